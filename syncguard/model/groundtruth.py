"""Native ground truth: count syncs with the runtime's own mechanism, to cross-check syncguard.

- CUDA: ``torch.cuda.set_sync_debug_mode("warn")`` with the warnings filter at "always" (sees
  item/bool, blocking copies, the nonzero family, stream syncs and in-kernel ``.item()``;
  misses ``torch.cuda.synchronize()``, ``Event.synchronize()`` and pageable non-blocking
  copies), plus the trace callbacks of ``torch.cuda._gpu_trace`` (every stream, device and
  event synchronisation). Trace activation cannot be undone: run it in a child process.
- NPU: the "warn" mode of ``torch.npu.set_sync_debug_mode`` writes to C++ stderr only, so the
  trace callbacks of ``torch_npu.utils._npu_trace`` are used.
- Simulated device: the backend's own op-level count (every host-read ATen op the fallback
  runs, whether or not a Python interceptor reported it): an independent second layer.

:func:`compare` lines two per-key counts up and lists every disagreement, with the known
reason when there is one.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import traceback
import warnings
from typing import Any, Dict, List, Optional, Tuple

from .._paths import pkg_path
from ..core.hub import INTERNAL_DIRS

#: Cases where the native mechanism is known to miss a real sync (or see none by design).
KNOWN_BLIND_SPOTS: Dict[Tuple[str, str], str] = {
    ("cuda-debug", "device.synchronize()"): "set_sync_debug_mode does not check "
    "torch.cuda.synchronize() (facts: sync-ops.md)",
    ("cuda-debug", "event.synchronize()"): "set_sync_debug_mode does not check "
    "Event.synchronize()",
    ("cuda-debug", "pageable .to(dev, non_blocking=True)"): "a non-blocking copy from pageable "
    "memory syncs in the driver; no PyTorch check sees it",
    ("cuda-trace", "pageable .to(dev, non_blocking=True)"): "a non-blocking copy from pageable "
    "memory syncs in the driver; no PyTorch check sees it",
}
# Not for npu-trace: torch_npu synchronizes the stream for a non_blocking copy from or to
# pageable (unregistered) host memory and its trace fires on it (read from the torch_npu
# 2.13.0 wheel: shared/facts/torch-npu-real.md), so the NPU trace sees both copies.
for _mech in ("cuda-debug", "cuda-trace"):
    KNOWN_BLIND_SPOTS[(_mech, "pageable_buf.copy_(t, non_blocking=True)")] = (
        "a non-blocking copy into pageable host memory is synchronous in the driver "
        "(cudaMemcpyAsync to pageable memory); no PyTorch check or trace callback sees it")
for _case in ("device.synchronize()", "stream.synchronize()", "event.synchronize()"):
    KNOWN_BLIND_SPOTS[("sim-backend", _case)] = (
        "explicit synchronize is a device-module call, not an ATen op: the simulated module "
        "reports it itself, the backend op count cannot see it")


class NativeCounter:
    """Counts syncs with a native mechanism while active. ``count`` and ``sites``."""

    name = "native"

    def __init__(self) -> None:
        self._n = 0
        self.sites: List[str] = []
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Syncs seen so far (readable while active, for per-step deltas)."""
        return self._n

    def _hit(self, n: int = 1) -> None:
        site = _user_site()
        with self._lock:
            self._n += n
            self.sites.extend([site] * n)  # one entry per sync: per-site counts line up

    def __enter__(self) -> NativeCounter:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


_WARNINGS_FILE = os.path.abspath(warnings.__file__)


def _user_site() -> str:
    import os

    import torch

    tdir = os.path.dirname(torch.__file__)
    for fr in reversed(traceback.extract_stack()[:-2]):
        f = os.path.abspath(fr.filename)
        if not f.startswith((tdir, _WARNINGS_FILE, pkg_path("model", "groundtruth.py"),
                             *INTERNAL_DIRS)):
            return normalize_site(f"{fr.filename}:{fr.lineno}")
    return "<unknown>"


def normalize_site(site: str) -> str:
    """``file:line`` with an absolute file path, so syncguard's and native sites compare."""
    import os

    f, sep, line = site.rpartition(":")
    if not sep or f.startswith("<"):
        return site
    return f"{os.path.abspath(f)}:{line}"


