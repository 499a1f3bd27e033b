"""``torch.compile`` on the simulated device: what its compile stack needs to run there.

Installed once by :func:`syncguard.sim.device.setup` (process-global and permanent, as the
device itself is). Three places of torch's compile stack meet a device whose tensors keep their
values in Python (:class:`~syncguard.sim.kernel.SimTensor`):

* ``FakeTensor.__new__`` calls ``Tensor._make_subclass(cls, elem, ...)``, which detaches
  ``elem``, a data-less ``meta`` tensor that can carry the device's dispatch keys (the meta
  results of ops on the device's fake tensors do); that detach reaches the device's Python
  kernel, and ``_make_subclass`` refuses any result a Python kernel gives (a tensor with a
  Python object already). While such a fake tensor is built, the device's key is excluded, so
  the detach runs the stock meta kernel. (Other ops on such meta tensors are run by the device
  kernel as the Meta backend would: :func:`syncguard.sim.kernel._on_meta`.)
* AOT autograd's tracing and its first-call check of custom ops accept only the tensor types
  they know (``proxy_tensor.HANDLED_TYPES``) and give up on any other: ``SimTensor`` is added
  there, as the plain device tensor it stands for.
* Inductor generates kernels that read a tensor's memory from C++; a simulated tensor has
  none. Its graphs for the simulated device run as ``aot_eager`` runs them: the same graph
  (Dynamo's graph breaks, AOT autograd's functionalization and its passes, such as the one that
  turns ``.item()`` arithmetic into tensor ops), so the same syncs; a warning says so once.
  Graphs of CPU tensors still go to inductor.

Known limit: on torch 2.7/2.8's route (:mod:`syncguard.sim.wrapper_backend`, device tensors
are ``__torch_dispatch__`` subclasses) compiled code runs and its graph breaks are counted, but
a read captured in the graph (``capture_scalar_outputs``) fails in Dynamo.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Iterable, Optional

import torch

log = logging.getLogger("syncguard")

_PU1 = torch._C.DispatchKey.PrivateUse1
_EXCLUDE = torch._C.DispatchKeySet(_PU1)
_installed = False
_warned = False


def _carries_device_keys(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.is_meta
            and torch._C._dispatch_keys(t).has(_PU1))


def _fake_new(orig: Callable[..., Any]) -> Callable[..., Any]:
    def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if any(_carries_device_keys(a) for a in args) or any(
                _carries_device_keys(a) for a in kwargs.values()):
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
                return orig(cls, *args, **kwargs)
        return orig(cls, *args, **kwargs)

    __new__.__wrapped__ = orig  # type: ignore[attr-defined]
    return __new__


def _on_device(inputs: Iterable[Any], name: str) -> bool:
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.device.type == name:
            return True
    return False


def _graph_on_device(model: Any, inputs: Any, name: str) -> bool:
    """Whether a graph handed to inductor computes on the simulated device ``name``: one of
    its example inputs, parameters or buffers lives there."""
    if _on_device(inputs if isinstance(inputs, (list, tuple)) else (), name):
        return True
    for attr in ("parameters", "buffers"):
        get = getattr(model, attr, None)
        if callable(get):
            try:
                if _on_device(get(), name):
                    return True
            except Exception:  # not a module after all: its inputs decided
                return False
    return False


def _inductor_call(orig: Callable[..., Any], name: str) -> Callable[..., Any]:
    def __call__(self: Any, model_: Any, inputs_: Any, *args: Any, **kwargs: Any) -> Any:
        if not _graph_on_device(model_, inputs_, name):
            return orig(self, model_, inputs_, *args, **kwargs)
        global _warned
        if not _warned:
            _warned = True
            log.warning(
                "syncguard: torch.compile backend 'inductor' cannot run its generated kernels "
                "on the simulated %s device (its tensors have no device memory): its graphs "
                "for %s run as backend='aot_eager' runs them (the same graph, the same syncs); "
                "use --device cpu to run inductor's own kernels", name, name)
        from torch._dynamo.backends.debugging import aot_eager

        return aot_eager(model_, inputs_)

    __call__.__wrapped__ = orig  # type: ignore[attr-defined]
    return __call__


def _add_handled_type(tensor_type: type) -> None:
    from torch.fx.experimental import proxy_tensor

    mods = [proxy_tensor]
    rw: Optional[Any] = sys.modules.get("torch._functorch._aot_autograd.runtime_wrappers")
    if rw is not None:  # imported already: it copied the tuple by name
        mods.append(rw)
    for m in mods:
        handled = getattr(m, "HANDLED_TYPES", None)
        if isinstance(handled, tuple) and tensor_type not in handled:
            m.HANDLED_TYPES = handled + (tensor_type,)  # type: ignore[attr-defined]


def install(name: str, tensor_type: type) -> None:
    """Make ``torch.compile`` run on the simulated device ``name`` (see the module docstring).
    Once per process; each piece is skipped on a torch that lacks what it adjusts."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # pragma: no cover - torch without fake tensors: nothing to adjust
        FakeTensor = None  # type: ignore[assignment,misc]
    if FakeTensor is not None:
        FakeTensor.__new__ = staticmethod(_fake_new(FakeTensor.__new__))  # type: ignore
    try:
        _add_handled_type(tensor_type)
    except ImportError:  # pragma: no cover
        pass
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    call = vars(wrapper).get("__call__") if isinstance(wrapper, type) else None
    if wrapper is not None and callable(call):
        wrapper.__call__ = _inductor_call(call, name)
