"""The simulated "npu" device (syncguard.sim): behaviour, not implementation.

PrivateUse1 can be set up once per process, so one module-scoped fixture sets the device up
and every test copes with it existing already.
"""

from __future__ import annotations

import copy
import gc
import io
import pickle
import re
import sys
import threading
import types
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch

import syncguard.core.aten as aten
import syncguard.core.intercept as intercept
from sglang_ascend_sampling import npu_op
from sglang_ascend_sampling.npu_op import top_k_top_p_reference
from syncguard import sim
from syncguard.sim import device as simdev
from syncguard.sim import pinned as simpinned
from syncguard.sim import torch_npu_standin as standin

_MIN = "{}.{}".format(*simdev.MIN_TORCH_VERSION)
pytestmark = pytest.mark.skipif(
    simdev._torch_version() < simdev.MIN_TORCH_VERSION,
    reason=f"the simulated device needs torch >= {_MIN}",
)

NPU = "npu"


@pytest.fixture(scope="module", autouse=True)
def dev() -> torch.device:
    return sim.simulated_device()


@pytest.fixture
def ops_seen(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[str, str, str]]:
    """Records (op name, device_type, thread name) for every op the backend runs."""
    seen: List[Tuple[str, str, str]] = []

    def hook(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], device_type: str) -> None:
        seen.append((func.name(), device_type, threading.current_thread().name))

    monkeypatch.setattr(aten, "backend_op_hook", hook)
    return seen


def names(seen: List[Tuple[str, str, str]]) -> List[str]:
    return [s[0] for s in seen]


# ---- setup -----------------------------------------------------------------------------------


def test_device_parses_and_factories_work(dev: torch.device) -> None:
    assert dev == torch.device("npu:0")
    assert torch.device("npu").type == NPU
    assert torch.device("npu:0").index == 0
    z = torch.zeros(3, device="npu")
    assert z.device == dev and z.device.type == NPU
    assert sim.is_simulated(z) and not sim.is_simulated(torch.zeros(3))
    assert torch.equal(z.cpu(), torch.zeros(3))
    o = torch.ones(2, 2).to("npu")
    assert o.device.type == NPU and o.shape == (2, 2) and o.dtype == torch.float32
    assert torch.ones(2, device="npu:0").is_npu
    assert torch.arange(5, device=dev).tolist() == [0, 1, 2, 3, 4]


def test_setup_is_idempotent_and_refuses_another_name(dev: torch.device) -> None:
    assert sim.simulated_device() == dev
    assert sim.simulated_device("npu") == dev
    assert sim.current_name() == NPU
    with pytest.raises(sim.SimulatedDeviceError, match="already set up as 'npu'.*'xpu2'"):
        sim.simulated_device("xpu2")


def test_refuses_when_real_torch_npu_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("torch_npu")
    fake.__file__ = "/opt/site-packages/torch_npu/__init__.py"
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    # As a fresh process would see it (the real setup already happened in this one).
    why = simdev._refusal("npu", "privateuseone", None)
    assert why is not None and "real torch_npu is imported" in why and "owns" in why
    # The stand-in is not "real".
    monkeypatch.setitem(sys.modules, "torch_npu", standin)
    assert simdev._refusal("npu", "privateuseone", None) is None


def test_refuses_when_privateuse1_belongs_to_another_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    why = simdev._refusal("npu", "foo", None)
    assert why is not None and "already renamed to 'foo'" in why
    why = simdev._refusal("cuda", "privateuseone", None)
    assert why is not None and "cuda" in why
    assert simdev._refusal("Bad Name", "privateuseone", None) is not None


def test_refuses_old_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    major, minor = simdev.MIN_TORCH_VERSION
    older = f"{major}.{minor - 1}.1"
    monkeypatch.setattr(torch, "__version__", older)
    why = simdev._refusal("npu", "privateuseone", None)
    assert why is not None and f"torch >= {_MIN}" in why and older in why


def test_check_can_setup_passes_for_our_own_device() -> None:
    simdev._check_can_setup("npu")
    with pytest.raises(sim.SimulatedDeviceError):
        simdev._check_can_setup("other")


