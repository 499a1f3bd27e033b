"""The torch_npu stand-in holds no operator of its own: a plug-in provides each fused operator
(syncguard.standin.provide), as the case study provides npu_top_k_top_p, and code that calls
``torch_npu.<op>`` runs unchanged on the simulated npu."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from syncguard import standin

ROOT = Path(__file__).resolve().parents[2]


def test_syncguard_itself_defines_no_fused_operator() -> None:
    hits = [str(p.relative_to(ROOT)) for p in (ROOT / "syncguard").rglob("*.py")
            if re.search(r"^def npu_top_k_top_p\b", p.read_text(encoding="utf-8"), re.M)]
    assert hits == []
    assert re.search(r"^def npu_top_k_top_p\b",
                     (ROOT / "sglang_ascend_sampling" / "npu_op.py").read_text(), re.M)


@pytest.mark.parametrize("name", ["top_k", "npu_", "npu_a.b", "", 3])
def test_provide_refuses_a_name_that_is_no_fused_operator(name: object) -> None:
    with pytest.raises(ValueError, match="starts with 'npu_'"):
        standin.provide(name, lambda: None)  # type: ignore[arg-type]


def test_provide_refuses_what_cannot_be_called() -> None:
    with pytest.raises(TypeError, match="callable"):
        standin.provide("npu_thing", 3)  # type: ignore[arg-type]


_CHILD = """
import sys
import torch
from syncguard import sim
sim.simulated_device("npu", torch_npu=True)
npu = sys.modules["torch_npu"]
try:
    npu.npu_top_k_top_p
    print("before: callable")
except Exception as exc:
    print("before:", type(exc).__name__)
try:
    npu.npu_top_k_top_p(torch.zeros(1, 4), None, None)
except Exception as exc:
    print("call before:", str(exc))
import sglang_ascend_sampling  # the case study: provides its operator
out = npu.npu_top_k_top_p(torch.tensor([[1.0, 3.0, 2.0, 0.0]], device="npu"), None,
                          torch.tensor([2], dtype=torch.int32, device="npu"))
print("after:", sim.host_value(out)[0].isfinite().nonzero().flatten().tolist())
"""


def test_the_case_study_provides_its_operator_to_the_stand_in() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         cwd=str(ROOT), timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "before: callable"  # libraries import npu_* ops at load time
    assert "not simulated by syncguard's stand-in (only the operators plug-ins provide " \
           "are: none)" in lines[1]
    assert lines[2] == "after: [1, 2]"  # top-2 of [1, 3, 2, 0]: indices 1 and 2
