"""``syncguard lint``: each rule, each device-inference case (host-only code silent), the
output formats (SARIF validated against the 2.1.0 schema), exit codes, inline allows,
excludes and ``[tool.syncguard.lint]``, baselines and ``--diff``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import List, Optional

import pytest
from _paths import ROOT

from syncguard.cli import main
from syncguard.lint import lint_paths
from syncguard.lint.checker import CERTAIN, LIKELY, SILENT, Finding, check_source

ROOT = str(ROOT)

PRE = """\
import numpy as np
import torch
import torch.nn.functional as F

def f(x_in: torch.Tensor, device, lst, ids_cpu, pinned_buf, n: int, unk):
    x = torch.zeros(8, device=device)
    y = torch.arange(8, device="npu")
    h = torch.zeros(8)
"""


def _lint(body: str) -> List[Finding]:
    src = PRE + textwrap.indent(textwrap.dedent(body), "    ")
    return check_source(src, "t.py")


def _last(body: str) -> Optional[Finding]:
    """The finding on the snippet's last line (None when there is none)."""
    src_lines = (PRE + textwrap.indent(textwrap.dedent(body), "    ")).rstrip("\n").split("\n")
    found = [f for f in _lint(body) if f.line == len(src_lines)]
    return found[0] if found else None


# -- each rule ----------------------------------------------------------------------------
RULE_CASES = [
    ("if x[0] > 0:\n    pass", "SG101", "Tensor.__bool__"),
    ("while x.sum() > 0:\n    pass", "SG101", "Tensor.__bool__"),
    ("assert x.min() >= 0", "SG101", "Tensor.__bool__"),
    ("a = (x[0] > 0) and 1", "SG101", "Tensor.__bool__"),
    ("a = not (x[0] > 0)", "SG101", "Tensor.__bool__"),
    ("a = 1 if x[0] > 0 else 2", "SG101", "Tensor.__bool__"),
    ("a = 2.0 in x", "SG101", "Tensor.__contains__"),
    ("a = sorted(x)", "SG101", "Tensor.__bool__"),
    ("a = int(x[0])", "SG102", "Tensor.__int__"),
    ("a = float(x.sum())", "SG102", "Tensor.__float__"),
    ("a = bool(x[0])", "SG101", "Tensor.__bool__"),
    ("a = range(x[2])", "SG102", "Tensor.__index__"),
    ("a = lst[:x[1]]", "SG102", "Tensor.__index__"),
    ("a = torch.arange(x[0], device=device)", "SG102", "Tensor.__index__"),
    ("a = x.view(y[0], -1)", "SG102", "Tensor.__index__"),
    ("a = x.sum().item()", "SG103", "Tensor.item"),
    ("a = x.tolist()", "SG201", "Tensor.tolist"),
    ("a = x.cpu()", "SG201", "Tensor.cpu"),
    ("a = x.to('cpu')", "SG201", "Tensor.to"),
    ("a = x.numpy(force=True)", "SG201", "Tensor.numpy"),
    ("h.copy_(x)", "SG201", "Tensor.copy_"),
    ("h.copy_(x, non_blocking=True)", "SG201", "Tensor.copy_"),
    ("a = torch.nonzero(x)", "SG301", "torch.nonzero"),
    ("a = x.nonzero(as_tuple=True)", "SG301", "Tensor.nonzero"),
    ("a = torch.argwhere(x)", "SG301", "torch.argwhere"),
    ("a = torch.where(x > 0)", "SG301", "torch.where"),
    ("a = x[x > 0]", "SG301", "Tensor.__getitem__"),
    ("a = x[~(x > 0) & (y > 1)]", "SG301", "Tensor.__getitem__"),
    ("x[x > 0] = y", "SG301", "Tensor.__setitem__"),
    ("a = torch.masked_select(x, x > 0)", "SG301", "torch.masked_select"),
    ("a = torch.unique(x)", "SG301", "torch.unique"),
    ("a = x.unique_consecutive()", "SG301", "Tensor.unique_consecutive"),
    ("a = torch.bincount(y)", "SG301", "torch.bincount"),
    ("a = torch.repeat_interleave(x, y)", "SG301", "torch.repeat_interleave"),
    ("a = x.repeat_interleave(y)", "SG301", "Tensor.repeat_interleave"),
    ("a = F.one_hot(y)", "SG301", "torch.nn.functional.one_hot"),
    ("a = torch.equal(x, y)", "SG302", "torch.equal"),
    ("a = torch.allclose(x, y)", "SG302", "torch.allclose"),
    ("a = torch.tensor(lst, device=device)", "SG401", "torch.tensor"),
    ("a = torch.as_tensor(lst, device='npu')", "SG401", "torch.as_tensor"),
    ("a = h.to(device)", "SG401", "Tensor.to"),
    ("a = h.to(device, non_blocking=True)", "SG401", "Tensor.to"),
    ("a = h.cuda()", "SG401", "Tensor.cuda"),
    ("a = x[ids_cpu]", "SG401", "Tensor.__getitem__"),
    ("x[ids_cpu] = 0", "SG401", "Tensor.__setitem__"),
    ("print(x)", "SG501", "Tensor.__repr__"),
    ("a = str(x)", "SG501", "Tensor.__repr__"),
    ("a = f'{x[0]:.3f}'", "SG501", "Tensor.__format__"),
    ("torch.cuda.synchronize()", "SG601", "torch.cuda.synchronize"),
    ("torch.npu.synchronize()", "SG601", "torch.npu.synchronize"),
    ("torch.cuda.current_stream().synchronize()", "SG601",
     "torch.cuda.current_stream().synchronize"),
    ("a = torch.multinomial(x, 1)", "SG701", "torch.multinomial"),
    ("x.masked_fill_(x > 0, y[0])", "SG701", "Tensor.masked_fill_"),
]


