"""torch.compile together with the guard's optional modes: the dispatch-level net
(``exhaustive``) and lineage tracking. Each read of a compiled step is still counted once, on
its own line, and the lineage verdict is the one eager code gets."""

from __future__ import annotations

import inspect
from typing import Any, Callable, List, Tuple

import pytest
import torch

from syncguard import SyncGuard
from syncguard.driving.lineage import start_for

BACKENDS = ["eager", "aot_eager"]


def _line(fn: Callable[..., Any], text: str) -> int:
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def helper(x: torch.Tensor) -> int:
    return int(x.sum().int().item())  # captured read


def sized(x: torch.Tensor) -> torch.Tensor:
    n = helper(x + 1)
    return torch.ones(n) * 2


@pytest.mark.parametrize("backend", BACKENDS)
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
@pytest.mark.parametrize("backend", BACKENDS)
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
