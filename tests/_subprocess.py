"""Real syncguard processes for tests: a clean environment, and a run stopped by a signal
once it has written some steps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Tuple


def env() -> Dict[str, str]:
    """The test process's environment, without SYNCGUARD_DEBUG, 200 columns wide."""
    out = dict(os.environ)
    out.pop("SYNCGUARD_DEBUG", None)
    out["COLUMNS"] = "200"
    return out


def step_lines(path: Path) -> int:
    """Step lines written to a streamed ``result.jsonl`` so far (0 before it exists)."""
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for ln in f if ln.startswith('{"type":"step"'))
    except FileNotFoundError:
        return 0


def run_stopped(tmp_path: Path, scenario: str, sig: int, after_steps: int, timeout: float,
                exit_timeout: float) -> Tuple[int, str, str]:
    """``syncguard run SCENARIO --device sim --out tmp_path/out --no-timed`` in a new session,
    sent ``sig`` once ``after_steps`` steps are on disk (waiting at most ``timeout`` s for
    them, then ``exit_timeout`` s for the exit); returns (exit code, stdout, stderr)."""
    out = tmp_path / "out"
    with open(tmp_path / "stdout", "w") as so, open(tmp_path / "stderr", "w") as se:
        proc = subprocess.Popen([sys.executable, "-m", "syncguard", "run", scenario, "--device",
                                 "sim", "--out", str(out), "--no-timed"], stdout=so, stderr=se,
                                env=env(), start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while step_lines(out / "result.jsonl") < after_steps:
                assert proc.poll() is None, (
                    f"the run ended (exit {proc.returncode}) before signal {sig} was sent; "
                    f"stderr: {(tmp_path / 'stderr').read_text(encoding='utf-8')[-2000:]}")
                assert time.monotonic() < deadline, f"no {after_steps} steps written in time"
                time.sleep(0.05)
            proc.send_signal(sig)
            rc = proc.wait(timeout=exit_timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return (rc, (tmp_path / "stdout").read_text(encoding="utf-8"),
            (tmp_path / "stderr").read_text(encoding="utf-8"))

