"""nanoGPT's sample.py (tests/data/exec/nanogpt, its shape read from karpathy/nanoGPT), run
unchanged under `syncguard exec --device sim`: it loads a checkpoint saved on the host with
`torch.load(ckpt, map_location="npu")` (a segmentation fault before the simulated npu served
storages), samples the same text as on the CPU, and each token is one step with its reads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _cli import program_env
from _paths import TESTS

from syncguard.cli import main
from syncguard.results import loader

HERE = os.path.join(str(TESTS), "data", "exec", "nanogpt")
SAMPLES, TOKENS = 2, 6


def _python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=HERE, capture_output=True, text=True,
                          timeout=600)


def test_nanogpt_sample_loads_its_checkpoint_onto_the_simulated_npu(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    assert _python("train.py", ckpt).returncode == 0
    opts = [f"--out_dir={ckpt}", "--start=abc", f"--num_samples={SAMPLES}",
            f"--max_new_tokens={TOKENS}"]
    on_cpu = _python("sample.py", "--device=cpu", *opts)
    assert on_cpu.returncode == 0, on_cpu.stderr
    out = str(tmp_path / "o")
    p = _python("-m", "syncguard", "exec", "--device", "sim", "--out", out, "--loop",
                "model:GPT.forward", "--", "python", "sample.py", "--device=npu", *opts)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith(on_cpu.stdout)  # the same samples: the weights loaded right
    steps = loader.load(os.path.join(out, "result.jsonl")).steps
    assert len(steps) == SAMPLES * TOKENS
    # per token: the list index x[:, [-1], :] (an upload), the top-k mask's upload and its
    # boolean index (nonzero)
    assert {s.syncs for s in steps} == {3}
    assert [s.step for s in steps if (s.labels or {}).get("phase") == "prefill"] == [0, TOKENS]


def test_what_the_simulated_npu_cannot_do_is_one_line_and_exit_2(
        tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A device tensor's storage holds no bytes on the simulated npu: a program that sets a
    tensor from it gets syncguard's one line, exit 2 (not a traceback), reports written."""
    program_env(monkeypatch)
    prog = tmp_path / "storage_prog.py"
    prog.write_text("import torch\n"
                    "s = torch.zeros(3, device='npu').untyped_storage()\n"
                    "torch.empty(0, device='npu').set_(s)\n")
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--", "python", str(prog)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    said = [ln for ln in err.splitlines() if ln.startswith("syncguard: error: ")]
    assert len(said) == 1 and "set_ with a Storage is not supported" in said[0], err
    footer = loader.load(os.path.join(out, "result.jsonl")).footer
    assert footer["reason"] == "program raised SimulatedDeviceError", footer
