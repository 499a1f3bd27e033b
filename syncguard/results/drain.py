"""``exec``'s result file written by a second process, the drain.

Writing a finished step's line in the program's own process costs its next step several times
the instructions it takes: after the model's work has left the writer's code, its site table
and the kernel's file path out of the caches, each of them comes back on the program's clock
(about 20 us of a 1 ms decode step, a third of what ``exec`` added, measured in one process
with the writing here and in a drain swapped block by block). So ``exec`` hands each
finished step, as a few numbers, to a drain process through a pipe, and the drain runs the
:class:`~syncguard.results.writer.ResultWriter` that formats and writes the file: the
program's process pays one lookup per read, one ``marshal.dumps`` and one pipe write per
step.

What a run keeps is what it kept before:

- each finished step is in the pipe when the step returns: the operating system's, not the
  program's. Killed with SIGKILL, the program's process drops nothing: the drain reads to the
  end of the pipe and writes every step, then fsyncs and leaves the file without a footer, as
  a killed run's file was. (The drain ignores Ctrl-C and SIGTERM: the program's process stops
  it, by closing the run or by dying.)
- the drain wakes every :data:`POLL_S` to write what came (never woken per step, which would
  cost the program's process a wake-up per step); it fsyncs at most once a second, at the end,
  and when asked (:meth:`DrainWriter.sync`).
- a write error (a full disk) stops the writing there, every line before it kept, and is
  reported by :meth:`DrainWriter.raise_error` after the program, as before; a drain that ended
  early is such an error too.
- the file is claimed (locked) by the run: the drain writes through the same open file, so the
  lock holds until both processes are done with it.

:func:`start` returns None where no drain can be started (no ``fork``/``exec``, a drain that
fails to come up): the caller writes in-process then, as before.

Messages are :mod:`marshal` tuples, one after another with nothing between them: marshal
data says where it ends, so the drain reads them back one by one (a partial one at the end of
what came waits for its rest). Format version 2 (:data:`_MARSHAL`): no table of repeated
objects to build per message. A length prefix and the one-message framing it needs cost the
program's process about 6 us a step, its ``struct`` and concatenation code out of the caches
by then (each timed alone after a cache sweep). A read's site (everything of its event but
its step, count, wait, warm-up flag and lineage) goes once, as a numbered template; each read
after it is ``(site, step, count, wait_us, warmup, lineage)``.
"""

from __future__ import annotations

import io
import itertools
import json
import marshal
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.events import SITE_FIELDS, Frame, Read, ReadSite, Stack, SyncEvent, site_key
from ..process import fds
from .format import ExecStep, StepKey
from .writer import ResultWriter

#: how often the drain looks for new steps (s): at most this long between a step's end and
#: its line in the file (kept in the pipe meanwhile, so a killed program loses nothing)
POLL_S = 0.01
#: how long :func:`start` waits for the drain to come up, and :meth:`DrainWriter.close` for
#: it to write the rest (s)
START_S, CLOSE_S = 30.0, 300.0
#: the marshal format of the messages: 2 has every type they hold (tuples, strings, numbers,
#: None, booleans; floats in binary) and, unlike 3 and 4, builds no table of repeated objects
#: per message
_MARSHAL = 2
_READ = 1 << 16  # bytes the drain reads at a time
_SITE_IDS = 4096  # site objects a writer keeps numbered (then it starts afresh)
_PIPE_SIZE = 1 << 20  # F_SETPIPE_SZ: a loaded machine may leave the drain waiting a while
#: whether :func:`start` starts drains (tests of the in-process writer's own schedule turn
#: it off)
ENABLED = True
#: pipe write ends of the drains this process opened: a child forked by the program closes
#: them, so that only this process's end keeps a drain reading
_OPEN_FDS: List[int] = []


def _close_in_child() -> None:
    for fd in _OPEN_FDS:
        try:
            os.close(fd)
        except OSError:
            pass
    _OPEN_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def _json(obj: Any) -> Optional[str]:
    return None if obj is None else json.dumps(obj, default=str)


