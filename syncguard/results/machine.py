"""What a result records about the machine its host times were measured on, and whether two
results' absolute host times can be compared at all.

Ratios between paths of one run are measured side by side (interleaved rounds) and mostly
carry from one machine state to another; absolute host time per step does not: a busier
machine, another CPU or another torch thread count moves it with no code change. So a result
header records the machine (:func:`machine_state`), including a short reference loop timed at
the start of the run, and :func:`machine_differs` says why two of them differ.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any, Dict, List, Optional

#: Repetitions of the reference loop; its median is recorded.
CAL_REPEATS = 7
#: Reference loops further apart than this ratio mean a different machine state.
CAL_TOLERANCE = 1.05
#: 1-minute load averages further apart than this (per CPU) mean a different machine state.
LOAD_TOLERANCE = 0.25
#: What the reference loop does (recorded with its time).
CAL_WHAT = ("64x64 float32 matmul+tanh x100 and 20000 Python integer multiply-adds, median of "
            f"up to {CAL_REPEATS} repeats")


def cpu_model() -> Optional[str]:
    """The CPU model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _reference_once() -> float:
    import torch

    t0 = time.perf_counter()
    x = torch.full((64, 64), 0.5)
    for _ in range(100):
        x = torch.tanh(x @ x * 0.01)
    s = 0
    for i in range(20000):
        s += i * i
    return (time.perf_counter() - t0) * 1e3


#: The reference loop stops repeating after this many seconds (at least 3 repeats): on a
#: machine so busy that one loop takes a second, the run does not wait for 7.
CAL_BUDGET_S = 0.3


def reference_ms(repeats: int = CAL_REPEATS, budget_s: float = CAL_BUDGET_S) -> List[float]:
    """The reference loop's times (ms), one per repeat (the first, a warm-up, left out):
    ``repeats`` of them, fewer (at least 3) once ``budget_s`` seconds have gone."""
    t0 = time.perf_counter()
    _reference_once()
    out: List[float] = []
    while len(out) < repeats and (len(out) < 3 or time.perf_counter() - t0 < budget_s):
        out.append(_reference_once())
    return out


def machine_state(calibrate: bool = True) -> Dict[str, Any]:
    """The header's ``machine``: CPU model and count, 1-minute load average, torch intra-op
    threads, and the reference loop's median time (ms) with what it does."""
    import torch

    try:
        load: Optional[float] = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        load = None
    out: Dict[str, Any] = {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
                           "loadavg_1m": load, "torch_threads": torch.get_num_threads()}
    if calibrate:
        times = sorted(reference_ms())
        out["reference_ms"] = round(times[len(times) // 2], 4)
        out["reference"] = CAL_WHAT
        out["reference_repeats"] = len(times)
    return out


def machine_differs(a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> Optional[str]:
    """None when two ``machine`` records describe the same machine state, else the reason:
    ``"machine not recorded"`` (an older result) or ``"machine differs: <what>"``."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return "machine not recorded"
    why: List[str] = []
    for key, name in (("cpu_model", "CPU"), ("cpu_count", "CPU count"),
                      ("torch_threads", "torch threads")):
        if a.get(key) != b.get(key):
            why.append(f"{name} {a.get(key)} vs {b.get(key)}")
    ra, rb = a.get("reference_ms"), b.get("reference_ms")
    if not isinstance(ra, (int, float)) or not isinstance(rb, (int, float)) or ra <= 0 \
            or rb <= 0:
        why.append("reference loop not recorded")
    elif max(ra, rb) / min(ra, rb) > CAL_TOLERANCE:
        why.append(f"reference loop {ra:.2f} vs {rb:.2f} ms")
    la, lb, n = a.get("loadavg_1m"), b.get("loadavg_1m"), a.get("cpu_count")
    cpus = n if isinstance(n, int) and n > 0 else 1  # a result file is untrusted input
    if isinstance(la, (int, float)) and isinstance(lb, (int, float)) and \
            abs(la - lb) / cpus > LOAD_TOLERANCE:
        why.append(f"load average {la:.2f} vs {lb:.2f}")
    return "machine differs: " + "; ".join(why) if why else None
