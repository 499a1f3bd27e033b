"""syncguard's own descriptors (syncguard.process.fds): moved high, and told apart from a file
the program opened on the same number."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syncguard.process import fds

posix = pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors")


@posix
def test_a_descriptor_moved_high_is_close_on_exec_and_above_new_files() -> None:
    r, w = os.pipe()
    high = fds.high(w)
    try:
        assert high > r
        new = os.open(os.devnull, os.O_RDONLY)
        assert new < high, "a new file takes a low number, not syncguard's"
        os.close(new)
        assert not os.get_inheritable(high)
    finally:
        os.close(r)
        os.close(high)


@posix
@pytest.mark.parametrize("kind", ["pipe", "file"])
def test_own_tells_a_reused_number_apart_and_never_closes_it(kind: str,
                                                             tmp_path: Path) -> None:
    if kind == "pipe":
        r, fd = os.pipe()
    else:
        r, fd = -1, os.open(str(tmp_path / "ours"), os.O_WRONLY | os.O_CREAT)
    own = fds.Own(fd)
    assert own.ok() and own.same() and own.probe() == own.expected
    os.close(fd)
    assert not own.ok() and not own.same()
    theirs = os.open(str(tmp_path / "theirs"), os.O_WRONLY | os.O_CREAT)
    try:
        if theirs != fd:  # the program's file on syncguard's number (a new file may take it)
            os.dup2(theirs, fd)
        assert not own.ok() and not own.same()
        own.close()
        os.fstat(fd)  # still open: the program's
    finally:
        os.close(fd)
        if theirs != fd:
            os.close(theirs)
        if r >= 0:
            os.close(r)
