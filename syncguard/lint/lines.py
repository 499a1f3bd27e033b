"""Record which candidate lines of the lint a run executed, cheaply.

Only code objects of candidate files are watched, and only candidate lines are kept. On
Python 3.12+ :mod:`sys.monitoring`: a ``PY_START`` event turns on ``LINE`` events for the code
objects of candidate files (and is then disabled for every code object), and each ``LINE``
event disables itself after its first hit, so a line costs one callback per run. On older
Pythons a :func:`sys.settrace` tracer (and :func:`threading.settrace` for new threads) that
returns a local tracer only for frames of candidate files: the cost there is one Python call
per function call, so record lines on test runs, not on timed runs.
"""

from __future__ import annotations

import os
import sys
import threading
from types import CodeType, FrameType
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from ..errors import UsageError
from . import candidates

#: sys.monitoring tool ids to try (the coverage/profiler ids are left to those tools)
_TOOL_IDS = (4, 3, 5)


class LineRecorder:
    """``with LineRecorder({abs_path: [lines]}) as rec: ...`` then ``rec.executed``:
    ``{abs_path: sorted lines that ran}``. One per process at a time."""

    def __init__(self, candidates: Dict[str, List[int]]) -> None:
        self.candidates: Dict[str, Set[int]] = {
            os.path.realpath(f): set(lines) for f, lines in candidates.items()}
        self._hits: Dict[str, Set[int]] = {f: set() for f in self.candidates}
        self._by_name: Dict[str, Optional[str]] = {}  # co_filename -> candidate real path
        self._tool: Optional[int] = None
        self._prev_trace: Any = None
        self._prev_thread_trace: Any = None
        self.mechanism = ""

    @property
    def executed(self) -> Dict[str, List[int]]:
        return {f: sorted(s) for f, s in self._hits.items() if s}

    def _file(self, co_filename: str) -> Optional[str]:
        try:
            return self._by_name[co_filename]
        except KeyError:
            real = os.path.realpath(co_filename) if not co_filename.startswith("<") else ""
            got = real if real in self.candidates else None
            self._by_name[co_filename] = got
            return got

    # -- 3.12+: sys.monitoring ---------------------------------------------------------
    def _start_monitoring(self) -> bool:
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            return False
        for tid in _TOOL_IDS:
            try:
                mon.use_tool_id(tid, "syncguard-lint-lines")
            except ValueError:
                continue
            self._tool = tid
            break
        else:
            return False
        ev = mon.events
        disable = mon.DISABLE

        def on_start(code: CodeType, offset: int) -> Any:
            f = self._file(code.co_filename)
            if f is not None:
                mon.set_local_events(self._tool, code, ev.LINE)
            return disable

        def on_line(code: CodeType, line: int) -> Any:
            f = self._file(code.co_filename)
            if f is not None and line in self.candidates[f]:
                self._hits[f].add(line)
            return disable

        # events an earlier recorder disabled (DISABLE outlives the tool id) come back
        mon.restart_events()
        mon.register_callback(self._tool, ev.PY_START, on_start)
        mon.register_callback(self._tool, ev.LINE, on_line)
        mon.set_events(self._tool, ev.PY_START)
        self.mechanism = "sys.monitoring"
        return True

    def _stop_monitoring(self) -> None:
        mon = sys.monitoring  # type: ignore[attr-defined]
        tid = self._tool
        mon.set_events(tid, 0)
        mon.register_callback(tid, mon.events.PY_START, None)
        mon.register_callback(tid, mon.events.LINE, None)
        if hasattr(mon, "clear_tool_id"):  # 3.13+: drops the local events set on code
            mon.clear_tool_id(tid)
        mon.free_tool_id(tid)
        self._tool = None

    # -- fallback: settrace -------------------------------------------------------------
    def _code_lines(self, code: CodeType) -> Optional[Set[int]]:
        """The candidate lines inside ``code`` (None when it holds none: no local tracer)."""
        f = self._file(code.co_filename)
        if f is None:
            return None
        if hasattr(code, "co_lines"):
            own = {ln for _, _, ln in code.co_lines() if ln is not None}
        else:  # pragma: no cover - 3.9
            import dis

            own = {ln for _, ln in dis.findlinestarts(code)}
        mine = own & self.candidates[f]
        return mine or None

    def _tracer(self) -> Callable[[FrameType, str, Any], Any]:
        hits = self._hits
        by_code: Dict[CodeType, Optional[Set[int]]] = {}
        code_lines = self._code_lines
        file_of = self._file

        def global_trace(frame: FrameType, event: str, arg: Any) -> Any:
            code = frame.f_code
            try:
                lines = by_code[code]
            except KeyError:
                lines = by_code[code] = code_lines(code)
            if lines is None:
                return None
            got = hits[file_of(code.co_filename)]  # type: ignore[index]

            def local(frame: FrameType, event: str, arg: Any) -> Any:
                if event == "line":
                    ln = frame.f_lineno
                    if ln in lines:
                        got.add(ln)
                return local

            return local

        return global_trace

    def __enter__(self) -> LineRecorder:
        if not self.candidates:
            return self
        if sys.version_info >= (3, 12) and self._start_monitoring():
            return self
        tracer = self._tracer()
        self._prev_trace = sys.gettrace()
        self._prev_thread_trace = getattr(threading, "gettrace", lambda: None)()
        sys.settrace(tracer)
        threading.settrace(tracer)
        self.mechanism = "sys.settrace"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.mechanism == "sys.monitoring":
            self._stop_monitoring()
        elif self.mechanism == "sys.settrace":
            sys.settrace(self._prev_trace)
            threading.settrace(self._prev_thread_trace)

    def note(self) -> Dict[str, Any]:
        """The result note ``syncguard lint --with-run`` reads (:mod:`.runs`)."""
        n_c = sum(len(v) for v in self.candidates.values())
        n_e = sum(len(v) for v in self._hits.values())
        return {"kind": "lines",
                "message": f"recorded lines for syncguard lint --with-run: {n_e} of {n_c} "
                           f"candidate lines in {len(self.candidates)} files ran "
                           f"({self.mechanism or 'nothing to record'})",
                "mechanism": self.mechanism,
                "candidates": {f: sorted(v) for f, v in self.candidates.items()},
                "executed": self.executed}


def check_paths(paths: Sequence[str]) -> None:
    """``--record-lines`` of ``run`` and ``exec``: each path exists (one usage error, before
    anything runs)."""
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"--record-lines {p}: no such file or folder")


def recorder_for(paths: List[str]) -> Optional[LineRecorder]:
    """The recorder of the lint's candidate lines under ``paths`` (``run --record-lines``);
    None without paths."""
    if not paths:
        return None
    check_paths(paths)
    return LineRecorder(candidates(paths))
