"""Step markers and ``--step`` hooks, without running a program."""

from __future__ import annotations

import sys
import textwrap
from typing import List, Tuple

import pytest

import syncguard
from syncguard.core import steps
from syncguard.execute.hooks import StepHooks, StepSpecError, parse_step, static_missing


class Recorder:
    def __init__(self) -> None:
        self.calls: List[Tuple[str, str]] = []

    def begin(self, name: str) -> None:
        self.calls.append(("begin", name))

    def end(self, name: str) -> None:
        self.calls.append(("end", name))


@pytest.fixture
def rec():
    r = Recorder()
    prev = steps.set_recorder(r)
    yield r
    steps.set_recorder(prev)


def test_markers_do_nothing_without_syncguard():
    assert not steps.active()
    with syncguard.step():
        pass

    @syncguard.step
    def f(x):
        return x + 1

    assert f(1) == 2 and f.__name__ == "f" and f.__wrapped__(1) == 2

    @syncguard.step("decode")  # decorated while syncguard is not running ...
    def g():
        return 3

    rec = Recorder()
    prev = steps.set_recorder(rec)
    try:
        assert g() == 3  # ... is a step once it runs
    finally:
        steps.set_recorder(prev)
    assert rec.calls == [("begin", "decode"), ("end", "decode")]


def test_marker_forms_and_nesting(rec):
    @syncguard.step
    def outer(n):
        return inner(n) if n else 0

    @syncguard.step("decode")
    def inner(n):
        with syncguard.step("nested"):
            return outer(n - 1)

    outer(3)
    assert rec.calls == [("begin", "test_marker_forms_and_nesting.<locals>.outer"),
                         ("end", "test_marker_forms_and_nesting.<locals>.outer")]
    rec.calls.clear()
    with pytest.raises(ValueError):
        with syncguard.step("boom"):
            raise ValueError
    with syncguard.step():
        pass
    assert rec.calls == [("begin", "boom"), ("end", "boom"), ("begin", "step"), ("end", "step")]


def test_a_context_copied_inside_a_step_sees_it_end(rec):
    """A task started inside a step runs in a copy of its context: while the step is open, a
    step function it calls is part of that step; once the step has ended, the same call is a
    step of its own (the copy does not keep the ended step open)."""
    import asyncio

    @syncguard.step("decode")
    def decode() -> None:
        pass

    async def main() -> None:
        gate = asyncio.Event()

        async def later() -> None:
            decode()  # inside the open step: nested, nothing begins
            await gate.wait()
            decode()  # the step has ended: a step of its own

        with syncguard.step("outer"):
            task = asyncio.ensure_future(later())
            await asyncio.sleep(0)
        gate.set()
        await task

    asyncio.run(main())
    assert rec.calls == [("begin", "outer"), ("end", "outer"), ("begin", "decode"),
                         ("end", "decode")]


MOD = """
import os

def top(x):
    return x

class Runner:
    def execute(self, x):
        return ("execute", x)

    @staticmethod
    def stat(x):
        return ("stat", x)

    @classmethod
    def klass(cls, x):
        return ("klass", cls.__name__, x)

class Sub(Runner):
    pass
"""


@pytest.fixture
def hookmod(tmp_path, monkeypatch):
    (tmp_path / "sg_hookmod.py").write_text(textwrap.dedent(MOD))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "sg_hookmod"
    sys.modules.pop("sg_hookmod", None)


@pytest.mark.parametrize("imported_first", [False, True])
def test_hooks_wrap_on_import_and_restore(rec, hookmod, imported_first):
    if imported_first:
        __import__(hookmod)
    specs = ["top", "Runner.execute", "Runner.stat", "Runner.klass", "Sub.execute"]
    hooks = StepHooks([parse_step(f"{hookmod}:{q}") for q in specs])
    hooks.install()
    try:
        mod = __import__(hookmod)
        assert mod.top(1) == 1
        r = mod.Runner()
        assert r.execute(2) == ("execute", 2)
        assert mod.Runner.stat(3) == ("stat", 3) and r.stat(3) == ("stat", 3)
        assert mod.Sub.klass(4) == ("klass", "Sub", 4)
        assert mod.Sub().execute(5) == ("execute", 5)
        assert hooks.errors() == []
    finally:
        hooks.uninstall()
    assert [c for c in rec.calls if c[0] == "begin"] == [
        ("begin", "top"), ("begin", "Runner.execute"), ("begin", "Runner.stat"),
        ("begin", "Runner.stat"), ("begin", "Runner.klass"), ("begin", "Sub.execute")]
    # restored exactly: the class's own objects back, the subclass's patch removed
    d = mod.Runner.__dict__
    assert type(d["stat"]) is staticmethod and type(d["klass"]) is classmethod
    for f in (mod.top, d["execute"], d["stat"].__func__, d["klass"].__func__):
        assert not hasattr(f, "__syncguard_step__")
    assert "execute" not in mod.Sub.__dict__
    assert not any(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path)


