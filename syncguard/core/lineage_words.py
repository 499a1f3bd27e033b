"""The verdict on a sync site from the lineage of the values it read, in plain words (no
torch: reports read it from a result file). The tracker is :mod:`syncguard.core.lineage`."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

#: Root kinds that are host data (hoistable) and device results (not).
HOST_KINDS = frozenset({"upload", "const"})
DEVICE_KINDS = frozenset({"param", "input", "random"})
#: The verdicts, most cautious first.
VERDICTS = ("device", "unknown", "hoistable")


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


