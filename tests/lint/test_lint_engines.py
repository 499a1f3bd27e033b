"""``syncguard lint`` on engines it has never seen (issue 36): the misses of shape, device kernels
and tests apart, a backend per finding, device inference across the tree."""

from __future__ import annotations

import json
import textwrap
from typing import Dict, List

import pytest
from _paths import ROOT

from syncguard.cli import main
from syncguard.lint import lint_paths
from syncguard.lint.checker import CERTAIN, LIKELY, Finding, check_source


def _check(src: str, path: str = "m.py") -> List[Finding]:
    return [f for f in check_source(textwrap.dedent(src), path) if f.reported]


def _by_line(src: str, path: str = "m.py") -> Dict[int, Finding]:
    return {f.line: f for f in _check(src, path)}


# -- item 4: misses of shape ---------------------------------------------------------------
def test_device_tensor_written_into_a_host_slice() -> None:
    found = _by_line("""\
        import torch

        def f(x_gpu, out):
            host = torch.empty(8)
            host[0:4] = x_gpu
            host[0:4].copy_(x_gpu)
            out[0:4] = x_gpu
        """)
    assert found[5].rule == "SG201" and found[5].severity == CERTAIN
    assert found[6].rule == "SG201"
    assert 7 not in found  # out: a list or a tensor of unknown place, no host copy known


@pytest.mark.parametrize("line", [
    "a = torch.zeros((n, 4), device=dev)",
    "a = torch.zeros([n, 4], device=dev)",
    "a = x_gpu.new_empty((n, 4))",
    "a = torch.full((n,), 0, device=dev)",
    "a = x_gpu.view((n, -1))",
])
def test_a_device_scalar_inside_a_size_tuple(line: str) -> None:
    found = _by_line(f"""\
        import torch

        def f(x_gpu, dev):
            n = x_gpu.sum()
            {line}
        """)
    assert found[5].api == "Tensor.__index__" and found[5].severity == CERTAIN


def test_sizes_of_python_ints_stay_silent() -> None:
    assert _check("""\
        import torch

        def f(x_gpu, dev):
            n = int(x_gpu.size(0))
            a = torch.zeros((n, 4), device=dev)
            b = x_gpu.new_empty((n, 4))
        """) == []


@pytest.mark.parametrize("line,api", [
    ('logger.info("%s", t)', "Tensor.__repr__"),
    ('self.logger.debug("t=%s n=%d", t, 3)', "Tensor.__repr__"),
    ('logging.warning("%s", t)', "Tensor.__repr__"),
    ('logging.log(logging.INFO, "%s", t)', "Tensor.__repr__"),
    ('s = "%s" % t', "Tensor.__format__"),
    ('s = "%s %s" % (1, t)', "Tensor.__format__"),
    ('s = "{}".format(t)', "Tensor.__format__"),
])
def test_logging_and_formatting_calls_of_device_values(line: str, api: str) -> None:
    found = _by_line(f"""\
        import logging
        import torch
        logger = logging.getLogger(__name__)

        def f(self, x_gpu):
            t = x_gpu.sum()
            {line}
        """)
    assert found[7].rule == "SG501" and found[7].api == api and found[7].severity == CERTAIN


def test_logging_host_values_is_silent() -> None:
    assert _check("""\
        import logging
        import torch
        logger = logging.getLogger(__name__)

        def f(x_gpu):
            n = x_gpu.size(0)
            logger.info("%s %s", n, "x")
            s = "%d" % n
        """) == []


def test_the_readme_example_is_flagged() -> None:
    """examples/token_loop/stopping.py:12: a stop condition in a file that never says torch,
    ``bool((next_ids == stop_id).all())``."""
    rep = lint_paths([str(ROOT / "examples" / "token_loop" / "stopping.py")])
    assert [(f.line, f.api) for f in rep.reported] == [(12, "Tensor.__bool__")]
    assert rep.reported[0].severity == LIKELY


def test_tensor_only_reads_are_likely_in_a_file_without_torch() -> None:
    found = _by_line("""\
        def count(mask):
            n = int(mask.sum().item())
            lens = mask.cpu()
            return n, lens
        """)
    assert found[2].api == "Tensor.item" and found[2].severity == LIKELY
    assert found[3].api == "Tensor.cpu" and found[3].severity == LIKELY


