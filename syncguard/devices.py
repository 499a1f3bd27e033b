"""Device kinds a run can target, and the error for one that cannot be used here.

Torch-free on purpose: the CLI's ``--help`` and argument parsing must not pay for importing
torch (seconds on a 910B host with torch_npu).
"""

from __future__ import annotations

DEVICES = ("auto", "sim", "npu", "cuda", "cpu")


class DeviceError(RuntimeError):
    """The requested device cannot be used here (exit code 2)."""