# ---- values and ops ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64,
     torch.uint8, torch.bool, torch.complex64],
)
def test_values_round_trip_exactly(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(5, 7, generator=g, dtype=torch.float64) * 100
    x = base.to(dtype) if dtype != torch.complex64 else torch.complex(base, -base).to(dtype)
    d = x.to("npu")
    assert d.dtype == dtype and d.shape == x.shape
    back = d.cpu()
    assert back.device.type == "cpu" and not sim.is_simulated(back)
    assert torch.equal(back, x)
    assert d.tolist() == x.tolist()
    if dtype != torch.bfloat16:  # numpy has no bfloat16
        assert torch.equal(torch.from_numpy(d.numpy(force=True)), x)


def test_scalar_reads() -> None:
    x = torch.tensor([1.5, 2.5, -3.0], device="npu")
    assert x.sum().item() == 1.0
    assert bool((x > 0).any()) is True
    assert int(x[1]) == 2 and float(x[2]) == -3.0
    assert f"{x[0]:.2f}" == "1.50"
    assert 2.5 in x
    assert torch.equal(x, x.clone()) and not torch.equal(x, x + 1)
    eq = x == x
    assert sim.is_simulated(eq) and eq.dtype == torch.bool and bool(eq.all())


def _flat(out: Any) -> List[torch.Tensor]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _same_on_both(fn: Callable[[torch.Tensor], Any], x: torch.Tensor) -> None:
    cpu_items = _flat(fn(x))
    npu_items = _flat(fn(x.to("npu")))
    assert len(cpu_items) == len(npu_items)
    for a, b in zip(cpu_items, npu_items):
        assert sim.is_simulated(b), type(b)
        assert b.device.type == NPU
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b.cpu()), (a, b)


OPS: Dict[str, Callable[[torch.Tensor], Any]] = {
    "add_mul": lambda x: x * 2 + 1,
    "exp_log": lambda x: torch.log(torch.exp(x) + 1),
    "sum_dim": lambda x: x.sum(dim=1),
    "mean_max": lambda x: (x.mean(), x.max(dim=-1)),
    "argmax": lambda x: x.argmax(-1),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "log_softmax": lambda x: torch.log_softmax(x, dim=-1),
    "sort": lambda x: torch.sort(x, dim=-1, descending=True, stable=True),
    "topk": lambda x: torch.topk(x, 3, dim=-1),
    "cumsum": lambda x: torch.cumsum(x, dim=-1),
    "gather": lambda x: x.gather(1, torch.argsort(x, dim=1)[:, :2]),
    "scatter": lambda x: torch.zeros_like(x).scatter_(1, torch.argsort(x, dim=1), x),
    "masked_fill": lambda x: x.masked_fill(x < 0, float("-inf")),
    "masked_fill_": lambda x: x.clone().masked_fill_(x > 0.5, 0.0),
    "where": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "matmul": lambda x: x @ x.t(),
    "cat_stack": lambda x: (torch.cat([x, x], 0), torch.stack([x, x])),
    "index_select": lambda x: x.index_select(1, torch.arange(0, x.size(1), 2, device=x.device)),
    "int_index": lambda x: x[torch.tensor([2, 0], device=x.device)],
    "bool_index": lambda x: x[x > 0],
    "nonzero": lambda x: (x > 0).nonzero(),
    "clamp_to": lambda x: x.clamp(-0.5, 0.5).to(torch.float16),
    "reshape_t": lambda x: x.t().reshape(-1),
    "arange_cmp": lambda x: torch.arange(x.size(1), device=x.device)[None, :] >= 3,
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_match_cpu(name: str) -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    _same_on_both(OPS[name], x)


def test_multinomial_matches_cpu_under_fixed_generator() -> None:
    probs = torch.softmax(torch.randn(6, 50, generator=torch.Generator().manual_seed(2)), -1)
    a = torch.multinomial(probs, 3, generator=torch.Generator().manual_seed(7))
    b = torch.multinomial(probs.to("npu"), 3, generator=torch.Generator().manual_seed(7))
    assert sim.is_simulated(b) and torch.equal(a, b.cpu())
    torch.manual_seed(11)
    c = torch.multinomial(probs, 1)
    torch.manual_seed(11)
    d = torch.multinomial(probs.to("npu"), 1)
    assert torch.equal(c, d.cpu())


def test_random_factories_match_cpu() -> None:
    a = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    b = torch.randn(3, 4, device="npu", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b.cpu())
    torch.npu.manual_seed(5)  # type: ignore[attr-defined]
    c = torch.rand(4, device="npu")
    torch.manual_seed(5)
    assert torch.equal(c.cpu(), torch.rand(4))


# ---- views and metadata -------------------------------------------------------------------------


def test_views_alias_their_base() -> None:
    t = torch.zeros(3, 4, device="npu")
    t[0].fill_(1)
    assert t.cpu()[0].tolist() == [1.0] * 4
    t[:, :2] *= 2
    assert t.cpu()[0].tolist() == [2.0, 2.0, 1.0, 1.0]
    s = t[1:, 1:]
    s.masked_fill_(torch.ones_like(s, dtype=torch.bool), 5.0)
    assert t.cpu().tolist() == [[2.0, 2.0, 1.0, 1.0], [0.0, 5.0, 5.0, 5.0], [0.0, 5.0, 5.0, 5.0]]
    flat = t.view(-1)
    flat.add_(1)
    assert t.cpu()[2, 0].item() == 1.0
    t.t()[0].zero_()
    assert t.cpu()[:, 0].tolist() == [0.0, 0.0, 0.0]
    d = t.detach()
    d[2, 3] = 9.0
    assert t[2, 3].item() == 9.0
    row = t.unsqueeze(0).expand(2, 3, 4)
    assert row.shape == (2, 3, 4) and torch.equal(row[1].cpu(), t.cpu())


def test_wrapper_metadata_mirrors_cpu() -> None:
    c = torch.arange(24.0).reshape(4, 6)
    d = c.to("npu")
    for f in (lambda x: x[1:, 2:], lambda x: x.t(), lambda x: x[:, ::2], lambda x: x[2],
              lambda x: x.unsqueeze(1), lambda x: x.narrow(1, 1, 3)):
        vc, vd = f(c), f(d)
        assert vd.shape == vc.shape
        assert vd.stride() == vc.stride()
        assert vd.storage_offset() == vc.storage_offset()
        assert vd.is_contiguous() == vc.is_contiguous()
        assert torch.equal(vd.cpu(), vc)
    # contiguous() of a non-contiguous view copies, then view() works.
    assert d.t().contiguous().view(-1).tolist() == c.t().contiguous().view(-1).tolist()
    with pytest.raises(RuntimeError):
        d.t().view(-1)  # as on any device: not viewable


def test_dtype_views_alias() -> None:
    x = torch.tensor([1.0, -2.0], device="npu")
    bits = x.view(torch.int32)
    assert sim.is_simulated(bits)
    assert bits.tolist() == torch.tensor([1.0, -2.0]).view(torch.int32).tolist()
    bits[1] = torch.tensor([1.0]).view(torch.int32).item()
    assert x.tolist() == [1.0, 1.0]
    assert x.view(dtype=torch.float16).shape == (4,)
    assert x.view(2, 1).shape == (2, 1) and x.view(-1).shape == (2,)


def test_out_and_resize_update_metadata() -> None:
    x = torch.arange(6.0).reshape(2, 3).to("npu")
    out = torch.empty(0, device="npu")
    r = torch.cumsum(x, 1, out=out)
    assert r is out and out.shape == (2, 3)
    assert out.tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
    a = torch.zeros(4, 4, device="npu")
    a.resize_(2, 8)
    assert a.shape == (2, 8) and a.stride() == (8, 1)
    y = x.clone()
    assert y.add_(1) is y and y.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_devices_must_match() -> None:
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="npu") + torch.ones(3)
    # 0-d host tensors are scalars, allowed as on CUDA.
    assert (torch.ones(3, device="npu") + torch.tensor(1.0)).tolist() == [2.0] * 3
    # Asking for a host result keeps it on the host.
    h = torch.empty_like(torch.ones(2, device="npu"), device="cpu")
    assert h.device.type == "cpu" and not sim.is_simulated(h)


