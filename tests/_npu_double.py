"""A test double of torch_npu that loads the way the real wheel does.

Installed as a distribution in a folder put on ``PYTHONPATH`` of a subprocess: a
``torch_npu-<version>.dist-info`` with the real wheel's ``[torch.backends] torch_npu =
torch_npu:_autoload`` entry point, so ``import torch`` autoloads it (torch >= 2.5), and a
``torch_npu`` package whose import does what the real ``torch_npu/__init__.py`` does around
the device: turns autoload off while it imports torch, renames PrivateUse1 to ``npu``,
registers a device module with an ``is_available()`` answer, and restores the switch in
``_autoload``. Device resolution is thereby tested through torch's own loading path.

The host state comes from ``NPU_DOUBLE_STATE`` in the subprocess's environment:

- ``healthy``: an NPU is visible. The device's kernels are syncguard's simulated npu (set up
  under the double's name, as a real backend would register its own), so runs, selftests and
  tests execute; ``torch.npu.get_device_name()`` says ``Ascend910B3 (test double)``.
- ``no-device``: torch_npu loads, ``torch.npu.is_available()`` is False.
- ``broken``: the import fails as on a host without CANN (``libhccl.so``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

DEVICE_NAME = "Ascend910B3 (test double)"

_INIT = '''
import os
import sys
import types

ORG_AUTOLOAD = os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch

__version__ = "{version}"
_STATE = os.environ.get("NPU_DOUBLE_STATE", "healthy")
if _STATE == "broken":
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

if _STATE == "healthy":
    # the double's kernels: syncguard's simulated device, set up while this module is not
    # yet "torch_npu" in sys.modules (the simulated device refuses next to a real one)
    _me = sys.modules.pop("torch_npu")
    try:
        from syncguard.sim import simulated_device
        from sglang_ascend_sampling.npu_op import npu_top_k_top_p  # noqa: F401

        simulated_device("npu")
    finally:
        sys.modules["torch_npu"] = _me
    torch.npu.get_device_name = lambda device=None: "{device_name}"
else:
    torch.utils.rename_privateuse1_backend("npu")
    _npu = types.ModuleType("torch_npu.npu")
    _npu.is_available = lambda: False
    _npu.device_count = lambda: 0
    def _no_device(*args, **kwargs):
        raise RuntimeError("npuSetDevice: no NPU device visible (test double)")
    _npu.current_device = _no_device
    _npu.get_device_name = _no_device
    torch._register_device_module("npu", _npu)


def _autoload():
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = ORG_AUTOLOAD


_autoload()
'''


def install(root: Path, version: str = "2.13.0") -> Path:
    """Write the double under ``root`` (put ``root`` on PYTHONPATH); returns ``root``."""
    pkg = root / "torch_npu"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(
        _INIT.format(version=version, device_name=DEVICE_NAME), encoding="utf-8")
    info = root / f"torch_npu-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[torch.backends]\ntorch_npu = torch_npu:_autoload\n", encoding="utf-8")
    (info / "top_level.txt").write_text("torch_npu\n", encoding="utf-8")
    return root


def environ(root: Path, state: str, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A subprocess environment with the double installed in ``state``."""
    env = dict(os.environ if base is None else base)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([str(root), repo])
    env["NPU_DOUBLE_STATE"] = state
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return env
