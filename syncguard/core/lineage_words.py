"""The verdict on a sync site from the lineage of the values it read, in plain words (no
torch: reports read it from a result file). The tracker is :mod:`syncguard.core.lineage`."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

#: Root kinds that are host data (hoistable) and device results (not).
HOST_KINDS = frozenset({"upload", "const"})
DEVICE_KINDS = frozenset({"param", "input", "random"})
#: The words a lineage gives state carried on the device from an earlier step.
CARRIED = "state carried on the device from an earlier step"


def site_verdict(lineages: Iterable[Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """One verdict for a site from its events' lineages (None when none has one): the most
    cautious of them (device over unknown over hoistable), ``same`` 1 when the value is the
    same every step (one digest over every event, or uploaded once before the loop)."""
    seen = [d for d in lineages if isinstance(d, dict) and d.get("verdict")]
    if not seen:
        return None
    order = {"device": 0, "unknown": 1, "hoistable": 2}
    first = min(seen, key=lambda d: order.get(str(d.get("verdict")), 1))
    digests = {str(d.get("digest") or "") for d in seen}
    same = int(all(d.get("once") == 1 for d in seen)
               or (len(seen) > 1 and len(digests) == 1 and "" not in digests))
    return {**first, "same": same}


def verdict_text(lin: Dict[str, Any]) -> str:
    """A site's verdict in plain words, with the evidence."""
    v = lin.get("verdict")
    roots = str(lin.get("roots") or "")
    ops = str(lin.get("ops") or "")
    via = f" via {ops}" if ops else ""
    if v == "hoistable":
        where = str(lin.get("uploads") or "")
        at = f" uploaded at {where}" if where else ""
        text = (f"hoistable: depends only on host data{at} (and constants)"
                f"{via}: compute it on the host where that data is built, as SGLang's fix did")
        if lin.get("same"):
            text += "; the same value every step"
        return text
    if v == "device":
        dev = "; ".join(w for w in roots.split("; ")
                        if not w.startswith(("host data", "a constant")))
        return (f"depends on device results ({dev}){via}: keep the decision on the device "
                f"(torch.where, a device-side mask), or read it one step late")
    return (f"unknown: the value comes from {roots or 'tensors'} not seen being made "
            f"(before tracking began, or from outside): no verdict")



def verdict_hint(lin: Dict[str, Any]) -> str:
    """A site's verdict as a short hint beside a line of code (the lint's ``--with-run``):
    ``hoistable: compute it on the host where batch.py:113 builds it, the same value every
    step``; :func:`verdict_text` says it with the evidence."""
    v = lin.get("verdict")
    if v == "hoistable":
        where = _text(lin.get("uploads"))
        if where:
            verb = "build" if ", " in where else "builds"
            text = f"hoistable: compute it on the host where {where} {verb} it"
        else:
            text = "hoistable: made of constants only: compute it on the host"
        if lin.get("same"):
            text += ", the same value every step"
        return text
    if v == "device":
        dev = "; ".join(w for w in _text(lin.get("roots")).split("; ")
                        if w and not w.startswith(("host data", "a constant")))
        of = f" ({dev})" if dev else ""
        return (f"depends on device results{of}: keep the decision on the device or read it "
                f"one step late")
    return "unknown: made from a value not seen being made: no verdict"


#: Bounds of a lineage tree as a report draws it (a crafted result may hold anything): op
#: levels, children per node, nodes in all, characters per name.
DRAW_DEPTH = 10
DRAW_WIDTH = 6
DRAW_NODES = 80
DRAW_CHARS = 200


def _text(v: Any) -> str:
    s = v if isinstance(v, str) else ("" if v is None else str(v))
    return s if len(s) <= DRAW_CHARS else s[:DRAW_CHARS - 3] + "..."


def _count(v: Any) -> int:
    return v if type(v) is int and 0 < v < 1 << 53 else 0


def draw_tree(lin: Dict[str, Any], tree: Any = None) -> List[Dict[str, Any]]:
    """The nodes under the value read, checked and bounded for a report, from ``tree`` (the
    recorded tree, :func:`syncguard.core.lineage.tree_of`; default ``lin["tree"]``). Each
    node is ``{"op": str, "in": [nodes], "more": int, "cut": bool}`` (``more``: children
    left out; ``cut``: the ops before it were not kept, ``in`` lists its roots) or ``{"root":
    kind, "label": str, "site": str}``. A lineage recorded before trees were (only the flat
    ``roots`` and ``ops``) gives one cut node with ``"flat": True``: its ops (as one list),
    then its roots."""
    if tree is None:
        tree = lin.get("tree")
    budget = [DRAW_NODES]
    if isinstance(tree, list) and tree:
        return _draw_list(tree, DRAW_DEPTH, budget)[0]
    leaves: List[Dict[str, Any]] = []
    more = 0
    for w in str(lin.get("roots") or "").split("; "):
        if not w:
            continue
        if w == "more":
            more += 1
        elif len(leaves) >= DRAW_WIDTH:
            more += 1
        elif w.startswith(("host data at ", "a constant at ")):
            label, _, site = w.partition(" at ")
            leaves.append({"root": "upload" if label == "host data" else "const",
                           "label": _text(label), "site": _text(site)})
        else:
            leaves.append({"root": "", "label": _text(w), "site": ""})
    if not leaves:
        return []
    return [{"op": _text(lin.get("ops")), "in": leaves, "more": more, "cut": True,
             "flat": True}]


def _draw_list(items: List[Any], depth: int, budget: List[int]
               ) -> Tuple[List[Dict[str, Any]], int]:
    out: List[Dict[str, Any]] = []
    for x in items:
        if len(out) >= DRAW_WIDTH or budget[0] <= 0:
            break
        node = _draw(x, depth, budget)
        if node is not None:
            out.append(node)
    return out, len(items) - len(out)


def _draw(x: Any, depth: int, budget: List[int]) -> Optional[Dict[str, Any]]:
    if not isinstance(x, dict):
        return None
    budget[0] -= 1
    if "root" in x:
        return {"root": _text(x.get("root")), "label": _text(x.get("label")),
                "site": _text(x.get("site"))}
    node: Dict[str, Any] = {"op": _text(x.get("op")), "in": [], "more": _count(x.get("more")),
                            "cut": bool(x.get("cut"))}
    kids = x.get("in")
    if isinstance(kids, list) and kids:
        if depth <= 1:
            node["more"] += len(kids)
        else:
            node["in"], left = _draw_list(kids, depth - 1, budget)
            node["more"] += left
    return node