# ---- printing, pickling --------------------------------------------------------------------------


def test_printing_looks_like_a_device_tensor(capsys: pytest.CaptureFixture[str]) -> None:
    x = torch.tensor([1.0, 2.0], device="npu")
    assert repr(x) == "tensor([1., 2.], device='npu:0')"
    assert str(x) == repr(x)
    print(x)
    assert capsys.readouterr().out == "tensor([1., 2.], device='npu:0')\n"
    i = torch.tensor([1, 2], dtype=torch.int32, device="npu")
    assert repr(i) == "tensor([1, 2], device='npu:0', dtype=torch.int32)"
    assert repr(torch.empty(0, device="npu")) == "tensor([], device='npu:0')"
    assert repr(torch.tensor(3.5, device="npu")) == "tensor(3.5000, device='npu:0')"
    m = torch.arange(6.0).reshape(2, 3)
    assert repr(m.to("npu")) == repr(m)[:-1] + ", device='npu:0')"
    big = torch.randn(100, 100, generator=torch.Generator().manual_seed(0))
    r = repr(big.to("npu"))
    assert "..." in r and r.endswith("device='npu:0')")
    assert r.split("device=")[0].rstrip(" ,\n") == repr(big)[:-1].rstrip(" ,\n")


def test_pickling_and_copies() -> None:
    x = torch.arange(6.0).reshape(2, 3).to("npu")
    buf = io.BytesIO()
    torch.save({"x": x, "row": x[1]}, buf)
    buf.seek(0)
    loaded = torch.load(buf)  # weights_only default
    assert sim.is_simulated(loaded["x"]) and loaded["x"].device == x.device
    assert torch.equal(loaded["x"].cpu(), x.cpu()) and loaded["row"].tolist() == [3.0, 4.0, 5.0]
    p = pickle.loads(pickle.dumps(x))
    assert sim.is_simulated(p) and torch.equal(p.cpu(), x.cpu())
    dc = copy.deepcopy(x)
    dc.zero_()
    assert x.sum().item() == 15.0 and sim.is_simulated(dc)


