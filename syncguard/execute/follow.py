"""Every process of the program under the same guard: ``exec`` follows the program's children.

Engines decode in child processes: SGLang's scheduler under a forced ``spawn``, vLLM's
EngineCore and tensor-parallel workers (``fork`` or ``spawn``), ``torch.multiprocessing``
ranks. A gate that sees only the process it started passes on what it did not see. So the
run's settings travel to every Python process the program starts, the way coverage.py's
``patch = subprocess`` does it (facts: ``following-processes.md``):

- **Fresh interpreters** (``spawn`` and ``forkserver`` children, the forkserver itself, a
  ``subprocess``/``os.exec*`` of Python, and their children): the root puts
  :data:`ENV` (the settings, JSON) into the environment and this package's ``_boot`` folder
  in front of ``PYTHONPATH``; its ``sitecustomize`` calls :func:`boot` at interpreter start,
  before any of the program's code, then hands over to the ``sitecustomize`` it shadows.
  :func:`boot` costs an import of this module: the guard itself waits for ``torch``. When
  the child imports ``torch`` (or, on ``sim``, ``torch_npu``: the stand-in, which imports
  torch), the device is set up as in the root (the simulated npu and the ``torch_npu``
  stand-in on ``sim``) and the child's session starts: the guard, the ``--step``/``--loop``
  hooks. A Python child that never imports torch reads no device value and pays nothing
  more.
- **Forked children** (``fork``, a bare ``os.fork``, the forkserver's children) inherit the
  guard and the session: an at-fork hook gives the child a part of its own
  (:meth:`ExecSession.restart`), its open steps the parent's, not its own.

Each process writes its own part, ``OUT/processes/<run>-<pid>.jsonl``, in the result format
with a ``process`` header field (pid, parent, name, target, start method), through its own
drain, from its first step or read on (a process that saw none writes no file). The root's
``result.jsonl`` names the run (``exec.follow``), and :func:`syncguard.results.loader.load`
merges the parts into it as ranks are merged: a scenario per process, ``<program>
[<name> pid N]``. A part is closed at the process's end: a normal exit, ``sys.exit``,
``os._exit`` (how ``fork`` and ``forkserver`` children end), and SIGTERM when the program has
no handler of its own (how pools and executors stop workers); a part with no footer is a
process that was killed or has not ended: the merged run is incomplete for it.

``--no-follow`` turns all of this off (the root alone is guarded, as before).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import secrets
import signal
import sys
import threading
from typing import Any, Dict, Iterator, List, NoReturn, Optional

from ..core import steps as markers
from ..driving.devices import resolve_target
from ..process.atomic import claim, stream_of
from ..results import drain
from ..results.writer import ResultWriter
from .hooks import StepHooks, find_elsewhere, parse_step

#: the run's settings for the processes the program starts (JSON)
ENV = "SYNCGUARD_FOLLOW"
#: the folder, under the run's output folder, of the processes' parts
PARTS = "processes"
#: the folder whose ``sitecustomize`` boots a followed interpreter
BOOT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_boot")
_VERSION = 1


@dataclasses.dataclass
class Settings:
    """What a followed process needs of the run: where to write, the device, the step
    targets and the options of its session, the root's result header."""

    run: str
    out: str
    root: int
    device: str
    exhaustive: bool
    steps: List[List[str]]  # [spec, flag, module]
    warmup: int
    allow: List[List[str]]
    lineage: bool
    events_per_site: Optional[int]
    rank: Optional[int]
    program: str
    header: Dict[str, Any]

    def to_env(self) -> str:
        return json.dumps({"v": _VERSION, **dataclasses.asdict(self)}, default=str)

    @classmethod
    def from_env(cls, text: str) -> Settings:
        d = json.loads(text)
        if not isinstance(d, dict) or d.pop("v", None) != _VERSION:
            raise ValueError("another syncguard version's settings")
        return cls(**d)


def part_name(run: str, pid: int) -> str:
    """The file name of process ``pid``'s part of run ``run``."""
    return f"{run}-{pid}.jsonl"


def new_run_id() -> str:
    return secrets.token_hex(6)


