"""A released engine's sampling module, unchanged, on the simulated npu (issue 13, item 4).

Optional: needs the ``vllm`` package, which CI does not install (about 800 MB). Run it with::

    pip install --no-deps vllm==0.34.0   # plus the pure-Python imports in reports/real-vllm.md
    python -m pytest -q -p no:xdist -m realengine tests/casestudy/test_real_vllm.py

The expected counts and sites come from reading vLLM's ``topk_topp_sampler.py`` (see
reports/real-vllm.md): the sort-based route syncs nowhere; ``apply_top_k_only`` syncs once per
call, in ``logits.topk(max_top_k, ...)`` (a 0-d device tensor used as an int argument).
Each run is a subprocess, so vLLM's import stays out of the test process.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from _paths import ROOT

from syncguard.results import format as results
from syncguard.results import loader

ROOT = str(ROOT)
HERE = os.path.join(ROOT, "examples", "real_vllm")
SCRIPT = os.path.join(HERE, "vllm_decode.py")
SUBJECTS = ["vllm_subject:VllmSubject", "vllm_subject:VllmCpuPlatformSubject"]
HOW = ("vllm is not installed (CI leaves it out: ~800 MB). To run: pip install --no-deps "
       "vllm==0.34.0 plus the pure-Python packages listed in reports/real-vllm.md, then "
       "python -m pytest -q -p no:xdist -m realengine tests/casestudy/test_real_vllm.py")

pytestmark = [
    pytest.mark.realengine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=HOW),
]


def _line(path: str, text: str) -> int:
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


@pytest.fixture(scope="module")
def sampler_file() -> str:
    """vLLM's topk_topp_sampler.py, found without importing vLLM into the test process."""
    code = ("import vllm, vllm.v1.sample.ops.topk_topp_sampler as m; "
            "print(vllm.__version__); print(m.__file__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"vllm is installed but its sampling module does not import "
                    f"({proc.stderr.strip().splitlines()[-1]}); {HOW}")
    version, path = proc.stdout.strip().splitlines()[-2:]
    if version == "0.34.0":  # the release reports/real-vllm.md was measured on
        assert _line(path, "logits.topk(max_top_k, dim=1)") == 281
    return path


def _syncguard(args: list, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "syncguard", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _hidden(res: results.RunResult) -> set:
    return {(e["path"], e["step"], e["filename"], e["lineno"], e["op"])
            for e in res.events if not e["allowed"]}


def _exec(tmp_path, *script_args: str) -> results.RunResult:
    out = str(tmp_path / "o")
    proc = _syncguard(["exec", "--device", "sim", "--out", out, "--max-syncs", "0",
                       "--step", "vllm_decode:decode_step", "--", "python", SCRIPT,
                       *script_args], cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the token readback syncs
    assert "decoded 6 steps; tokens per request: [3, 3, 6, 6]" in proc.stdout
    return loader.load(os.path.join(out, "result.jsonl"))


def test_script_vllm_dispatcher_route(tmp_path, sampler_file):
    """apply_top_k_top_p (sort-based route): only the script's own readback syncs."""
    res = _exec(tmp_path)
    assert [(s.path, s.step, s.syncs) for s in res.steps] == [
        ("decode_step", i, 1) for i in range(6)]
    readback = _line(SCRIPT, "next_ids.tolist()")
    assert _hidden(res) == {("decode_step", i, SCRIPT, readback, "aten::_to_copy")
                            for i in range(6)}


def test_script_vllm_cpu_platform_route(tmp_path, sampler_file):
    """allow_cpu_sync=True: once the batch is top-k only (steps 3-5), vLLM's
    apply_top_k_only adds one scalar read per step at its logits.topk(max_top_k) line."""
    res = _exec(tmp_path, "--allow-cpu-sync")
    assert [s.syncs for s in res.steps] == [1, 1, 1, 2, 2, 2]
    readback = _line(SCRIPT, "next_ids.tolist()")
    topk = _line(sampler_file, "logits.topk(max_top_k, dim=1)")
    assert _hidden(res) == (
        {("decode_step", i, SCRIPT, readback, "aten::_to_copy") for i in range(6)}
        | {("decode_step", i, sampler_file, topk, "aten::_local_scalar_dense")
           for i in (3, 4, 5)})


def test_subjects_over_a_scenario(tmp_path, sampler_file):
    """Both subjects over a batch that turns top-k only at step 3."""
    out = str(tmp_path / "o")
    args = ["run", "topk_only.toml", "--device", "sim", "--no-timed", "--out", out]
    for s in SUBJECTS:
        args += ["--subject", s]
    proc = _syncguard(args, cwd=HERE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = loader.load(os.path.join(out, "result.jsonl"))
    rows = {(s.path, s.step): (s.syncs, s.allowed >= 1, s.labels.get("branch"))
            for s in res.steps}
    assert rows == {
        **{("vllm", i): (0, True, "sort") for i in range(6)},
        **{("vllm-cpu-platform", i): (0, True, "sort") for i in range(3)},
        **{("vllm-cpu-platform", i): (1, True, "top-k only") for i in range(3, 6)},
    }
    topk = _line(sampler_file, "logits.topk(max_top_k, dim=1)")
    assert _hidden(res) == {("vllm-cpu-platform", i, sampler_file, topk,
                             "aten::_local_scalar_dense") for i in (3, 4, 5)}


def test_check_gates_the_cpu_platform_route(sampler_file):
    """The CI gate: exit 1 naming vLLM's line for the syncing route, 0 for the other."""
    topk = _line(sampler_file, "logits.topk(max_top_k, dim=1)")
    bad = _syncguard(["check", "topk_only.toml", "--device", "sim", "--subject", SUBJECTS[1]],
                     cwd=HERE)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert f"vllm/v1/sample/ops/topk_topp_sampler.py:{topk}" in bad.stdout
    good = _syncguard(["check", "topk_only.toml", "--device", "sim", "--subject", SUBJECTS[0]],
                      cwd=HERE)
    assert good.returncode == 0, good.stdout + good.stderr