# ---- threads and the hook ---------------------------------------------------------------------


def test_ops_on_a_worker_thread(ops_seen: List[Tuple[str, str, str]]) -> None:
    result: Dict[str, Any] = {}

    def work() -> None:
        result["v"] = (torch.ones(3, device="npu") * 3).sum().item()

    t = threading.Thread(target=work, name="sim-worker")
    t.start()
    t.join()
    assert result["v"] == 9.0
    worker = [n for n, _, th in ops_seen if th == "sim-worker"]
    assert "aten::_local_scalar_dense" in worker
    assert all(d == NPU for _, d, _ in ops_seen)


def test_hook_sees_each_host_read_as_documented(ops_seen: List[Tuple[str, str, str]]) -> None:
    x = torch.tensor([[1.0, -2.0], [3.0, 4.0]], device="npu")
    ops_seen.clear()
    x.sum().item()
    assert names(ops_seen)[-1] == "aten::_local_scalar_dense"
    ops_seen.clear()
    bool(x.max() > 0)
    assert names(ops_seen)[-1] == "aten::_local_scalar_dense"
    for read in (lambda: x.tolist(), lambda: x.cpu(), lambda: repr(x)):
        ops_seen.clear()
        read()
        assert names(ops_seen) == ["aten::_copy_from"]
    mask = x > 0
    ops_seen.clear()
    x[mask]  # one op carrying the boolean mask (not nonzero + index)
    assert names(ops_seen) == ["aten::index.Tensor"]
    ops_seen.clear()
    torch.ones(2).to("npu")
    assert "aten::_copy_from" in names(ops_seen)
    ops_seen.clear()
    torch.softmax(x, -1).sort(-1)
    assert names(ops_seen) == ["aten::_softmax", "aten::sort"]


def test_a_copy_into_an_empty_destination_that_it_resizes_is_one_sync() -> None:
    """``aten::_copy_from_and_resize`` resizes an empty destination before it copies
    (torch_npu's kernel: ``dst.numel() == 0`` -> ``resize_as_``): the whole source crosses,
    a blocking copy, in either direction. The guard counted none (the empty destination read
    as a copy of nothing)."""
    from syncguard import SyncGuard

    x = torch.arange(4.0, device="npu")
    for src, dst, kind in ((x, torch.empty(0), "d2h_copy"),
                           (torch.arange(4.0), torch.empty(0, device="npu"), "h2d_copy")):
        with SyncGuard() as g:
            torch.ops.aten._copy_from_and_resize(src, dst)
        assert [(e.kind, e.api) for e in g.events] == [(kind, "aten::_copy_from_and_resize")]
        assert dst.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    with SyncGuard() as g:  # nothing to copy: no wait
        torch.ops.aten._copy_from_and_resize(torch.empty(0, device="npu"), torch.empty(0))
    assert g.count == 0


def test_hook_runs_before_the_op_and_may_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.ones(2, device="npu")

    class Stop(Exception):
        pass

    def hook(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], device_type: str) -> None:
        if func.name() == "aten::_local_scalar_dense":
            raise Stop(device_type)

    monkeypatch.setattr(aten, "backend_op_hook", hook)
    with pytest.raises(Stop, match="npu"):
        x.sum().item()
    y = x.clone()
    y.add_(1)  # other ops still run
    assert y.tolist() == [2.0, 2.0]


# ---- torch.npu ---------------------------------------------------------------------------------


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[Any, ...]]:
    got: List[Tuple[Any, ...]] = []

    def report(kind: str, api: str, op: Any = None, count: int = 1, device: Any = None,
               source: Any = None) -> None:
        got.append((kind, api, op, device))

    monkeypatch.setattr(intercept, "report_sync", report)
    monkeypatch.setattr(aten, "report_sync", report)
    return got


def test_npu_module_basics() -> None:
    npu = torch.npu  # type: ignore[attr-defined]
    assert torch.get_device_module("npu") is npu
    assert npu.is_available() and npu.is_initialized()
    assert npu.device_count() == 1 and npu.current_device() == 0
    npu.set_device(0)
    npu.set_device("npu:0")
    with pytest.raises(RuntimeError):
        npu.set_device(1)
    assert npu.get_device_name() == "Simulated NPU (syncguard)"
    free, total = npu.mem_get_info()
    assert 0 <= free <= total
    assert npu.memory_allocated() >= 0
    torch.manual_seed(0)  # reaches npu.manual_seed_all without a warning


