"""Host reads seen at the ATen level, below every Python entry point: the hook a Python
backend (the simulated device) calls for each op it runs, and the dispatch-level safety net
of ``SyncGuard(exhaustive=True)``. Each reports only what no interceptor on its thread
already reported (:mod:`syncguard.core.intercept`)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .classify import _SKIP, Hit, _aten_classifier, _copy_dir, _device_type_of, _first_dev, _Tensor
from .hub import HUB
from .intercept import _call_reporting, report_sync

#: Backend-level observers (the simulated device's native count): called for every host-read
#: op a Python backend runs, whether or not a Python-level interceptor already reported it.
BACKEND_COUNTERS: List[Callable[[str, str, int], None]] = []


def backend_op_hook(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                    device_type: str) -> None:
    """Called by a Python backend (the simulated device's fallback) before it runs ATen op
    ``func`` on tensors of ``device_type``: classifies the op and reports a sync if it is one
    and no Python-level interceptor on this thread already reported it."""
    if not HUB.guards and not BACKEND_COUNTERS:
        return
    HUB.seen_dev += 1
    c = _aten_classifier(func)
    if c is _SKIP:
        return
    hit = c(args, kwargs, device_type)
    HUB.tls.last_hit = (args, hit)
    if hit is None:
        return
    kind, op, device, count, source = hit
    if isinstance(count, int):
        for cb in list(BACKEND_COUNTERS):
            cb(kind, op or func.name(), count)
    if HUB.guards and not HUB.tls.busy:
        report_sync(kind, op or func.name(), op, count, device, source, read=args)


# -- the dispatch-level safety net (``SyncGuard(exhaustive=True)``) ------------------------
def _net_hit(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    """Classify one ATen op seen by the dispatch net: the reads no Python entry point sees,
    e.g. a 0-d device tensor passed where an int or a Scalar is expected (``torch.arange(n)``,
    ``x.view(n, -1)``, ``add(alpha=n)``: PyTorch's argument parser calls ``item()`` in C++)."""
    name = func.name()
    base = name.split(".", 1)[0]
    backends = HUB.backends  # their own kernels classify their ops
    if base == "aten::copy_":
        dst, src = args[0], args[1]
        if (not isinstance(src, _Tensor) or src.device.type in backends
                or dst.device.type in backends):
            return None
        nb = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking", False))
        hit = _copy_dir(src, dst.device.type, nb, dst)
        return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
    if base == "aten::_to_copy":
        target = kwargs.get("device")
        if target is None or args[0].device.type in backends:
            return None
        hit = _copy_dir(args[0], _device_type_of(target),
                        bool(kwargs.get("non_blocking", False)))
        return None if hit is None else (hit[0], name, hit[2], 1, hit[4])
    d = _first_dev(args) or (_first_dev(kwargs.values()) if kwargs else None)
    if d is None or d in backends:  # the simulated device's backend classifies its own ops
        return None
    c = _aten_classifier(func)
    if c is _SKIP:
        return None
    hit = c(args, kwargs, d)
    if hit is not None and base == "aten::_local_scalar_dense" and hit[4] is None:
        # no Python entry point reported it: a 0-d device tensor read in C++, most often one
        # passed where an int or Scalar is expected (torch.arange(n), x.view(n, -1)), or
        # TorchScript's aten::Bool / aten::item / aten::Int
        hit = (hit[0], hit[1], hit[2], hit[3],
               "read in C++ (a 0-d tensor used as a number, or TorchScript)")
    return hit  # type: ignore[no-any-return]


def dispatch_net() -> Any:
    """A ``TorchDispatchMode`` that reports the host reads of every ATen op run on this
    thread that no Python-level interceptor already reported. Thread-local (a dispatch mode
    is), and it puts every op through Python: opt-in, for measurement runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _DispatchNet(TorchDispatchMode):
        #: set when its guard is taken down from elsewhere (another thread, or with another
        #: mode above it): left on its stack, it reports nothing more
        inert = False

        def __torch_dispatch__(self, func: Any, types: Any, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            if HUB.guards and not HUB.tls.busy and not self.inert:
                hit = _net_hit(func, args, kwargs)
                if hit is not None:
                    return _call_reporting(hit, hit[1] or func.name(), func, args, kwargs)
            return func(*args, **kwargs)

    return _DispatchNet()
