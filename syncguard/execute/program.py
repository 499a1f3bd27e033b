"""Run a Python program in this process as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS``
would: ``sys.argv``, ``__main__`` and ``sys.path[0]`` as a plain run has them, restored after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import runpy
import sys
import traceback
import types
from typing import Any, Callable, Iterator, List, Optional, Sequence

from ..core.hub import HUB
from ..errors import SyncguardError
from .mainhook import run_bound

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_RUNPY = os.path.abspath(runpy.__file__)


class ProgramError(SyncguardError, ValueError):
    """The program to run cannot be found: one line, exit code 2."""


@dataclasses.dataclass(frozen=True)
class Program:
    """What to run: a script path or a module name, and its arguments."""

    target: str
    args: List[str]
    module: bool = False
    #: ``python -u``: stdout and stderr unbuffered (write-through) while the program runs
    unbuffered: bool = False

    @property
    def name(self) -> str:
        """A short label for reports: the script's file name or the module name."""
        return self.target if self.module else os.path.basename(self.target)

    @property
    def argv(self) -> List[str]:
        return [self.target, *self.args]


def parse_command(program: List[str], module: Optional[List[str]]) -> Program:
    """``[--] [python] SCRIPT ARGS``, ``[--] [python] -m MODULE ARGS`` or ``-m MODULE ARGS``."""
    if module:
        return Program(module[0], list(module[1:]), module=True)
    words = list(program)
    if words and words[0] == "--":
        words = words[1:]
    if words and os.path.basename(words[0]).startswith("python") and not words[0].endswith(
            ".py"):
        words = words[1:]
    unbuffered = False
    while words and words[0] == "-u":  # the one interpreter option that applies in-process
        unbuffered, words = True, words[1:]
    if words and words[0] == "-m":
        if len(words) < 2:
            raise ProgramError("-m: expected a module name")
        return Program(words[1], words[2:], module=True, unbuffered=unbuffered)
    if not words:
        raise ProgramError("no program: give `-- python SCRIPT [ARGS]` or `-m MODULE [ARGS]`")
    if words[0].startswith("-"):
        raise ProgramError(f"{words[0]}: the program runs inside syncguard's interpreter, so of "
                           f"python's options only -u applies; give `python [-u] SCRIPT` or "
                           f"`python [-u] -m MODULE`")
    return Program(words[0], words[1:], unbuffered=unbuffered)


@contextlib.contextmanager
def _unbuffered(on: bool) -> Iterator[None]:
    """``python -u`` for the block: stdout and stderr write through, as before after."""
    saved = []
    if on:
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure") and hasattr(stream, "write_through"):
                saved.append((stream, stream.write_through))
                stream.reconfigure(write_through=True)
    try:
        yield
    finally:
        for stream, was in saved:
            stream.flush()
            stream.reconfigure(write_through=was)


def check(program: Program) -> None:
    """Raise :class:`ProgramError` when the script or module does not exist."""
    if program.module:
        saved = sys.path[:]
        sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(program.target)
        except (ImportError, ValueError) as exc:
            raise ProgramError(f"-m {program.target}: {exc}") from None
        finally:
            sys.path[:] = saved
        if spec is None:
            raise ProgramError(f"-m {program.target}: no module named {program.target!r}")
    elif not os.path.isfile(program.target):
        raise ProgramError(f"{program.target}: no such file")


def path0(program: Program) -> str:
    """``sys.path[0]`` of a plain run: the script's folder, or the working folder for -m."""
    if program.module:
        return os.getcwd()
    return os.path.dirname(os.path.abspath(program.target))


@contextlib.contextmanager
def program_path(program: Program) -> Iterator[None]:
    """``sys.path`` as the program will see it at start, for a block."""
    saved = sys.path[:]
    sys.path.insert(0, path0(program))
    try:
        yield
    finally:
        sys.path[:] = saved


