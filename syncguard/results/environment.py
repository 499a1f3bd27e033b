"""What a result header records of the machine and the checkout: versions, host, git commit,
the scenario files."""

from __future__ import annotations

import getpass
import hashlib
import os
import platform
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Dict, Optional

from .._paths import PKG_DIR
from .._version import __version__
from ..standin import is_standin

if TYPE_CHECKING:  # pragma: no cover
    pass


def _git(cwd: str, *args: str) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_dirty(cwd: str) -> Optional[bool]:
    """True when tracked files other than reports/ (outputs, possibly this run's own) differ
    from the commit (None outside a git checkout)."""
    top = _git(cwd, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    out = _git(top, "status", "--porcelain", "--untracked-files=no", "--", ".",
               ":(exclude)reports")
    return None if out is None else bool(out)


def environment(device: str, device_name: str) -> Dict[str, Any]:
    """Versions and machine facts for a result header."""
    import torch

    commit = _git(PKG_DIR, "rev-parse", "HEAD") or None
    tnpu = sys.modules.get("torch_npu")
    tnpu_v = None
    if tnpu is not None and not is_standin(tnpu):
        tnpu_v = getattr(tnpu, "__version__", "unknown")
    try:
        user = getpass.getuser()
    except Exception:
        user = None
    return {
        "syncguard": __version__, "torch": torch.__version__, "torch_npu": tnpu_v,
        "python": platform.python_version(), "platform": platform.platform(),
        "machine": platform.machine(), "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(), "host": socket.gethostname(), "user": user,
        "device": device, "device_name": device_name,
        "git_commit": commit, "git_dirty": _git_dirty(PKG_DIR) if commit else None,
    }


def scenario_record(path: str, text: str) -> Dict[str, str]:
    return {"file": path, "sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text}


