"""What the per-read and per-step bookkeeping keeps between calls (the frames of a call site,
each code object's facts, the copies of events a step makes) must never change an answer: a
cached frame is its own line's, a code object freed and another made in its place is the new
one's, and a copied event is the event ``dataclasses.replace`` would make."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, List

import pytest
import torch

import syncguard
from syncguard.core.events import Frame, SyncEvent
from syncguard.core.hub import HUB


def _reads_on_two_lines(x: torch.Tensor) -> None:
    for _ in range(3):
        x.item()  # first line
        x.item()  # second line


def test_each_read_of_a_loop_is_blamed_on_its_own_line_every_time() -> None:
    x = torch.tensor(1.0)
    with syncguard.SyncGuard(devices=("cpu",)) as g:
        _reads_on_two_lines(x)
    first = _reads_on_two_lines.__code__.co_firstlineno
    lines = [e.lineno - first for e in g.events]
    assert lines == [2, 3] * 3


def test_a_code_object_made_where_a_freed_one_was_is_named_as_itself() -> None:
    """Facts per code object are kept by identity: a function freed and another compiled in
    its place (ids are reused) must be named as the new one, on its own line."""
    x = torch.tensor(1.0)
    seen: List[Any] = []
    with syncguard.SyncGuard(devices=("cpu",)) as g:
        for i in range(40):
            ns: dict = {}
            pad = "\n" * (i % 5)
            exec(compile(f"{pad}def reader_{i}(x):\n    return x.item()\n", f"<made_{i}>",
                         "exec"), ns)
            ns[f"reader_{i}"](x)
            seen.append((f"reader_{i}", i % 5 + 2))
            del ns
            gc.collect()
    assert [(e.function, e.lineno) for e in g.events] == seen


def test_user_stack_names_the_callers_innermost_first() -> None:
    def inner() -> Any:
        return HUB.user_stack(depth=4)

    def outer() -> Any:
        return inner()

    stacks = [outer() for _ in range(3)]  # one call site: the same frames each time
    assert [fr.function for fr in stacks[0][:2]] == ["inner", "outer"]
    assert all(isinstance(fr, Frame) for fr in stacks[0])
    assert stacks[0] == stacks[1] == stacks[2]
    assert outer()[2].lineno == stacks[0][2].lineno + 4  # another line: its own frame


def _event() -> SyncEvent:
    return SyncEvent(kind="scalar_read", api="Tensor.item", op="aten::_local_scalar_dense",
                     filename="m.py", lineno=3, function="f",
                     stack=(Frame("m.py", 3, "f"),), step=None, thread="MainThread",
                     wait_us=1.5, lineage={"verdict": "unknown"})


@pytest.mark.parametrize("change", [{"step": 4}, {"warmup": True}, {"step": None},
                                    {"allowed": True, "reason": "why"}])
def test_evolve_makes_what_dataclasses_replace_makes(change: dict) -> None:
    ev = _event()
    new = ev.evolve(**change)
    assert new == dataclasses.replace(ev, **change)
    assert new is not ev and ev == _event()  # the original untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.step = 9  # type: ignore[misc]


def test_evolve_refuses_a_field_the_event_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field stepp"):
        _event().evolve(stepp=1)


def test_the_same_function_in_two_files_is_judged_by_its_own_file() -> None:
    """Two code objects that compare equal (same name, lines and bytecode: a helper copied
    into a second module) are still two places: code objects compare without their file. A
    copy inside torch is skipped (the read is blamed on its caller), the user's is not."""
    import os

    src = "def helper(x):\n    return x.item()\n"
    inside: dict = {}
    mine: dict = {}
    torch_file = os.path.join(os.path.dirname(torch.__file__), "_made_helpers.py")
    exec(compile(src, torch_file, "exec"), inside)
    exec(compile(src, "/engine/helpers.py", "exec"), mine)
    assert inside["helper"].__code__ == mine["helper"].__code__  # what a code-keyed cache sees
    x = torch.tensor(1.0)
    with syncguard.SyncGuard(devices=("cpu",)) as g:
        inside["helper"](x)
        mine["helper"](x)
    assert g.events[0].filename == __file__  # torch's copy: blamed on the line calling it
    assert (g.events[1].filename, g.events[1].function) == ("/engine/helpers.py", "helper")


def _reads_for_both_paths(x: torch.Tensor) -> None:
    x.item()
    with syncguard.allow("the token"):
        x.item()
    x.tolist()


@pytest.mark.parametrize("kwargs", [
    dict(devices=("cpu",)),
    dict(devices=("cpu",), allow_sites=["_reads_for_both_paths"], warmup=1),
    dict(devices=("cpu",), stack_depth=1),
    dict(),  # CPU reads not counted: the guard does not name the device
])
def test_a_lone_guard_records_what_it_records_beside_another(kwargs: dict) -> None:
    """The only counting guard has its events made by the hub without its general loop; beside a
    second guard the general loop makes them. Each event, count and step is the same."""
    x = torch.tensor([1.0])

    def run(with_other: bool) -> Any:
        g = syncguard.SyncGuard(**kwargs)
        other = syncguard.SyncGuard(devices=("cpu",))
        with g:
            if with_other:
                other.__enter__()
            assert (HUB._solo is g) is not with_other
            try:
                for _ in range(2):
                    with g.step():
                        _reads_for_both_paths(x)
            finally:
                if with_other:
                    other.__exit__(None, None, None)
        return g

    alone, beside = run(False), run(True)
    assert [e.to_dict() | {"wait_us": None} for e in alone.events] == [
        e.to_dict() | {"wait_us": None} for e in beside.events]
    assert (alone.count, alone.allowed_count) == (beside.count, beside.allowed_count)
    assert len(alone.events) == (0 if not kwargs else 6)


_LAUNCHED = '''
import sys

import torch
from syncguard.core.hub import HUB

x = torch.tensor(1.0)


def inner():
    return x.item()


def outer():
    return inner()


for _ in range(3):
    x.item()
    outer()
with open(sys.argv[1], "w") as f:
    f.write(f"{HUB._end.f_code.co_name} {HUB._end.f_code.co_filename}")
'''


def test_a_program_s_reads_stop_at_its_module_not_the_launcher(tmp_path) -> None:
    """A program run as exec runs it (runpy inside syncguard's runner): every read's stack
    ends at the program's ``<module>``, and once a walk has reached the runner, the walks stop
    at runpy's innermost frame (the one that runs the ``<module>``): runpy's frames are not
    walked on every read."""
    import runpy

    from syncguard.execute.program import Program, run

    script, out = tmp_path / "prog.py", tmp_path / "end.txt"
    script.write_text(_LAUNCHED)
    with syncguard.SyncGuard(devices=("cpu",)) as g:
        run(Program(str(script), [str(out)]))
    assert len(g.events) == 6
    for e in g.events:
        assert {f.filename for f in e.stack} == {str(script)}, e.stack
        assert e.stack[-1].function == "<module>"
    nested = [e for e in g.events if e.function == "inner"]
    assert [f.function for f in nested[-1].stack] == ["inner", "outer", "<module>"]
    name, filename = out.read_text().split(" ", 1)
    assert name == "_run_code" and filename in ("<frozen runpy>", runpy.__file__)
    assert HUB._end is None and HUB.root is None  # as before the run
