"""Older stacks: 910B hosts run Python 3.9 to 3.11 (torch_npu pins torch 2.1 to 2.9)."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _python39() -> Optional[str]:
    cands = [os.environ.get("SYNCGUARD_PYTHON39", "")]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")))
    cands += ["/usr/bin/python3.9", "/usr/local/bin/python3.9"]
    for c in cands:
        if c and os.path.isfile(c):
            out = subprocess.run([c, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() == "(3, 9)":
                return c
    return None


PY39 = _python39()


@pytest.mark.skipif(PY39 is None, reason="no Python 3.9 interpreter on this machine")
def test_package_compiles_and_cli_parses_on_python39(tmp_path: Path) -> None:
    # every module is valid 3.9 syntax; the torch-free layer (CLI parsing, results, baselines,
    # config) imports and runs there without torch
    assert PY39 is not None
    prefix = str(tmp_path / "pyc")
    env = {**os.environ, "PYTHONPYCACHEPREFIX": prefix}  # keep 3.9 bytecode out of the tree
    proc = subprocess.run([PY39, "-m", "compileall", "-q", str(ROOT / "syncguard")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code = ("import sys\n"
            "import syncguard.core.events, syncguard.driving.devices, syncguard.driving.config\n"
            "import syncguard.results.format\n"
            "import syncguard.gate.baseline, syncguard.core.opmodel, syncguard.renderers.ci\n"
            "from syncguard.cli import main\n"
            "assert main(['check', '--help']) == 0\n"
            "assert 'torch' not in sys.modules\n")
    proc = subprocess.run([PY39, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                          env={**env, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr

