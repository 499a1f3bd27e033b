"""``syncguard lint`` sure of what it flags, silent on what does not sync, and no line lost
(issue 57): Python's own line numbers and character columns, allow markers only in comments,
types of methods and parameters inside a class, masks made by casts, helpers that always
sync, builtins over tensors, host values whatever a hint says, the NPU's mask writes."""

from __future__ import annotations

import json
import textwrap
from typing import Dict, List

import pytest

from syncguard.cli import main
from syncguard.lint.checker import CERTAIN, LIKELY, Finding, check_source  # noqa: F401


def _check(src: str, path: str = "m.py") -> List[Finding]:
    return [f for f in check_source(textwrap.dedent(src), path) if f.reported]


def _by_line(src: str, path: str = "m.py") -> Dict[int, Finding]:
    return {f.line: f for f in _check(src, path)}


# -- lines and columns as Python and editors count them --
@pytest.mark.parametrize("brk", ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
                                 "\u2029"])
def test_only_newlines_break_lines(brk: str) -> None:
    # a form feed (a ^L page break) or another character str.splitlines() breaks at is no
    # line break for Python: the allow comment on line 4 must not hide line 5's finding
    src = ("import torch\n\ndef f(x_gpu):\n"
           f"    a = 1  # note {brk} syncguard: allow[unrelated]\n"
           "    return x_gpu.item()\n")
    found = {f.line: f for f in check_source(src, "m.py")}
    assert found[5].reported and found[5].text == "return x_gpu.item()"


def test_carriage_returns_count_as_python_counts_them() -> None:
    src = "import torch\r\rdef f(x_gpu):\r\n    return x_gpu.item()\r"
    (f,) = check_source(src, "m.py")
    assert f.line == 4 and f.text == "return x_gpu.item()"


def test_columns_are_characters_not_bytes() -> None:
    src = 'import torch\n\ndef f(x_gpu):\n    s = "éé"; return x_gpu.item()\n'
    (f,) = check_source(src, "m.py")
    line = src.splitlines()[3]
    assert f.col == line.index("x_gpu.item")