# -- item 2: kernels and tests apart -------------------------------------------------------
@pytest.mark.parametrize("head,deco", [
    ("import triton\nimport triton.language as tl", "@triton.jit"),
    ("import triton", "@triton.autotune(configs=[], key=['n'])\n@triton.jit"),
    ("from triton import jit", "@jit"),
    ("import cutlass.cute as cute", "@cute.kernel"),
    ("from cutlass import cute", "@cute.jit"),
    ("import tilelang.language as T", "@T.prim_func"),
    ("import tilelang", "@tilelang.jit(out_idx=[-1])"),
])
def test_no_finding_inside_device_kernels(head: str, deco: str) -> None:
    src = f"""\
import torch
{head}

{deco}
def kernel(x_ptr, is_greedy, n):
    x = torch.zeros(4, device="cuda")
    if is_greedy:
        pass
    if x.sum() > 0:
        pass
"""
    assert _check(src) == []


def test_a_host_function_beside_a_kernel_is_still_read() -> None:
    found = _by_line("""\
        import torch
        import triton

        @triton.jit
        def kernel(x_ptr):
            pass

        def launch(x_gpu):
            return x_gpu.sum().item()
        """)
    assert list(found) == [9]


CONTEXT_SRC = """\
import torch

class Sampler:
    def step(self, x_gpu):
        return x_gpu.sum().item()

def test_sampler(x_gpu):
    return x_gpu.sum().item()

def bench_sampler(x_gpu):
    return x_gpu.sum().item()

class TestSampler:
    def check(self, x_gpu):
        return x_gpu.sum().item()

def main():
    x_gpu = torch.zeros(4, device="cuda")
    return x_gpu.sum().item()

if __name__ == "__main__":
    y_gpu = torch.zeros(4, device="cuda")
    print(y_gpu.sum().item())
    main()
"""


def test_contexts_of_findings() -> None:
    found = {f.line: f.context for f in _check(CONTEXT_SRC, "engine/sampler.py")}
    # 24: main() syncs on every path, so its call in the __main__ block does (issue 57)
    assert found == {5: "serving", 8: "test", 11: "benchmark", 15: "test", 19: "script",
                     23: "script", 24: "script"}
    assert {f.context for f in _check(CONTEXT_SRC, "engine/tests/test_sampler.py")} == {"test"}
    assert {f.context for f in _check(CONTEXT_SRC, "engine/test_sampler.py")} == {"test"}
    assert {f.context for f in _check(CONTEXT_SRC, "benchmarks/run.py")} == {"benchmark"}


def test_tests_do_not_fail_ci_by_default(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_a.py").write_text("import torch\n\ndef test_f(t_gpu):\n"
                                        "    assert t_gpu.sum() > 0\n")
    assert main(["lint", "test_a.py"]) == 0
    out = capsys.readouterr().out
    assert "[test]" in out and "1 not failing CI (1 in tests, benchmarks or scripts)" in out
    assert main(["lint", "test_a.py", "--include-tests"]) == 1
    (tmp_path / "pyproject.toml").write_text("[tool.syncguard.lint]\ninclude-tests = true\n")
    assert main(["lint", "test_a.py"]) == 1
    (tmp_path / "pyproject.toml").write_text("[tool.syncguard.lint]\ninclude-tests = 1\n")
    assert main(["lint", "test_a.py"]) == 2


# -- item 3: a backend per finding ---------------------------------------------------------
BACKEND_SRC = """\
import torch

def f(logits_gpu, dev):
    ret = torch.zeros(4, device=dev)
    ret[ret > 0] = -1
    idx = torch.arange(3, device=dev)
    ret[idx] = 0
    a = torch.multinomial(logits_gpu, 1)
    b = torch.multinomial(logits_gpu, 4, replacement=True)
    c = logits_gpu.sum().item()
"""


def test_each_finding_names_its_backends() -> None:
    found = {f.line: f.backend for f in _check(BACKEND_SRC)}
    assert found == {5: "npu", 7: "cuda", 8: "cuda", 10: "both"}


