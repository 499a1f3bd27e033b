"""The guard cannot be left broken: interrupted install/uninstall, unbalanced exits, entry from
two threads, exits from the wrong thread (issue 12, items 1, 2, 4 and 10)."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from typing import Any, Callable, List, Optional

import pytest
import torch

from syncguard import SyncGuard
from syncguard.core.hub import HUB
from syncguard.core.intercept import PATCHER, snapshot

_SWAPS = (setattr, delattr)


class _Injector:
    """A ``sys.setprofile`` hook raising KeyboardInterrupt at the ``n``-th ``setattr`` or
    ``delattr`` (``when="c_call"``: before it runs; ``"c_return"``: just after it ran), as a
    Ctrl-C landing there would. ``n=0`` only counts."""

    def __init__(self, n: int, when: str, real_signal: bool = False) -> None:
        self.n, self.when, self.seen, self.real_signal = n, when, 0, real_signal

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == self.when and any(arg is f for f in _SWAPS):
            self.seen += 1
            if self.seen == self.n:
                if self.real_signal:  # as a real Ctrl-C: handled asynchronously
                    signal.raise_signal(signal.SIGINT)
                else:
                    raise KeyboardInterrupt(f"injected at swap {self.n} ({self.when})")


def _run_profiled(hook: Callable[..., Any], fn: Callable[[], Any]) -> Optional[BaseException]:
    sys.setprofile(hook)
    try:
        fn()
    except KeyboardInterrupt as exc:
        return exc
    finally:
        sys.setprofile(None)
    return None


def _assert_clean_and_counting(before: Any) -> None:
    assert snapshot() == before, "torch attributes differ from before the guard"
    assert PATCHER.users == 0 and not PATCHER.installed and not HUB.guards
    x = torch.arange(3)
    with SyncGuard(devices=("cpu",)) as g:
        x.sum().item()
        x.tolist()
    assert g.count == 2, [e.describe() for e in g.events]


def _swaps_in(fn: Callable[[], Any]) -> int:
    counter = _Injector(0, "c_call")
    _run_profiled(counter, fn)
    return counter.seen


@pytest.mark.parametrize("when", ["c_call", "c_return"])
def test_interrupt_at_every_point_of_install_leaves_torch_as_before(when: str) -> None:
    before = snapshot()
    g0 = SyncGuard(devices=("cpu",))
    n_swaps = _swaps_in(g0.__enter__)
    g0.__exit__(None, None, None)
    assert n_swaps > 20  # the whole patch set, not a token
    for n in range(1, n_swaps + 1):
        g = SyncGuard(devices=("cpu",))
        exc = _run_profiled(_Injector(n, when), g.__enter__)
        assert exc is not None, f"swap {n} was not reached"
        assert not g.active
        _assert_clean_and_counting(before)


@pytest.mark.parametrize("when", ["c_call", "c_return"])
def test_interrupt_at_every_point_of_uninstall_leaves_torch_as_before(when: str) -> None:
    before = snapshot()
    g0 = SyncGuard(devices=("cpu",))
    g0.__enter__()
    n_swaps = _swaps_in(lambda: g0.__exit__(None, None, None))
    assert n_swaps > 20
    for n in range(1, n_swaps + 1):
        g = SyncGuard(devices=("cpu",))
        g.__enter__()
        exc = _run_profiled(_Injector(n, when), functools.partial(g.__exit__, None, None, None))
        assert exc is not None, f"swap {n} was not reached"
        _assert_clean_and_counting(before)


def test_unbalanced_exits_change_nothing_and_later_guards_count() -> None:
    x = torch.arange(3)
    g = SyncGuard(devices=("cpu",))
    with g:
        pass
    g.__exit__(None, None, None)  # a second exit
    SyncGuard().__exit__(None, None, None)  # an exit without an entry
    assert PATCHER.users == 0
    with pytest.raises(RuntimeError, match="released more often"):
        PATCHER.release()
    assert PATCHER.users == 0
    with SyncGuard(devices=("cpu",)) as outer:
        with SyncGuard(devices=("cpu",)) as inner:
            x.sum().item()
        inner.__exit__(None, None, None)  # exiting the inner guard again leaves outer on
        x.sum().item()
    assert (outer.count, inner.count) == (2, 1)
    with pytest.raises(Exception, match="hidden host sync"):
        with SyncGuard(devices=("cpu",), on_sync="raise"):
            x.sum().item()


def test_one_guard_entered_from_two_threads_at_once_is_entered_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    g = SyncGuard(devices=("cpu",))
    first_inside, release = threading.Event(), threading.Event()
    real_push = HUB.push
    pushes: List[object] = []

    def slow_push(guard: SyncGuard) -> None:
        pushes.append(guard)
        if len(pushes) == 1:  # the first entry pauses mid-way; the second thread tries now
            first_inside.set()
            release.wait(timeout=10)
        real_push(guard)

    monkeypatch.setattr(HUB, "push", slow_push)
    results: List[str] = []

    def enter() -> None:
        try:
            g.__enter__()
            results.append("entered")
        except RuntimeError:
            results.append("refused")

    t1 = threading.Thread(target=enter)
    t1.start()
    assert first_inside.wait(timeout=10)
    t2 = threading.Thread(target=enter)
    t2.start()
    t2.join(timeout=1.0)  # unguarded entry completes here; a locked one waits for t1
    release.set()
    t1.join()
    t2.join()
    try:
        assert sorted(results) == ["entered", "refused"]
        assert HUB.guards.count(g) == 1
        x = torch.arange(3)
        x.sum().item()
        assert g.count == 1
    finally:
        for _ in range(results.count("entered")):
            g.__exit__(None, None, None)
            HUB.remove(g)


def test_exhaustive_guard_exit_from_another_thread_is_refused_and_leaves_nothing() -> None:
    modes = torch._C._len_torch_dispatch_stack()
    g = SyncGuard(devices=("cpu",), exhaustive=True)
    g.__enter__()
    errors: List[BaseException] = []

    def exit_elsewhere() -> None:
        try:
            g.__exit__(None, None, None)
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=exit_elsewhere)
    t.start()
    t.join()
    try:
        assert len(errors) == 1 and "thread that entered it" in str(errors[0])
        assert g.active and torch._C._len_torch_dispatch_stack() == modes + 1
    finally:
        g.__exit__(None, None, None)
    assert not g.active and torch._C._len_torch_dispatch_stack() == modes


def _getitem_patched() -> bool:
    return getattr(vars(torch.Tensor).get("__getitem__"), "__syncguard__", False) is True


@pytest.mark.parametrize("phase", ["enter", "exit"])
def test_tensors_never_look_like_sequences_between_patches(phase: str) -> None:
    """Another thread may run between any two patches: a list of 0-d tensors must build at
    every point of install and uninstall (the sequence slots are repaired at once)."""
    t0 = torch.tensor(1.0)
    checked: List[bool] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and any(arg is f for f in _SWAPS):
            try:
                torch.tensor([t0, t0])
                checked.append(True)
            except TypeError:
                checked.append(False)

    g = SyncGuard()
    if phase == "exit":
        g.__enter__()
    sys.setprofile(hook)
    try:
        g.__enter__() if phase == "enter" else g.__exit__(None, None, None)
        assert _getitem_patched() == (phase == "enter")
    finally:
        sys.setprofile(None)
        if g.active:
            g.__exit__(None, None, None)
    assert len(checked) > 20 and all(checked), checked


def test_a_real_ctrl_c_during_entry_or_exit_is_deferred_and_leaves_torch_clean() -> None:
    before = snapshot()
    g0 = SyncGuard(devices=("cpu",))
    n_enter = _swaps_in(g0.__enter__)
    n_exit = _swaps_in(functools.partial(g0.__exit__, None, None, None))
    for phase, n_swaps in (("enter", n_enter), ("exit", n_exit)):
        for n in (1, n_swaps // 2, n_swaps):
            g = SyncGuard(devices=("cpu",))
            if phase == "exit":
                g.__enter__()
            step = g.__enter__ if phase == "enter" else functools.partial(
                g.__exit__, None, None, None)
            exc = _run_profiled(_Injector(n, "c_call", real_signal=True), step)
            assert isinstance(exc, KeyboardInterrupt), (phase, n)
            assert not g.active, (phase, n)
            _assert_clean_and_counting(before)