def test_sarif_says_its_columns_are_code_points(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "m.py").write_text('import torch\n\ndef f(x_gpu):\n    s = "\U0001F600"; '
                                   'return x_gpu.item()\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "m.py", "--format", "sarif", "-o", "out.sarif"]) == 1
    run = json.loads((tmp_path / "out.sarif").read_text())["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["startColumn"] == 1 + len('    s = "\U0001F600"; return ')


def test_an_allow_marker_inside_a_string_allows_nothing() -> None:
    src = textwrap.dedent("""\
        import torch

        def f(x_gpu, log):
            log("use '# syncguard: allow[reason]' to allow a line", x_gpu.item())
            y = x_gpu.item()  # syncguard: allow[read once per request]
            return y
        """)
    found = {f.line: f for f in check_source(src, "m.py")}
    assert found[4].reported
    assert found[5].allowed == "read once per request"


# -- builtins over tensors --
@pytest.mark.parametrize("expr", ["max(a_gpu, b_gpu)", "max(1, a_gpu)", "min(n, a_gpu)",
                                  "any(a_gpu)", "all(a_gpu > 0)"])
def test_builtins_compare_tensors_as_truth_values(expr: str) -> None:
    found = _by_line(f"""\
        import torch

        def f(a_gpu, b_gpu, n: int):
            return {expr}
        """)
    assert found[4].api == "Tensor.__bool__" and found[4].severity == CERTAIN


@pytest.mark.parametrize("expr", ["float(max(a_gpu, b_gpu))", "float(sum(a_gpu))",
                                  "float(abs(a_gpu))"])
def test_a_builtin_over_device_tensors_returns_a_device_tensor(expr: str) -> None:
    found = _by_line(f"""\
        import torch

        def f(a_gpu, b_gpu):
            y = {expr}
        """)
    assert found[4].api == "Tensor.__float__" and found[4].severity == CERTAIN


def test_builtins_over_python_values_stay_silent() -> None:
    assert not _check("""\
        import torch

        def f(a: int, xs: list):
            return max(a, 3), min(xs), sum(xs), abs(a), any(xs), all(x > 0 for x in xs)
        """)


@pytest.mark.parametrize("m", ["isfinite", "isnan", "isinf"])
def test_tensor_only_methods_make_a_tensor(m: str) -> None:
    found = _by_line(f"""\
        import torch

        def f(loss):
            if not loss.{m}().all():
                return 1
            if loss.{m}():
                return 2
        """)
    assert found[4].severity == LIKELY and found[6].api == "Tensor.__bool__"


# -- methods and functions: what their returns and parameters are --
def test_a_method_annotated_to_return_a_tensor() -> None:
    found = _by_line("""\
        import torch

        class Trainer:
            def run(self, batch):
                loss = self.step(batch)
                if not loss.isfinite():
                    raise RuntimeError("nan")
                if loss > 0:
                    return loss

            def step(self, batch) -> torch.Tensor:
                return self.model(batch)
        """)
    assert found[6].api == "Tensor.__bool__" and found[6].severity == LIKELY
    assert found[8].api == "Tensor.__bool__" and found[8].severity == LIKELY


def test_a_method_returning_a_device_tensor_is_certain_before_its_def() -> None:
    found = _by_line("""\
        import torch

        class Trainer:
            def run(self):
                norm = self.grad_norm()
                return norm.item()

            def grad_norm(self):
                return torch.zeros(1, device="cuda")
        """)
    assert found[6].api == "Tensor.item" and found[6].severity == CERTAIN


def test_a_function_annotated_to_return_a_tensor() -> None:
    found = _by_line("""\
        import torch

        def run(batch):
            if step(batch):
                return 1

        def step(batch) -> torch.Tensor:
            return batch.model(batch)
        """)
    assert found[4].api == "Tensor.__bool__" and found[4].severity == LIKELY


def test_a_parameter_every_caller_in_the_class_fills_from_a_device_value() -> None:
    found = _by_line("""\
        import torch

        class Clipper:
            def __init__(self, params):
                self.params = params

            def grad_norm(self):
                return torch.zeros(1, device="cuda")

            def step(self):
                self._clip(self.grad_norm())
                self._clip(total_norm=self.grad_norm())

            def _clip(self, total_norm):
                if total_norm > 1.0:
                    return 1
        """)
    assert found[15].api == "Tensor.__bool__" and found[15].severity == CERTAIN


def test_a_parameter_some_caller_fills_from_the_host_stays_unknown() -> None:
    found = _by_line("""\
        import torch

        class Clipper:
            def grad_norm(self):
                return torch.zeros(1, device="cuda")

            def step(self, n: float):
                self._clip(self.grad_norm())
                self._clip(n)

            def _clip(self, total_norm):
                if total_norm > 1.0:
                    return 1
        """)
    assert 12 not in found


def test_a_numpy_array_passed_where_the_hint_says_tensor_is_host() -> None:
    found = _by_line("""\
        import numpy as np
        import torch

        class Packer:
            def pack(self, n: int):
                self._fill(np.zeros(n))

            def _fill(self, buf: torch.Tensor):
                return buf.tolist()
        """)
    assert 9 not in found


def test_a_numpy_return_beats_a_tensor_hint() -> None:
    found = _by_line("""\
        import numpy as np
        import torch

        def layout(n) -> torch.Tensor:
            return np.arange(n)

        def f(n):
            return layout(n).tolist()
        """)
    assert 8 not in found


# -- masks made by casts, wherever they flow --
@pytest.mark.parametrize("line", [
    "y = x_gpu[0, m.bool(), :]",
    "y = x_gpu[m.to(torch.bool)]",
    "y = x_gpu[m.to(dtype=torch.bool)]",
    "keep = torch.zeros(8, dtype=torch.bool, device=x_gpu.device); y = x_gpu[keep]",
    "keep = torch.ones_like(x_gpu, dtype=torch.bool); y = x_gpu[keep]",
    "keep = torch.cat([a > 0, b > 0]); y = x_gpu[keep]",
    "keeps = [a > 0, b > 0]; y = x_gpu[torch.cat(keeps)]",
    "keeps = []; keeps.append(a > 0); y = x_gpu[torch.stack(keeps)]",
    "k1, k2 = a > 0, b.isnan(); y = x_gpu[k2]",
    "keep = m.bool().to(x_gpu.device); y = x_gpu[keep]",
    "y = x_gpu[torch.isin(a, b)]",
])
def test_masks_made_by_casts_index_by_nonzero(line: str) -> None:
    found = _by_line(f"""\
        import torch

        def f(x_gpu, m, a, b):
            {line}
        """)
    assert found[4].api == "Tensor.__getitem__" and found[4].severity == CERTAIN


def test_an_integer_cast_is_no_mask() -> None:
    assert not _check("""\
        import torch

        def f(x_gpu, m):
            return x_gpu[m.long()], x_gpu[m.to(torch.int64)]
        """)


# -- the NPU's mask writes --
@pytest.mark.parametrize("hint", ["", ": torch.BoolTensor"])
def test_a_number_written_through_a_tensor_of_unknown_dtype_syncs_on_the_npu(hint) -> None:
    found = _by_line(f"""\
        import torch

        def f(logits_gpu, keep{hint}):
            logits_gpu[keep] = 0.0
        """)
    assert found[4].rule in ("SG301", "SG401")
    assert found[4].backend in ("both", "npu")
    if hint:
        assert found[4].backend == "npu"


def test_a_number_written_through_an_integer_index_is_cuda_only() -> None:
    found = _by_line("""\
        import torch

        def f(logits_gpu, scores):
            idx = scores.argmax(dim=-1)
            logits_gpu[idx] = 0.0
            _, top = torch.topk(scores, 4)
            logits_gpu[top] = 0.0
            logits_gpu[scores.long()] = 0.0
        """)
    assert [found[n].backend for n in (5, 7, 8)] == ["cuda", "cuda", "cuda"]


def test_backend_npu_fails_on_the_unknown_dtype_write(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "m.py").write_text(textwrap.dedent("""\
        import torch

        def f(logits_gpu, keep):
            logits_gpu[keep] = 0.0
        """))
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "m.py", "--backend", "npu"]) == 1
    assert "no sync on NPU" not in capsys.readouterr().out