@pytest.mark.parametrize("body,rule,api", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_each_rule_flags_a_device_value(body: str, rule: str, api: str) -> None:
    f = _last(body) if "\n" not in body else _lint(body)[0]
    assert f is not None, body
    assert (f.rule, f.api) == (rule, api)
    assert f.severity in (CERTAIN, LIKELY) and f.reported
    assert f.why


NO_SYNC = [
    "a = torch.where(x > 0, x, 0.0)",
    "x.masked_fill_(x > 0, 0.0)",
    "a = torch.repeat_interleave(x, y, output_size=8)",
    "a = torch.repeat_interleave(x, 2)",
    "a = F.one_hot(y, num_classes=8)",
    "a = torch.multinomial(x, 2, replacement=True)",
    "a = pinned_buf.to(device, non_blocking=True)",
    "pinned_buf.copy_(x, non_blocking=True)",
    "a = torch.zeros(4, pin_memory=True).to(device, non_blocking=True)",
    "a = x.shape[0] > 2 and x.dim() == 1",
    "a = torch.any(x > 0)",
    "a = x[y]",
    "a = x[0]",
    "a = x.to(device)",
    "a = torch.tensor(lst)",
    "a = x.numpy()",  # raises on a device tensor: reads nothing
    "if x is None:\n    pass",
]


@pytest.mark.parametrize("body", NO_SYNC)
def test_no_sync_forms_are_not_reported(body: str) -> None:
    assert [f for f in _lint(body) if f.reported] == []


# -- a Python number written through an index; torch.tensor of device scalars -------------
# (the backends differ: see the op models' Tensor.__setitem__ entries and the catalogue)
SETITEM_CASES = [
    # 0-d destination: CUDA copies the value from the host (x is 1-d: certain)
    ("x[0] = 0", "SG401", CERTAIN, "0-d"),
    ("x.__setitem__(0, 0.0)", "SG401", CERTAIN, "0-d"),
    ("x[-1] = 1.5", "SG401", CERTAIN, "0-d"),
    ("x[n] = 0", "SG401", CERTAIN, "0-d"),           # an int name
    ("x[unk] = 0", "SG401", LIKELY, "0-d"),          # an index of unknown place
    ("z = torch.zeros(2, 3, device=device)\nz[0, 1] = 0", "SG401", CERTAIN, "0-d"),
    ("x_in[0] = 0", "SG401", LIKELY, "0-d"),         # rank unknown: likely
    ("x_in.__setitem__(0, 0.0)", "SG401", LIKELY, "0-d"),
    # an index tensor: CUDA's index_put_ copies the value
    ("x[y] = 0.0", "SG401", CERTAIN, "index"),
    ("x.__setitem__(torch.arange(2, device=device), 0.0)", "SG401", CERTAIN, "index"),
    ("x[0, y] = 1", "SG401", CERTAIN, "index"),
    # a boolean mask: NPU's index_put_ goes through nonzero
    ("x[x > 0] = 1.0", "SG301", CERTAIN, "mask"),
    ("x.__setitem__(x > 0, 1.0)", "SG301", CERTAIN, "mask"),
    ("m = x > 0\nx[m] = n", "SG301", CERTAIN, "mask"),
]
_WHY = {"0-d": ("backend-dependent", "CUDA", "0-d destination", "fill_"),
        "index": ("index tensor", "CUDA", "no sync on NPU"),
        "mask": ("NPU", "nonzero", "CUDA uses masked_fill")}


@pytest.mark.parametrize("body,rule,severity,why", SETITEM_CASES,
                         ids=[c[0] for c in SETITEM_CASES])
def test_python_number_written_through_an_index(body: str, rule: str, severity: str,
                                                why: str) -> None:
    f = _last(body)
    assert f is not None, body
    assert (f.rule, f.api, f.severity) == (rule, "Tensor.__setitem__", severity)
    assert f.reported
    assert all(w in f.why for w in _WHY[why]), f.why


SETITEM_SILENT = [
    "x[1:2] = 0",                                   # a slice keeps a dimension: fill_
    "x.__setitem__(slice(1, 2), 0.0)",
    "x[:] = 0",
    "x[None, 0] = 0",
    "z = x.view(2, 4)\nz[0] = 0",                   # a row of a 2-d tensor: fill_
    "x.view(2, 4).__setitem__(0, 0.0)",
    "z = torch.zeros(2, 3, device=device)\nz[0] = 0",
    "z = torch.zeros((2, 3), device=device)\nz[1] = 1.0",
    "z = torch.zeros(2, 3, device=device)\nz.__setitem__(0, 0.0)",
    "z = torch.zeros(2, 3, device=device)\nz += 1\nz[0] = 0",
    "z = torch.zeros(2, 3, device=device)\nif n:\n    z = z * 2\nz[0] = 0",
    "x[0] = y[0]",                                   # a device value: copy_ on the device
    "h[0] = 0",                                      # a host tensor
    "lst[0] = 0",
    "unk[0] = 0",                                    # not known to be a tensor
]


@pytest.mark.parametrize("body", SETITEM_SILENT)
def test_slices_and_rows_of_2d_tensors_are_silent(body: str) -> None:
    assert [(f.rule, f.text) for f in _lint(body) if f.reported] == []


def test_a_rank_from_a_module_function_and_branches() -> None:
    src = textwrap.dedent("""\
        import torch

        def make(dev, n):
            return torch.tensor([float(v) for v in range(n)]).to(dev)

        def make2d(dev):
            return torch.zeros(2, 2).to(dev)

        def f(dev, c):
            make(dev, 3)[0] = 0
            make2d(dev)[0] = 0
            z = make2d(dev) if c else make(dev, 3)
            z[0] = 0
        """)
    found = {f.line: f for f in check_source(src, "r.py") if f.reported}
    assert found[10].severity == CERTAIN and found[10].rule == "SG401"
    assert 11 not in found
    assert found[13].severity == LIKELY  # either rank: the lint cannot tell


@pytest.mark.parametrize("body,severity,upload", [
    ("t0 = torch.tensor(1).to(device)\nt1 = y[0]\na = torch.tensor([t0, t1])", CERTAIN, False),
    ("a = torch.tensor([y[0], y[1]], device=device)", CERTAIN, True),
    ("a = torch.tensor([[y[0]], [y[1]]])", CERTAIN, False),
    ("a = torch.as_tensor((y[0], 1), device='npu')", CERTAIN, True),
    ("a = torch.tensor([v for v in y])", CERTAIN, False),
    ("a = torch.tensor([x_in[0], x_in[1]])", LIKELY, False),
])
def test_torch_tensor_of_device_scalars(body: str, severity: str, upload: bool) -> None:
    f = _last(body)
    assert f is not None and f.reported
    assert (f.rule, f.severity) == ("SG102", severity)
    assert f.api in ("torch.tensor", "torch.as_tensor")
    assert "each element" in f.why and ("back to the device" in f.why) == upload


@pytest.mark.parametrize("body", [
    "a = torch.tensor([1, 2])",
    "a = torch.tensor([n, n + 1])",
    "a = torch.tensor([h[0], h[1]])",               # host scalars: no sync
    "a = torch.tensor([y[0].item(), 2.0]) + n",  # the .item() is the sync (SG103)
    "a = torch.tensor([], device=device)",          # no element: nothing copied
    "e = torch.empty(0, device=device)\na = e.cpu()",
    "e = torch.zeros(0, 3, device=device)\na = e.tolist()",
    "a = torch.empty(0).to(device)",
    "h.new_zeros(0).copy_(torch.empty(0, device=device))",
])
def test_host_scalars_and_empty_tensors_are_silent(body: str) -> None:
    last = len((PRE + textwrap.indent(textwrap.dedent(body), "    ")).rstrip("\n").split("\n"))
    found = [f for f in _lint(body) if f.reported and f.line == last]
    assert [(f.rule, f.api) for f in found] in ([], [("SG103", "Tensor.item")]), found
    assert not any("SG102" in a for f in found for a in f.also)


# -- device inference ---------------------------------------------------------------------
HOST_ONLY = [
    "a = np.arange(4)\nif a[0] > 0:\n    pass",
    "a = np.zeros(3)\nb = a.tolist()",
    "c = x.cpu()\nif c[0] > 0:\n    pass",
    "c = x.tolist()\nif c[0] > 0:\n    pass",
    "v = x.sum().item()\nif v > 0:\n    pass",
    "c = torch.zeros(3, device='cpu')\nb = c.item()",
    "c = torch.ones(3)\nif c.sum() > 0:\n    pass",
    "if ids_cpu[0] > 0:\n    pass",
    "b = ids_cpu.tolist()",
    "b = pinned_buf.sum().item()",
    "b = torch.from_numpy(np.ones(3)).tolist()",
    "if n > 0:\n    pass",
    "print(h)",
    "if isinstance(unk, float):\n    b = int(unk)",
    "e = unk.npu_top_k_eligible\nb = bool(e) and 1 <= n <= NPU_TOP_K_MAX",  # flags, constants
    "b = f'{unk.torch_npu!r}'",
]


@pytest.mark.parametrize("body", HOST_ONLY)
def test_host_only_code_is_silent(body: str) -> None:
    """Nothing reported past the snippet's first line (which may itself be the sync that
    brings the value to the host: ``c = x.cpu()``)."""
    first = PRE.count("\n") + 1
    found = [f for f in _lint(body) if f.reported and (f.line > first or "\n" not in body)]
    assert found == [], [(f.rule, f.text) for f in found]


def test_host_candidates_are_kept_silent() -> None:
    f = _last("c = torch.ones(3)\nb = c.sum().item()")
    assert f is not None and f.severity == SILENT and not f.reported


@pytest.mark.parametrize("body,severity", [
    ("b = x.item()", CERTAIN),                  # device= argument
    ("b = y.item()", CERTAIN),                  # device="npu"
    ("b = h.to(device).item()", CERTAIN),       # .to(device)
    ("b = h.cuda().item()", CERTAIN),           # .cuda()
    ("b = h.npu().tolist()", CERTAIN),          # .npu()
    ("b = (x + h).item()", CERTAIN),            # an op on a device tensor
    ("b = torch.softmax(x, -1).item()", CERTAIN),
    ("a, b = torch.topk(x, 2)\nc = b.tolist()", CERTAIN),
    ("b = x_in.item()", LIKELY),                # annotated torch.Tensor, device unknown
    ("b = logits_gpu.item()", CERTAIN),         # named as a device tensor
    ("b = unk.item()", LIKELY),                 # a tensor-only API on an unknown value
    ("if unk:\n    pass", None),                # unknown value as a condition: not a tensor
    ("b = torch.zeros_like(x).item()", CERTAIN),
    ("b = torch.zeros(3, device=torch.device('cpu')).item()", SILENT),
    ("b = x.new_tensor([1], device='cpu').item()", SILENT),
    ("z = x if n else h\nb = z.item()", LIKELY),  # joined branches: a tensor, place unknown
])
def test_inference_ranks(body: str, severity: Optional[str]) -> None:
    f = _last(body) if not body.endswith("pass") else (_lint(body) or [None])[0]
    if severity is None:
        assert f is None or not f.reported
    else:
        assert f is not None and f.severity == severity, (body, f)


def test_self_attributes_from_init_and_module_functions() -> None:
    src = textwrap.dedent("""\
        import torch

        def make(dev):
            return torch.zeros(3).to(dev)

        class Runner:
            def __init__(self, device):
                self.buf = torch.zeros(3, device=device)
                self.buf_host = torch.zeros(3, pin_memory=True)
                self.host = torch.zeros(3)

            def step(self):
                a = self.buf.tolist()
                b = self.host.tolist()
                c = make("npu").item()
                self.host.copy_(self.buf, non_blocking=True)
                self.buf_host.copy_(self.buf, non_blocking=True)
        """)
    found = {f.line: f for f in check_source(src, "r.py")}
    assert found[13].severity == CERTAIN and found[13].api == "Tensor.tolist"
    assert found[14].severity == SILENT
    assert found[15].severity == CERTAIN
    assert found[16].reported and found[16].rule == "SG201"  # pageable: non_blocking no help
    assert 17 not in found  # pinned: async


def _reported(src: str) -> dict:
    return {f.line: f for f in check_source(textwrap.dedent(src), "m.py") if f.reported}


def test_values_unpacked_from_a_method_result_are_unknown() -> None:
    """vllm-ascend dsa_cp.py before 871759a231: a tuple returned by a method of the class was
    taken for host values, so the .item() on a device tensor it holds was silent."""
    src = """\
        import torch


        class AscendDSACPMetadataBuilder:
            def build(self, num_reqs):
                (
                    local_end_with_pad,
                    local_query_start_loc,
                    local_seq_lens,
                ) = self._build_local_token_metadata(num_reqs=num_reqs, seq_lens=self.seq_lens[:num_reqs])
                local_query_start_loc = local_query_start_loc.clone()
                local_seq_lens_q = local_query_start_loc[1 : num_reqs + 1] - local_query_start_loc[:num_reqs]
                max_local_query_len = max(1, int(local_seq_lens_q.max().item()))
                max_local_seq_lens = int(local_seq_lens.max())
                lens = self._metadata().tolist()
                return max_local_query_len, max_local_seq_lens, lens
        """  # noqa: E501 - lines as in the real code
    found = _reported(src)
    assert found[13].api == "Tensor.item" and found[13].severity == LIKELY
    assert found[14].severity == LIKELY  # int(x.max()) on an unknown tensor
    assert found[15].api == "Tensor.tolist" and found[15].severity == LIKELY
    assert sorted(found) == [13, 14, 15]


def test_values_unpacked_from_a_method_result_host_forms_are_silent() -> None:
    """The fix commit's form: names marked host (``_cpu``) unpacked from the same method stay
    host; size()/numel() results stay Python values; a numpy module without torch stays quiet."""
    src = """\
        import torch


        class AscendDSACPMetadataBuilder:
            def build(self, num_reqs):
                _, _, local_query_start_loc_cpu, local_seq_lens_cpu = self._build_local_token_metadata(
                    num_reqs=num_reqs, seq_lens=self.seq_lens_cpu[:num_reqs]
                )
                local_seq_lens_q_cpu = local_query_start_loc_cpu[1 : num_reqs + 1] - local_query_start_loc_cpu[:num_reqs]
                max_local_query_len = max(1, int(local_seq_lens_q_cpu.max().item()))
                max_local_seq_lens = max(1, int(local_seq_lens_cpu.max().item()))
                n = self.size(0)
                if n > 1:
                    return max_local_query_len, max_local_seq_lens
        """  # noqa: E501 - lines as in the real code
    assert _reported(src) == {}
    numpy_file = """\
        import numpy as np

        class Table:
            def rows(self):
                start, end = self._bounds()
                return start.item(), end.tolist()
        """
    assert _reported(numpy_file) == {}  # a numpy module: its arrays have .item() too


def test_pageable_upload_through_an_advanced_index_of_a_pinned_buffer() -> None:
    """vllm-ascend patch_uva.py before e110dd23c8: indexing a pinned buffer with a list of
    rows gathers into a new, pageable tensor, so .to(non_blocking=True) of it is a synchronous
    copy; a plain (pageable) host buffer is flagged the same way."""
    src = """\
        import torch


        class UvaBufferWrapper:
            def __init__(self, size, dtype):
                self._cpu: torch.Tensor = torch.zeros(size, dtype=dtype, device="cpu", pin_memory=True)
                self._uva: torch.Tensor = torch.zeros_like(self._cpu, device="npu")
                self._modified_indices: set[int] = set()

            @property
            def uva(self):
                if self._modified_indices:
                    dirty_rows = sorted(self._modified_indices)
                    self._uva[dirty_rows] = self._cpu[dirty_rows].to(device="npu", non_blocking=True)
                    self._modified_indices.clear()
                return self._uva

            def upload_rows(self, rows: torch.Tensor):
                return self._cpu[rows].to(device="npu", non_blocking=True)


        class PageableWrapper:
            def __init__(self, n):
                self._cpu = torch.zeros(n, dtype=torch.int32)
                self._uva = torch.zeros(n, dtype=torch.int32, device="npu")

            def flush(self, dirty_rows):
                self._uva[dirty_rows] = self._cpu[dirty_rows].to(device="npu", non_blocking=True)
        """  # noqa: E501 - lines as in the real code
    found = _reported(src)
    for line in (14, 19, 28):
        assert found[line].rule == "SG401" and found[line].api == "Tensor.to", line
        assert found[line].severity == CERTAIN and found[line].value == "host"
        assert "pageable" in found[line].why
    assert sorted(found) == [14, 19, 28]


def test_pinned_uploads_by_view_or_repinned_gather_are_silent() -> None:
    """The fix commit's forms: a slice (a view of the pinned memory) and a gather pinned
    again; and a pinned buffer indexed by a row whose kind is unknown (an int mostly)."""
    src = """\
        import torch


        class UvaBufferWrapper:
            def __init__(self, n):
                self._cpu = torch.zeros(n).pin_memory()
                self._buf = torch.empty(n, 4, pin_memory=True)
                self._uva = torch.zeros(n, device="npu")

            def flush(self, n_dirty, row):
                dirty_rows = sorted(range(n_dirty))
                self._uva[:n_dirty].copy_(self._cpu[:n_dirty], non_blocking=True)
                src = self._cpu[dirty_rows].pin_memory()
                self._uva[dirty_rows] = src.to(device="npu", non_blocking=True)
                a = self._cpu[:n_dirty].to(device="npu", non_blocking=True)
                b = self._buf[row].to("npu", non_blocking=True)
                c = self._buf[row, 1:].to(device="npu", non_blocking=True)
                return a, b, c
        """
    assert _reported(src) == {}


def test_one_finding_per_line_and_inline_allow() -> None:
    found = _lint("a = x.item() + y.tolist()[0] + int(x[0])  # syncguard: allow[debug]")
    line = [f for f in found if f.text.startswith("a = x.item()")]
    assert len(line) == 1
    assert line[0].allowed == "debug" and not line[0].reported
    assert len(line[0].also) == 2


def test_lambdas_comprehensions_and_nested_functions() -> None:
    found = _lint("""\
        g = lambda t: t.item()
        a = [v.item() for v in x]
        def inner(q: torch.Tensor):
            return q.tolist()
        """)
    assert {f.api for f in found if f.reported} == {"Tensor.item", "Tensor.tolist"}
    assert sum(f.reported for f in found) == 3


def test_syntax_error_is_reported_not_raised(tmp_path) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n")
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(2, device='npu')\n"
                                    "y = x.item()\n")
    rep = lint_paths([str(tmp_path)], root=str(tmp_path))
    assert rep.files == 2 and len(rep.errors) == 1 and "bad.py:1" in rep.errors[0]
    assert [f.path for f in rep.reported] == ["ok.py"]


