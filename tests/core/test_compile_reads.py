"""torch.compile with devices=("cpu",): reads inside compiled graphs are counted once each and
blamed on the user's source line, whatever runs them (Dynamo's graph, AOT autograd's,
inductor's output code); with the guard's optional modes too (the dispatch-level net,
``exhaustive``, and lineage tracking, on cpu and the simulated npu), where the lineage
verdict is the one eager code gets."""

from __future__ import annotations

import inspect
import shutil
from typing import Any, Callable, List, Tuple

import pytest
import torch

from syncguard import SyncGuard
from syncguard.driving.lineage import start_for

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None,
    reason="inductor needs a C++ compiler on CPU"))]


def _line(fn: Callable[..., Any], text: str) -> int:
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def helper(x: torch.Tensor) -> int:
    return int(x.sum().int().item())  # captured read


def sized(x: torch.Tensor) -> torch.Tensor:
    n = helper(x + 1)
    return torch.ones(n) * 2


def scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + x.sum().item()  # a float read AOT autograd turns into tensor ops


def drive(fn: Callable[..., Any], x: torch.Tensor) -> Tuple[SyncGuard, torch.Tensor]:
    with SyncGuard(devices=("cpu",)) as g:
        out = fn(x)
        bool(out.sum() > 0)  # read outside
    return g, out


def _sites(g: SyncGuard) -> List[Tuple[int, str]]:
    return [(e.lineno, e.function) for e in g.counted_events]


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_scalar_reads_are_each_counted_once(backend: str) -> None:
    # capture_scalar_outputs puts .item() in the graph: no Python entry point sees it run
    # under aot_eager (the graph calls aten._local_scalar_dense itself)
    torch._dynamo.reset()
    x = torch.arange(4.0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        g, out = drive(torch.compile(sized, backend=backend), x)
    assert out.tolist() == [2.0] * 10
    assert _sites(g) == [(_line(helper, "captured read"), "helper"),
                         (_line(drive, "read outside"), "drive")], [
        e.describe() for e in g.events]
    assert g.count == 2
    inside = g.counted_events[0]
    assert [(f.lineno, f.function) for f in inside.stack[:3]] == [
        (_line(helper, "captured read"), "helper"), (_line(sized, "helper(x + 1)"), "sized"),
        (_line(drive, "out = fn(x)"), "drive")]
    assert all(f.filename == __file__ for f in inside.stack[:3])


def test_a_read_the_compiler_removed_is_not_counted() -> None:
    # AOT autograd rewrites `x * 2 + x.sum().item()` as tensor ops (no read at all); its
    # prims.convert_element_type copies device data on the device: no device-to-host copy
    torch._dynamo.reset()
    x = torch.arange(4.0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        g, out = drive(torch.compile(scaled, backend="aot_eager"), x)
    assert out.tolist() == scaled(x).tolist()
    assert _sites(g) == [(_line(drive, "read outside"), "drive")], [
        e.describe() for e in g.events]


def test_graph_break_reads_keep_their_lines() -> None:
    def step(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        v = y.sum().item()  # graph break here
        z = y + v
        return z * float(z.max())  # after the break: Dynamo's resume function

    torch._dynamo.reset()
    with SyncGuard(devices=("cpu",)) as g:
        torch.compile(step, backend="aot_eager")(torch.arange(4.0))
    assert _sites(g) == [(_line(step, "graph break here"), "step"),
                         (_line(step, "after the break"), "step")]


# -- with the optional modes -------------------------------------------------------------
EAGER_BACKENDS = ["eager", "aot_eager"]


@pytest.mark.parametrize("backend", EAGER_BACKENDS)
def test_exhaustive_counts_each_compiled_read_once(backend: str) -> None:
    torch._dynamo.reset()
    x = torch.arange(4.0)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        with SyncGuard(devices=("cpu",), exhaustive=True) as g:
            out = torch.compile(sized, backend=backend)(x)
            bool(out.sum() > 0)  # read outside
    assert out.tolist() == [2.0] * 10
    assert g.count == 2
    assert [(e.lineno, e.function) for e in g.counted_events] == [
        (_line(helper, "captured read"), "helper"),
        (_line(test_exhaustive_counts_each_compiled_read_once, "read outside"),
         "test_exhaustive_counts_each_compiled_read_once")]


def stop_check(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return (x * 2).sum() > k.sum()


def _verdicts(kind: str, backend: str,
              make: Callable[[], Tuple[torch.Tensor, torch.Tensor]]) -> List[Tuple[int, Any]]:
    torch._dynamo.reset()
    f = torch.compile(stop_check, backend=backend)
    tracker = start_for(kind)
    try:
        x, k = make()  # made while the tracker watches: their roots are known
        with SyncGuard(devices=("cpu",) if kind == "cpu" else ()) as g:
            for _ in range(2):
                if f(x, k):  # the read
                    pass
    finally:
        tracker.stop()
    return [(e.lineno, (e.lineage or {}).get("verdict")) for e in g.counted_events]


@pytest.mark.parametrize("kind", ["cpu", "sim"])
@pytest.mark.parametrize("backend", EAGER_BACKENDS)
def test_lineage_of_a_compiled_step_is_the_eager_verdict(kind: str, backend: str) -> None:
    dev = "cpu"
    if kind == "sim":
        from syncguard import sim

        dev = str(sim.simulated_device("npu"))
    line = _line(_verdicts, "the read")
    host = _verdicts(kind, backend, lambda: (torch.ones(4, device=dev),
                                             torch.tensor([1, 2], device=dev)))  # uploads
    assert host == [(line, "hoistable")] * 2
    layer = torch.nn.Linear(4, 4).to(dev)

    def model_output() -> Tuple[torch.Tensor, torch.Tensor]:
        logits = torch.randn(4, generator=torch.Generator().manual_seed(0)).to(dev)
        return layer(logits).detach(), torch.tensor([1, 2], device=dev)

    dev_result = _verdicts(kind, backend, model_output)  # parameters times an input
    assert dev_result == [(line, "device")] * 2  # depends on device results