class DrainWriter:
    """The result writer of an ``exec`` run whose file a drain process writes: the calls the
    run makes on a :class:`~syncguard.results.writer.ResultWriter` (``exec_step``, ``events``,
    ``note``, ``sync``, ``close``, ``raise_error``), each sent to the drain in
    the order made. Calls come one at a time (the exec session's lock)."""

    def __init__(self, path: str, proc: Any, pipe: int, status: int) -> None:
        self.path = path
        self._proc, self._pipe, self._status = proc, pipe, status
        #: the first write error, the drain's or the pipe's (:meth:`raise_error`)
        self.error: Optional[OSError] = None
        self._sites: Dict[Tuple[Any, ...], int] = {}  # a read's site -> its template's number
        #: the same by site object (:class:`ReadSite`: no key to build per read); bounded,
        #: since sites come and go with the hub's stacks (their numbers stay in _sites)
        self._site_ids: Dict[ReadSite, int] = {}
        self._closed = False
        self._numbers = itertools.count()  # the sites' template numbers
        self.sent = 0  # steps sent (a lost drain's error says how many of them are lost)
        # the program may close or reuse descriptors: each is checked before it is used
        self._own, self._own_status = fds.Own(pipe), fds.Own(status)
        self._probe, self._expected = self._own.probe, self._own.expected

    # -- what the run calls --------------------------------------------------------------
    def exec_step(self, st: ExecStep, events: Sequence[SyncEvent]) -> None:
        """:meth:`ResultWriter.exec_step`, in the drain."""
        self.sent += 1
        self._send(_step_message(st, self._reads(events)))

    def exec_reads(self, st: ExecStep, reads: Sequence[Read]) -> None:
        """:meth:`ResultWriter.exec_reads`, in the drain: no event is made here."""
        out = []
        ids = self._site_ids
        step, warmup = st.step, st.warmup
        for site, w, lin in reads:
            sid = ids.get(site)
            if sid is None:
                if len(ids) >= _SITE_IDS:
                    ids.clear()
                sid = ids[site] = self._sid(site.event)
            out.append((sid, step, site.count, w, warmup, None if lin is None else _json(lin)))
        self.sent += 1
        self._send(_step_message(st, tuple(out)))

    def events(self, scenario: str, path: str, pass_: str, events: List[SyncEvent],
               rank: Optional[int] = None,
               after: Optional[List[Optional[int]]] = None) -> None:
        """:meth:`ResultWriter.events`, in the drain."""
        self._send(("events", scenario, path, pass_, self._reads(events), rank,
                    None if after is None else tuple(after)))

    def note(self, **fields: Any) -> None:
        self._send(("note", _json(fields)))

    def sync(self) -> None:
        """Have the drain write what it has and fsync the file."""
        self._send(("sync",))

    def close(self, complete: bool, **fields: Any) -> None:
        """The footer; then wait for the drain to write everything and to say how it went."""
        if self._closed:
            return
        self._send(("close", complete, _json(fields)))
        self._closed = True
        self._finish()

    def raise_error(self) -> None:
        """The first write error as one line naming the file, as the in-process writer gives
        it, with how many of the steps sent to the drain are not in the file."""
        if self.error is not None and self.sent:
            self.error = OSError(self.error.errno, f"{self.error.strerror}; "
                                                   f"{_lost(self.path, self.sent)}")
            self.sent = 0  # said once
        ResultWriter.raise_error(self)  # type: ignore[arg-type]

    # -- the pipe ------------------------------------------------------------------------
    def _reads(self, events: Sequence[SyncEvent]) -> Tuple[Tuple[Any, ...], ...]:
        out = []
        for ev in events:
            lin = ev.lineage
            out.append((self._sid(ev), ev.step, ev.count, ev.wait_us, ev.warmup,
                        None if lin is None else _json(lin)))
        return tuple(out)

    def _sid(self, ev: SyncEvent) -> int:
        """The number of ``ev``'s site's template, sent to the drain the first time."""
        key = site_key(ev)
        sid = self._sites.get(key)
        if sid is None:
            # numbered (one C call), sent, then known: a signal handler whose read lands in
            # between makes a template of its own, and never names one not yet sent
            sid = next(self._numbers)
            self._send(("site", sid, _site_fields(ev)))
            self._sites[key] = sid
        return sid

    def _send(self, msg: Tuple[Any, ...]) -> None:
        if self.error is not None or self._closed:
            return
        data = marshal.dumps(msg, _MARSHAL)
        try:
            if self._probe() != self._expected:  # the program closed or reused the number
                raise OSError(0, "not the pipe")
            n = os.write(self._pipe, data)
            while n < len(data):  # a pipe takes a large message in parts
                data = data[n:]
                n = os.write(self._pipe, data)
        except OSError as exc:  # the drain is gone: what it wrote is kept, the rest is lost
            if not self._own.ok():  # never written into: the program's now
                self._lose()
                return
            self.error = OSError(exc.errno, f"the process writing it ended early "
                                            f"({exc.strerror})")
            self._finish()

    def _lose(self) -> None:
        """The program closed the pipe's descriptor, or opened another file on its number:
        the run goes on, its file ends at the last step sent (no footer: incomplete)."""
        self.error = OSError(0, f"the program closed or reused syncguard's pipe to the "
                                f"process writing it (descriptor {self._pipe}); the steps "
                                f"after that are not in it")
        self._finish()

    def _finish(self) -> None:
        """Close the pipe, wait for the drain, take its status (its first write error)."""
        if self._pipe in _OPEN_FDS:
            _OPEN_FDS.remove(self._pipe)
        self._own.close()  # only if still ours
        self._closed = True
        try:
            code = self._proc.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        try:
            status = os.read(self._status, 1 << 16) if self._own_status.same() else b""
        except OSError:
            status = b""
        finally:
            self._own_status.close()
        err = _status_error(status, code)
        if err is not None and self.error is None:
            self.error = err