@pytest.mark.parametrize("fmt", ["text", "github", "sarif", "json"])
def test_backend_and_context_in_every_format(tmp_path, monkeypatch, capsys, fmt: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(BACKEND_SRC + "\n\ndef test_x(t_gpu):\n    t_gpu.item()\n")
    main(["lint", "a.py", "--format", fmt])
    out = capsys.readouterr().out
    if fmt in ("text", "github"):
        assert "[npu only]" in out and "[cuda only]" in out and "[test]" in out
    elif fmt == "json":
        doc = json.loads(out)
        assert {(f["line"], f["backend"], f["context"]) for f in doc["findings"]} >= {
            (5, "npu", "serving"), (10, "both", "serving"), (14, "both", "test")}
    else:
        props = [r["properties"] for r in json.loads(out)["runs"][0]["results"]]
        assert {(p["backend"], p["context"]) for p in props} >= {
            ("npu", "serving"), ("cuda", "serving"), ("both", "test")}
        assert any("[npu only]" in r["message"]["text"]
                   for r in json.loads(out)["runs"][0]["results"])


def test_backend_option_chooses_what_fails(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch\n\ndef f(dev):\n"
                                   "    ret = torch.zeros(4, device=dev)\n"
                                   "    ret[ret > 0] = -1\n")
    assert main(["lint", "a.py"]) == 1
    assert main(["lint", "a.py", "--backend", "npu"]) == 1
    assert main(["lint", "a.py", "--backend", "cuda"]) == 0
    assert "1 not on cuda" in capsys.readouterr().out
    (tmp_path / "pyproject.toml").write_text('[tool.syncguard.lint]\nbackend = "cuda"\n')
    assert main(["lint", "a.py"]) == 0
    assert main(["lint", "a.py", "--backend", "any"]) == 1
    (tmp_path / "pyproject.toml").write_text('[tool.syncguard.lint]\nbackend = "rocm"\n')
    assert main(["lint", "a.py"]) == 2


# -- item 1: device inference across the tree ----------------------------------------------
def _tree_lint(tmp_path, files: Dict[str, str]) -> Dict[str, Dict[int, Finding]]:
    for name, src in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src))
    rep = lint_paths([str(tmp_path)], root=str(tmp_path))
    out: Dict[str, Dict[int, Finding]] = {}
    for f in rep.reported:
        out.setdefault(f.path, {})[f.line] = f
    return out


def test_device_tensors_made_in_another_module(tmp_path) -> None:
    found = _tree_lint(tmp_path, {
        "eng/__init__.py": "",
        "eng/buffers.py": """\
            import torch

            def make_lens(n):
                return torch.zeros(n, device="cuda")

            def make_host(n):
                return torch.zeros(n, device="cpu")

            GLOBAL_BUF = torch.empty(8, device="cuda")

            class Runner:
                def __init__(self):
                    self.lens = torch.zeros(4, device="cuda")
                    self.lens_cpu = torch.zeros(4, pin_memory=True)

                def pick(self):
                    return self.lens
            """,
        "eng/batch.py": """\
            import dataclasses
            import torch

            @dataclasses.dataclass
            class Batch:
                input_ids: torch.Tensor
                seq_lens_cpu: torch.Tensor
                n: int
            """,
        "eng/loop.py": """\
            from .batch import Batch
            from .buffers import GLOBAL_BUF, Runner, make_host, make_lens

            def step(batch: Batch):
                a = make_lens(4)
                n = a.sum().item()
                h = make_host(4)
                m = h.tolist()
                g = GLOBAL_BUF.tolist()
                r = Runner()
                x = r.lens.tolist()
                y = r.lens_cpu.tolist()
                z = r.pick().tolist()
                ids = batch.input_ids.tolist()
                lens = batch.seq_lens_cpu.tolist()
                k = batch.n
                if k:
                    pass
            """,
    })
    loop = found["eng/loop.py"]
    assert loop[6].severity == CERTAIN  # returned by a function of another module
    assert 8 not in loop  # device="cpu" there: a host tensor here
    assert loop[9].severity == CERTAIN  # a module global
    assert loop[11].severity == CERTAIN  # an attribute set in __init__
    assert 12 not in loop  # a pinned host attribute
    assert loop[13].severity == CERTAIN  # a method's return
    assert loop[14].severity == LIKELY  # a dataclass field typed torch.Tensor
    assert 15 not in loop and 17 not in loop  # a _cpu field, an int field


