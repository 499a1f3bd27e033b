"""The catalogue of sync and no-sync cases: what must be caught, and what must stay at zero.

Each case is a small function of a device string. ``expect`` is the number of host syncs the
hardware makes, per op sync model backend ("cuda", "npu"). The same catalogue drives the test
suite (CPU-as-device and the simulated npu), the self-test and, on real hardware, the native
ground-truth calibration (``syncguard calibrate``).
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any, Callable, ContextManager, Dict, List, Union

import torch

from .hub import allow


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[[str], object]
    expect: Union[int, Dict[str, int]]
    #: needs host memory distinct from device memory (H2D copies, pinned memory)
    host_distinct: bool = False
    #: calls the device module's synchronize API (needs a device module)
    device_module: bool = False
    #: what the line does, for reports
    line: str = ""
    #: no Python entry point sees this read (C++ reads a 0-d tensor argument): only the
    #: dispatch net (``SyncGuard(exhaustive=True)``) or a device backend counts it
    needs_net: bool = False

    def expected(self, backend: str) -> int:
        if isinstance(self.expect, int):
            return self.expect
        return self.expect[backend]


def _t(dev: str, *vals: float) -> torch.Tensor:
    # Built on the host, then moved: the move itself is allowed in tests that use it.
    with _setup():
        return torch.tensor([float(v) for v in vals]).to(dev)


def _n(dev: str, v: int) -> torch.Tensor:
    """A 0-d integer tensor on the device (built in setup)."""
    with _setup():
        return torch.tensor(v).to(dev)


def _any(x: torch.Tensor) -> Any:
    return x


def _setup() -> ContextManager[None]:
    return allow("catalogue setup: build the input on the device")


def _devmod(dev: str) -> object:
    return getattr(torch, torch.device(dev).type)


def _if(x: torch.Tensor) -> int:
    if x[0] > 0:
        return 1
    return 0


def _assert(x: torch.Tensor) -> None:
    assert x[0] >= 0


def _print(x: torch.Tensor) -> None:
    print(x, file=io.StringIO())


def _pinned(dev: str) -> torch.Tensor:
    return torch.arange(4.0).pin_memory().to(dev, non_blocking=True)


def _d2h_nb(dev: str, pinned: bool) -> torch.Tensor:
    x = _t(dev, 1, 2)
    with _setup():
        buf = torch.empty(2).pin_memory() if pinned else torch.empty(2)
    return buf.copy_(x, non_blocking=True)


def _to_own_device(x: torch.Tensor) -> torch.Tensor:
    return x.to(x.device)  # the same tensor comes back: nothing is copied


def _empty(dev: str) -> torch.Tensor:
    return torch.empty(0, device=dev)


def _event_sync(dev: str) -> None:
    mod = _devmod(dev)
    ev = mod.Event()  # type: ignore[attr-defined]
    ev.record()
    ev.synchronize()


CATCH: List[Case] = [
    Case("bool(t)", lambda d: bool(_t(d, 1)[0] > 0), 1, line="bool(x[0] > 0)"),
    Case("if t:", lambda d: _if(_t(d, 1, 2)), 1, line="if x[0] > 0:"),
    Case("t and ...", lambda d: (_t(d, 1)[0] > 0) and 1, 1, line="(x[0] > 0) and 1"),
    Case("not t", lambda d: not (_t(d, 1)[0] > 0), 1, line="not (x[0] > 0)"),
    Case("assert t", lambda d: _assert(_t(d, 1)), 1, line="assert x[0] >= 0"),
    Case("t.item()", lambda d: _t(d, 3).sum().item(), 1, line="x.sum().item()"),
    Case("int(t)", lambda d: int(_t(d, 3)[0]), 1, line="int(x[0])"),
    Case("float(t)", lambda d: float(_t(d, 3)[0]), 1, line="float(x[0])"),
    Case("list[t] (__index__)", lambda d: [0, 1, 2][torch.arange(3, device=d)[1]], 1,
         line="lst[x[1]]"),
    Case("range(t)", lambda d: range(torch.arange(3, device=d)[2]), 1, line="range(x[2])"),
    Case("list[t0:t1]", lambda d: [0, 1, 2, 3][torch.arange(4, device=d)[1]:
                                               torch.arange(4, device=d)[3]], 2,
         line="lst[x[1]:y[3]]"),
    Case("tensor[:t]", lambda d: torch.arange(4, device=d)[: torch.arange(4, device=d)[2]], 1,
         line="x[:y[2]]"),
    Case("f'{t:.3f}'", lambda d: f"{_t(d, 1.5)[0]:.3f}", 1, line="f'{x[0]:.3f}'"),
    Case("repr(t)", lambda d: repr(_t(d, 1, 2)), 1, line="repr(x)"),
    Case("str(t)", lambda d: str(_t(d, 1, 2)), 1, line="str(x)"),
    Case("print(t)", lambda d: _print(_t(d, 1, 2)), 1, line="print(x)"),
    Case("t.tolist()", lambda d: _t(d, 1, 2).tolist(), 1, line="x.tolist()"),
    Case("t.cpu()", lambda d: _t(d, 1, 2).cpu(), 1, line="x.cpu()"),
    Case("t.to('cpu')", lambda d: _t(d, 1, 2).to("cpu"), 1, line="x.to('cpu')"),
    Case("t.numpy(force=True)", lambda d: _t(d, 1, 2).numpy(force=True), 1,
         line="x.numpy(force=True)"),
    Case("cpu_buf.copy_(t)", lambda d: torch.empty(2).copy_(_t(d, 1, 2)), 1,
         line="torch.empty(2).copy_(x)"),
    Case("x in t", lambda d: 2.0 in _t(d, 1, 2), 1, line="2.0 in x"),
    Case("sorted(t)", lambda d: sorted(torch.arange(4, device=d)), 3,
         line="sorted(x)  (3 comparisons read as bool)"),
    Case("torch.nonzero", lambda d: torch.nonzero(_t(d, 0, 1)), 1, line="torch.nonzero(x)"),
    Case("t.nonzero(as_tuple=True)", lambda d: _t(d, 0, 1).nonzero(as_tuple=True), 1,
         line="x.nonzero(as_tuple=True)"),
    Case("torch.argwhere", lambda d: torch.argwhere(_t(d, 0, 1)), 1, line="torch.argwhere(x)"),
    Case("torch.where(cond)", lambda d: torch.where(_t(d, 0, 1) > 0), 1,
         line="torch.where(x > 0)"),
    Case("x[mask]", lambda d: _t(d, 0, 1)[_t(d, 0, 1) > 0], 1, line="x[x > 0]"),
    Case("masked_select", lambda d: torch.masked_select(_t(d, 0, 1), _t(d, 0, 1) > 0), 1,
         line="torch.masked_select(x, x > 0)"),
    Case("torch.unique", lambda d: torch.unique(_t(d, 1, 1, 2)), 1, line="torch.unique(x)"),
    Case("unique_consecutive", lambda d: torch.unique_consecutive(_t(d, 1, 1, 2)), 1,
         line="torch.unique_consecutive(x)"),
    Case("torch.equal", lambda d: torch.equal(_t(d, 1), _t(d, 1)), 1, line="torch.equal(x, y)"),
    Case("torch.allclose", lambda d: torch.allclose(_t(d, 1), _t(d, 1)), 1,
         line="torch.allclose(x, y)"),
    Case("bincount", lambda d: torch.bincount(torch.arange(3, device=d)), 1,
         line="torch.bincount(x)"),
    Case("repeat_interleave(repeats=t)",
         lambda d: torch.repeat_interleave(_t(d, 1, 2), torch.arange(1, 3, device=d)), 1,
         line="torch.repeat_interleave(x, repeats)"),
    Case("one_hot() without num_classes",
         lambda d: torch.nn.functional.one_hot(torch.arange(3, device=d)), 1,
         line="F.one_hot(x)"),
    Case("masked_fill_(mask, 0-d device tensor)",
         lambda d: _t(d, 1, 2).masked_fill_(_t(d, 0, 1) > 0, _t(d, 5)[0]), 1,
         line="x.masked_fill_(m, v) with v a 0-d device tensor"),
    Case("x[mask] = device tensor",
         lambda d: _t(d, 1, 2).__setitem__(_t(d, 0, 1) > 0, _t(d, 7)), 1,
         line="x[m] = y"),
    # A Python number written through an index: the backends differ (see the op models'
    # Tensor.__setitem__ entries for the source paths); the hardware check settles them.
    Case("x[0] = 0 (0-d destination)", lambda d: _t(d, 1, 2).__setitem__(0, 0.0),
         {"cuda": 1, "npu": 0}, line="x[0] = 0 on a 1-d x: on CUDA a blocking copy of the value"),
    Case("x[idx] = 0 (int index tensor)",
         lambda d: _t(d, 1, 2, 3).__setitem__(torch.arange(2, device=d), 0.0),
         {"cuda": 1, "npu": 0}, line="x[idx] = 0: on CUDA value.to(device) in index_put_"),
    Case("x[mask] = 1.0", lambda d: _t(d, 1, 2).__setitem__(_t(d, 0, 1) > 0, 1.0),
         {"cuda": 0, "npu": 1}, line="x[m] = 1.0: CUDA masked_fill; NPU index_put_ via nonzero"),
    Case("torch.multinomial", lambda d: torch.multinomial(_t(d, 0.5, 0.5), 1),
         {"cuda": 2, "npu": 0}, line="torch.multinomial(p, 1)"),
    Case("torch.tensor(list, device=)", lambda d: torch.tensor([1, 2], device=d), 1,
         host_distinct=True, line="torch.tensor([1, 2], device=dev)"),
    Case("torch.tensor([t0, t1])", lambda d: torch.tensor([_n(d, 1), _n(d, 2)]), 2,
         line="torch.tensor([t0, t1]) with 0-d device tensors (one host read each)"),
    Case("torch.tensor([t0, t1], device=)",
         lambda d: torch.tensor([_n(d, 1), _n(d, 2)], device=d), 3, host_distinct=True,
         line="torch.tensor([t0, t1], device=dev): a read per element, then one upload"),
    Case("cpu_t.to(dev)", lambda d: torch.arange(4).to(d), 1, host_distinct=True,
         line="x_cpu.to(dev)"),
    Case("pageable .to(dev, non_blocking=True)",
         lambda d: torch.arange(4).to(d, non_blocking=True), 1, host_distinct=True,
         line="x_cpu.to(dev, non_blocking=True) from pageable memory"),
    # the 0-d tensor where an int/Scalar is expected is the point: typed Any for the stubs
    Case("pageable_buf.copy_(t, non_blocking=True)", lambda d: _d2h_nb(d, False), 1,
         host_distinct=True, line="cpu_buf.copy_(x, non_blocking=True) into pageable memory"),
    Case("torch.arange(0-d t)", lambda d: torch.arange(_any(_n(d, 3)), device=d), 1,
         line="torch.arange(n) with n a 0-d device tensor", needs_net=True),
    Case("x.view(0-d t, -1)", lambda d: _t(d, 1, 2, 3, 4).view(_any(_n(d, 2)), -1), 1,
         line="x.view(n, -1) with n a 0-d device tensor", needs_net=True),
    Case("add(alpha=0-d t)", lambda d: _t(d, 1, 2).add(_t(d, 1, 1), alpha=_any(_n(d, 2))), 1,
         line="x.add(y, alpha=n) with n a 0-d device tensor", needs_net=True),
    Case("device.synchronize()", lambda d: _devmod(d).synchronize(), 1,  # type: ignore
         device_module=True, line="torch.<dev>.synchronize()"),
    Case("stream.synchronize()",
         lambda d: _devmod(d).current_stream().synchronize(), 1,  # type: ignore
         device_module=True, line="torch.<dev>.current_stream().synchronize()"),
    Case("event.synchronize()", _event_sync, 1, device_module=True,
         line="torch.<dev>.Event().synchronize()"),
]

#: Cases whose count per backend was decided from the PyTorch / torch_npu source (the op
#: models' entries say where), not yet measured: the hardware check's calibration lists each
#: with its native count (``question_lines``), confirming or correcting the model.
QUESTIONS = (
    "x[0] = 0 (0-d destination)", "x[idx] = 0 (int index tensor)", "x[mask] = 1.0",
    "x2d[0] = 0 (fill_)", "x[1:2] = 0 (fill_)", "torch.tensor([t0, t1])",
    "torch.tensor([t0, t1], device=)", "torch.tensor([], device=)",
    "empty.to(dev), empty.cpu()", "empty_buf.copy_(empty t)",
)

ZERO: List[Case] = [
    Case("torch.all (no read)", lambda d: torch.all(_t(d, 1, 1) > 0), 0),
    Case("torch.any (no read)", lambda d: torch.any(_t(d, 1, 1) > 0), 0),
    Case("where(c, x, y)", lambda d: torch.where(_t(d, 0, 1) > 0, _t(d, 1, 1), 0.0), 0),
    Case("masked_fill_(mask, 0.0)", lambda d: _t(d, 1, 2).masked_fill_(_t(d, 0, 1) > 0, 0.0), 0),
    Case("sort", lambda d: torch.sort(_t(d, 2, 1)), 0),
    Case("topk", lambda d: torch.topk(_t(d, 2, 1, 3), 2), 0),
    Case("softmax", lambda d: torch.softmax(_t(d, 2, 1), -1), 0),
    Case("cumsum", lambda d: torch.cumsum(_t(d, 2, 1), 0), 0),
    Case("gather", lambda d: torch.gather(_t(d, 2, 1), 0, torch.arange(2, device=d)), 0),
    Case("x[int tensor]", lambda d: _t(d, 2, 1)[torch.arange(2, device=d)], 0),
    Case("x[int]", lambda d: _t(d, 2, 1)[1], 0),
    Case("factory device=", lambda d: (torch.zeros(3, device=d), torch.arange(3, device=d)), 0),
    Case("shape/dtype queries", lambda d: (_t(d, 1).shape, _t(d, 1).dtype, _t(d, 1).numel()), 0),
    Case("one_hot(num_classes=n)",
         lambda d: torch.nn.functional.one_hot(torch.arange(3, device=d), num_classes=3), 0),
    Case("repeat_interleave(output_size=n)",
         lambda d: torch.repeat_interleave(_t(d, 1, 2), torch.arange(1, 3, device=d),
                                           output_size=3), 0),
    Case("multinomial(replacement=True, n=2)",
         lambda d: torch.multinomial(_t(d, 0.5, 0.5), 2, replacement=True), 0),
    Case("pinned .to(dev, non_blocking=True)", _pinned, 0, host_distinct=True),
    Case("pinned_buf.copy_(t, non_blocking=True)", lambda d: _d2h_nb(d, True), 0,
         host_distinct=True),
    Case("device.to(dev) (same device)", lambda d: _t(d, 1).to(d), 0, host_distinct=True),
    Case("x2d[0] = 0 (fill_)", lambda d: _t(d, 1, 2, 3, 4).view(2, 2).__setitem__(0, 0.0), 0),
    Case("x[1:2] = 0 (fill_)", lambda d: _t(d, 1, 2).__setitem__(slice(1, 2), 0.0), 0),
    Case("t.to(t.device) (same tensor)", lambda d: _to_own_device(_t(d, 1)), 0),
    Case("torch.tensor([], device=)", lambda d: torch.tensor([], device=d), 0),
    Case("empty.to(dev), empty.cpu()", lambda d: (torch.empty(0).to(d), _empty(d).cpu()), 0),
    Case("empty_buf.copy_(empty t)", lambda d: torch.empty(0).copy_(_empty(d)), 0),
]