# -- the root ---------------------------------------------------------------------------------
@contextlib.contextmanager
def following(settings: Settings) -> Iterator[None]:
    """While the program runs: every Python process it starts is guarded too (the settings
    in the environment, the boot folder in front of ``PYTHONPATH``), and a forked child of
    this process gets a part of its own. The environment is as it was after the block."""
    saved = {k: os.environ.get(k) for k in (ENV, "PYTHONPATH")}
    os.environ[ENV] = settings.to_env()
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = BOOT_DIR + (os.pathsep + path if path else "")
    global _SETTINGS
    prev, _SETTINGS = _SETTINGS, settings
    try:
        yield
    finally:
        _SETTINGS = prev
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- a followed process -----------------------------------------------------------------------
#: the run's settings in this process (the root's while it runs the program; a child's own)
_SETTINGS: Optional[Settings] = None
#: this process's part, in a followed child
_CHILD: Optional[_Part] = None
#: the session of this process (the root's or a child's): a forked child restarts it
_SESSION: Any = None


def is_child() -> bool:
    """Whether this process is a followed child with a part of its own (its session's
    results are its part's, never the root's reports)."""
    return _CHILD is not None and _CHILD.pid == os.getpid()


def set_session(session: Any) -> None:
    """The session of this process (the root's): a forked child restarts it."""
    global _SESSION
    _SESSION = session


def _label() -> Dict[str, Any]:
    """Who this process is, for the merged reports: its pid and parent, its multiprocessing
    name and target function, or its command line."""
    info: Dict[str, Any] = {"pid": os.getpid(), "ppid": os.getppid()}
    mp = sys.modules.get("multiprocessing")
    proc = None
    if mp is not None:
        with contextlib.suppress(Exception):
            proc = mp.current_process()
    if proc is not None and proc.name != "MainProcess":
        info["name"] = str(proc.name)
        target = getattr(proc, "_target", None)
        fn = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
        args = getattr(proc, "_args", ())
        # torch.multiprocessing runs the user's function through its own _wrap(fn, i, ...)
        if fn == "_wrap" and args and callable(args[0]):
            fn = getattr(args[0], "__qualname__", None)
            if len(args) > 1 and isinstance(args[1], int):
                info["index"] = args[1]
        if fn:
            info["target"] = str(fn)
        with contextlib.suppress(Exception):
            info["start"] = mp.get_start_method(allow_none=True)  # type: ignore[union-attr]
    else:
        argv = [a for a in sys.argv if a]
        info["name"] = os.path.basename(argv[0]) if argv else "python"
        info["argv"] = [str(a)[:200] for a in sys.argv[:8]]
    return info


class _Part:
    """This process's part of the run: its writer, opened at the first step or read, and
    closed once at the process's end."""

    def __init__(self, settings: Settings, session: Any) -> None:
        self.settings, self.session = settings, session
        self.pid = os.getpid()
        self.writer: Any = None
        self.done = False
        self._lock = threading.RLock()

    def open(self) -> Any:
        """The writer of this part, started now (header first)."""
        s = self.settings
        path = os.path.join(s.out, PARTS, part_name(s.run, self.pid))
        header = dict(s.header)
        ex = dict(header.get("exec") or {})
        ex.pop("follow", None)
        header["exec"] = ex
        header["process"] = {**_label(), "run": s.run, "root": s.root}
        fd = claim(path, True)
        w: Any = drain.start(path, fd, header, s.events_per_site)
        if w is None:
            w = ResultWriter(path, header, stream_of(fd), events_per_site=s.events_per_site)
        else:
            os.close(fd)  # the drain has its own copy
        self.writer = w
        return w

    def finish(self, reason: Optional[str] = None, killed: bool = False) -> None:
        """Close the part: the session's last records, then the footer. ``killed``: ended by
        a signal; complete only when no step was open then."""
        with self._lock:
            if self.done or self.pid != os.getpid():
                return
            self.done = True

        session = self.session
        with contextlib.suppress(Exception):
            session.guard.__exit__(None, None, None)
        open_steps = bool(session._steps)
        complete = not (killed and open_steps)
        markers.set_recorder(None)
        try:
            session.finish(complete=complete)
        except Exception:  # the process is ending: what was written stays
            complete = False
        w = self.writer
        if w is None:
            return  # no step and no read: no part
        fields: Dict[str, Any] = {"device_used": process_used_device(session)}
        if reason:
            fields["reason"] = reason
        with contextlib.suppress(Exception):
            w.close(complete, **fields)


