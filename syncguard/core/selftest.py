"""Plant known syncs and verify the guard sees them: "0 syncs" must never mean "detector off"."""

from __future__ import annotations

from typing import List, Tuple

import torch

from .events import SelfTestError
from .guard import SyncGuard

__all__ = ["SelfTestError", "selftest", "summary_line"]


def selftest(device: str | None = None) -> List[str]:
    """Run planted probes; return a line per probe, raise :class:`SelfTestError` on a miss.

    Probes run on plain CPU tensors treated as device-resident, and on ``device`` too when
    given (e.g. the simulated "npu", or "cuda"): a scalar read, a copy to host, a
    nonzero-family op, and a control that must stay at zero.
    """
    lines: List[str] = []
    targets: List[Tuple[str, Tuple[str, ...]]] = [("cpu", ("cpu",))]
    if device is not None and torch.device(device).type != "cpu":
        targets.append((device, ()))
    for dev, extra in targets:
        x = torch.arange(4, device=dev)
        probes = [
            ("bool(tensor)", lambda x=x: bool(x[1] > 0), 1),
            ("tensor.tolist()", lambda x=x: x.tolist(), 1),
            ("x[mask]", lambda x=x: x[x > 1], 1),
            ("control: torch.all without a read", lambda x=x: torch.all(x >= 0), 0),
        ]
        for name, fn, want in probes:
            with SyncGuard(devices=extra) as g:
                fn()
            if g.count != want:
                raise SelfTestError(
                    f"syncguard self-test failed on {dev}: {name} gave {g.count} syncs, "
                    f"expected {want}; the interceptors are not working on this torch "
                    f"({torch.__version__})"
                )
            lines.append(f"ok {dev}: {name} -> {g.count}")
    return lines


def summary_line(lines: List[str]) -> str:
    """The line under :func:`selftest`'s: ``selftest passed: 8 probes on cpu, npu:0, every
    planted sync seen and the control clean``."""
    devices = list(dict.fromkeys(ln[len("ok "):].split(": ", 1)[0] for ln in lines))
    return (f"selftest passed: {len(lines)} probes on {', '.join(devices)}, every planted sync "
            f"seen and the control clean")