def test_explicit_syncs_are_reported(syncs: List[Tuple[Any, ...]]) -> None:
    npu = torch.npu  # type: ignore[attr-defined]
    npu.synchronize()
    s = npu.Stream()
    s.synchronize()
    e = npu.Event()
    e.record()
    e.synchronize()
    assert syncs == [
        ("explicit_sync", "torch.npu.synchronize", None, "npu"),
        ("explicit_sync", "torch.npu.Stream.synchronize", None, "npu"),
        ("explicit_sync", "torch.npu.Event.synchronize", None, "npu"),
    ]
    syncs.clear()
    s.wait_stream(npu.current_stream())
    s.wait_event(e)
    e.wait(s)
    assert e.query() and s.query()
    assert syncs == []


def test_streams_and_events() -> None:
    npu = torch.npu  # type: ignore[attr-defined]
    s = npu.Stream()
    assert isinstance(s, torch.Stream) and s.device.type == NPU
    assert npu.current_stream() == npu.default_stream() != s
    with npu.stream(s):
        assert npu.current_stream() == s
        x = torch.ones(3, device="npu")
        x.record_stream(s)
    assert npu.current_stream() == npu.default_stream()
    start = npu.Event(enable_timing=True)
    end = npu.Event(enable_timing=True)
    start.record()
    (torch.ones(64, 64, device="npu") @ torch.ones(64, 64, device="npu")).sum()
    end.record(s)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    ev = s.record_event()
    assert isinstance(ev, npu.Event) and ev.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        npu.Event().elapsed_time(npu.Event())


# ---- pinned memory ------------------------------------------------------------------------------


def test_pin_memory() -> None:
    host = torch.arange(8.0)
    assert not host.is_pinned() and not sim.is_pinned_host(host)
    pinned = host.pin_memory()
    assert pinned.is_pinned() and sim.is_pinned_host(pinned)
    assert torch.equal(pinned, host) and pinned.data_ptr() != host.data_ptr()
    assert pinned[2:].is_pinned()  # views of pinned memory are pinned
    assert pinned.pin_memory() is pinned
    d = pinned.to("npu", non_blocking=True)
    assert torch.equal(d.cpu(), host)
    buf = torch.empty(8, device="npu")
    buf.copy_(pinned, non_blocking=True)
    assert torch.equal(buf.cpu(), host)
    t = torch.arange(12.0).reshape(3, 4).t()
    pt = t.pin_memory()
    assert pt.stride() == t.stride() and torch.equal(pt, t) and pt.is_pinned()
    assert not torch.ones(2, device="npu").is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        torch.ones(2, device="npu").pin_memory()


def test_non_blocking_copies(ops_seen: List[Tuple[str, str, str]]) -> None:
    y = torch.arange(6.0).reshape(2, 3).to("npu")
    ops_seen.clear()
    h = y.to("cpu", non_blocking=True)  # the host result is pinned, as on a real device
    assert h.device.type == "cpu" and h.is_pinned() and torch.equal(h, torch.arange(6.0).view(2, 3))
    assert names(ops_seen) == ["aten::_copy_from"]
    assert not y.cpu().is_pinned()
    ht = y.t().to("cpu", non_blocking=True)
    assert ht.stride() == (1, 3) and ht.is_pinned()
    pinned = torch.ones(3).pin_memory()
    d = pinned.to("npu", non_blocking=True)
    assert sim.is_simulated(d) and d.tolist() == [1.0, 1.0, 1.0]


def test_pinned_marker_is_forgotten_with_the_memory() -> None:
    pinned = torch.ones(1024).pin_memory()
    ptr = pinned.untyped_storage().data_ptr()
    assert ptr in simpinned._PINNED
    view = pinned[10:]
    del pinned
    gc.collect()
    assert ptr in simpinned._PINNED and view.is_pinned()  # the storage lives on in the view
    del view
    gc.collect()
    assert ptr not in simpinned._PINNED


# ---- torch_npu stand-in -------------------------------------------------------------------------


def k32(*vals: int, device: str = "cpu") -> torch.Tensor:
    return torch.tensor(vals, dtype=torch.int32, device=device)