# -- no false syncs --
@pytest.mark.parametrize("line", [
    "t = torch.tensor(vals, pin_memory=True).cuda(non_blocking=True)",
    "t = torch.tensor(vals, pin_memory=True).to(dev, non_blocking=True)",
    "t = torch.as_tensor(vals).pin_memory().to(dev, non_blocking=True)",
    "t = acc.pin_memory(torch.tensor(vals)).to(dev, non_blocking=True)",
    "b = torch.empty(8, pin_memory=True); b.copy_(torch.tensor(vals)); "
    "t = b.cuda(non_blocking=True)",
])
def test_non_blocking_copies_from_pinned_memory_are_async(line: str) -> None:
    assert not _check(f"""\
        import torch

        def f(vals, dev, acc):
            {line}
        """)


@pytest.mark.parametrize("load", [
    'torch.load(path, map_location="cpu")',
    "torch.load(path, map_location=torch.device('cpu'))",
    "safetensors.torch.load_file(path)",
    "load_file(path)",
])
def test_checkpoints_loaded_on_the_host_are_host_values(load: str) -> None:
    assert not _check(f"""\
        import torch
        import safetensors.torch
        from safetensors.torch import load_file

        def f(path):
            sd = {load}
            step = sd["step"].item()
            if sd["scale"] > 0:
                return step
        """)


def test_a_checkpoint_loaded_onto_the_device_is_not_a_host_value() -> None:
    found = _by_line("""\
        import torch

        def f(path):
            sd = torch.load(path, map_location="cuda")
            return sd["step"].item()
        """)
    assert found[5].api == "Tensor.item"


