"""Process-global delivery of sync events to the active guards.

One object owns the global state: the stack of active guards, everything that affects
classification (the device types counted as device-resident, the op sync models the active
guards ask for, the registered backends), the per-thread "an API call already reported"
depth, the ``allow()`` context and attribution to user code.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
import runpy
import site
import sys
import sysconfig
import threading
from types import FrameType
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Tuple,
    Union,
)

from .._paths import pkg_path
from ..standin import is_standin
from .events import Frame, HostSyncError, ReadSite, Stack, SyncEvent

log = logging.getLogger("syncguard")


class SyncGuard(Protocol):
    """What the hub asks of an active guard (:class:`syncguard.core.guard.SyncGuard`, which
    sits above the hub and registers itself: so the hub names no guard class)."""

    on_sync: str
    devices: FrozenSet[str]
    #: ``(pattern, reason)`` of the call sites it allows
    allow_sites_of: List[Tuple[str, str]]
    model: Optional[str]
    stack_depth: int
    #: the guard's raised errors that the code under it caught (each guard learns of them)
    swallowed: List[Any]
    #: the lean form of its events, when it takes them so (``exec``'s guard)
    on_read: Optional[Callable[[ReadSite, Optional[float]], None]]

    @property
    def stale(self) -> bool: ...
    def _abandon(self) -> None: ...
    def accepts(self, device: Optional[str]) -> bool: ...
    def site_allowed(self, stack: Tuple[Frame, ...]) -> Optional[str]: ...
    def current_step(self) -> Tuple[Optional[int], bool]: ...
    def _record(self, ev: SyncEvent) -> None: ...
    def _read(self, site: ReadSite, wait_us: Optional[float]) -> None: ...
    def _raised_error(self, ev: SyncEvent, err: HostSyncError) -> None: ...


#: syncguard's own machinery, never "the user's line" (files, and folders ending in a
#: separator); the subjects it drives (the case study in sglang_ascend_sampling, a user's
#: sampler) are. Every frame walk of syncguard's skips these.
INTERNAL_DIRS = tuple(
    pkg_path(*p.split("/")) for p in ("core/hub.py", "core/intercept.py", "core/classify.py",
                                     "core/aten.py", "core/guard.py",
                                     "core/opmodel.py", "core/selftest.py", "sim/",
                                     "core/lineage.py",
                                     "pytest_plugin/", "core/steps.py", "execute/")
)

# The standard library (minus the site-packages folders that may live under it).
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE = tuple(sorted({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                      if k in ("purelib", "platlib")} | {os.path.abspath(p) + os.sep
                                                         for p in site.getsitepackages()}))

_current_thread = threading.current_thread
_get_ident = threading.get_ident
#: the threading module's live threads by ident (what ``current_thread()`` looks up)
_threads: Dict[int, threading.Thread] = getattr(threading, "_active", {})
#: device types that are the host's: a guard counts their reads only when it names them
HOST_DEVICES = ("cpu", "meta")

_allow_reason: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "syncguard_allow", default=None
)


_UNKNOWN = Frame("<unknown>", 0, "<unknown>")
#: runpy's file where it is not frozen (Python 3.9, 3.10): its frames launch the program
_RUNPY = os.path.splitext(os.path.abspath(runpy.__file__))[0] + ".py"

# Syncs that read no device value (an upload, a wait): no lineage to give.
_NO_LINEAGE = frozenset({"h2d_copy", "explicit_sync"})


class _ThreadState(threading.local):
    def __init__(self) -> None:
        # > 0 while an intercepted call that already reported (or syncguard itself) runs.
        self.busy = 0
        # (args, hit) of the last op a backend's kernel classified on this thread (hit None:
        # not a sync), so an observer of the same call need not classify it again
        self.last_hit: Optional[Tuple[Any, Any]] = None


class Backend(NamedTuple):
    """A device backend syncguard itself provides (the simulated device): its device type
    ``name``, the Python class of its tensors and the op sync model (``"npu"``) it follows."""

    name: str
    tensor_type: type
    model: str


#: Per-guard counts of an in-kernel read that depends on the guard's op sync model
#: (``devices=("cpu",)`` with ``model=``): model name -> (reads, source).
ByModel = Dict[str, Tuple[int, str]]


#: the deepest calling stack :meth:`Hub.user_stack` keeps its answer for (deeper: walked)
_CHAIN_MAX = 96
_KEY_MAX = 1 + 2 * _CHAIN_MAX  # its key: depth, and per frame its code's id and instruction

# -- compiled code -------------------------------------------------------------------------
# torch.compile runs generated code: FX graph modules (``<eval_with_key>.N``: Dynamo's graph
# under backend="eager", AOT autograd's under "aot_eager") and inductor's output modules (in
# its cache directory). Each generated line comes from graph nodes that remember the user's
# stack where they were traced (``node.meta["stack_trace"]``); a sync there is blamed on
# those lines. Dynamo's continuation after a graph break is a function named
# ``torch_dynamo_resume_in_<function>_at_<line>`` in the user's file: named as its function.
_RESUME = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_\d+$")
_TRACE_LINE = re.compile(r'File "(.+)", line (\d+), in (.+)')
_mapped: Dict[Tuple[str, int], Tuple[Frame, ...]] = {}


def _user_name(code: Any) -> Tuple[str, str]:
    """``(function, qualname)`` of a code object as a report names it (qualname empty when
    the same; Python 3.11+)."""
    name = code.co_name
    q = getattr(code, "co_qualname", "")
    m = _RESUME.match(name)
    if m is not None:
        return m.group(1), ""
    return name, (q if q != name else "")


def _trace_frames(stack_trace: Optional[str]) -> Tuple[Frame, ...]:
    """The frames of a node's recorded stack (a formatted traceback, outermost first), innermost
    first."""
    if not stack_trace:
        return ()
    out = [Frame(fn, int(line), name.strip()) for fn, line, name in
           _TRACE_LINE.findall(stack_trace)]
    return tuple(reversed(out))


def _fx_node_trace(f: FrameType) -> Optional[str]:
    gm = f.f_locals.get("self")
    lineno_map = getattr(gm, "_lineno_map", None)
    graph = getattr(gm, "graph", None)
    if not isinstance(lineno_map, dict) or graph is None:
        return None
    idx = lineno_map.get(f.f_lineno - int(getattr(gm, "_prologue_start", 0) or 0))
    if idx is None:
        return None
    for i, node in enumerate(graph.nodes):
        if i == idx:
            meta = getattr(node, "meta", None)
            trace = meta.get("stack_trace") if isinstance(meta, dict) else None
            return trace if isinstance(trace, str) else None
    return None


def _inductor_trace(filename: str, lineno: int) -> Optional[Tuple[Frame, ...]]:
    cc = sys.modules.get("torch._inductor.codecache")
    cache = getattr(cc, "PyCodeCache", None)
    linemaps = getattr(cache, "linemaps", None)
    if not isinstance(linemaps, dict) or filename not in linemaps:
        return None
    try:
        found = cache.stack_frames_for_code(filename, lineno)  # type: ignore[union-attr]
    except Exception:  # a changed private API: the line is still generated code
        found = None
    return tuple(Frame(str(d["filename"]), int(d["line"]), str(d["name"]))
                 for d in found or ())


def compiled_source(f: FrameType) -> Optional[Tuple[Frame, ...]]:
    """For a frame of code torch.compile generated: the user's frames its current line was
    traced from (innermost first; empty when the line has none, e.g. a node a compiler pass
    made). None for any other frame."""
    filename = f.f_code.co_filename
    if not filename.startswith("<eval_with_key>"):
        cc = sys.modules.get("torch._inductor.codecache")
        if cc is None or filename.startswith("<"):
            return None
    key = (filename, f.f_lineno)
    got = _mapped.get(key)
    if got is not None:
        return got
    if filename.startswith("<eval_with_key>"):
        got = _trace_frames(_fx_node_trace(f))
    else:
        ind = _inductor_trace(filename, f.f_lineno)
        if ind is None:
            return None
        got = ind
    if len(_mapped) < 4096:  # generated lines are few; a bound all the same
        _mapped[key] = got
    return got


class Hub:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.guards: List[SyncGuard] = []
        #: True when some active guard raises on a sync (the call must not run first):
        #: worked out when the guards change, read on every read (a plain attribute: a
        #: property is a Python call each time)
        self.raising = False
        #: the only active guard when it merely counts (``exec``'s, a plain test's): its
        #: events are made without the general loop's bookkeeping (raising, logging, per-model
        #: counts)
        self._solo: Optional[SyncGuard] = None
        self._depth = 8  # the deepest stack an active guard keeps: likewise
        self.tls = _ThreadState()
        self._skip_cache: Dict[str, bool] = {}
        self._soft_cache: Dict[str, bool] = {}
        #: by id: hashing a code object hashes its bytecode and constants, every time
        self._info_cache: Dict[int, Tuple[Any, Tuple[bool, bool, str, str, bool]]] = {}
        #: (id of code, last instruction) -> (code, the Frame it reports): a call site's
        #: frame, the same every step
        self._frame_cache: Dict[Tuple[int, int], Tuple[Any, Frame]] = {}
        #: a whole calling stack (each frame's code and last instruction) -> (its codes, the
        #: user stack it gives, the read sites made from it): a loop's read comes from the
        #: same stack every step
        self._chain_cache: Dict[Tuple[Any, ...], Tuple[Tuple[Any, ...], Tuple[Frame, ...],
                                                       Dict[Tuple[Any, ...], ReadSite]]] = {}
        #: the frame that runs the program (``exec``'s runner), while it runs: the frames
        #: outside it are syncguard's launcher, never the user's, and a stack walk ends there
        self.root: Optional[FrameType] = None
        #: where a stack walk ends: :attr:`root`, or once a walk has reached it, the innermost
        #: of the launcher's frames inside it (runpy's ``run_path`` and the two it calls,
        #: exec's own): they run the program's ``<module>``, never the user's, and are the
        #: same for every read (walked on every read otherwise: a fifth of the bytecodes a
        #: loop's read runs in syncguard)
        self._end: Optional[FrameType] = None
        self._end_found = False
        self._skip_prefixes: Tuple[str, ...] = self._compute_skip_prefixes()
        self._reporting: Tuple[str, ...] = ()
        # Classification state, recomputed from the active guards as they enter and leave:
        # device types that count as device-resident besides every non-CPU one, and the op
        # sync models guards asked for (for device types without a model of their own).
        self.extra_devices: frozenset[str] = frozenset()
        self.models: frozenset[str] = frozenset()
        # Backends registered by syncguard.sim (process-lifetime, like their setup).
        self.backends: Dict[str, Backend] = {}
        # Tensors seen by classifiers (CPU ones not counted, device ones): a guard that saw
        # only the first warns once. Racy increments are fine: only "none" vs "some" matters.
        self.seen_cpu = 0
        self.seen_dev = 0
        self.warned_no_device = False
        # The lineage of a read value (syncguard.core.lineage), while a tracker is on: called
        # with the read call's arguments, returns the summary an event carries.
        self.lineage: Any = None  # Callable[[Any], Optional[Dict[str, Any]]], or None

    @staticmethod
    def _compute_skip_prefixes() -> Tuple[str, ...]:
        prefixes: List[str] = list(INTERNAL_DIRS)
        for mod in ("torch", "torch_npu"):
            m = sys.modules.get(mod)
            f = getattr(m, "__file__", None) if m is not None else None
            if f and not is_standin(m):
                prefixes.append(os.path.dirname(os.path.abspath(f)) + os.sep)
        return tuple(prefixes)

    def tensors_seen(self) -> Tuple[int, int]:
        return self.seen_cpu, self.seen_dev

    @property
    def active(self) -> bool:
        return bool(self.guards)

    # -- guard registry ---------------------------------------------------------------
    def push(self, guard: SyncGuard) -> None:
        with self.lock:
            if guard not in self.guards:  # listed once, whatever the caller does
                self.guards = [*self.guards, guard]
            self._refresh()

    def heal(self) -> List[SyncGuard]:
        """Take down every stale guard (:attr:`SyncGuard.stale`: its ``with`` block was left
        without its exit, e.g. a Ctrl-C as ``__exit__`` began), so that the patches it holds
        go and a guard entered or exited now counts alone. Called by each guard's entry and
        exit; returns the guards taken down."""
        with self.lock:
            stale = [g for g in self.guards if g.stale]
        for g in stale:
            g._abandon()
        if stale:
            log.warning("syncguard: took down %d guard(s) whose block was left without their "
                        "exit (interrupted); torch is restored when no guard is active",
                        len(stale))
        return stale

    def remove(self, guard: SyncGuard) -> None:
        with self.lock:
            if guard in self.guards:
                self.guards = [g for g in self.guards if g is not guard]
            self._refresh()

    def _refresh(self) -> None:
        devs: set = set()
        models: set = set()
        for g in self.guards:
            devs.update(g.devices)
            if g.model is not None:
                models.add(g.model)
        self.extra_devices = frozenset(devs)
        self.models = frozenset(models)
        self._skip_prefixes = self._compute_skip_prefixes()
        self.raising = any(g.on_sync == "raise" for g in self.guards)
        solo = self.guards[0] if len(self.guards) == 1 else None
        self._solo = solo if solo is not None and solo.on_sync == "count" else None
        # the deepest stack a guard keeps (a guard's stack_depth is fixed when it is made)
        self._depth = max((g.stack_depth for g in self.guards), default=8)
        self._reporting = _reporting_prefixes()
        self._skip_cache.clear()
        self._info_cache.clear()  # built on _skip
        self._frame_cache.clear()
        self._chain_cache.clear()

    def register_backend(self, backend: Backend) -> None:
        with self.lock:
            self.backends = {**self.backends, backend.name: backend}

    @property
    def classification_state(self) -> Dict[str, object]:
        """What the active guards make the classifiers use (empty when no guard is active)."""
        return {"guards": list(self.guards), "devices": set(self.extra_devices),
                "models": set(self.models)}

    def is_device_type(self, device_type: str) -> bool:
        return device_type not in HOST_DEVICES or device_type in self.extra_devices

    # -- attribution ------------------------------------------------------------------
    def skip(self, filename: str) -> bool:
        s = self._skip_cache.get(filename)
        if s is None:
            a = os.path.abspath(filename) if not filename.startswith("<") else filename
            s = a.startswith(self._skip_prefixes) or filename.startswith("<frozen")
            self._skip_cache[filename] = s
        return s

    def _soft(self, filename: str) -> bool:
        """Frames that are code but rarely the line to blame: the standard library (logging,
        pprint, copy, pickle, threading...) and generated code (``<string>``: a dataclass's
        ``__repr__``). Dropped when a user frame lies further out."""
        s = self._soft_cache.get(filename)
        if s is None:
            if filename.startswith("<"):
                s = filename == "<string>"
            else:
                a = os.path.abspath(filename)
                s = a.startswith(_STDLIB) and not a.startswith(_SITE)
            self._soft_cache[filename] = s
        return s

    @staticmethod
    def _passthrough(code: Any) -> bool:
        """A library's decorator wrapper (``def wrapper(*args, **kwargs)`` closing over the
        function it calls, in site-packages or the standard library): never the frame a user
        would name as the caller, so dropped as the soft frames are. (Asked once per code
        object: :meth:`_code_info`'s answers are kept.)"""
        a = os.path.abspath(code.co_filename)
        return bool(code.co_flags & 0x0C == 0x0C and code.co_freevars
                    and (a.startswith(_SITE) or a.startswith(_STDLIB)))

    def _code_info(self, code: Any) -> Tuple[bool, bool, str, str, bool]:
        """What :meth:`user_stack` needs of a frame's code, worked out on its first frame and
        kept (by id; :meth:`user_stack` looks it up): skipped (torch's, syncguard's), maybe
        generated by torch.compile (FX code, or an inductor output module, registered before
        any of its code runs), its report name and qualname, and soft (dropped when a user
        frame lies further out)."""
        fn = code.co_filename
        generated = fn.startswith("<eval_with_key>")
        if not generated and not fn.startswith("<"):
            cc = sys.modules.get("torch._inductor.codecache")
            maps = getattr(getattr(cc, "PyCodeCache", None), "linemaps", None)
            generated = isinstance(maps, dict) and fn in maps
        name, q = _user_name(code)
        info = (self.skip(fn), generated, name, q,
                self._soft(fn) or self._passthrough(code))
        if len(self._info_cache) < 65536:
            self._info_cache[id(code)] = (code, info)  # holding code keeps its id its own
        return info

    def user_stack(self, depth: int = 8, skip: int = 0) -> Tuple[Frame, ...]:
        """The user's frames of the calling stack, innermost first, at most ``depth``.

        Called on every read. The answer is a function of the stack's code objects and
        their last instructions (a frame's line follows from them), so it is kept per such
        stack (:data:`_CHAIN_MAX` frames at most): a read repeated from the same stack, as a
        loop's is every step, costs one walk reading two attributes a frame and one lookup.
        A stack with a frame of code torch.compile generated is worked out each time."""
        return self._stack_entry(sys._getframe(1 + skip), depth)[0]

    def _stack_entry(self, f: FrameType, depth: int) -> Tuple[Tuple[Frame, ...], Optional[
            Dict[Tuple[Any, ...], ReadSite]]]:
        """:meth:`user_stack` from frame ``f`` outwards, and the read sites of its kept
        stack (None when the stack is not kept): they live and go with it."""
        # the key: depth, then each frame's code (by id) and instruction, built as it walks
        # (a read pays for every step of this after the model's work: building the key from
        # lists of codes and instructions afterwards cost this call about 1.5 us more, timed
        # alone right after a cache sweep)
        key: Any = [depth]
        g: Any = f  # a frame, or None past the top of a stack without the root
        root = self._end
        try:
            while g is not root:  # one test a frame: the walk runs on every read
                key += (id(g.f_code), g.f_lasti)  # fewer bytecodes a frame than two appends
                g = g.f_back
        except AttributeError:  # g is None: a stack without the root in it (a thread's)
            pass
        if g is not None and not self._end_found:
            self._find_end(f)  # the first walk to reach the program's root
        whole = len(key) <= _KEY_MAX  # a deeper stack is walked each time, never kept
        if whole:
            key = tuple(key)
            hit = self._chain_cache.get(key)
            if hit is not None:  # its codes are held: their ids are theirs
                return hit[1], hit[2]
        stack, cacheable = self._walk(f, depth)
        if whole and cacheable and root is self._end:
            codes = []
            g = f
            while g is not None and g is not root:
                codes.append(g.f_code)
                g = g.f_back
            if len(self._chain_cache) >= 4096:
                self._chain_cache.clear()
            sites: Dict[Tuple[Any, ...], ReadSite] = {}
            self._chain_cache[key] = (tuple(codes), stack, sites)
            return stack, sites
        return stack, None

    def _walk(self, f: Optional[FrameType], depth: int) -> Tuple[Tuple[Frame, ...], bool]:
        """:meth:`user_stack` from frame ``f`` outwards, and whether the answer may be kept
        for the same stack (not when a frame's code may be torch.compile's: its lines map
        through the compiler's registries). Each frame costs one lookup: the code object's
        facts (:meth:`_code_info`) and the :class:`Frame` of an instruction are worked out
        once and kept."""
        cacheable = True
        frames: List[Frame] = []
        soft: List[bool] = []
        root: Optional[Frame] = None  # a compiled region's own function, mapped already
        info_of, frame_at = self._info_cache.get, self._frame_cache.get
        limit = depth + 8
        end = self._end
        while f is not None and f is not end and len(frames) < limit:
            code = f.f_code
            hit = info_of(id(code))
            info = hit[1] if hit is not None and hit[0] is code else self._code_info(code)
            if info[0]:  # torch's or syncguard's own
                f = f.f_back  # type: ignore[assignment]
                continue
            if info[1]:  # maybe generated by torch.compile
                cacheable = False
                mapped = compiled_source(f)
                if mapped is not None:  # generated code: the user's lines it was made from
                    mapped = tuple(fr for fr in mapped if not self.skip(fr.filename))
                    frames.extend(mapped)
                    soft.extend(self._soft(fr.filename) for fr in mapped)
                    root = mapped[-1] if mapped else None
                    f = f.f_back  # type: ignore[assignment]
                    continue
            if root is not None and (code.co_filename, info[2]) == (root.filename,
                                                                    root.function):
                # the compiled function's own frame (Dynamo's code for it, at its ``def``
                # line): its line is the mapped one already listed
                root = None
                f = f.f_back  # type: ignore[assignment]
                continue
            root = None
            key = (id(code), f.f_lasti)
            at = frame_at(key)
            if at is not None and at[0] is code:
                fr = at[1]
            else:
                fr = Frame(code.co_filename, f.f_lineno, info[2], info[3])
                if len(self._frame_cache) < 65536:
                    self._frame_cache[key] = (code, fr)
            frames.append(fr)
            soft.append(info[4])
            f = f.f_back  # type: ignore[assignment]
        if not all(soft):  # blame user code; keep the soft frames only when there is none
            frames = [fr for fr, sf in zip(frames, soft) if not sf]
        return Stack(frames[:depth]), cacheable

    @property
    def walk_end(self) -> Optional[FrameType]:
        """Where a walk of the program's stack ends (exclusive): :attr:`root`, or the
        launcher's innermost frame inside it once a read's walk has found it."""
        return self._end

    def _find_end(self, f: FrameType) -> None:
        """Set :attr:`_end` from a stack that reaches :attr:`root` (``f`` its innermost
        frame): the innermost frame of the launcher's (runpy's, syncguard's) right inside the
        root, or the root itself when there is none."""
        chain: List[FrameType] = []
        g: Optional[FrameType] = f
        while g is not None and g is not self.root:
            chain.append(g)
            g = g.f_back
        if g is None:  # not a stack of the program's
            return
        end = self.root
        for fr in reversed(chain):  # outermost first
            name = fr.f_code.co_filename
            if not (name == "<frozen runpy>" or name == _RUNPY or self.skip(name)):
                break
            end = fr
        self._end, self._end_found = end, True
        self._chain_cache.clear()

    @contextlib.contextmanager
    def program_root(self, frame: FrameType) -> Iterator[None]:
        """While inside, ``frame`` runs the program (:attr:`root`): user stacks end there."""
        prev = self.root, self._end, self._end_found
        self.root = self._end = frame
        self._end_found = False
        self._chain_cache.clear()
        try:
            yield
        finally:
            self.root, self._end, self._end_found = prev
            self._chain_cache.clear()

    # -- delivery ---------------------------------------------------------------------
    def _in_reporting(self) -> bool:
        """Whether this call comes from a test framework's own reporting (pytest's saferepr
        of a failed assertion's operands): those reads are not the code under test's."""
        prefixes = self._reporting
        if not prefixes:
            return False
        f: Optional[FrameType] = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename.startswith(prefixes):
                return True
            f = f.f_back
        return False

    def deliver(self, kind: str, api: str, op: Optional[str], device: Optional[str],
                count: Union[int, ByModel] = 1, source: Optional[str] = None,
                wait_us: Optional[float] = None, read: Any = None, up: int = 0) -> None:
        """Record one sync on every active guard that accepts it. ``count`` is a number of
        host reads, or (an op sync model's in-kernel reads on a device type without a model
        of its own) a :data:`ByModel` mapping: each guard takes its own model's entry.
        ``read``: the call's arguments (the tensors read), for the lineage tracker if on.
        ``up``: frames above the caller that are syncguard's own (an interceptor's), passed
        over without a look."""
        guards = self.guards  # replaced, never changed in place, as guards come and go
        if not guards or (self._reporting and self._in_reporting()):
            return
        lineage = None
        if read is not None and self.lineage is not None and kind not in _NO_LINEAGE:
            try:
                lineage = self.lineage(read)
            except Exception:  # lineage is a diagnosis: never lose the count over it
                log.debug("syncguard: lineage of a read failed", exc_info=True)
        stack, sites = self._stack_entry(sys._getframe(1 + up), self._depth)
        top = stack[0] if stack else _UNKNOWN
        t = _threads.get(_get_ident())
        thread = t._name if t is not None else _current_thread().name  # type: ignore
        reason = _allow_reason.get()
        g = self._solo
        if g is not None and type(count) is int:
            # the one counting guard, without the general loop's bookkeeping
            if not g.accepts(device):
                return
            if reason is None and g.allow_sites_of:
                reason = g.site_allowed(stack)
            step, warm = g.current_step()
            if sites is not None and step is None and lineage is None and (
                    g.on_read is not None):
                # the lean form: the read's site, made once for this stack and call
                key = (kind, api, op, device, count, source, thread, reason)
                site = sites.get(key)
                if site is None:
                    site = sites[key] = ReadSite(SyncEvent.make(
                        kind=kind, api=api, op=op, filename=top.filename, lineno=top.lineno,
                        function=top.function, stack=stack, step=None, thread=thread,
                        allowed=reason is not None, reason=reason, warmup=False, count=count,
                        device=device, source=source, wait_us=None, lineage=None))
                g._read(site, wait_us)
                return
            g._record(SyncEvent.make(  # the stack is the guard's depth (_depth is its own)
                kind=kind, api=api, op=op, filename=top.filename, lineno=top.lineno,
                function=top.function, stack=stack, step=step, thread=thread,
                allowed=reason is not None, reason=reason, warmup=warm, count=count,
                device=device, source=source, wait_us=wait_us, lineage=lineage))
            return
        raise_for: Optional[SyncEvent] = None
        raisers: List[SyncGuard] = []
        for g in guards:
            if not g.accepts(device):
                continue
            n, src = count, source
            if isinstance(n, dict):
                per = n.get(g.model) if g.model is not None else None
                if per is None:
                    continue  # this guard's model (or none) says the op reads nothing
                n, src = per
            allowed_reason = reason or (g.site_allowed(stack) if g.allow_sites_of else None)
            step, warm = g.current_step()
            ev = SyncEvent.make(
                kind=kind, api=api, op=op, filename=top.filename, lineno=top.lineno,
                function=top.function,
                stack=stack if len(stack) <= g.stack_depth else stack[: g.stack_depth],
                step=step, thread=thread, allowed=allowed_reason is not None,
                reason=allowed_reason, warmup=warm, count=n, device=device, source=src,
                wait_us=wait_us, lineage=lineage)
            g._record(ev)
            if g.on_sync == "log":
                log.warning("host sync: %s", ev.describe())
            elif g.on_sync == "raise" and not ev.allowed and not warm:
                raisers.append(g)
                if raise_for is None:
                    raise_for = ev
        if raise_for is not None:
            err = HostSyncError(format_error(raise_for))
            for g in raisers:  # kept: the guard fails at exit if the code swallows it
                g._raised_error(raise_for, err)
            raise err


def _reporting_prefixes() -> Tuple[str, ...]:
    """pytest's reporting code (saferepr, assertion explanations), if pytest is loaded."""
    m = sys.modules.get("_pytest")
    f = getattr(m, "__file__", None) if m is not None else None
    if not f:
        return ()
    root = os.path.dirname(os.path.abspath(f))
    return tuple(os.path.join(root, d) + os.sep for d in ("_io", "assertion"))


def format_error(ev: SyncEvent) -> str:
    op = f" -> {ev.op}" if ev.op else ""
    return (
        f"hidden host sync at {ev.site} in {ev.function}(): {ev.api}{op} [{ev.kind}] "
        f"makes the host wait for the device. If it is intended, wrap it in "
        f'`with syncguard.allow("why"):` or allow the call site with '
        f'allow_sites=["{os.path.basename(ev.filename)}:{ev.lineno}"].'
    )


HUB = Hub()


@contextlib.contextmanager
def allow(reason: str) -> Iterator[None]:
    """Syncs made inside (on this thread) are recorded as allowed, with ``reason``, and are
    not counted in ``SyncGuard.count``. The model case: an engine's per-step token readback."""
    if not reason or not isinstance(reason, str):
        raise ValueError("syncguard.allow() needs a non-empty reason string")
    token = _allow_reason.set(reason)
    try:
        yield
    finally:
        _allow_reason.reset(token)
