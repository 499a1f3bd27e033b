"""Unit tests of the interceptors (:mod:`syncguard.core.intercept`) below the guard: the patch set's
life cycle (installed for the first user, removed exactly with the last), the classifiers of
the copy and read entry points, the outermost-call rule, and reporting with no guard active.

CPU tensors stand in for device tensors (``devices=("cpu",)``), as in test_guard.py."""

from __future__ import annotations

from typing import List

import pytest
import torch

from syncguard.core import classify
from syncguard.core.guard import SyncGuard
from syncguard.core.hub import HUB
from syncguard.core.intercept import PATCHER, patched_attributes, report_sync, snapshot, suppressed


def _kinds(g: SyncGuard) -> List[str]:
    return [e.kind for e in g.events]


def test_the_patch_set_is_installed_for_the_first_user_and_removed_with_the_last() -> None:
    before = snapshot()
    PATCHER.acquire()
    try:
        assert PATCHER.installed and PATCHER.users == 1
        patched = snapshot()
        assert patched != before  # the entry points are wrapped
        PATCHER.acquire()  # a second user: no second layer of wrappers
        try:
            assert snapshot() == patched and PATCHER.users == 2
        finally:
            PATCHER.release()
        assert PATCHER.installed and snapshot() == patched  # one user left: still installed
    finally:
        PATCHER.release()
    assert not PATCHER.installed and PATCHER.users == 0
    assert snapshot() == before  # every attribute exactly as it was (identity, not equality)


def test_releasing_more_often_than_acquired_is_an_error_and_changes_nothing() -> None:
    before = snapshot()
    with pytest.raises(RuntimeError, match="released more often than acquired"):
        PATCHER.release()
    assert PATCHER.users == 0 and snapshot() == before


def test_the_patched_attributes_name_the_read_entry_points() -> None:
    names = set(patched_attributes())
    for api in ("Tensor.item", "Tensor.tolist", "Tensor.__bool__", "Tensor.__getitem__",
                "Tensor.numpy", "Tensor.cpu", "Tensor.to", "Tensor.copy_"):
        assert api in names, api


def test_reporting_without_an_active_guard_records_nothing_anywhere() -> None:
    assert not HUB.guards
    report_sync("d2h_copy", "Tensor.item", "aten::_local_scalar_dense")  # no guard: a no-op
    with SyncGuard(devices=("cpu",)) as g:
        pass
    assert g.count == 0


def test_report_sync_reaches_every_active_guard_once() -> None:
    with SyncGuard(devices=("cpu",)) as outer, SyncGuard(devices=("cpu",)) as inner:
        report_sync("d2h_copy", "Backend.read", "aten::_local_scalar_dense", count=3)
    assert outer.count == 3 and inner.count == 3
    assert [e.api for e in outer.events] == ["Backend.read"]


def test_suppressed_reads_are_not_counted_and_the_next_one_is() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        with suppressed():
            x.sum().item()
            report_sync("d2h_copy", "Backend.read")
        x.sum().item()
    assert g.count == 1 and [e.api for e in g.events] == ["Tensor.item"]


def test_the_outermost_intercepted_call_reports_once() -> None:
    """``x in t`` calls ``.item()`` inside: one host read, one event, blamed on ``in``."""
    t = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        assert 2 in t
    assert g.count == 1 and g.events[0].api == "Tensor.__contains__"


@pytest.mark.parametrize("read,api", [
    (lambda x: x.item(), "Tensor.item"),
    (lambda x: x.tolist(), "Tensor.tolist"),
    (lambda x: bool(x), "Tensor.__bool__"),
    (lambda x: float(x), "Tensor.__float__"),
])
def test_each_read_of_a_device_scalar_is_one_sync_with_its_api(read, api) -> None:  # type: ignore[no-untyped-def]
    x = torch.tensor(1.5)
    with SyncGuard(devices=("cpu",)) as g:
        read(x)
    assert g.count == 1 and g.events[0].api == api


def test_device_to_device_work_is_not_a_sync() -> None:
    x = torch.arange(8, dtype=torch.float32)
    with SyncGuard(devices=("cpu",)) as g:
        y = (x * 2).sum()
        z = torch.where(x > 3, x, y)
        _ = z[1:3]  # a slice is a view: no read
    assert g.count == 0, _kinds(g)


def test_the_interceptors_are_gone_after_a_guard_raises() -> None:
    before = snapshot()
    with pytest.raises(ZeroDivisionError):
        with SyncGuard(devices=("cpu",)):
            raise ZeroDivisionError
    assert snapshot() == before and not PATCHER.installed


def test_an_async_copy_to_the_host_waits_only_into_pageable_memory() -> None:
    """``.to("cpu", non_blocking=True)`` allocates its result pinned: the host does not wait;
    ``copy_(non_blocking=True)`` into a pageable tensor is copied synchronously (a sync)."""
    x = torch.arange(3)
    pageable = torch.empty(3, dtype=x.dtype)
    with SyncGuard(devices=("cpu",)) as g:  # "cpu" is the device only while a guard says so
        assert classify._to((x, "cpu"), {"non_blocking": True}) is None
        blocking = classify._to((x, "cpu"), {})
        hit = classify._copy_((pageable, x), {"non_blocking": True})
    assert g.count == 0  # classifying reads nothing
    assert blocking is not None and blocking[0] == "d2h_copy"
    assert hit is not None and hit[0] == "d2h_copy" and "pageable" in str(hit[4])