class CudaDebugModeCounter(NativeCounter):
    """``torch.cuda.set_sync_debug_mode("warn")``: one UserWarning per synchronizing call,
    counted as it is issued (so the user's line is taken from the live stack: the warning's own
    location is the innermost Python frame, often a wrapper)."""

    name = "cuda-debug"

    def __enter__(self) -> CudaDebugModeCounter:
        import torch

        self._prev = torch.cuda.get_sync_debug_mode()
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("always")
        forward = warnings.showwarning

        def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: Optional[str] = None) -> None:
            if "synchroniz" in str(message):
                self._hit()
            else:
                forward(message, category, filename, lineno, file, line)

        warnings.showwarning = show  # restored by catch_warnings on exit
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        torch.cuda.set_sync_debug_mode(self._prev)
        self._cm.__exit__(*exc)


class TraceCounter(NativeCounter):
    """Trace callbacks on every stream/device/event synchronisation (CUDA or NPU).
    Activation is permanent for the process: use in a child process."""

    _registered: Dict[str, bool] = {}
    _current: Optional[TraceCounter] = None

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend
        self.name = f"{backend}-trace"

    @classmethod
    def _callback(cls, *args: Any) -> None:
        cur = cls._current
        if cur is not None:
            cur._hit()

    def _register(self) -> None:
        if TraceCounter._registered.get(self.backend):
            return
        import importlib

        if self.backend == "cuda":
            import torch

            # not imported by ``import torch``: import the trace module itself
            gt = importlib.import_module("torch.cuda._gpu_trace")
            torch._C._activate_gpu_trace()
        else:
            import torch_npu  # type: ignore[import-not-found]

            gt = importlib.import_module("torch_npu.utils._npu_trace")
            act = torch_npu._C._activate_npu_trace
            try:
                act(0)  # newer torch_npu: a mode argument (0 = stream trace)
            except TypeError:
                act()
        registered = []
        for what in ("stream", "device", "event"):
            for name in (f"register_callback_for_{what}_synchronization",
                         f"register_callback_for_npu_{what}_synchronization"):
                reg = getattr(gt, name, None)
                if reg is None:
                    continue
                try:
                    reg(TraceCounter._callback)
                except TypeError:  # torch_npu: (callback, callback name)
                    reg(TraceCounter._callback, f"syncguard_{what}_sync")
                registered.append(name)
                break
        if not registered:
            raise RuntimeError(
                f"{gt.__name__} has no synchronization callbacks to register "
                f"(looked for register_callback_for[_npu]_{{stream,device,event}}_"
                f"synchronization): this {self.backend} build cannot give a native count")
        TraceCounter._registered[self.backend] = True

    def __enter__(self) -> TraceCounter:
        self._register()
        TraceCounter._current = self
        return self

    def __exit__(self, *exc: Any) -> None:
        TraceCounter._current = None


class SimBackendCounter(NativeCounter):
    """The simulated device's own count of host-read ATen ops (backend level)."""

    name = "sim-backend"

    def __enter__(self) -> SimBackendCounter:
        from ..core import aten  # torch: only a process that drives a device loads it

        aten.BACKEND_COUNTERS.append(self._on_op)
        return self

    def _on_op(self, kind: str, op: str, count: int) -> None:
        self._hit(count)

    def __exit__(self, *exc: Any) -> None:
        from ..core import aten  # torch: only a process that drives a device loads it

        aten.BACKEND_COUNTERS.remove(self._on_op)


def native_counter(kind: str) -> NativeCounter:
    """``cuda-debug``, ``cuda-trace``, ``npu-trace`` or ``sim-backend``."""
    if kind == "cuda-debug":
        return CudaDebugModeCounter()
    if kind in ("cuda-trace", "npu-trace"):
        return TraceCounter(kind.split("-", 1)[0])
    if kind == "sim-backend":
        return SimBackendCounter()
    raise ValueError(f"unknown native counter {kind!r}")


@dataclasses.dataclass(frozen=True)
class Disagreement:
    key: str
    syncguard: int
    native: int
    known_reason: Optional[str]


def compare(mechanism: str, ours: Dict[str, int], native: Dict[str, int]
            ) -> List[Disagreement]:
    """Every key whose counts differ, with the documented reason when it is a known blind
    spot of ``mechanism`` (then it is an exception, not an error)."""
    out = []
    for key in sorted(set(ours) | set(native)):
        a, b = ours.get(key, 0), native.get(key, 0)
        if a != b:
            out.append(Disagreement(key, a, b, KNOWN_BLIND_SPOTS.get((mechanism, key))))
    return out