def run(program: Program, main_names: Sequence[str] = (),
        on_main_bind: Optional[Callable[[types.ModuleType], Any]] = None) -> None:
    """Run ``program`` here. What it raises (``SystemExit`` included) propagates; ``sys.argv``
    and ``sys.path`` are restored afterwards. With ``main_names``, the program's own code is
    compiled so that ``on_main_bind(__main__)`` runs after each of those names is bound
    (:mod:`.mainhook`)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    home = _cwd()
    unbuffered = _unbuffered(program.unbuffered)
    unbuffered.__enter__()
    root = HUB.program_root(sys._getframe())  # the frames outside are exec's, not the user's
    root.__enter__()
    try:
        if main_names and on_main_bind is not None:
            sys.argv = [program.target, *program.args]
            sys.path.insert(0, path0(program))
            run_bound(program.target, program.module, main_names, on_main_bind)
        elif program.module:
            sys.argv = [program.target, *program.args]  # run_module puts the file in argv[0]
            sys.path.insert(0, path0(program))
            runpy.run_module(program.target, run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(program.target)
            sys.argv = [program.target, *program.args]
            sys.path.insert(0, path0(program))
            runpy.run_path(path, run_name="__main__")
    finally:
        root.__exit__(None, None, None)
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path
        unbuffered.__exit__(None, None, None)
        _out_of_a_removed_folder(home)
        _streams_back()


def _streams_back() -> None:
    """``sys.stderr`` and ``sys.stdout`` open again when the program closed them (the report
    and the verdict go after the program): over descriptors 2 and 1 where those are still
    open (closing ``sys.stdout`` leaves them open), else a closed stdout's text goes to
    stderr, and a closed stderr's nowhere."""
    sys.stderr = _open_stream(sys.stderr, 2) or open(os.devnull, "w")
    sys.stdout = _open_stream(sys.stdout, 1) or sys.stderr


def _open_stream(stream: Any, fd: int) -> Any:
    """``stream`` while it is open, else a new text stream over ``fd`` (None when that is
    closed too)."""
    try:
        if stream is not None and not stream.closed:
            return stream
    except (AttributeError, ValueError):  # a stream of the program's own making
        return stream
    try:
        os.fstat(fd)
        return open(fd, "w", encoding=getattr(stream, "encoding", None) or "utf-8",
                    errors="backslashreplace", closefd=False, buffering=1)
    except (OSError, ValueError):
        return None


def _cwd() -> Optional[str]:
    try:
        return os.getcwd()
    except OSError:
        return None


def _out_of_a_removed_folder(home: Optional[str]) -> None:
    """Back to ``home`` (the folder the program started in) when the program removed the
    folder it is in: the reports resolve and show paths from the current folder, which must
    exist. A program that only changed folders stays where it went."""
    if _cwd() is not None:
        return
    for folder in (home, os.sep):
        if folder is None:
            continue
        try:
            os.chdir(folder)
            return
        except OSError:
            pass


def user_traceback(tb: Optional[types.TracebackType]) -> Optional[types.TracebackType]:
    """``tb`` without syncguard's and runpy's frames (the runner, step wrappers,
    interceptors): the traceback a plain run of the program would show."""
    keep: List[types.TracebackType] = []
    while tb is not None:
        f = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not (f.startswith(_PKG_DIR) or f == _RUNPY
                or tb.tb_frame.f_code.co_filename == "<frozen runpy>"):
            keep.append(tb)
        tb = tb.tb_next
    out: Optional[types.TracebackType] = None
    for t in reversed(keep):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def show_exception(exc: BaseException) -> None:
    """Print ``exc`` as Python would for the program (through ``sys.excepthook``)."""
    tb = user_traceback(exc.__traceback__)
    exc = exc.with_traceback(tb)  # the default hook prints the exception's own traceback
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:  # a broken excepthook: fall back to the plain format
        traceback.print_exception(type(exc), exc, tb)