def test_a_helper_returning_a_python_bool_is_no_tensor_condition() -> None:
    found = _by_line("""\
        import torch

        def is_done(x) -> bool:
            return x.numel() == 0 or flag(x)

        def use_greedy(t: torch.Tensor):
            return bool(t.all())

        def same(a: torch.Tensor, b: torch.Tensor):
            return torch.equal(a, b)

        def loop(x_gpu):
            if is_done(x_gpu):
                pass
            if use_greedy(x_gpu):
                pass
            if same(x_gpu, x_gpu):
                pass
        """)
    assert sorted(found) == [7, 10]  # the helpers' own reads, not their callers


def test_imports_are_resolved_in_a_folder_of_scripts(tmp_path) -> None:
    found = _tree_lint(tmp_path, {
        "ex/helpers.py": """\
            import torch

            def on_device():
                return torch.ones(3, device="npu")
            """,
        "ex/run.py": """\
            from helpers import on_device

            def go():
                t = on_device()
                return t.tolist()
            """,
    })
    assert found["ex/run.py"][5].severity == CERTAIN


def test_a_blocking_copy_into_a_pinned_buffer_from_an_unknown_source() -> None:
    """exllamav2 dynamic.py: ``batch_logits = self.logits_pinned[...]`` then
    ``batch_logits.copy_(device_logits)`` with the logits unpacked from a model call."""
    found = _by_line("""\
        import torch

        class Gen:
            def __init__(self):
                self.logits_pinned = torch.empty(4, 8, pin_memory=True)

            def step(self, model):
                out, _ = model.forward_chunk()
                buf = self.logits_pinned[:2]
                buf.copy_(out)
                buf.copy_(out, non_blocking=True)
        """)
    assert found[10].api == "Tensor.copy_" and found[10].severity == LIKELY
    assert 11 not in found


def test_a_helper_of_any_place_given_host_tensors_returns_host_ones() -> None:
    """fla index.py after 6b7931d2: ``prepare_lens(cu_seqlens_cpu)`` is a host tensor."""
    found = _by_line("""\
        import torch

        def prepare_lens(cu_seqlens: torch.Tensor) -> torch.LongTensor:
            return cu_seqlens[1:] - cu_seqlens[:-1]

        def f(cu_seqlens, cu_seqlens_cpu: torch.Tensor | None, chunk_size: int):
            a = int(max(prepare_lens(cu_seqlens_cpu)))
            b = prepare_lens(cu_seqlens_cpu).tolist()
            c = prepare_lens(cu_seqlens).max().item()
        """)
    assert sorted(found) == [9]


def test_switches_and_strings_are_no_tensors() -> None:
    """exllamav2: ``if self.archparams.clamp_hidden_states:`` is a switch, and the items of
    ``text.split("</doc>")`` are strings (split is a tensor method too)."""
    assert _check("""\
        import os
        import torch

        def f(self, text, hidden_states):
            if self.archparams.clamp_hidden_states:
                hidden_states.clamp_(-65504, 65504)
            articles = [a[a.find("\\n") + 1:] for a in text.split("</doc>\\n")]
            devs = [int(d) for d in os.environ.get("X", "").split(",")]
        """) == []


def test_a_container_of_tensors_is_no_tensor() -> None:
    """exllamav2 cache.py: ``cache_seqlens: torch.Tensor | list[torch.Tensor] | None`` read
    as ``if cache_seqlens``: the truth value of a list (or of a tensor: unknown which)."""
    found = _by_line("""\
        from typing import List, Optional
        import torch

        def f(a: torch.Tensor | list[torch.Tensor] | None, b: List[torch.Tensor],
              c: Optional[torch.Tensor]):
            x = a[0] if a else None
            if b:
                pass
            for t in b:
                t.item()
            if c:
                pass
        """)
    assert sorted(found) == [10, 11]
    assert found[10].severity == LIKELY