class _LazyWriter:
    """The writer of a part that has not written yet: the first record opens the part
    (:meth:`_Part.open`) and replaces this in the session."""

    def __init__(self, part: _Part) -> None:
        self._part = part

    def _real(self) -> Any:
        w = self._part.writer or self._part.open()
        self._part.session.writer = w
        return w

    def exec_reads(self, st: Any, reads: Any) -> None:
        self._real().exec_reads(st, reads)

    def events(self, *args: Any, **kwargs: Any) -> None:
        self._real().events(*args, **kwargs)

    def note(self, **fields: Any) -> None:
        self._real().note(**fields)

    def sync(self) -> None:
        pass

    def close(self, complete: bool, **fields: Any) -> None:
        pass

    def raise_error(self) -> None:
        pass


def process_used_device(session: Any) -> bool:
    """Whether this process put anything on the run's device (call after
    ``session.finish``): it read a device tensor (a hidden sync), ops ran on the simulated
    npu, or memory was allocated on the GPU or NPU (a device whose memory statistics say 0
    still counts by its reads). On ``cpu`` host tensors are the device."""
    kind = session.target.kind
    if kind == "cpu" or session.outside.hidden or any(
            t.syncs for t in session.totals.values()):
        return True
    try:
        if kind == "sim":
            from ..sim import kernel as simdev  # torch: a sim run's device only

            return bool(simdev.USED)
        import torch

        return bool(getattr(torch, kind).max_memory_allocated() > 0)
    except Exception:
        return True  # cannot tell: no claim that it stayed on the host


def forget_device_use(target: Any) -> None:
    """Start the evidence of :func:`process_used_device` afresh (syncguard's own set-up and
    self-test ran ops on the device)."""
    try:
        if target.kind == "sim":
            from ..sim import kernel as simdev  # torch: a sim run's device only

            simdev.USED = False
        elif target.kind != "cpu":
            import torch

            getattr(torch, target.kind).reset_peak_memory_stats()
    except Exception:
        pass


def _start_child(settings: Settings) -> None:
    """This followed interpreter imported torch: set the device up and start its session."""
    global _CHILD, _SETTINGS
    from .session import ExecSession  # torch (the guard): after the environment is set

    target = resolve_target(settings.device, gpu=True, exhaustive=settings.exhaustive)
    targets = []
    for spec, flag, module in settings.steps:
        t = parse_step(spec, flag)
        t.module = module  # the program's own code is __main__ (the root decided)
        targets.append(t)
    hooks = StepHooks(targets)
    writer: Any = None  # the part's: set below
    session = ExecSession(settings.program, writer, target, warmup=settings.warmup,
                          allow_sites=[(a, b) for a, b in settings.allow],
                          rank=settings.rank,
                          devices=("cpu",) if target.kind == "cpu" else ())
    session.record_empty = False
    part = _Part(settings, session)
    session.writer = _LazyWriter(part)  # type: ignore[assignment]
    _SETTINGS, _CHILD = settings, part
    set_session(session)
    if settings.lineage:
        from ..driving.lineage import tracking  # torch: only a lineage run loads it

        tracking(target, True).__enter__()
    session.__enter__()
    hooks.install()
    if hooks.pending().get("__main__"):
        _main_ready_at_bootstrap(hooks)
    markers.set_recorder(session)
    _install_exit_hooks()
    install_fork_hook()
    forget_device_use(target)


def _main_ready_at_bootstrap(hooks: Any) -> None:
    """``--step`` on the program's own functions in a spawn child: its main module runs again
    there as ``__mp_main__`` (by ``runpy``, no import a hook sees). Its targets are wrapped
    when the child's process starts its target (``BaseProcess._bootstrap``), the target itself
    included when it is one of them."""
    from multiprocessing import process

    orig = process.BaseProcess._bootstrap  # type: ignore[attr-defined]

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        process.BaseProcess._bootstrap = orig  # type: ignore[attr-defined]
        main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
        if main is not None:
            before = dict(vars(main))
            with contextlib.suppress(Exception):
                hooks.main_ready(main)
            target = getattr(self, "_target", None)
            for name, value in before.items():
                new = vars(main).get(name)
                if new is value:
                    continue
                # runpy ran the code in a dict of its own and copied it into the module: the
                # functions look their names up there
                glob = getattr(value, "__globals__", None)
                if isinstance(glob, dict) and glob is not vars(main) and glob.get(name) is value:
                    glob[name] = new
                if target is value:
                    self._target = new
        return orig(self, *args, **kwargs)

    process.BaseProcess._bootstrap = _bootstrap  # type: ignore[attr-defined]