def test_hook_errors(hookmod):
    with pytest.raises(StepSpecError):
        parse_step("no-colon")
    missing = parse_step(f"{hookmod}:Runner.nope")
    assert "has no attribute 'nope'" in (static_missing(missing) or "")
    assert static_missing(parse_step(f"{hookmod}:Runner.execute")) is None
    assert static_missing(parse_step(f"{hookmod}:os")) is None  # bound by an import
    assert static_missing(parse_step(f"{hookmod}:Sub")) is None  # a class: calls are steps
    assert static_missing(parse_step(f"{hookmod}:Sub.execute")) is None  # inherited
    assert "no attribute 'nope'" in (static_missing(parse_step(f"{hookmod}:nope")) or "")
    hooks = StepHooks([parse_step(f"{hookmod}:Runner.nope"), parse_step("sg_never:f")])
    hooks.install()
    try:
        __import__(hookmod)
    finally:
        hooks.uninstall()
    errs = hooks.errors()
    assert len(errs) == 2 and "no attribute 'nope'" in errs[0] and "never imported" in errs[1]


def test_session_writes_device_time_one_step_late(tmp_path):
    """On a real device each record waits for its step's end event: written one step late
    (no stall of the program's overlap), and the last one when the run finishes."""
    from syncguard.execute.session import ExecSession
    from syncguard.results.loader import load
    from syncguard.results.writer import ResultWriter

    class FakeTimer:
        def __init__(self):
            self.n = 0

        def start(self):
            self.n += 1
            return self.n

        def stop(self, h):
            pass

        def elapsed(self, h):
            return float(h)

    class Target:
        kind, exhaustive = "cpu", False

    path = str(tmp_path / "r.jsonl")
    writer = ResultWriter(path, {})
    session = ExecSession("prog", writer, Target())
    session._timer = FakeTimer()
    written = []
    with session:
        for _ in range(3):
            st = session.begin("s")
            assert st is not None
            st.end("s")
            written.append(len(load(path).steps))
    session.finish()
    writer.close(True)
    assert written == [0, 1, 2]
    assert [(s.step, s.device_ms) for s in load(path).steps] == [(0, 1.0), (1, 2.0), (2, 3.0)]


def test_a_step_that_raises_is_reported_as_failed():
    """A recorder with ``failed(name, exc_name)`` hears which exception left the step (the
    program may catch it and go on); a recorder without it gets ``end`` as before."""

    class Failing(Recorder):
        def failed(self, name: str, exc: str) -> None:
            self.calls.append(("failed", f"{name}:{exc}"))

    r = Failing()
    prev = steps.set_recorder(r)
    try:
        with pytest.raises(KeyError):
            with syncguard.step("decode"):
                raise KeyError("k")

        @syncguard.step
        def f():
            raise ValueError

        with pytest.raises(ValueError):
            f()
        with syncguard.step("decode"):
            pass
    finally:
        steps.set_recorder(prev)
    qual = "test_a_step_that_raises_is_reported_as_failed.<locals>.f"
    assert r.calls == [("begin", "decode"), ("failed", "decode:KeyError"), ("begin", qual),
                       ("failed", f"{qual}:ValueError"), ("begin", "decode"), ("end", "decode")]


def test_a_step_s_handle_is_the_context_s_until_it_ends_and_is_the_one_closed() -> None:
    """A recorder's ``begin`` may return a handle: ``steps.current()`` is that handle in the
    context that opened the step (and in a thread that adopted it, and in nested levels),
    None elsewhere and after the end; the handle's own ``end``/``failed`` close the step,
    not the recorder's, and ``begin`` is called once per outermost step."""
    import threading

    class Handle:
        def __init__(self, log: List[Tuple[str, str]], n: int) -> None:
            self.log, self.n = log, n

        def end(self, name: str) -> None:
            self.log.append(("end", f"{name}#{self.n}"))

        def failed(self, name: str, exc: str) -> None:
            self.log.append(("failed", f"{name}#{self.n}:{exc}"))

    class Handing(Recorder):
        def begin(self, name: str) -> Handle:  # type: ignore[override]
            self.calls.append(("begin", name))
            return Handle(self.calls, len(self.calls))

    r = Handing()
    prev = steps.set_recorder(r)
    seen = {}
    try:
        assert steps.current() is None
        with syncguard.step("a"):
            outer = steps.current()
            assert isinstance(outer, Handle)
            with syncguard.step("inner"):  # a level of the open step: no begin
                assert steps.current() is outer
            cell = steps.open_cell()
            assert cell is not None

            def work() -> None:
                seen["before"] = steps.current()
                steps.adopt(cell)
                seen["adopted"] = steps.current()
                with syncguard.step("own"):  # a thread's own step, not a level of "a"
                    seen["own"] = steps.current()
                seen["after_own"] = steps.current()

            t = threading.Thread(target=work)
            t.start()
            t.join()
            assert steps.current() is outer
        assert steps.current() is None and steps.open_cell() is None
        with pytest.raises(KeyError):
            with syncguard.step("b"):
                raise KeyError
    finally:
        steps.set_recorder(prev)
    assert seen["before"] is None and seen["adopted"] is outer
    assert isinstance(seen["own"], Handle) and seen["own"] is not outer
    assert seen["after_own"] is None  # its own step ended: no step of its own now
    assert r.calls == [("begin", "a"), ("begin", "own"), ("end", "own#2"), ("end", "a#1"),
                       ("begin", "b"), ("failed", "b#5:KeyError")]