def _lost(path: str, sent: int) -> str:
    """How many of the ``sent`` steps the file at ``path`` lacks (read once, after an
    error)."""
    try:
        with open(path, "rb") as f:
            kept = sum(1 for line in f if line.startswith(b'{"type":"step"'))
    except OSError:
        return f"{sent} steps sent to it"
    return f"{max(0, sent - kept)} of {sent} steps sent to it are not in the file"


def _site_fields(ev: SyncEvent) -> Tuple[Any, ...]:
    """``site_key(ev)`` with plain values (the frames as tuples): a ``site`` message's
    fields, in :data:`SITE_FIELDS`' order (:func:`_template` reads them back)."""
    return tuple(tuple((f.filename, f.lineno, f.function, f.qualname) for f in v)
                 if k == "stack" else v for k, v in zip(SITE_FIELDS, site_key(ev)))


def _template(fields: Tuple[Any, ...]) -> SyncEvent:
    """The event a ``site`` message stands for (step None, count 1)."""
    d = dict(zip(SITE_FIELDS, fields))
    d["stack"] = Stack(Frame(*fr) for fr in d["stack"])
    return SyncEvent.make(**d, step=None, warmup=False, count=1, wait_us=None, lineage=None)


def _step_message(st: ExecStep, reads: Tuple[Tuple[Any, ...], ...]) -> Tuple[Any, ...]:
    """A ``step`` message: ``("step", reads, labels as JSON)``, the step's key and its other
    fields in :class:`ExecStep`'s order (:func:`_step_of` reads it back)."""
    return ("step", reads, _json(st.labels)) + st.key + st[1:-1]


def _step_of(msg: Tuple[Any, ...]) -> Tuple[ExecStep, Tuple[Tuple[Any, ...], ...]]:
    """A ``step`` message (:func:`_step_message`) as the step and its reads."""
    n = 3 + len(StepKey._fields)
    labels = None if msg[2] is None else json.loads(msg[2])
    return ExecStep._make((StepKey._make(msg[3:n]), *msg[n:], labels)), msg[1]


def _status_error(status: bytes, code: int) -> Optional[OSError]:
    """The drain's report: the first write error it met; an error too when it said nothing
    (it crashed, or was killed)."""
    try:
        got = json.loads(status.decode("utf-8").splitlines()[-1])
    except (ValueError, IndexError, UnicodeDecodeError):
        got = None
    if isinstance(got, dict) and got.get("done"):
        e = got.get("error")
        if isinstance(e, list) and len(e) == 2:
            return OSError(e[0], e[1])
        return None
    return OSError(0, f"the process writing it exited with {code} before it finished")