def _on_torch(settings: Settings) -> None:
    try:
        _start_child(settings)
    except Exception as exc:  # never break the program: it runs unguarded, said once
        print(f"syncguard: warning: process {os.getpid()} is not guarded: "
              f"{type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)


class _TorchFinder:
    """A ``sys.meta_path`` finder that finds nothing itself: when ``torch`` is imported it
    has torch's loader call :func:`_on_torch` once its body ran; on ``sim``, ``import
    torch_npu`` (before torch) imports torch first, whose hook installs the stand-in."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if self._busy or fullname not in ("torch", "torch_npu"):
            return None
        if fullname == "torch_npu":
            if self.settings.device != "sim" or "torch" in sys.modules:
                return None
            import importlib.util

            import torch  # noqa: F401  (its hook installs the stand-in in sys.modules)

            mod = sys.modules.get("torch_npu")
            if mod is None:
                return None
            return importlib.util.spec_from_loader(
                "torch_npu", _Existing(mod))  # type: ignore[arg-type]

        self._busy = True
        try:
            spec = find_elsewhere(self, fullname, path, target)
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        orig = loader.exec_module
        settings, me = self.settings, self

        def exec_module(module: Any) -> None:
            try:
                orig(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(me)
            _on_torch(settings)

        loader.exec_module = exec_module
        return spec


class _Existing:
    """The loader of a module that exists already (the ``torch_npu`` stand-in, made while
    its import was being looked for)."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod

    def create_module(self, spec: Any) -> Any:
        return self.mod

    def exec_module(self, module: Any) -> None:
        pass


def boot() -> None:
    """At a followed interpreter's start (``_boot/sitecustomize.py``): wait for torch."""
    text = os.environ.get(ENV)
    if not text:
        return
    try:
        settings = Settings.from_env(text)
    except (ValueError, TypeError) as exc:
        print(f"syncguard: warning: {ENV} is not this syncguard's ({exc}); process "
              f"{os.getpid()} is not guarded", file=sys.stderr)
        return
    if settings.root == os.getpid():
        return
    with contextlib.suppress(ValueError):  # the program's own sys.path as a plain run has it
        sys.path.remove(BOOT_DIR)
    if "torch" in sys.modules:
        _on_torch(settings)
    else:
        sys.meta_path.insert(0, _TorchFinder(settings))


def leave() -> None:
    """This process runs a syncguard command of its own (a program that runs ``syncguard``):
    it is not guarded as a child of another run, and what it starts is its own run's."""
    for f in [f for f in sys.meta_path if isinstance(f, _TorchFinder)]:
        sys.meta_path.remove(f)
    if os.environ.pop(ENV, None) is not None:
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p and os.path.abspath(p) != BOOT_DIR]
        if parts:
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            os.environ.pop("PYTHONPATH", None)


# -- the end of a followed process -----------------------------------------------------------
_EXIT_HOOKS = False
_REAL_EXIT = os._exit


def _finish_child(reason: Optional[str] = None, killed: bool = False) -> None:
    part = _CHILD
    if part is not None and part.pid == os.getpid():
        part.finish(reason, killed)


def _exit(status: int) -> NoReturn:  # os._exit: how fork and forkserver children end
    with contextlib.suppress(BaseException):
        _finish_child()
    _REAL_EXIT(status)


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM in a child without a handler of its own (a pool's or executor's worker
    stopped): the part closed (complete when no step was open), then the default action."""
    with contextlib.suppress(BaseException):
        _finish_child(reason="ended by SIGTERM", killed=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_exit_hooks() -> None:
    """A part closes at its process's end: a normal exit, ``os._exit``, SIGTERM."""
    atexit.register(_finish_child)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
    _install_os_exit()


def _after_fork() -> None:
    """In a forked child of a followed process (the root or a child): a part of its own."""
    global _CHILD
    settings, session = _SETTINGS, _SESSION
    if settings is None or session is None or getattr(session, "pid", None) == os.getpid():
        return

    part = _Part(settings, session)
    session.record_empty = False
    session.restart(_LazyWriter(part))
    _CHILD = part
    markers.set_recorder(session)  # the steps open at the fork were the parent's
    _install_exit_hooks()


def install_fork_hook() -> None:
    """Give forked children of this process parts of their own (once per process)."""
    global _FORK_HOOK
    if not _FORK_HOOK and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
        _FORK_HOOK = True
    _install_os_exit()


_FORK_HOOK = False


def _install_os_exit() -> None:
    """``os._exit`` closes this process's part first (once per process; a forked child
    inherits it)."""
    global _EXIT_HOOKS
    if not _EXIT_HOOKS:
        _EXIT_HOOKS = True
        os._exit = _exit