# -- helpers that always sync --
HELPER_SRC = """\
import torch

def device_synchronize():
    torch.cuda.synchronize()

def maybe_synchronize(flag: bool):
    if flag:
        torch.cuda.synchronize()

def either_synchronize(npu: bool):
    if npu:
        torch.npu.synchronize()
    else:
        torch.cuda.synchronize()

def early_out(dist):
    if dist is None:
        return
    torch.cuda.synchronize()

def timed():
    device_synchronize()
    return 1

def decode(steps: int, flag: bool):
    for _ in range(steps):
        device_synchronize()
        maybe_synchronize(flag)
        either_synchronize(flag)
        early_out(None)
        timed()
"""


def test_a_helper_that_always_syncs_is_flagged_where_it_is_called() -> None:
    found = _by_line(HELPER_SRC)
    assert found[27].rule == "SG601" and found[27].severity == CERTAIN
    assert "device_synchronize() -> torch.cuda.synchronize" in found[27].why
    assert 28 not in found and 30 not in found  # not on every path
    assert found[29].severity == CERTAIN
    # a helper calling one: the whole chain
    assert "timed() -> device_synchronize() -> torch.cuda.synchronize" in found[31].why


def test_a_helper_imported_from_another_module(tmp_path, monkeypatch, capsys) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "acc.py").write_text("import torch\n\n\ndef sync():\n    torch.cuda.synchronize()\n")
    (pkg / "loop.py").write_text("from pkg.acc import sync\nfrom pkg import acc\n\n\n"
                                 "def run(n: int):\n    for _ in range(n):\n        sync()\n"
                                 "        acc.sync()\n")
    monkeypatch.chdir(tmp_path)
    main(["lint", "pkg", "--format", "json"])
    lines = {(f["path"], f["line"]) for f in json.loads(capsys.readouterr().out)["findings"]}
    assert {("pkg/loop.py", 7), ("pkg/loop.py", 8)} <= lines


def test_a_method_that_always_syncs() -> None:
    found = _by_line("""\
        import torch

        class Timer:
            def run(self, n: int):
                for _ in range(n):
                    self._wait()

            def _wait(self):
                torch.cuda.current_stream().synchronize()
                torch.cuda.synchronize()
        """)
    assert found[6].severity == CERTAIN and "_wait()" in found[6].why


def test_a_generator_that_syncs_does_not_sync_where_it_is_called() -> None:
    found = _by_line("""\
        import torch

        def gen():
            torch.cuda.synchronize()
            yield 1

        def f():
            g = gen()
            return g
        """)
    assert 8 not in found


# -- no line lost --
@pytest.mark.parametrize("n", [100, 400])
def test_a_long_chain_of_calls_is_analysed(n: int) -> None:
    # each function calls the one defined after it: read ahead, depth bounded
    lines = ["import torch", ""]
    for i in range(n - 1):
        lines += [f"def f{i}(x):", f"    return f{i + 1}(x) + x.item()"]
    lines += [f"def f{n - 1}(x):", "    return x.item()"]
    found = check_source("\n".join(lines) + "\n", "chain.py")
    assert len(found) == n


def _notebook(cells: List[str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"]}] + [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": [line + "\n" for line in c.split("\n")]} for c in cells]})


def test_a_notebook_is_linted_cell_by_cell(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "nb.ipynb").write_text(_notebook([
        "import torch\n%matplotlib inline\nx_gpu = torch.zeros(4, device='cuda')",
        "!nvidia-smi\nfor _ in range(3):\n    v = x_gpu.sum().item()",
        "%%bash\necho hi"]))
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "nb.ipynb", "--format", "json"]) == 1
    (f,) = json.loads(capsys.readouterr().out)["findings"]
    assert (f["path"], f["cell"], f["line"], f["api"]) == ("nb.ipynb", 2, 3, "Tensor.item")
    assert f["severity"] == CERTAIN  # x_gpu made in cell 1
    assert main(["lint", "nb.ipynb"]) == 1
    assert "nb.ipynb:cell 2:3:" in capsys.readouterr().out


