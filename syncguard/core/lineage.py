"""Where a value read by a sync came from: its lineage, and whether the read can be hoisted.

A :class:`LineageTracker` watches every ATen op while it is on (opt-in: ``--lineage``) and
keeps, per tensor and without keeping any tensor alive (``WeakIdKeyDictionary``), a bounded
summary of how the tensor was made: the roots it depends on and the last ops on the way.
Roots are host data uploaded to the device (with the user's file:line and a digest of the
bytes), constants made by factories, model parameters and buffers, step inputs handed in from
outside (the decode loop's logits), random draws, and tensors not seen being made (unknown).
When a sync is reported, the hub asks the active tracker for the summary of the tensors read
(:meth:`LineageTracker.summary`), a flat dict of strings and ints that goes on the event.

The verdict, in plain words (:func:`verdict_text`, per site: :func:`site_verdict`):

* ``hoistable``: only host data and constants: compute it on the host where the data is built
  (SGLang's "[NPU] Avoid device synchronization in Ascend sampling" did this for its top-k
  range check), and "the same value every step" when the uploads' bytes repeat or happened
  once before the loop;
* ``device``: it depends on device results (parameters, model output, a sampled token, logits
  passed in): keep the decision on the device or read it one step late;
* ``unknown``: a root was not seen being made; the tracker says so and does not guess.

Two ways to see ops: a ``TorchDispatchMode`` on the entering thread (cpu, cuda, a real npu),
or, for a Python backend that must not run under a dispatch mode (the simulated device), the
backend's own op observer list, which the front end hands to :meth:`LineageTracker.start`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .._paths import PKG_DIR
from .hub import HUB
from .lineage_words import CARRIED, DEVICE_KINDS, HOST_KINDS, site_verdict, verdict_text
from .sites import key_path

log = logging.getLogger("syncguard")

__all__ = ["LineageTracker", "Node", "Root", "active", "mark_input", "site_verdict",
           "summarize", "tree_id", "tree_of", "verdict_text"]

#: Bounds of one tensor's summary: roots kept, op names kept.
MAX_ROOTS = 8
MAX_OPS = 8
#: Bounds of the op tree kept per tensor: inputs per op; a tree grown over MAX_HEIGHT levels
#: or MAX_SIZE nodes (shared ones counted each time) is trimmed to KEEP_DEPTH levels and
#: KEEP_NODES nodes (the rest cut, their roots kept), so memory stays bounded however long
#: a tensor is updated.
MAX_INPUTS = 4
MAX_HEIGHT = 16
MAX_SIZE = 256
KEEP_DEPTH = 8
KEEP_NODES = 64
#: Bounds of the tree an event carries (:func:`tree_of`): levels, children per node, nodes.
TREE_DEPTH = 8
TREE_WIDTH = 4
TREE_NODES = 40
#: Host tensors larger than this are not hashed (their digest is unknown: no "same value").
MAX_DIGEST_BYTES = 1 << 20


_RANDOM = ("multinomial", "rand", "normal", "bernoulli", "uniform", "exponential", "poisson",
           "random_", "geometric", "cauchy", "log_normal", "dropout")
_COPIES = frozenset({"aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_",
                     "aten::_to_copy", "aten::copy"})
# ops that change no value: not worth naming among "the ops between"
_QUIET_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy", "aten::lift",
                        "aten::detach", "aten::alias", "aten::_unsafe_view"})
_LIFTS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy", "aten::lift"})


class Root(NamedTuple):
    """One origin of a value. ``kind``: ``upload`` (host data put on the device), ``const``
    (a factory with host arguments), ``param`` (a model parameter or buffer), ``input`` (a
    step input handed in from outside), ``random`` (random draws), ``unknown`` (a tensor not
    seen being made). ``site``: the user's ``path:line`` where known; ``digest``: 12 hex
    digits of the uploaded bytes (empty when not hashed); ``step``: the guard's step when it
    was made (None: outside every step, e.g. before the loop)."""

    kind: str
    label: str
    site: str = ""
    digest: str = ""
    step: Optional[int] = None


class Node:
    """The bounded summary of how one tensor was made: its roots and the last ops (flat, for
    the verdict), and the op that made it with the nodes of its inputs (the tree a report
    draws). A node without inputs is a root (``op`` None, one root), or ``cut``: the ops
    before it were not kept (over :data:`MAX_HEIGHT` levels or :data:`MAX_SIZE` nodes), its
    ``roots`` still say where it came from. A node with ``op`` None and inputs is a join (two
    records of one tensor: an in-place write into a view's base, several tensors read)."""

    __slots__ = ("roots", "ops", "more", "op", "inputs", "dropped", "cut", "height", "size",
                 "made", "fed")

    def __init__(self, roots: Tuple[Root, ...], ops: Tuple[str, ...] = (),
                 more: bool = False, op: Optional[str] = None,
                 inputs: Tuple[Node, ...] = (), dropped: int = 0, cut: bool = False,
                 made: Optional[int] = None, fed: bool = False) -> None:
        self.roots = roots
        #: the step whose op made it last (None: a root, or made outside every step)
        self.made = made
        #: an op of its history, in a step, took a value an op of an earlier step made:
        #: state carried between steps on the device (a fed-back state, a position, a buffer)
        self.fed = fed
        self.ops = ops
        self.more = more  # roots were left out (over MAX_ROOTS)
        self.op = op  # the op that made it (its short name), None for a root or a join
        self.inputs = inputs  # the nodes of its inputs (at most MAX_INPUTS)
        self.dropped = dropped  # inputs left out (over MAX_INPUTS)
        self.cut = cut  # the ops before it were not kept: its roots stand for them
        self.height: int  # levels of op history kept below it
        self.size: int  # nodes kept below it and itself (shared ones counted each time)
        if inputs:
            self.height = 1 + max(i.height for i in inputs)
            self.size = 1 + sum(i.size for i in inputs)
        else:
            self.height = 0
            self.size = 1


def _made(roots: Tuple[Root, ...], ops: Tuple[str, ...], more: bool, op: Optional[str],
          inputs: Tuple[Node, ...], dropped: int = 0, made: Optional[int] = None,
          fed: bool = False) -> Node:
    """A node with inputs, its history trimmed when it grew over the bounds (so a tensor
    updated every step keeps :data:`KEEP_DEPTH` levels, never the whole run)."""
    n = Node(roots, ops, more, op, inputs, dropped, made=made, fed=fed)
    if n.height > MAX_HEIGHT or n.size > MAX_SIZE:
        n = _trim(n, KEEP_DEPTH, [KEEP_NODES])
    return n


def _trim(n: Node, depth: int, budget: List[int]) -> Node:
    """``n`` with at most ``depth`` levels and ``budget[0]`` nodes of history; deeper nodes
    are cut (they keep their roots)."""
    if not n.inputs:
        return n
    budget[0] -= 1
    if depth <= 0 or budget[0] <= 0:
        return Node(n.roots, n.ops, n.more, n.op, (), n.dropped, cut=True, made=n.made,
                    fed=n.fed)
    return Node(n.roots, n.ops, n.more, n.op,
                tuple(_trim(i, depth - 1, budget) for i in n.inputs), n.dropped, n.cut,
                n.made, n.fed)


def _carried(nodes: List[Node], step: Optional[int]) -> Tuple[Optional[int], bool]:
    """(made, fed) of what an op running in ``step`` makes from ``nodes`` (``step`` None: a
    join of records, no op: the latest of theirs)."""
    fed = any(n.fed for n in nodes)
    if step is None:
        made = max((n.made for n in nodes if n.made is not None), default=None)
        return made, fed
    return step, fed or any(n.made is not None and n.made < step for n in nodes)


def _merge(nodes: List[Node], op: Optional[str], step: Optional[int] = None) -> Node:
    """What ``op`` (None: a join of records) made from ``nodes``, in ``step``."""
    made, fed = _carried(nodes, step if op is not None else None)
    if len(nodes) == 1:  # the common case (a unary op, a chain): no new roots to join
        n = nodes[0]
        if op is None or (n.ops and n.ops[-1] == op):
            if n.made == made and n.fed == fed:
                return n
            return Node(n.roots, n.ops, n.more, n.op, n.inputs, n.dropped, n.cut, made, fed)
        chain = tuple(o for o in n.ops if o != op) + (op,)
        return _made(n.roots, chain[-MAX_OPS:], n.more, op, (n,), made=made, fed=fed)
    roots: List[Root] = []
    keys = set()
    ops: List[str] = []
    more = False
    inputs: List[Node] = []
    dropped = 0
    for n in nodes:
        more = more or n.more
        if not any(n is i for i in inputs):
            if len(inputs) < MAX_INPUTS:
                inputs.append(n)
            else:
                dropped += 1
        for r in n.roots:
            k = (r.kind, r.label, r.site, r.digest)
            if k not in keys:
                if len(roots) >= MAX_ROOTS:
                    more = True
                    continue
                keys.add(k)
                roots.append(r)
        for o in n.ops:
            if o not in ops:
                ops.append(o)
    if op is not None:
        if op in ops:
            ops.remove(op)
        ops.append(op)
    if len(inputs) == 1 and op is None:
        return inputs[0]
    return _made(tuple(roots), tuple(ops[-MAX_OPS:]), more, op, tuple(inputs), dropped, made,
                 fed)


def _holds(n: Node, other: Node) -> bool:
    """Whether ``n`` already says all ``other`` says (its roots, carried state)."""
    if other.fed and not n.fed:
        return False
    keys = {(r.kind, r.label, r.site, r.digest) for r in n.roots}
    return all((r.kind, r.label, r.site, r.digest) in keys for r in other.roots)


def _short(op_name: str) -> str:
    return op_name.split("::", 1)[-1]


def _tensors(xs: Any) -> List[torch.Tensor]:
    out: List[torch.Tensor] = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            out.extend(t for t in x if isinstance(t, torch.Tensor))
    return out


def _digest_tensor(t: torch.Tensor) -> str:
    """12 hex digits of a host tensor's bytes (its dtype and shape too); empty when it is not
    on the host or too large. Never reads device memory (that would be a sync itself)."""
    if t.device.type != "cpu":
        return ""
    try:
        n = t.numel() * t.element_size()
        if n > MAX_DIGEST_BYTES:
            return ""
        flat = t.detach().contiguous().reshape(-1)
        data = flat.view(torch.uint8).numpy().tobytes() if n else b""
    except Exception:  # a tensor type without bytes (sparse, quantized, a subclass): no digest
        return ""
    h = hashlib.blake2b(data, digest_size=6)
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    return h.hexdigest()


def _digest_args(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> str:
    text = repr(([a for a in args if not isinstance(a, torch.Tensor)],
                 sorted((k, repr(v)) for k, v in kwargs.items())))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


_WRITES: Dict[Any, Tuple[Tuple[int, str], ...]] = {}
#: per op: (base name, its name among "the ops between" or None, its random root or None,
#: the arguments it writes)
_OP_INFO: Dict[Any, Tuple[str, Optional[str], Optional[Node], Tuple[Tuple[int, str], ...]]] = {}


def _op_info(func: Any) -> Tuple[str, Optional[str], Optional[Node], Tuple[Tuple[int, str], ...]]:
    try:
        name = func.name()
    except AttributeError:
        name = str(func)
    base = name.split(".", 1)[0]
    rand = None
    if any(r in name for r in _RANDOM):
        rand = Node((Root("random", f"random draws ({_short(base)})"),))
    info = (base, None if base in _QUIET_OPS else _short(base), rand, _written(func))
    if len(_OP_INFO) < 4096:
        _OP_INFO[func] = info
    return info


def _written(func: Any) -> Tuple[Tuple[int, str], ...]:
    """(position, name) of the arguments an op writes (in-place ``self``, ``out=``)."""
    w = _WRITES.get(func)
    if w is None:
        found: List[Tuple[int, str]] = []
        try:
            for i, a in enumerate(func._schema.arguments):
                ai = a.alias_info
                if ai is not None and ai.is_write:
                    found.append((-1 if a.kwarg_only else i, a.name))
        except AttributeError:
            pass
        w = _WRITES[func] = tuple(found)
    return w


def _arg(args: Tuple[Any, ...], kwargs: Dict[str, Any], pos: int, name: str) -> Any:
    if 0 <= pos < len(args):
        return args[pos]
    return kwargs.get(name)


class LineageTracker:
    """Per-tensor lineage while on. ``host_devices``: device types whose tensors are host
    data (``"cpu"`` normally; empty in cpu mode, where cpu tensors stand for device ones and
    data enters through ``torch.tensor`` and factories). Start with :meth:`start`, stop with
    :meth:`stop` (or use it as a context manager on the thread that runs the ops)."""

    def __init__(self, host_devices: Iterable[str] = ("cpu",)) -> None:
        self.host_devices = frozenset(host_devices)
        self.records: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._lock = threading.RLock()
        self._mode: Any = None
        self._observers: Optional[List[Any]] = None
        self._hook: Any = None
        self._modules: Any = None
        self._prev_provider: Any = None
        self._trees: Dict[str, List[Dict[str, Any]]] = {}
        self.ops_seen = 0
        self.failures = 0  # ops whose record failed (see observe)

    # -- switching on and off -------------------------------------------------------------
    def start(self, observers: Optional[List[Any]] = None) -> LineageTracker:
        """Switch on: into ``observers`` (a backend's op observer list: ``cb(op, args,
        kwargs, out)`` after each op) when given, else a dispatch mode on this thread; a
        global module pre-hook marks the parameters and buffers of every module called."""
        import weakref

        from torch.nn.modules.module import register_module_forward_pre_hook

        with HUB.lock:  # torch may have been imported since the hub last looked: skip its frames
            HUB._refresh()
        self._modules = weakref.WeakSet()
        self._hook = register_module_forward_pre_hook(self._module_called)
        if observers is not None:
            self._observers = observers
            observers.append(self.observe)
        else:
            self._mode = _mode(self)
            self._mode.__enter__()
        self._prev_provider = HUB.lineage
        HUB.lineage = self.summary
        _ACTIVE.append(self)
        return self

    def stop(self) -> None:
        """Switch off (idempotent); the records stay readable."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if HUB.lineage == self.summary:
            HUB.lineage = self._prev_provider
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._observers is not None:
            if self.observe in self._observers:
                self._observers.remove(self.observe)
            self._observers = None
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)

    def __enter__(self) -> LineageTracker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- marking ---------------------------------------------------------------------------
    def mark_input(self, t: torch.Tensor, label: str) -> None:
        """``t`` is a step input handed in from outside (the decode loop's logits): a device
        result, whatever made it."""
        self.records[t] = Node((Root("input", f"step input {label}", step=_step()),))

    def mark_module(self, module: torch.nn.Module) -> None:
        """Record the parameters and buffers of ``module`` (and its children) as such."""
        name = type(module).__name__
        for what, tensors in (("parameters", module.parameters()),
                              ("buffers", module.buffers())):
            for t in tensors:  # however it reached the device: a weight of the model
                self.records[t] = Node((Root("param", f"{what} of {name}"),))

    def _module_called(self, module: Any, args: Any) -> None:
        mods = self._modules
        if mods is not None and module not in mods:
            for m in module.modules():  # its children are the same model: named after it
                mods.add(m)
            self.mark_module(module)

    # -- recording -------------------------------------------------------------------------
    def _node(self, t: torch.Tensor) -> Node:
        n = self.records.get(t)
        if n is not None and (n.roots[:1] and n.roots[0].kind == "param"
                              or not isinstance(t, torch.nn.Parameter)):
            base = t._base
            if base is not None:  # the base written since (in place, or through a view)
                bn = self.records.get(base)
                if bn is not None and bn is not n and not _holds(n, bn):
                    n = self.records[t] = _merge([n, bn], None)
            return n
        if isinstance(t, torch.nn.Parameter):  # a weight, however it reached the device
            n = self.records[t] = Node((Root("param", "model parameters"),))
            return n
        base = getattr(t, "_base", None)
        if base is not None:
            n = self.records.get(base)
            if n is not None:
                return n
        if t.device.type in self.host_devices:
            n = Node((Root("upload", "host data", digest=self._digest(t), step=_step()),))
        else:
            n = Node((Root("unknown", "a tensor made before tracking began or passed in"),))
        self.records[t] = n
        return n

    def _digest(self, t: torch.Tensor) -> str:
        tls = HUB.tls
        tls.busy += 1  # reading host bytes is not the user's sync
        _OWN.on = True
        try:
            return _digest_tensor(t)
        finally:
            _OWN.on = False
            tls.busy -= 1

    def _upload(self, src: Optional[torch.Tensor], args: Tuple[Any, ...],
                kwargs: Dict[str, Any], kind: str = "upload") -> Node:
        site = _upload_site()
        digest = self._digest(src) if src is not None else _digest_args(args, kwargs)
        label = "host data" if kind == "upload" else "a constant"
        return Node((Root(kind, label, site, digest, _step()),))

    def _is_host(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type in self.host_devices

    def observe(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                out: Any) -> None:
        """Record ``out`` (and what ``func`` wrote) from ``args``/``kwargs``. Never raises:
        a diagnosis must not break the program's op (a failure leaves ``out`` unrecorded,
        so its reads say "unknown")."""
        if _OWN.on:
            return  # the tracker's own work (hashing host bytes)
        try:
            self._observe(func, args, kwargs, out)
        except Exception:
            self.failures += 1
            log.debug("syncguard: lineage of %s not recorded", func, exc_info=True)

    def _observe(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                 out: Any) -> None:
        self.ops_seen += 1
        info = _OP_INFO.get(func)
        if info is None:
            info = _op_info(func)
        base, short, rand, written = info
        records = self.records
        with self._lock:
            if base in _COPIES:
                self._copy(base, args, kwargs, out)
                return
            ins = _tensors(args)
            if kwargs:
                ins += _tensors(kwargs.values())
            if base in _LIFTS and ins and ins[0] not in records:
                node = self._upload(ins[0], args, kwargs)  # torch.tensor(data): hashed on the host
                self._set_out(out, node)
                return
            outs = _tensors(out) if isinstance(out, (list, tuple)) else (
                [out] if isinstance(out, torch.Tensor) else [])
            if not ins:
                if outs:  # a factory: random draws (torch.rand...) are not constants
                    self._set_out(out, rand if rand is not None else self._upload(
                        None, args, kwargs, "const"))
                return
            nodes = [self._node(t) for t in ins]
            if rand is not None:
                nodes.append(rand)
            node = _merge(nodes, short, _step())
            for pos, an in written:
                w = _arg(args, kwargs, pos, an)
                for t in _tensors((w,)):
                    records[t] = node
                    self._to_base(t, node)
            for t in outs:
                records[t] = node

    def _to_base(self, t: torch.Tensor, node: Node) -> None:
        """A write into view ``t`` (``buf[i:i+1] = tok``, ``e[1] = tok[0]``) is a write into
        its base: the base's record joins ``node``."""
        b = t._base
        if b is not None:
            self.records[b] = _merge([self._node(b), node], None)

    def _set_out(self, out: Any, node: Node) -> None:
        for t in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
            self.records[t] = node

    def _copy(self, base: str, args: Tuple[Any, ...], kwargs: Dict[str, Any],
              out: Any) -> None:
        if base in ("aten::_copy_from", "aten::_copy_from_and_resize"):
            src, dst = args[0], args[1]
        elif base == "aten::copy_":
            dst, src = args[0], args[1]
        elif base == "aten::copy":  # copy(self, src): a new tensor holding src's values
            src, dst = args[1], out
        else:  # _to_copy: a new tensor
            src, dst = args[0], out
        if not isinstance(src, torch.Tensor) or not isinstance(dst, torch.Tensor):
            return
        known = self.records.get(src)
        if self._is_host(src) and not self._is_host(dst) and (
                known is None or all(r.kind in HOST_KINDS for r in known.roots)):
            node = self._upload(src, args, kwargs)  # host data put on the device here
        else:
            node = self._node(src)
        if base not in ("aten::_to_copy", "aten::copy"):  # a write into dst
            self._to_base(dst, node)
        self.records[dst] = node
        if out is not dst and isinstance(out, torch.Tensor):
            self.records[out] = node

    # -- reading ---------------------------------------------------------------------------
    def summary(self, read: Any) -> Optional[Dict[str, Any]]:
        """The lineage of the tensors in ``read`` (a call's arguments): the flat dict of
        :func:`summarize`, with ``tree`` (:func:`tree_of`) and ``tree_id`` (:func:`tree_id`),
        or None when it holds no tensor."""
        ts = _tensors(read if isinstance(read, (list, tuple)) else (read,))
        if not ts:
            return None
        with self._lock:
            dev = [t for t in ts if not self._is_host(t)] or ts
            node = _merge([self._node(t) for t in dev], None)
            out = summarize(node)
            tree = tree_of(node)
        tid = tree_id(tree)
        kept = self._trees.get(tid)  # one object per distinct tree: events share it
        if kept is None:
            if len(self._trees) >= 256:
                self._trees.clear()
            kept = self._trees[tid] = tree
        out["tree"] = kept
        out["tree_id"] = tid
        return out


def _items(n: Node) -> Tuple[List[Node], int]:
    """The nodes drawn under ``n``'s op (joins spliced in, each node once) and how many
    inputs were left out."""
    out: List[Node] = []
    dropped = n.dropped
    stack = list(reversed(n.inputs))
    while stack:
        i = stack.pop()
        if i.op is None and i.inputs and not i.cut:  # a join: its inputs stand here
            dropped += i.dropped
            stack.extend(reversed(i.inputs))
        elif not any(i is o for o in out):
            out.append(i)
    return out, dropped


def _leaf(r: Root) -> Dict[str, Any]:
    d: Dict[str, Any] = {"root": r.kind, "label": r.label}
    if r.site:
        d["site"] = r.site
    return d


def tree_of(node: Node) -> List[Dict[str, Any]]:
    """The tree of the value read, for an event (JSON: a list of nodes under the read). An
    op node is ``{"op": name, "in": [nodes], "more": N}`` (``more``: children left out),
    with ``"cut": 1`` when the ops before it were not kept (``in`` then lists its roots); a
    root is ``{"root": kind, "label": words, "site": "path:line"}``. Bounded: at most
    :data:`TREE_DEPTH` op levels, :data:`TREE_WIDTH` children per node and :data:`TREE_NODES`
    nodes in all."""
    budget = [TREE_NODES]
    if node.op is None and node.inputs and not node.cut:
        top, _ = _items(node)
    else:
        top = [node]
    return [_tree(n, TREE_DEPTH, budget) for n in top[:TREE_WIDTH]]


def _tree(n: Node, depth: int, budget: List[int]) -> Dict[str, Any]:
    budget[0] -= 1
    if not n.inputs and not n.cut and n.op is None and len(n.roots) == 1:
        return _leaf(n.roots[0])
    d: Dict[str, Any] = {"op": n.op or ""}
    if n.inputs and depth > 1 and budget[0] > 0:
        kids, more = _items(n)
        d["in"] = []
        for k in kids[:TREE_WIDTH]:
            if budget[0] <= 0:
                break
            d["in"].append(_tree(k, depth - 1, budget))
        more += len(kids) - len(d["in"])
    else:  # the ops before it were not kept (or are over the bounds): its roots
        d["cut"] = 1
        roots = list({(r.kind, r.label, r.site): r for r in n.roots}.values())
        d["in"] = [_leaf(r) for r in roots[:TREE_WIDTH]]
        budget[0] -= len(d["in"])
        more = len(roots) - len(d["in"]) + int(n.more)
    if more > 0:
        d["more"] = more
    return d


def tree_id(tree: List[Dict[str, Any]]) -> str:
    """12 hex digits naming a tree: a result file writes each distinct tree once (the
    events after carry only ``tree_id``)."""
    import json

    text = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def summarize(node: Node) -> Dict[str, Any]:
    """The flat dict an event carries: ``verdict`` (hoistable, device, unknown), ``roots``
    (plain words), ``ops`` (the last ops, oldest first), ``uploads`` (the host data's
    ``path:line``, comma-separated), ``digest`` (of every upload's bytes together; empty when
    one was not hashed) and ``once`` (1 when every upload happened outside the steps)."""
    order = {"param": 0, "input": 1, "random": 2, "unknown": 3, "upload": 4, "const": 5}
    fed = node.fed
    node = Node(tuple(sorted(node.roots, key=lambda r: order.get(r.kind, 9))), node.ops,
                node.more)
    kinds = {r.kind for r in node.roots}
    if kinds & DEVICE_KINDS or fed:
        verdict = "device"
    elif "unknown" in kinds or not kinds or node.more:
        verdict = "unknown"
    else:
        verdict = "hoistable"
    ups = [r for r in node.roots if r.kind == "upload"]
    words: List[str] = []
    for r in node.roots:
        if r.kind in ("upload", "const"):
            words.append(f"{r.label} at {r.site}" if r.site else r.label)
        elif r.label not in words:
            words.append(r.label)
    words = list(dict.fromkeys(words))
    if fed:
        words.insert(0, CARRIED)
    if node.more:
        words.append("more")
    dig = ""
    if ups and all(r.digest for r in ups) and not fed:  # carried: not the uploads' value
        dig = hashlib.blake2b("".join(sorted(r.digest for r in ups)).encode(),
                              digest_size=6).hexdigest()
    return {
        "verdict": verdict,
        "roots": "; ".join(words),
        "ops": ", ".join(node.ops),
        "uploads": ", ".join(dict.fromkeys(r.site for r in ups if r.site)),
        "digest": dig,
        "once": int(bool(ups) and all(r.step is None for r in ups) and not fed),
    }


class _Own(threading.local):
    on = False


_OWN = _Own()

# -- the active trackers ----------------------------------------------------------------------
_ACTIVE: List[LineageTracker] = []


def active() -> Optional[LineageTracker]:
    """The tracker switched on last, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def mark_input(t: Any, label: str) -> None:
    """Tell the active tracker (if any) that ``t`` is a step input from outside the loop
    (a device result, e.g. the model's logits). Costs nothing when lineage is off."""
    if _ACTIVE and isinstance(t, torch.Tensor):
        _ACTIVE[-1].mark_input(t, label)


def _step() -> Optional[int]:
    guards = HUB.guards
    if not guards:
        return None
    g = guards[-1]
    step = g.current_step()[0]
    if step is None:  # exec's guard: its steps are per context, its session's
        of = getattr(g, "context_step", None)
        if of is not None:
            return of()  # type: ignore[no-any-return]
    return step


_OWN_DIR = PKG_DIR + os.sep


@functools.lru_cache(maxsize=1024)
def _shown(filename: str, cwd: str) -> Optional[str]:
    """The file as a lineage names it (:func:`syncguard.core.sites.key_path`), or None for
    syncguard's own files (cached: it walks ``sys.path``)."""
    if os.path.abspath(filename).startswith(_OWN_DIR):
        return None
    return key_path(filename, cwd)


def _upload_site() -> str:
    """``path:line`` of the user's line that made host data a device tensor: the hub's user
    frame, past syncguard's own helpers (the decode loop's pinned staging) to their caller."""
    for fr in HUB.user_stack(6, skip=1):
        shown = _shown(fr.filename, os.getcwd())
        if shown is not None:
            return f"{shown}:{fr.lineno}"
    return ""


def _mode(tracker: LineageTracker) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    observe: Callable[..., None] = tracker.observe

    class _LineageMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Tuple[Any, ...] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            observe(func, args, kwargs, out)
            return out

    return _LineageMode()