NEG = float("-inf")


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_top_k_top_p_semantics(device: str) -> None:
    f = standin.npu_top_k_top_p
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]], device=device)
    # k=1 keeps only the maximum.
    out = f(logits, torch.tensor([1.0], device=device), k32(1, device=device))
    assert out.tolist() == [[NEG, 3.0, NEG, NEG]]
    # p=1 keeps all of the top-k, in vocabulary order.
    out = f(logits, torch.tensor([1.0], device=device), k32(2, device=device))
    assert out.tolist() == [[NEG, 3.0, 2.0, NEG]]
    # Ties with the k-th largest are all kept.
    tied = torch.tensor([[2.0, 1.0, 2.0, 3.0]], device=device)
    out = f(tied, torch.tensor([1.0], device=device), k32(2, device=device))
    assert out.tolist() == [[2.0, NEG, 2.0, 3.0]]
    # Top-p on the softmax renormalised over the kept values: softmax([0,1,2,3]) ascending is
    # [.032, .087, .237, .644], cumsum [.032, .119, .356, 1]; p=0.5 removes cumsum <= 0.5.
    row = torch.tensor([[0.0, 1.0, 2.0, 3.0]], device=device)
    out = f(row, torch.tensor([0.5], device=device), k32(4, device=device))
    assert out.tolist() == [[NEG, NEG, NEG, 3.0]]
    out = f(row, torch.tensor([0.7], device=device), k32(4, device=device))
    assert out.tolist() == [[NEG, NEG, 2.0, 3.0]]
    # p=0 still keeps the largest.
    out = f(row, torch.tensor([0.0], device=device), k32(4, device=device))
    assert out.tolist() == [[NEG, NEG, NEG, 3.0]]
    # Top-k then top-p: k=3 keeps [1,2,3], renormalised [.09, .245, .665]: p=0.5 keeps only 3,
    # p=0.8 keeps 2 and 3.
    out = f(row.repeat(2, 1), torch.tensor([0.5, 0.8], device=device), k32(3, 3, device=device))
    assert out.tolist() == [[NEG, NEG, NEG, 3.0], [NEG, NEG, 2.0, 3.0]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_top_k_top_p_dtypes_and_devices_agree(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(5, 300, generator=g).to(dtype)
    p = torch.tensor([0.9, 1.0, 0.5, 0.0, 0.99]).to(dtype)
    k = k32(50, 1, 300, 7, 200)
    a = standin.npu_top_k_top_p(logits, p, k)
    b = standin.npu_top_k_top_p(logits.to("npu"), p.to("npu"), k.to("npu"))
    assert a.dtype == dtype and a.shape == logits.shape
    assert sim.is_simulated(b) and torch.equal(a, b.cpu())
    assert torch.equal(a, top_k_top_p_reference(logits, p, k))
    kept = torch.isfinite(a)
    assert kept.sum(-1)[1].item() == 1
    assert (kept.sum(-1) <= torch.tensor([50, 1, 300, 7, 200])).all()
    assert torch.equal(a[kept], logits[kept])  # kept entries are the original logits


@pytest.mark.parametrize(
    "case, match",
    [
        ("k_int64", r"k must be int32, got torch.int64"),
        ("p_dtype", r"p dtype torch.float32 must equal the logits dtype torch.float16"),
        ("logits_1d", r"logits must be 2-D"),
        ("logits_f64", r"logits dtype torch.float64 is not supported"),
        ("p_size", r"p must be 1-D of size batch=3"),
        ("k_list", r"k must be a tensor, got list"),
        ("devices", r"one device"),
    ],
)
@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_top_k_top_p_contract(case: str, match: str, device: str) -> None:
    """What the aclnn kernel checks (null, dtype, shape, format) is refused."""
    logits = torch.zeros(3, 1500, device=device)
    p = torch.ones(3, device=device)
    k = k32(10, 10, 10, device=device)
    args: Dict[str, Tuple[Any, Any, Any]] = {
        "k_int64": (logits, p, k.long()),
        "p_dtype": (logits.half(), p, k),
        "logits_1d": (logits[0], p[:1], k[:1]),
        "logits_f64": (logits.double(), p.double(), k),
        "p_size": (logits, p[:2], k),
        "k_list": (logits, p, [10, 10, 10]),
        "devices": (logits, p.cpu() if device == "npu" else p.to("npu"), k),
    }
    with pytest.raises(npu_op.TopKTopPContractError, match=match) as info:
        standin.npu_top_k_top_p(*args[case])
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "case, match",
    [
        ("k0", r"k\[1\]=0 is outside \[1, min\(1024, vocab=1500\)\]"),
        ("k1025", r"k\[2\]=1025 is outside"),
        ("k_vocab", r"k\[0\]=600 is outside \[1, min\(1024, vocab=500\)\]"),
        ("p_range", r"p\[0\]=1.5 is outside \[0, 1\]"),
    ],
)
@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_top_k_top_p_values_the_kernel_does_not_check(case: str, match: str,
                                                      device: str) -> None:
    """Values the real kernel leaves undefined: a warning naming the value, never an error
    claiming the hardware refuses it; the result keeps its shape and dtype."""
    logits = torch.randn(3, 1500, device=device)
    p = torch.ones(3, device=device)
    args: Dict[str, Tuple[Any, Any, Any]] = {
        "k0": (logits, p, k32(10, 0, 10, device=device)),
        "k1025": (logits, p, k32(10, 10, 1025, device=device)),
        "k_vocab": (logits[:, :500], p, k32(600, 10, 10, device=device)),
        "p_range": (logits, torch.tensor([1.5, 1.0, 1.0], device=device), k32(10, 10, 10,
                                                                             device=device)),
    }
    with pytest.warns(npu_op.UndefinedResultWarning, match=match) as rec:
        out = standin.npu_top_k_top_p(*args[case])
    assert "undefined" in str(rec[0].message) and "refuses" not in str(rec[0].message)
    assert out.shape == args[case][0].shape and out.dtype == args[case][0].dtype


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_top_k_top_p_p_and_k_are_optional(device: str) -> None:
    """The real schema: ``(Tensor logits, Tensor? p=None, Tensor? k=None)``."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 50, generator=g).to(device)
    p = torch.full((2,), 0.8, device=device)
    k = k32(5, 7, device=device)
    full_k = k32(50, 50, device=device)
    ones = torch.ones(2, device=device)
    assert torch.equal(standin.npu_top_k_top_p(logits), logits)  # neither filter
    assert torch.equal(standin.npu_top_k_top_p(logits, p=p), standin.npu_top_k_top_p(
        logits, p, full_k))
    assert torch.equal(standin.npu_top_k_top_p(logits, k=k), standin.npu_top_k_top_p(
        logits, ones, k))
    kept = (standin.npu_top_k_top_p(logits, k=k) > float("-inf")).sum(-1)
    assert kept.tolist() == [5, 7]


def test_top_k_top_p_one_minus_p_in_the_logits_dtype() -> None:
    """op-plugin's reference computes ``1 - p`` in the logits' dtype. In fp16 that rounds
    (p = 0.30005: 0.70020, where float32 gives 0.69995), and a token whose cumulative
    probability lies between the two is removed on the device; the stand-in agrees."""
    # seven equal small tokens and one large: the cumulative sum at the 7th is about 0.7
    logits = torch.tensor([[0.0] * 7 + [1.0986]], dtype=torch.float16)
    cum7 = float(torch.softmax(logits.float(), dim=-1)[0, :7].sum())
    grid = torch.arange(0.29, 0.31, 2.0 ** -13, dtype=torch.float32).half().unique()
    picked = [float(p) for p in grid
              if float(1 - p.float()) < cum7 <= float((1 - p).float())]
    assert picked, "no fp16 p whose two thresholds straddle the cumulative sum"
    p = torch.tensor([picked[0]], dtype=torch.float16)
    out = standin.npu_top_k_top_p(logits, p, k32(8))
    kept = int((out > float("-inf")).sum())
    assert kept == 1  # fp16 threshold: the 7th token removed (float32 would keep 2)


def test_top_k_top_p_reads_nothing_from_the_device(ops_seen: List[Tuple[str, str, str]]) -> None:
    logits = torch.randn(4, 64).to("npu")
    p = torch.full((4,), 0.9).to("npu")
    k = k32(1, 5, 64, 10, device="npu")
    ops_seen.clear()
    standin.npu_top_k_top_p(logits, p, k)
    seen = names(ops_seen)
    assert "aten::_local_scalar_dense" not in seen and "aten::nonzero" not in seen
    assert "aten::index.Tensor" not in seen
    # The only copies are device-to-device (the k dtype cast), none to the host.
    ops_seen.clear()
    with pytest.warns(npu_op.UndefinedResultWarning):
        standin.npu_top_k_top_p(logits, p, k32(0, 5, 64, 10, device="npu"))
    assert "aten::_local_scalar_dense" not in names(ops_seen)


def test_standin_install_and_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    with sim.torch_npu_standin_installed() as mod:
        import torch_npu  # type: ignore[import-not-found]

        assert torch_npu is mod is standin
        assert torch_npu.__syncguard_standin__ is True and "syncguard" in torch_npu.__version__
        assert hasattr(torch_npu, "npu_top_k_top_p")
        assert torch_npu.npu is torch.npu  # type: ignore[attr-defined]
        assert sim.install_torch_npu_standin() is mod  # idempotent
    assert "torch_npu" not in sys.modules
    assert sim.simulated_device(torch_npu=True).type == NPU
    assert sys.modules["torch_npu"] is standin
    assert sim.uninstall_torch_npu_standin() is True
    assert sim.uninstall_torch_npu_standin() is False

    other = types.ModuleType("torch_npu")
    monkeypatch.setitem(sys.modules, "torch_npu", other)
    with pytest.raises(sim.SimulatedDeviceError, match="not syncguard's stand-in"):
        sim.install_torch_npu_standin()
    with pytest.raises(sim.SimulatedDeviceError):
        with sim.torch_npu_standin_installed():
            pass
    assert sim.uninstall_torch_npu_standin() is False
    assert sys.modules["torch_npu"] is other


@pytest.mark.parametrize("vocab", [4097, 32000])
def test_standin_large_vocab_fast_path_equals_full_sort(vocab: int, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from sglang_ascend_sampling import npu_op as s

    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(6, vocab, generator=g)
    p = torch.rand(6, generator=g) * 0.6 + 0.4
    k = torch.tensor([1, 2, 20, 512, 1000, 1024], dtype=torch.int32)
    fast = s.top_k_top_p_reference(logits, p, k)
    monkeypatch.setattr(s, "_FAST_VOCAB", 1 << 30)
    full = s.top_k_top_p_reference(logits, p, k)
    assert torch.equal(fast, full)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_standin_large_vocab_ties_beyond_the_candidates_keep_full_sort_semantics(
        dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    # a flat row (common in bf16): every value ties with the k-th largest and must be kept,
    # though only 1024 candidates fit the fast path; a mixed batch too
    from sglang_ascend_sampling import npu_op as s

    vocab = 8192
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, vocab, generator=g).to(dtype)
    logits[0] = 0.0
    logits[2, :3000] = 5.0  # 3000 tokens tied at the top
    p = torch.tensor([1.0, 0.9, 1.0])
    k = torch.tensor([20, 20, 20], dtype=torch.int32)
    fast = s.top_k_top_p_reference(logits, p, k)
    monkeypatch.setattr(s, "_FAST_VOCAB", 1 << 30)
    full = s.top_k_top_p_reference(logits, p, k)
    assert torch.equal(fast, full)
    assert int(torch.isfinite(full[0]).sum()) == vocab
    assert int(torch.isfinite(full[2]).sum()) == 3000


def test_standin_fast_path_is_used_when_exact() -> None:
    from sglang_ascend_sampling import npu_op as s

    logits = torch.randn(2, 8192, generator=torch.Generator().manual_seed(2))
    out = s._top_k_top_p_topk(logits, torch.tensor([0.9, 0.5]), torch.tensor([20, 1000]))
    assert out is not None
    flat = torch.zeros(1, 8192)
    assert s._top_k_top_p_topk(flat, torch.tensor([1.0]), torch.tensor([20])) is None


@pytest.mark.parametrize("missing", ["acc", "setup", "backend_name"])
def test_a_renamed_private_api_is_a_clear_refusal_naming_the_torch_version(
        monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    import torch.utils.backend_registration as br

    if simdev.WRAPPER_ROUTE and missing != "backend_name":
        pytest.skip("this process uses the wrapper route, which checks its own needs")
    if missing == "acc":
        monkeypatch.delattr(torch._C, "_acc")
        lacks = "torch._C._acc.create_empty_tensor"
    elif missing == "setup":
        monkeypatch.delattr(br, "_setup_privateuseone_for_python_backend")
        lacks = "_setup_privateuseone_for_python_backend"
    else:
        monkeypatch.delattr(torch._C, "_get_privateuse1_backend_name")
        lacks = "torch._C._get_privateuse1_backend_name"
    why = simdev._refusal("npu", "privateuseone", None)
    assert why is not None and lacks in why and f"torch {torch.__version__}" in why
    with pytest.raises(sim.SimulatedDeviceError, match=re.escape(lacks)):
        simdev._check_can_setup("npu")


def test_standin_imports_torch_npu_fused_ops_and_refuses_only_a_call() -> None:
    # transformers imports `from torch_npu import npu_fusion_attention` once torch_npu looks
    # available: that import must succeed on the simulated device (found guarding vLLM's
    # sampler unchanged), and only a call says the op is not simulated
    from syncguard.sim import torch_npu_standin as standin

    from_import = standin.npu_fusion_attention  # what `from torch_npu import x` does
    assert from_import.__name__ == "npu_fusion_attention"
    with pytest.raises(standin.OpNotSimulatedError, match="npu_fusion_attention is not simulated"):
        from_import(None)
    with pytest.raises(AttributeError):
        standin.not_an_npu_op  # noqa: B018 - other names are still missing


def test_simulated_npu_module_has_the_real_names() -> None:
    """Names real code calls on ``torch.npu``, with torch_npu's signatures."""
    npu = torch.npu  # type: ignore[attr-defined]
    assert npu.is_bf16_supported(including_emulation=False) is True
    before = npu.get_sync_debug_mode()
    try:
        npu.set_sync_debug_mode("warn")
        assert npu.get_sync_debug_mode() == 1
        npu.set_sync_debug_mode(2)
        assert npu.get_sync_debug_mode() == 2
        with pytest.raises(RuntimeError, match="debug_mode"):
            npu.set_sync_debug_mode("loud")
    finally:
        npu.set_sync_debug_mode(before)
    s = npu.ExternalStream(0xBEEF)
    assert s.stream_ptr == 0xBEEF and isinstance(s, npu.Stream)
    with npu.stream(s):
        assert npu.current_stream() is s
    assert npu.utilization() == 0