def test_a_notebook_syntax_error_names_its_cell(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "nb.ipynb").write_text(_notebook(["x = 1", "def f(:\n    pass"]))
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "nb.ipynb"]) == 1
    assert "cell 2, line 1" in capsys.readouterr().out


def test_a_private_helper_every_call_in_the_module_gives_a_device_tensor() -> None:
    found = _by_line("""\
        import torch

        def _count(mask):
            return mask.sum().item()

        def step(x_gpu, y_gpu):
            a = _count(x_gpu > 0)
            b = _count(mask=y_gpu > 0)
            return a + b

        def public(t):
            return t.sum().item()

        def caller(x_gpu):
            return public(x_gpu)
        """)
    assert found[4].severity == CERTAIN
    assert found[12].severity == LIKELY  # public: other modules may call it


def test_a_private_helper_given_host_arrays_everywhere_is_silent() -> None:
    assert not _check("""\
        import numpy as np
        import torch

        def _total(lens: torch.Tensor):
            return lens.sum().item()

        def plan(n: int):
            return _total(np.ones(n)) + _total(np.zeros(n))
        """)


def test_a_factory_given_kwargs_may_be_on_the_device() -> None:
    found = _by_line("""\
        import torch

        def f(xs, dev):
            tkwargs = dict(dtype=torch.int64, device=dev)
            row_len = torch.tensor([len(x) for x in xs], **tkwargs)
            size = torch.zeros(1, **tkwargs)
            return sum(row_len).item(), size.item()
        """)
    assert found[7].api == "Tensor.item" and found[7].severity == LIKELY


def test_a_helper_on_its_arguments_device_syncs_where_that_is_one() -> None:
    # counts may be a host tensor (fla's _segmented_arange: "pass host-side counts"): the
    # helper's own line is flagged, its callers are not
    found = _by_line("""\
        import torch

        def _seg(counts: torch.Tensor):
            return torch.repeat_interleave(
                torch.arange(counts.numel(), device=counts.device), counts)

        def chunks(lens):
            return _seg(lens)

        def _on(x_gpu):
            return torch.zeros(4, device=x_gpu.device).sum().item()

        def f(x_gpu):
            return _on(x_gpu)
        """)
    assert found[4].severity == CERTAIN and 8 not in found
    assert found[14].severity == CERTAIN


def test_a_cached_helper_does_not_sync_on_every_call() -> None:
    found = _by_line("""\
        import functools
        import torch

        @functools.lru_cache
        def plan():
            return torch.zeros(4, device="cuda").sum().item()

        def step():
            return plan()
        """)
    assert found[6].severity == CERTAIN and 9 not in found


def test_module_objects_and_counts_per_gpu_are_no_device_tensors() -> None:
    assert not _check("""\
        import torch

        device = torch.device("cpu")

        def show(model, dev, path, micro_batch_size_per_gpu):
            model = model.to(dev)
            for name, mod in model.named_modules():
                print(f"{name:50s}")
            sd = torch.load(path, map_location=device)
            if "buffers" not in sd:
                return micro_batch_size_per_gpu > 0
        """)


def test_a_tensor_on_a_host_tensors_device_is_on_the_host() -> None:
    found = _by_line("""\
        import numpy as np
        import torch

        def _pad(src, size: int):
            out = torch.zeros(size, device=src.device)
            out[:3].copy_(src)
            return out

        def plan(n: int):
            return _pad(torch.from_numpy(np.ones(3)), n)
        """)
    assert 6 not in found


def test_an_assertion_message_does_not_sync_on_every_path() -> None:
    found = _by_line("""\
        import torch

        def _check(ok: bool, x_gpu):
            assert ok, f"bad {x_gpu}"

        def f(x_gpu):
            _check(True, x_gpu)
        """)
    assert 4 in found and 7 not in found


def test_a_model_moved_to_the_device_is_no_tensor() -> None:
    assert not _check("""\
        import torch
        from transformers import AutoModelForCausalLM

        def convert(path, device):
            src = AutoModelForCausalLM.from_pretrained(path).to(device)
            print(f"loaded {src}")
            model = build(path)
            model = model.to(device).eval()
            print(model)
        """)