def start(path: str, fd: int, header: Dict[str, Any],
          events_per_site: Optional[int]) -> Optional[DrainWriter]:
    """Start a drain writing ``header`` and then the run's lines to ``fd`` (the claimed
    result file ``path``); None where none can be started (then write in-process)."""
    if not ENABLED or os.name != "posix" or not sys.executable:
        return None
    pipe_r = pipe_w = status_r = status_w = -1
    proc = None
    writer: Optional[DrainWriter] = None
    try:
        pipe_r, pipe_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(pipe_w, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_SIZE)
        except (ImportError, OSError):
            pass  # the default pipe size: the program waits sooner on a slow drain
        pipe_w, status_r = fds.high(pipe_w), fds.high(status_r)  # out of the program's way
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cmd = [sys.executable, "-I", "-c",
               "import sys; sys.path.insert(0, sys.argv[1]); "
               "from syncguard.results.drain import main; main(sys.argv[2:])",
               root, str(pipe_r), str(fd), str(status_w)]
        proc = subprocess.Popen(cmd, pass_fds=(pipe_r, fd, status_w), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True)  # no signal sent to the group
        os.close(pipe_r)
        os.close(status_w)
        pipe_r = status_w = -1
        writer = DrainWriter(path, proc, pipe_w, status_r)
        _OPEN_FDS.append(pipe_w)
        writer._send(("open", path, _json(header), events_per_site))
        ready = _readable(status_r, START_S)
        if not ready or os.read(status_r, 6) != b"ready\n" or writer.error is not None:
            raise OSError("the drain did not start")
        return writer
    except (OSError, ValueError, subprocess.SubprocessError):
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if writer is not None:  # it owns the pipe and the status now: closed once, there
            if not writer._closed:
                writer._finish()
            return None
        if pipe_w in _OPEN_FDS:
            _OPEN_FDS.remove(pipe_w)
        for f in (pipe_r, pipe_w, status_r, status_w):
            if f >= 0:
                try:
                    os.close(f)
                except OSError:
                    pass
        return None


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has something to read within ``timeout`` s (``poll``: the descriptor
    is a high one, past ``select``'s limit of 1024)."""
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(fd, select.POLLIN)
        return bool(p.poll(timeout * 1000))
    return bool(select.select([fd], [], [], timeout)[0])  # pragma: no cover


# -- the drain process ---------------------------------------------------------------------
def main(argv: Sequence[str]) -> None:
    """The drain: read messages from the pipe ``argv[0]``, write the result file ``argv[1]``
    (an inherited descriptor), report on ``argv[2]``."""
    for sig in _ignored():
        signal.signal(sig, signal.SIG_IGN)  # the program's process ends the drain
    pipe, fd, status = (int(a) for a in argv[:3])
    os.set_blocking(pipe, False)
    drain = _Drain(fd, status)
    buf = bytearray()  # consumed in place: no new buffer per read
    eof = False
    while not eof and not drain.closed:
        got = False
        while True:
            try:
                chunk = os.read(pipe, _READ)
            except BlockingIOError:
                break
            if not chunk:
                eof = True
                break
            buf += chunk
            got = True
        if buf:
            del buf[:drain.feed(buf)]
        if not got and not eof and not drain.closed:
            time.sleep(POLL_S)
    drain.end()


#: the signals the drain ignores: every one a program, a terminal, a shell or a job scheduler
#: may send (SLURM's ``--signal=USR1``, a reload's SIGHUP, a timer's SIGALRM); it is in a
#: session of its own besides, away from the program's process group
_IGNORED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
            "SIGVTALRM", "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGXFSZ", "SIGXCPU",
            "SIGPIPE", "SIGIO", "SIGPOLL", "SIGPWR", "SIGWINCH", "SIGURG")


def _ignored() -> List[signal.Signals]:
    return [getattr(signal, n) for n in _IGNORED if hasattr(signal, n)]


class _Drain:
    """The drain's side: a :class:`ResultWriter` fed with the messages."""

    def __init__(self, fd: int, status: int) -> None:
        self.fd, self.status = fd, status
        self.writer: Optional[ResultWriter] = None
        self.templates: Dict[int, SyncEvent] = {}
        self.closed = False

    def feed(self, buf: bytearray) -> int:
        """Act on every whole message at the start of ``buf``; returns how many bytes that
        took."""
        src = io.BytesIO(buf)  # a copy: the buffer is consumed by the caller afterwards
        at = 0
        while not self.closed:
            try:
                msg = marshal.load(src)  # reads one message, exactly its bytes
            except EOFError:  # none, or the start of one: its rest comes later
                break
            at = src.tell()
            self.act(msg)
        return at

    def act(self, msg: Tuple[Any, ...]) -> None:
        op = msg[0]
        if op == "open":
            _, path, header, per_site = msg
            stream = os.fdopen(self.fd, "w", encoding="utf-8")
            self.writer = ResultWriter(path, json.loads(header), stream,
                                       events_per_site=per_site)
            os.write(self.status, b"ready\n")
            return
        w = self.writer
        if w is None:
            return
        if op == "site":
            self.templates[msg[1]] = _template(msg[2])
        elif op == "step":
            st, reads = _step_of(msg)
            w.exec_step(st, self.events(reads))
        elif op == "events":
            _, scenario, path, pass_, reads, rank, after = msg
            w.events(scenario, path, pass_, self.events(reads), rank,
                     None if after is None else list(after))
        elif op == "note":
            w.note(**json.loads(msg[1]))
        elif op == "sync":
            w.sync()
        elif op == "close":
            w.close(msg[1], **json.loads(msg[2]))
            self.closed = True

    def events(self, reads: Sequence[Tuple[Any, ...]]) -> List[SyncEvent]:
        out = []
        for sid, step, count, wait_us, warmup, lineage in reads:
            out.append(self.templates[sid].evolve(
                step=step, count=count, wait_us=wait_us, warmup=warmup,
                lineage=None if lineage is None else json.loads(lineage)))
        return out

    def end(self) -> None:
        """The run is over (closed), or the program's process died (the pipe's end): what
        came is written; fsync'ed; the first write error reported."""
        w = self.writer
        err = None
        if w is not None:
            if not self.closed:
                w.sync()  # no footer: the run did not finish
            err = w.error
        msg = {"done": True, "error": None if err is None else [err.errno, err.strerror]}
        try:
            os.write(self.status, (json.dumps(msg) + "\n").encode("utf-8"))
        except OSError:
            pass
