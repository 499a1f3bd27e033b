"""Interceptors: the Python-level entry points that read device data on the host, patched.

This module (with ``syncguard.sim``) is the only code that touches torch internals.
Patches are process-global (so reads on every Python thread are seen), installed when the first
guard is entered and removed, exactly as they were, when the last one exits. What each
entry point reads is decided by :mod:`syncguard.core.classify`; the reads below Python (a
backend's ATen ops, the dispatch net) are reported by :mod:`syncguard.core.aten`.

Rule against double counting: the outermost intercepted call that reports a sync marks the
thread busy; nothing nested inside it reports again (``x in t`` calls ``.item()`` internally;
it is one sync).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from time import perf_counter as _perf
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from ..process import signals as _signals
from . import syncapis
from .classify import (
    QUIET,
    Classifier,
    Hit,
    Hits,
    _aten_classifier,
    _contains,
    _copy_,
    _cpu,
    _d2h,
    _data_dep,
    _dev,
    _device_method,
    _explicit,
    _format,
    _getitem,
    _index_put,
    _model,
    _numpy,
    _one_hot,
    _repeat_interleave,
    _repr,
    _scalar,
    _setitem,
    _Tensor,
    _tensor_factory,
    _to,
    _where,
)
from .hub import HUB

# -- the patch table -----------------------------------------------------------------------
Target = Tuple[Any, str, str, Classifier]  # owner, attribute, api name, classifier


#: ATen ops that read the host and that torch.compile's generated code calls as Python objects
#: (FX graphs: ``torch.ops.aten._local_scalar_dense.default(x)``, a captured ``.item()`` under
#: ``capture_scalar_outputs``; inductor's fallback kernels), through ``OpOverload.__call__``,
#: which is intercepted. No Python entry point of the program sees these reads, and on a
#: device PyTorch knows (``--device cpu``, CUDA) no backend kernel of syncguard's does either.
#: (The op objects themselves must stay as they are: their hash is their C++ handle's, and
#: fake tensors look their implementations up by it.)
_GRAPH_READ_OPS = (
    "_local_scalar_dense.default", "nonzero.default", "masked_select.default",
    "repeat_interleave.Tensor", "index.Tensor", "_unique2.default", "unique_dim.default",
    "unique_consecutive.default", "bincount.default", "equal.default",
)


@functools.cache
def _graph_read_ops() -> Dict[int, Any]:
    """``id(op) -> op`` of :data:`_GRAPH_READ_OPS` (ids: an OpOverload's own hash is Python
    code; the ops live as long as the process)."""
    ops: Dict[int, Any] = {}
    for spec in _GRAPH_READ_OPS:
        packet, _, overload = spec.partition(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        if op is not None:
            ops[id(op)] = op
    return ops


def _graph_op(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Hit]:
    """Classify ``OpOverload.__call__(op, *a, **k)``: one of :data:`_GRAPH_READ_OPS` on plain
    tensors of a counted device (the registered backends' kernels classify their own ops;
    tensors of torch.compile's tracing, fake or functional, hold no data)."""
    op = _graph_read_ops().get(id(args[0]))
    if op is None:
        return None
    a = args[1:]
    x = a[0] if a else next(iter(kwargs.values()), None)
    if type(x) is not _Tensor and type(x) is not torch.nn.Parameter:
        return None
    d = _dev(x)
    if d is None:
        return None
    hit = _aten_classifier(op)(a, kwargs, d)
    return None if hit is None else (hit[0], hit[1], hit[2], hit[3], hit[4] or "compiled code")


def _wrap_op_call(orig: Callable[..., Any], api: str, classify: Classifier
                  ) -> Callable[..., Any]:
    """:func:`_wrap` for ``OpOverload.__call__``: every ATen op called from Python goes through
    it (a simulated device's kernel, torch's own decompositions), so the ops it does not
    classify take the shortest way (what the original does: ``self._op(...)``)."""
    tls = HUB.tls
    ops = _graph_read_ops()

    def __call__(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in ops or tls.busy or not HUB.guards or _is_compiling():
            if self._namespace == "prims" and HUB.guards and not tls.busy:
                # A prim's implementation is torch's own Python (AOT autograd's passes put
                # prims.convert_element_type in compiled graphs): the Tensor methods it calls
                # (copy_) are not the program's; with devices=("cpu",) they would read as
                # device-to-host copies.
                tls.busy += 1
                try:
                    return orig(self, *args, **kwargs)
                finally:
                    tls.busy -= 1
            return orig(self, *args, **kwargs)
        hit = classify((self,) + args, kwargs)
        if hit is None or _in_fake_mode():
            return orig(self, *args, **kwargs)
        return _call_reporting(hit, str(hit[1]), orig, (self,) + args, kwargs)

    __call__.__wrapped__ = orig  # type: ignore[attr-defined]
    __call__.__name__ = "__call__"
    __call__.__qualname__ = getattr(orig, "__qualname__", "OpOverload.__call__")
    __call__.__syncguard__ = True  # type: ignore[attr-defined]
    _never_compile(__call__.__code__)
    return __call__


def _targets() -> List[Target]:
    T = torch.Tensor
    t: List[Target] = []

    def meth(name: str, cls: Classifier) -> None:
        t.append((T, name, f"Tensor.{name}", cls))

    def fn(owner: Any, prefix: str, name: str, cls: Classifier) -> None:
        if hasattr(owner, name):
            t.append((owner, name, f"{prefix}.{name}", cls))

    # The table-driven families come from syncguard.core.syncapis (shared with `syncguard lint`).
    for api in syncapis.by_classify("scalar"):
        meth(api.name, _scalar)
    meth("__format__", _format)
    meth("__repr__", _repr)
    for api in syncapis.by_classify("d2h"):
        meth(api.name, _d2h)
    meth("cpu", _cpu)
    meth("numpy", _numpy)
    meth("to", _to)
    meth("cuda", _device_method("cuda"))
    meth("copy_", _copy_)
    meth("__contains__", _contains)
    meth("__getitem__", _getitem)
    meth("__setitem__", _setitem)
    meth("index_put_", _index_put)
    meth("index_put", _index_put)
    for api in syncapis.by_classify("data_dep"):
        assert api.op is not None
        if "Tensor" in api.owners:
            meth(api.name, _data_dep(api.op))
        if "torch" in api.owners:
            fn(torch, "torch", api.name, _data_dep(api.op))
    fn(torch, "torch", "where", _where)
    meth("repeat_interleave", _repeat_interleave)
    fn(torch, "torch", "repeat_interleave", _repeat_interleave)
    fn(torch.nn.functional, "torch.nn.functional", "one_hot", _one_hot)
    meth("multinomial", _model("aten::multinomial"))
    fn(torch, "torch", "multinomial", _model("aten::multinomial"))
    meth("masked_fill_", _model("aten::masked_fill_.Tensor"))
    meth("masked_fill", _model("aten::masked_fill_.Tensor"))
    fn(torch, "torch", "masked_fill", _model("aten::masked_fill_.Tensor"))
    fn(torch, "torch", "normal", _model("aten::normal.Tensor_Tensor"))
    fn(torch, "torch", "tensor", _tensor_factory(None))
    fn(torch, "torch", "as_tensor", _tensor_factory(2))
    # explicit synchronisation
    cuda = torch.cuda
    fn(cuda, "torch.cuda", "synchronize", _explicit("cuda"))
    fn(cuda.Stream, "torch.cuda.Stream", "synchronize", _explicit("cuda"))
    fn(cuda.Event, "torch.cuda.Event", "synchronize", _explicit("cuda"))
    for b in HUB.backends.values():
        # A registered backend's tensor may print itself (the simulated device's does):
        # intercept it under the Tensor API names.
        for name, cls in (("__repr__", _repr), ("__format__", _format)):
            if name in vars(b.tensor_type):
                t.append((b.tensor_type, name, f"Tensor.{name}", cls))
    npu = getattr(torch, "npu", None)
    if npu is not None and not getattr(npu, "__syncguard_sim__", False):
        fn(npu, "torch.npu", "synchronize", _explicit("npu"))
        for cls_name in ("Stream", "Event"):
            c = getattr(npu, cls_name, None)
            if c is not None:
                fn(c, f"torch.npu.{cls_name}", "synchronize", _explicit("npu"))
        meth_npu = getattr(T, "npu", None)
        if meth_npu is not None:
            meth("npu", _device_method("npu"))
    return t


def _call_reporting(hit: Hits, api: str, call: Callable[..., Any], args: Tuple[Any, ...],
                    kwargs: Dict[str, Any]) -> Any:
    """Run ``call(*args, **kwargs)`` (a classified call) with this thread marked busy, so
    nothing nested inside reports again, and report ``hit`` (unless it is :data:`QUIET`; a
    list: each in order): before the call when a guard raises, else after it with the time
    the call took (given to the last)."""
    # HUB.deliver(..., up=2): this frame and the interceptor's that called it are
    # syncguard's, so the stack walk starts at the interceptor's caller
    tls = HUB.tls
    tls.busy += 1
    try:
        if hit is QUIET:
            return call(*args, **kwargs)
        if HUB.raising:  # report first: "raise" stops the call before it syncs
            for kind, op, device, count, source in (hit if isinstance(hit, list) else [hit]):
                HUB.deliver(kind, api, op, device, count, source, None, args, 2)
            return call(*args, **kwargs)
        # Time the call: on a real device, how long the host waited in this sync.
        t0 = _perf()
        out = call(*args, **kwargs)
        wait = (_perf() - t0) * 1e6
        if isinstance(hit, list):
            for i, (kind, op, device, count, source) in enumerate(hit):
                HUB.deliver(kind, api, op, device, count, source,
                            wait if i == len(hit) - 1 else None, args, 2)
        else:
            kind, op, device, count, source = hit
            HUB.deliver(kind, api, op, device, count, source, wait, args, 2)
        return out
    finally:
        tls.busy -= 1


def _compiling_fn() -> Callable[[], bool]:
    comp = getattr(torch, "compiler", None)
    f = getattr(comp, "is_compiling", None)
    if f is None:  # torch < 2.3
        f = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return f if f is not None else (lambda: False)


_is_compiling = _compiling_fn()
_fake_mode_key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
_get_mode = getattr(torch._C, "_get_dispatch_mode", None)


def _in_fake_mode() -> bool:
    """torch.compile propagates shapes with fake tensors: that work reads no device data."""
    return _fake_mode_key is not None and _get_mode is not None and (
        _get_mode(_fake_mode_key) is not None)


_wrap_code_skipped = False


def _never_compile(code: Any) -> None:
    """Tell Dynamo's frame hook (in torch._C, so Dynamo need not be loaded) never to compile
    frames of ``code``, nor what they call: a wrapper called after a graph break runs as
    Python and counts what the compiled code really reads. Private, so optional."""
    ef = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    setter = getattr(ef, "set_code_exec_strategy", None)
    strategy, action = getattr(ef, "_FrameExecStrategy", None), getattr(ef, "_FrameAction", None)
    if setter is None or strategy is None or action is None:
        return
    try:
        setter(code, strategy(action.SKIP, action.SKIP))
    except Exception:  # pragma: no cover - a changed private API: is_compiling() still helps
        pass


def _wrap(orig: Callable[..., Any], api: str, classify: Classifier) -> Callable[..., Any]:
    global _wrap_code_skipped
    tls = HUB.tls

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _is_compiling():
            # Dynamo is tracing this wrapper (folding is_compiling() to True): trace only the
            # original call, never syncguard's bookkeeping (its clock, its thread state).
            return orig(*args, **kwargs)
        if tls.busy or not HUB.guards:
            return orig(*args, **kwargs)
        hit = classify(args, kwargs)
        if hit is None or _in_fake_mode():
            return orig(*args, **kwargs)
        return _call_reporting(hit, api, orig, args, kwargs)

    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(orig, "__name__", api.rsplit(".", 1)[-1])
    wrapper.__qualname__ = getattr(orig, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__syncguard__ = True  # type: ignore[attr-defined]
    if not _wrap_code_skipped:
        _never_compile(wrapper.__code__)  # one code object for every wrapper
        _wrap_code_skipped = True
    return wrapper


class _SequenceSlots:
    """Undo a CPython side effect of patching ``__getitem__``/``__setitem__`` on a heap type,
    on that type and on every subclass of it.

    Setting a Python ``__getitem__`` on ``torch.Tensor`` fills the type's ``sq_item`` slot as
    well as ``mp_subscript`` (and ``__setitem__`` fills ``sq_ass_item``), and deleting the
    attribute again leaves them filled. CPython updates the same slots on every subclass that
    inherits the attribute (``torch.nn.Parameter``, the simulated device's tensor type, a
    user's subclass), and a subclass created while the patch is on is born with them filled.
    A filled ``sq_item`` makes every tensor of that type pass ``PySequence_Check``, so
    ``torch.tensor([t0, t0])`` of 0-d tensors tries ``len()`` on them and raises, inside the
    guard and for the rest of the process. Indexing itself goes through ``mp_subscript``
    (checked first by ``PyObject_GetItem``), so after every patch and unpatch the two sequence
    slots of the root and of every subclass alive are put back to the root's own before any
    patch. A subclass that gets the attribute from elsewhere (its own, or a base outside the
    root's ancestry) is left alone: CPython keeps its slots right. A root found with a slot
    filled by CPython's generic function though the attribute is not its own (left so by an
    earlier patch) counts as empty. Only on CPython with the standard type layout (checked
    against each type's name); elsewhere nothing is touched."""

    _AS_SEQUENCE = 13  # PyTypeObject: 3 header words, then tp_name ... tp_as_sequence
    _SQ_ITEM, _SQ_ASS_ITEM = 3, 5  # PySequenceMethods
    _NAMES = ("__getitem__", "__setitem__")  # the attribute behind each slot, in order

    def __init__(self, root: type) -> None:
        self.root = root
        self._root_mro = frozenset(root.__mro__)
        # type -> its two slots (ctypes views); None: a layout not to touch
        self._views: weakref.WeakKeyDictionary[type, Optional[Tuple[Any, Any]]] = (
            weakref.WeakKeyDictionary())
        self.orig: Optional[Tuple[Optional[int], Optional[int]]] = None
        if sys.implementation.name != "cpython" or not getattr(
                sys, "_is_gil_enabled", lambda: True)():
            return
        view = self._view(root)
        if view is None:
            return

        class _Probe:  # CPython's generic slot functions, as any Python class gets them
            def __getitem__(self, i: Any) -> None: ...
            def __setitem__(self, i: Any, v: Any) -> None: ...

        generic = self._view(_Probe)
        orig = []
        for i, name in enumerate(self._NAMES):
            v = view[i].value
            if name not in vars(root) and generic is not None and v == generic[i].value:
                v = None
            orig.append(v)
        self.orig = (orig[0], orig[1])

    def _view(self, tp: type) -> Optional[Tuple[Any, Any]]:
        try:
            return self._views[tp]
        except KeyError:
            pass
        view: Optional[Tuple[Any, Any]] = None
        try:
            import ctypes

            word = ctypes.sizeof(ctypes.c_void_p)
            name = ctypes.c_char_p.from_address(id(tp) + 3 * word).value
            seq = ctypes.c_void_p.from_address(id(tp) + self._AS_SEQUENCE * word).value
            if name == tp.__name__.encode() and seq:
                view = (ctypes.c_void_p.from_address(seq + self._SQ_ITEM * word),
                        ctypes.c_void_p.from_address(seq + self._SQ_ASS_ITEM * word))
        except Exception:  # an unexpected layout: leave the type alone
            view = None
        self._views[tp] = view
        return view

    def _tree(self) -> List[type]:
        """The root and every subclass of it alive now."""
        out: List[type] = []
        seen: set = set()
        todo = [self.root]
        while todo:
            tp = todo.pop()
            if id(tp) in seen:
                continue
            seen.add(id(tp))
            out.append(tp)
            todo.extend(type.__subclasses__(tp))
        return out

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """While a patch set is swapped (other threads held off): the types and the slots
        to repair are found once, not at every :meth:`restore`."""
        self._plan = self._repairs()
        try:
            yield
        finally:
            self._plan = None

    _plan: Optional[List[Tuple[Any, int]]] = None

    _cache: Tuple[Any, List[Tuple[Any, int]]] = ((), [])

    def _repairs(self) -> List[Tuple[Any, int]]:
        """(slot view, slot index) of every slot of the tree to keep at the root's value;
        computed again when a type appears or goes, or gains or loses either attribute."""
        out: List[Tuple[Any, int]] = []
        if self.orig is None:
            return out
        tree = self._tree()
        key = tuple((id(tp), "__getitem__" in tp.__dict__, "__setitem__" in tp.__dict__)
                    for tp in tree)
        if key == self._cache[0]:
            return self._cache[1]
        for tp in tree:
            view = self._view(tp)
            if view is None:
                continue
            for i, name in enumerate(self._NAMES):
                if tp is not self.root and any(
                        name in vars(c) for c in tp.__mro__ if c not in self._root_mro):
                    continue
                out.append((view[i], i))
        self._cache = (key, out)
        return out

    def restore(self, name: Optional[str] = None) -> None:
        """Put the slots back (only ``name``'s slot, when given)."""
        orig = self.orig
        if orig is None:
            return
        only = self._NAMES.index(name) if name in self._NAMES else None
        for slot, i in self._plan if self._plan is not None else self._repairs():
            if (only is None or i == only) and slot.value != orig[i]:
                slot.value = orig[i]


Saved = Tuple[Any, str, bool, Any]  # owner, attribute, had its own attribute, original


def _all_targets() -> List[Target]:
    """Everything the patcher patches: the sync APIs (:func:`_targets`, the table's) and the
    route by which compiled code calls ATen ops (``OpOverload.__call__``, see
    :data:`_GRAPH_READ_OPS`: not an API a program names, so not the lint's)."""
    return _targets() + [(torch._ops.OpOverload, "__call__", "OpOverload.__call__",
                          _graph_op)]


def _restore(owner: Any, name: str, own: bool, orig: Any) -> None:
    """Put ``owner.name`` back as it was; idempotent (a retry after an interruption is safe)."""
    if own:
        if vars(owner).get(name, _MISSING) is not orig:
            setattr(owner, name, orig)
    elif name in vars(owner):
        delattr(owner, name)


_MISSING = object()
_SEQ_NAMES = ("__getitem__", "__setitem__")


def _unwrap_leftovers(targets: List[Target]) -> List[str]:
    """Remove interceptors that no bookkeeping of this patcher records (left by an earlier
    patch set whose records are gone: a guard cut short, syncguard imported afresh), so
    that nothing is wrapped twice and the originals come back. A wrapper whose original is
    what the owner inherits is deleted, else the original is set back. Returns
    ``owner.attr`` of each."""
    healed: List[str] = []
    for owner, name, _api, _cls in targets:
        v = vars(owner).get(name, _MISSING)
        while getattr(v, "__syncguard__", False) is True:
            orig = v.__wrapped__  # type: ignore[union-attr]
            inherited = next((vars(b)[name] for b in getattr(owner, "__mro__", (owner,))[1:]
                              if name in vars(b)), _MISSING)
            if inherited is orig:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
            healed.append(f"{getattr(owner, '__name__', owner)}.{name}")
            v = vars(owner).get(name, _MISSING)
    if healed:
        import logging

        logging.getLogger("syncguard").warning(
            "syncguard: removed %d interceptor(s) an earlier guard left on torch (%s)",
            len(healed), ", ".join(sorted(set(healed))[:5]))
    return healed


@contextlib.contextmanager
def _switches_held() -> Iterator[None]:
    """Ask the interpreter not to switch threads while the patch set is swapped, so other
    threads see torch before or after, not half-patched (nor a type whose sequence slots are
    briefly filled, see _SequenceSlots)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class _Patcher:
    """Owns the process-global patches: installed for the first guard, removed with the last.

    Install and uninstall are atomic: the full patch set is built first, every patch is
    recorded before it is applied (restoring is idempotent), an exception at any point of
    install rolls back every patch, and uninstall finishes restoring before it re-raises.
    Callers defer Ctrl-C around both (:func:`syncguard.process.signals.deferred`). The user count
    never goes below zero."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users = 0
        self.saved: List[Saved] = []
        # the sequence slots of each type whose __getitem__/__setitem__ is patched, and of its
        # subclasses, as they were before the first patch (see _SequenceSlots)
        self.slots: Dict[Any, _SequenceSlots] = {}
        #: ``owner.attr`` of the interceptors an earlier patch set left installed, found and
        #: removed by the last install (see :func:`_unwrap_leftovers`)
        self.healed: List[str] = []

    def acquire(self) -> None:
        # The caller (SyncGuard.__enter__) defers Ctrl-C around this and undoes on a pending
        # signal; deferring here too keeps a direct caller's install whole.
        with _signals.deferred(), self.lock:
            if self.users == 0:
                self._install()
            self.users += 1

    def release(self) -> None:
        with _signals.deferred(), self.lock:
            if self.users <= 0:
                raise RuntimeError("syncguard: interceptors released more often than acquired")
            self.users -= 1
            if self.users == 0:
                self._uninstall()

    def _plan(self) -> List[Tuple[Any, str, bool, Any, Callable[..., Any]]]:
        plan = []
        targets = _all_targets()
        self.healed = _unwrap_leftovers(targets)
        for owner, name, api, cls in targets:
            own = name in vars(owner)
            orig = vars(owner)[name] if own else getattr(owner, name)
            wrap = _wrap_op_call if api == "OpOverload.__call__" else _wrap
            plan.append((owner, name, own, orig, wrap(getattr(owner, name), api, cls)))
            if name in _SEQ_NAMES and owner not in self.slots:
                self.slots[owner] = _SequenceSlots(owner)
        if self.healed:
            for seq in self.slots.values():
                seq.restore()
        return plan

    @contextlib.contextmanager
    def _batched(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for seq in list(self.slots.values()):
                stack.enter_context(seq.batch())
            yield

    def _install(self) -> None:
        if self.saved:  # left by an interrupted uninstall: finish it first
            self._uninstall()
        plan = self._plan()
        try:
            with _switches_held(), self._batched():
                for owner, name, own, orig, wrapper in plan:
                    self.saved.append((owner, name, own, orig))  # recorded before applied
                    setattr(owner, name, wrapper)
                    if name in _SEQ_NAMES:
                        self.slots[owner].restore(name)
        except BaseException:
            self._uninstall()
            raise

    def _uninstall(self) -> None:
        error: Optional[BaseException] = None
        with _switches_held(), self._batched():
            while self.saved:
                entry = self.saved[-1]
                for _ in range(2):  # one retry: an injected or stray exception is not final
                    try:
                        _restore(*entry)
                        break
                    except BaseException as exc:
                        error = error or exc
                self.saved.pop()
                if entry[1] in _SEQ_NAMES and entry[0] in self.slots:
                    self.slots[entry[0]].restore(entry[1])
            for seq in self.slots.values():
                seq.restore()
        if error is not None:
            raise error

    @property
    def installed(self) -> bool:
        return bool(self.saved)


PATCHER = _Patcher()


def patched_attributes() -> List[str]:
    """Names of the attributes syncguard patches while a guard is active (for clean-state
    checks): ``owner.attr`` strings."""
    return [f"{getattr(o, '__name__', o)}.{n}" for o, n, _, _ in _all_targets()]


def snapshot() -> Dict[str, Any]:
    """Identity snapshot of every attribute syncguard may patch: equal before and after a
    guard means torch was left exactly as it was."""
    out: Dict[str, Any] = {}
    for owner, name, _, _ in _all_targets():
        key = f"{getattr(owner, '__qualname__', owner)}.{name}"
        out[key] = vars(owner).get(name, "<inherited>")
    return out


# -- reporting used by syncguard's own backends ----------------------------------------------
def report_sync(kind: str, api: str, op: Optional[str] = None, count: int = 1,
                device: Optional[str] = None, source: Optional[str] = None,
                read: Any = None) -> None:
    """Report one host sync to every active guard (no-op when none is active, or when an
    intercepted call on this thread already reported). May raise ``HostSyncError``.
    ``read``: the op's arguments (the tensors read), for the lineage tracker."""
    tls = HUB.tls
    if tls.busy or not HUB.guards:
        return
    tls.busy += 1
    try:
        HUB.deliver(kind, api, op, device, count, source, read=read)
    finally:
        tls.busy -= 1


@contextlib.contextmanager
def suppressed() -> Iterator[None]:
    """Inside, this thread reports nothing (syncguard's own reads, e.g. contract checks)."""
    HUB.tls.busy += 1
    try:
        yield
    finally:
        HUB.tls.busy -= 1

