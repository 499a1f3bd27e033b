"""No phantom copies, and a read per element of torch.tensor([t0, t1]) (issue 21, items 2-3):
on the simulated npu and in CPU mode."""

from __future__ import annotations

from typing import List, Tuple

import pytest
import torch

from syncguard import HostSyncError, SyncGuard, simulated_device
from syncguard.core.events import H2D_COPY, SCALAR_READ

DEV = str(simulated_device("npu", torch_npu=True))


def _kinds(g: SyncGuard) -> List[Tuple[str, int]]:
    return [(e.kind, e.lineno) for e in g.counted_events]


@pytest.mark.parametrize("make", [
    lambda: torch.tensor([], device=DEV),
    lambda: torch.tensor([[], []], device=DEV),
    lambda: torch.as_tensor([], device=DEV),
    lambda: torch.empty(0).to(DEV),
    lambda: torch.empty(0, 3).to(DEV, non_blocking=True),
    lambda: torch.empty(0, device=DEV).copy_(torch.empty(0)),
    lambda: torch.empty(0, device=DEV).cpu(),
    lambda: torch.empty(0, device=DEV).tolist(),
    lambda: torch.empty(0).copy_(torch.empty(0, device=DEV)),
    lambda: repr(torch.empty(0, device=DEV)),
], ids=["tensor([])", "tensor([[],[]])", "as_tensor([])", "empty.to", "empty.to(nb)",
        "dev_empty.copy_(host)", "empty.cpu", "empty.tolist", "host_empty.copy_(dev)",
        "repr(empty)"])
def test_zero_element_copies_are_not_counted(make: object) -> None:
    with SyncGuard() as g:
        make()  # type: ignore[operator]
    assert g.count == 0, [e.describe() for e in g.events]


def test_non_empty_copies_still_count() -> None:
    with SyncGuard() as g:
        torch.tensor([1.0], device=DEV)
        torch.zeros(2).to(DEV)
        torch.zeros(2, device=DEV).cpu()
    assert [e.kind for e in g.events] == [H2D_COPY, H2D_COPY, "d2h_copy"]


def test_cpu_mode_to_own_device_is_not_a_copy() -> None:
    c = torch.arange(3)
    other = torch.zeros(1)
    with SyncGuard(devices=("cpu",), model="cuda") as g:
        assert c.to(c.device) is c
        c.to(other)
        c.to(device=c.device, dtype=c.dtype)
        c.to(c.device, torch.float32)
    assert g.count == 0, [e.describe() for e in g.events]
    with SyncGuard(devices=("cpu",)) as g:  # "cpu" spelled as a string still is the host
        c.to("cpu")
        c.cpu()
    assert g.count == 2


def test_tensor_of_0d_device_tensors_reads_each_then_uploads_once() -> None:
    t0, t1 = torch.tensor(1.0, device=DEV), torch.tensor(2, device=DEV)
    with SyncGuard() as g:
        torch.tensor([t0, t1], device=DEV)
        torch.tensor([[t0, 3.0], [4.0, t1]])  # no device=: reads, no upload
        torch.tensor([1.0, 2.0], device=DEV)  # no tensor in it: the upload only
    assert [(e.kind, e.count, e.api) for e in g.counted_events] == [
        (SCALAR_READ, 1, "torch.tensor"), (SCALAR_READ, 1, "torch.tensor"),
        (H2D_COPY, 1, "torch.tensor"),
        (SCALAR_READ, 1, "torch.tensor"), (SCALAR_READ, 1, "torch.tensor"),
        (H2D_COPY, 1, "torch.tensor")]
    first = g.counted_events[:3]  # the user's line, for the reads and the upload alike
    assert {(e.filename, e.lineno) for e in first} == {(__file__, first[0].lineno)}
    assert first[0].lineno != g.counted_events[3].lineno


def test_tensor_of_0d_tensors_in_cpu_mode_and_with_raise() -> None:
    s = torch.tensor(2.0)
    with SyncGuard(devices=("cpu",)) as g:
        torch.tensor([s, 1.0, s])
    assert (g.count, [e.op for e in g.events]) == (2, ["aten::_local_scalar_dense"] * 2)
    t0 = torch.tensor(1.0, device=DEV)
    with pytest.raises(HostSyncError, match="torch.tensor"):
        with SyncGuard(on_sync="raise"):
            torch.tensor([t0], device=DEV)
