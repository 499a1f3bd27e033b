"""A guard that heals (issue 21, item 5): a real Ctrl-C at any instruction of a guard's entry
or exit leaves torch as it was once the next guard has come and gone, and that guard counts
right; patches an earlier guard left behind are found and removed."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Any, Callable, List, Optional

import pytest
import torch

import syncguard
from syncguard import SyncGuard
from syncguard.core.hub import HUB
from syncguard.core.intercept import PATCHER, snapshot
from syncguard.process import signals as _signals

_PKG = os.path.dirname(os.path.abspath(syncguard.__file__)) + os.sep

needs_sigint = pytest.mark.skipif(not hasattr(signal, "raise_signal") or os.name == "nt",
                                  reason="needs POSIX signals")


#: the guard's own entry and exit, the signal deferral and the hub: every instruction; the
#: patch set (intercept.py, thousands of instructions, all inside the OS-blocked section)
#: is sampled by a second pass
_CORE = tuple(os.path.join(_PKG, "core", f) for f in ("guard.py", "signals.py", "hub.py"))


class _SignalAtOpcode:
    """A ``sys.settrace`` hook that counts the bytecode instructions run in ``files`` and
    sends this process a real SIGINT at the ``n``-th (``n=0``: only counts), as a Ctrl-C
    arriving exactly there would: the handler raises wherever Python next checks."""

    def __init__(self, n: int, files: Any = _CORE) -> None:
        self.n, self.seen, self.files = n, 0, files

    def __call__(self, frame: Any, event: str, arg: Any) -> Optional[Callable[..., Any]]:
        if frame.f_code.co_filename.startswith(self.files):
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return self._opcode
        return None

    def _opcode(self, frame: Any, event: str, arg: Any) -> Callable[..., Any]:
        if event == "opcode":
            self.seen += 1
            if self.seen == self.n:
                signal.raise_signal(signal.SIGINT)
        return self._opcode


def _guarded_block(x: torch.Tensor) -> None:
    with SyncGuard(devices=("cpu",)):
        x.sum()


def _run(hook: _SignalAtOpcode, x: torch.Tensor) -> bool:
    """Run one guarded block under ``hook``; True if a KeyboardInterrupt came out of it."""
    sys.settrace(hook)
    try:
        _guarded_block(x)
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False


def _next_guard_counts_and_leaves_torch_clean(before: Any, where: str) -> None:
    x = torch.arange(3)
    with SyncGuard(devices=("cpu",)) as g:
        x.sum().item()
        x.tolist()
    assert g.count == 2, (where, [e.describe() for e in g.events])
    assert snapshot() == before, f"torch attributes differ after {where}"
    assert PATCHER.users == 0 and not PATCHER.installed and not HUB.guards, where
    if hasattr(signal, "pthread_sigmask"):
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ()), where


@needs_sigint
@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="needs Python's own SIGINT handler")
@pytest.mark.parametrize("files,stride", [(_CORE, 1), (_PKG, 97)], ids=["core", "sampled"])
def test_a_ctrl_c_at_every_instruction_of_entry_and_exit_heals(files: Any, stride: int
                                                               ) -> None:
    before = snapshot()
    x = torch.arange(3)
    _next_guard_counts_and_leaves_torch_clean(before, "a warm-up")  # one-time set-up done
    counter = _SignalAtOpcode(0, files)
    assert not _run(counter, x)
    total = counter.seen
    assert total > 300, total  # entry and exit: every instruction
    failures: List[str] = []
    stopped = 0
    points = range(1, total + 1, stride)
    for n in points:
        stopped += _run(_SignalAtOpcode(n, files), x)
        try:
            _next_guard_counts_and_leaves_torch_clean(before, f"a Ctrl-C at instruction {n}")
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
            # leave the next point a clean start whatever this one broke
            for g in list(HUB.guards):
                g._active, g._net = False, None
                HUB.remove(g)
            while PATCHER.users:
                PATCHER.release()
    assert stopped == len(points), "every Ctrl-C is delivered (none is lost)"
    assert failures == [], f"{len(failures)} of {len(points)}: {failures[:5]}"


def test_a_guard_whose_exit_never_ran_is_taken_down_by_the_next_entry(
        caplog: pytest.LogCaptureFixture) -> None:
    """The state a Ctrl-C at the first instruction of ``__exit__`` leaves: the block was left,
    the guard is still listed and torch still patched."""
    before = snapshot()
    x = torch.arange(3)
    real_exit = SyncGuard._exit

    def cut(self: SyncGuard, *exc: Any) -> None:
        raise KeyboardInterrupt

    vars(SyncGuard)["__exit__"].fn = cut  # type: ignore[attr-defined]
    try:
        with pytest.raises(KeyboardInterrupt):
            with SyncGuard(devices=("cpu",)):
                pass
    finally:
        vars(SyncGuard)["__exit__"].fn = real_exit  # type: ignore[attr-defined]
    (left,) = HUB.guards
    assert left.active and left.stale and PATCHER.installed
    with caplog.at_level(logging.WARNING, logger="syncguard"):
        with SyncGuard(devices=("cpu",)) as g:
            x.sum().item()
    assert g.count == 1 and left.count == 0 and not left.active
    assert "took down 1 guard" in caplog.text
    assert snapshot() == before and not HUB.guards and PATCHER.users == 0
    # and on an exit: the stale guard is inside a live one
    with SyncGuard(devices=("cpu",)) as outer:
        vars(SyncGuard)["__exit__"].fn = cut  # type: ignore[attr-defined]
        try:
            with SyncGuard(devices=("cpu",)):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            vars(SyncGuard)["__exit__"].fn = real_exit  # type: ignore[attr-defined]
        assert len(HUB.guards) == 2
        x.sum().item()
    assert outer.count == 1 and not HUB.guards and snapshot() == before


def test_guards_entered_by_hand_or_alive_are_never_taken_down() -> None:
    x = torch.arange(3)
    by_hand = SyncGuard(devices=("cpu",))
    by_hand.__enter__()
    try:
        with SyncGuard(devices=("cpu",)) as inner:  # a live outer with-block: not stale
            with SyncGuard(devices=("cpu",)) as innermost:
                x.sum().item()
            assert inner.active and not inner.stale and by_hand.active
        assert not by_hand.stale
    finally:
        by_hand.__exit__(None, None, None)
    assert (by_hand.count, inner.count, innermost.count) == (1, 1, 1)

    def gen() -> Any:
        with SyncGuard(devices=("cpu",)) as g:
            yield g  # suspended inside its with block: alive

    it = gen()
    g = next(it)
    with SyncGuard(devices=("cpu",)):
        assert g.active and not g.stale
    it.close()
    assert not g.active


def test_interceptors_left_by_an_earlier_patch_set_are_removed(
        caplog: pytest.LogCaptureFixture) -> None:
    """Patches whose records are gone (a guard cut short, syncguard imported afresh) are not
    wrapped again: the next install removes them, and its removal leaves torch as before."""
    before = snapshot()
    x = torch.arange(3)
    PATCHER.acquire()
    PATCHER.saved.clear()  # the records lost, the wrappers still on torch
    PATCHER.users = 0
    assert vars(torch.Tensor)["item"].__syncguard__
    with caplog.at_level(logging.WARNING, logger="syncguard"):
        with SyncGuard(devices=("cpu",)) as g:
            x.sum().item()
            torch.tensor([torch.tensor(1.0), torch.tensor(2.0)])
    assert g.count == 3, [e.describe() for e in g.events]
    assert "removed" in caplog.text and "Tensor.item" in PATCHER.healed
    assert snapshot() == before
    assert torch.tensor([torch.tensor(1.0)] * 2).tolist() == [1.0, 1.0]


def test_critical_blocks_at_the_os_level_and_delivers_after() -> None:
    if not _signals._OS_BLOCK:
        pytest.skip("no pthread_sigmask here")
    done: List[str] = []
    with pytest.raises(KeyboardInterrupt):
        with _signals.critical() as got:
            signal.raise_signal(signal.SIGINT)
            assert signal.SIGINT in signal.sigpending()  # held by the kernel, not handled
            done.append("ran on")
            assert _signals.take_pending(got) == [signal.SIGINT]
            assert signal.SIGINT not in signal.sigpending()
    assert done == ["ran on"]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    with _signals.critical(deliver=False) as got:
        signal.raise_signal(signal.SIGTERM)
    assert got == [signal.SIGTERM]


def test_a_stale_guard_can_be_entered_again() -> None:
    x = torch.arange(3)
    g = SyncGuard(devices=("cpu",))
    real_exit = SyncGuard._exit

    def cut(self: SyncGuard, *exc: Any) -> None:
        raise KeyboardInterrupt

    vars(SyncGuard)["__exit__"].fn = cut
    try:
        with pytest.raises(KeyboardInterrupt):
            with g:
                pass
    finally:
        vars(SyncGuard)["__exit__"].fn = real_exit
    assert g.stale
    with g:  # its own entry takes the stale entry down first
        x.sum().item()
    assert g.count == 1 and not g.active and not HUB.guards and PATCHER.users == 0
