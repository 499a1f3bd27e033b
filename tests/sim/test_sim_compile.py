"""torch.compile on the simulated npu: every backend runs, counts what the program reads, and
blames each read on the user's own line (never on generated code)."""

from __future__ import annotations

import inspect
import logging
import warnings
from typing import Any, Callable, List, Tuple

import pytest
import torch

from syncguard import SyncGuard, simulated_device
from syncguard.sim import device as simdev

DEV = simulated_device()
BACKENDS = ["eager", "aot_eager", "inductor"]


def _line(fn: Callable[..., Any], text: str) -> int:
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def step(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    v = y.sum().item()  # read inside
    return y + v


def helper(x: torch.Tensor) -> int:
    return int(x.sum().int().item())  # captured read


def sized(x: torch.Tensor) -> torch.Tensor:
    n = helper(x + 1)
    return torch.ones(n, device=x.device) * 2


def _sites(g: SyncGuard) -> List[Tuple[str, int, str]]:
    return [(e.filename, e.lineno, e.function) for e in g.counted_events]


def drive(fn: Callable[..., Any], x: torch.Tensor) -> Tuple[SyncGuard, torch.Tensor]:
    with SyncGuard() as g:
        out = fn(x)
        bool(out.sum() > 0)  # read outside
    return g, out


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_step_counts_as_the_eager_program(backend: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    torch._dynamo.reset()
    x = torch.arange(4.0, device=DEV)
    plain, expected = drive(step, x)
    with caplog.at_level(logging.WARNING, logger="syncguard"):
        g, out = drive(torch.compile(step, backend=backend), x)
    assert torch.equal(out.cpu(), expected.cpu())
    inside, outside = (__file__, _line(step, "read inside"), "step"), (
        __file__, _line(drive, "read outside"), "drive")
    assert _sites(plain) == [inside, outside]
    assert _sites(g) == [inside, outside], [e.describe() for e in g.events]
    assert g.count == plain.count == 2
    warned = [r.getMessage() for r in caplog.records if "inductor" in r.getMessage()]
    if backend == "inductor":  # run as aot_eager runs it, said once
        assert len(warned) <= 1 and all("aot_eager" in w for w in warned)
    else:
        assert not warned


@pytest.mark.skipif(simdev.WRAPPER_ROUTE, reason="torch < 2.9's route: its tensors are "
                    "__torch_dispatch__ subclasses, which Dynamo cannot put in a graph with a "
                    "captured read (known limit)")
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_captured_in_the_graph_is_blamed_on_its_line(backend: str) -> None:
    torch._dynamo.reset()
    x = torch.arange(4.0, device=DEV)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        g, out = drive(torch.compile(sized, backend=backend), x)
    assert out.shape == (10,)
    assert [(e.lineno, e.function) for e in g.counted_events] == [
        (_line(helper, "captured read"), "helper"), (_line(drive, "read outside"), "drive")]
    inside = g.counted_events[0]
    # the user's stack, as traced: the helper, its caller's line, then the caller of the
    # compiled function; no generated code, no second frame of the compiled function
    assert [(f.lineno, f.function) for f in inside.stack[:3]] == [
        (_line(helper, "captured read"), "helper"), (_line(sized, "helper(x + 1)"), "sized"),
        (_line(drive, "out = fn(x)"), "drive")]
    assert all(f.filename == __file__ for f in inside.stack[:3])


def test_compile_runs_without_a_guard() -> None:
    torch._dynamo.reset()
    x = torch.arange(4.0, device=DEV)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for backend in BACKENDS:
            out = torch.compile(step, backend=backend)(x)
            assert out.device == DEV and out.cpu().tolist() == [12.0, 14.0, 16.0, 18.0]
    # the device's kernels run from C++ inside compiled code (the graph break's .item()):
    # Dynamo never tries to compile them
    dynamo = [str(w.message)[:80] for w in caught if "Dynamo" in str(w.message)]
    assert not dynamo, dynamo