# -- CLI: formats, exit codes, config -----------------------------------------------------
def _tree(tmp_path, pyproject: str = "") -> str:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "hot.py").write_text(textwrap.dedent("""\
        import torch

        def step(x: torch.Tensor, device):
            y = torch.zeros(4, device=device)
            n = y.sum().item()
            if x.max() > 0:
                pass
            return n
        """))
    (tmp_path / "pkg" / "gen").mkdir()
    (tmp_path / "pkg" / "gen" / "made.py").write_text(
        "import torch\nv = torch.zeros(2, device='npu').item()\n")
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    return str(tmp_path)


def test_cli_text_and_exit_codes(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(_tree(tmp_path))
    assert main(["lint", "pkg"]) == 1
    out = capsys.readouterr().out
    assert "pkg/hot.py:5:" in out and "SG103 certain Tensor.item" in out
    assert "pkg/hot.py:6:" in out and "SG101 likely" in out
    assert "3 findings (2 certain, 1 likely)" in out and "files/s" in out
    assert main(["lint", "pkg", "--fail-on", "never"]) == 0
    assert main(["lint", "pkg", "--exclude", "gen/", "--exclude", "hot.py"]) == 0
    assert main(["lint", "pkg", "--exclude", "gen/", "--fail-on", "certain"]) == 1
    capsys.readouterr()
    assert main(["lint", "nope"]) == 2
    assert "nope: no such file" in capsys.readouterr().err
    assert main(["lint", "pkg", "--format", "xml"]) == 2


def test_numpy_files_take_unknown_values_for_host_ones() -> None:
    src = "def f(a):\n    if a.any():\n        return a.tolist()\n"
    assert [f.severity for f in check_source("import numpy as np\n" + src, "np.py")] == [
        SILENT]
    assert [f.severity for f in check_source("import torch\n" + src, "t.py")] == [
        LIKELY, LIKELY]


def test_fail_on_certain_passes_likely_only(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("import torch\n\ndef f(t):\n    return t.item()\n")
    assert main(["lint", "a.py"]) == 1
    assert main(["lint", "a.py", "--fail-on", "certain"]) == 0


def test_pyproject_section_and_gitignore(tmp_path, monkeypatch, capsys) -> None:
    root = _tree(tmp_path, '[tool.syncguard]\nmax_syncs = 0\n\n[tool.syncguard.lint]\n'
                           'exclude = ["pkg/gen/"]\nfail-on = "certain"\n')
    monkeypatch.chdir(root)
    assert main(["lint", "pkg", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {f["path"] for f in doc["findings"]} == {"pkg/hot.py"}
    (tmp_path / "pkg" / ".gitignore").write_text("hot.py\n")
    (tmp_path / "pyproject.toml").write_text('[tool.syncguard.lint]\nexclude = ["gen"]\n')
    assert main(["lint", "pkg"]) == 0
    (tmp_path / "pyproject.toml").write_text('[tool.syncguard.lint]\nexlude = ["gen"]\n')
    assert main(["lint", "pkg"]) == 2
    assert "exlude: unknown key" in capsys.readouterr().err


def test_github_format(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(_tree(tmp_path))
    main(["lint", "pkg/hot.py", "--format", "github"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("::error file=pkg/hot.py,line=5,col=")
    assert "title=syncguard SG103 Tensor.item::certain: " in out[0]
    assert out[1].startswith("::warning file=pkg/hot.py,line=6,")


def test_sarif_validates_against_the_schema(tmp_path, monkeypatch, capsys) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    monkeypatch.chdir(_tree(tmp_path))
    assert main(["lint", "pkg", "--format", "sarif", "-o", "out.sarif"]) == 1
    doc = json.loads((tmp_path / "out.sarif").read_text())
    with open(os.path.join(ROOT, "syncguard", "results", "schemas", "sarif-2.1.0.json")) as f:
        schema = json.load(f)
    jsonschema.validate(doc, schema)
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert all(r["help"]["text"] for r in run["tool"]["driver"]["rules"])
    assert [r["ruleId"] for r in run["results"]] == ["SG103", "SG101", "SG103"]
    for r in run["results"]:
        assert ids[r["ruleIndex"]] == r["ruleId"]
        assert r["partialFingerprints"]["syncguardLint/v1"]
    assert run["results"][0]["level"] == "error" and run["results"][1]["level"] == "warning"


def test_baseline_new_findings_fail_moved_lines_match(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(_tree(tmp_path))
    assert main(["lint", "pkg", "--update-baseline", "lint-baseline.json"]) == 0
    assert main(["lint", "pkg", "--baseline", "lint-baseline.json"]) == 0
    hot = tmp_path / "pkg" / "hot.py"
    text = hot.read_text()
    hot.write_text("# a comment\n\n" + text)  # every line moves down
    assert main(["lint", "pkg", "--baseline", "lint-baseline.json"]) == 0
    assert "3 known in the baseline" in capsys.readouterr().out
    hot.write_text(text + "\ndef more(x: torch.Tensor):\n    return x.tolist()\n")
    assert main(["lint", "pkg", "--baseline", "lint-baseline.json"]) == 1
    out = capsys.readouterr().out
    assert "Tensor.tolist" in out and "Tensor.item" not in out
    (tmp_path / "bad.json").write_text("{}")
    assert main(["lint", "pkg", "--baseline", "bad.json"]) == 2


def test_diff_lints_only_changed_lines(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(_tree(tmp_path))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "base"]):
        subprocess.run(["git", *cmd], check=True, env=env, capture_output=True)
    assert main(["lint", "pkg", "--diff", "HEAD"]) == 0
    hot = tmp_path / "pkg" / "hot.py"
    hot.write_text(hot.read_text().replace("return n", "return n, x.tolist()"))
    (tmp_path / "pkg" / "new.py").write_text("import torch\ndef g(t):\n    return t.item()\n")
    capsys.readouterr()
    assert main(["lint", "pkg", "--diff", "HEAD"]) == 1
    out = capsys.readouterr().out
    assert "pkg/hot.py:8:" in out and "pkg/new.py:3:" in out and "hot.py:5:" not in out
    assert "2 findings (0 certain, 2 likely)" in out
    assert main(["lint", "pkg", "--diff", "no-such-ref"]) == 2


def test_subprocess_run(tmp_path) -> None:
    _tree(tmp_path)
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-m", "syncguard", "lint", "pkg", "--format", "json"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["summary"]["counts"]["certain"] == 2


def test_pre_commit_hooks_file() -> None:
    """The hooks pre-commit reads: each runs `syncguard lint` on the staged Python files."""
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as f:
        text = f.read()
    hooks = text.split("\n- ")[1:]
    ids = [h.split("\n", 1)[0].split("id:", 1)[1].strip() for h in hooks]
    assert ids == ["syncguard-lint", "syncguard-lint-system"]
    for h in hooks:
        assert "entry: syncguard lint\n" in h and "types: [python]" in h


def test_a_lint_bug_in_one_file_does_not_hide_the_others(tmp_path, monkeypatch) -> None:
    import syncguard.lint as lint_mod

    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(2, device='npu').item()\n")
    (tmp_path / "b.py").write_text("import torch\n")
    real = lint_mod.check_tree

    def flaky(tree, source: str, path: str, *args) -> List[Finding]:  # type: ignore[no-untyped-def]
        if path.endswith("b.py"):
            raise KeyError("boom")
        return real(tree, source, path, *args)

    monkeypatch.setattr(lint_mod, "check_tree", flaky)
    rep = lint_paths([str(tmp_path)], root=str(tmp_path))
    assert [f.path for f in rep.reported] == ["a.py"]
    assert rep.errors == ["b.py: internal error of the lint: KeyError: 'boom'"]


def test_quiet_forms_from_real_trees() -> None:
    """Forms that were noise on torch/optim and torch/distributions: a Union[float, Tensor]
    hint is mostly a number; `key in <collection of tensors>`; torch.Size is no tensor."""
    src = textwrap.dedent("""\
        import torch
        from typing import Union

        def f(lr: Union[float, torch.Tensor], t: torch.Tensor, shape):
            if not 0.0 <= lr:
                raise ValueError(f"bad {lr}")
            groups = {"a": [t]}
            if "a" not in groups:
                pass
            s = torch.Size(shape)
            return t.expand(s + t.shape)
        """)
    assert [f for f in check_source(src, "o.py") if f.reported] == []
