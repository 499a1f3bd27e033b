"""Cross-check a run against the native ground truth, per step.

Run as a child process (trace activation cannot be undone)::

    python -m syncguard.driving.crosscheck --device cuda --out crosscheck.json [--paths ...]
        [--steps N] [--warmup N] SCENARIO ...

For each scenario and path, the counted pass runs under syncguard and the native mechanism at
once (CUDA: trace callbacks, then sync debug mode, one pass each; NPU: trace callbacks; sim:
the simulated backend's own op count). Every step is compared on its total (hidden + allowed
syncs: the native side cannot tell them apart) and site by site (``file:line`` of the user
code, counted per sync); a step that differs in either is a disagreement, listed with both
sides' sites.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from ..model import groundtruth
from ..model.groundtruth import normalize_site
from ..process.atomic import write_text
from ..results.environment import environment
from .devices import resolve_target
from .scenario import resolve

#: Native mechanisms per device kind, each a separate counted pass (CUDA: the trace callbacks
#: and sync debug mode; NPU: the trace callbacks; sim: the backend's own op count).
MECHANISMS = {"cuda": ["cuda-trace", "cuda-debug"], "npu": ["npu-trace"], "sim": ["sim-backend"]}


def crosscheck_pass(sc: Any, path: str, target: Any, mechanism: str) -> Dict[str, Any]:
    """One counted pass with syncguard and ``mechanism`` side by side, per step."""
    from collections import Counter

    from ..core.guard import SyncGuard  # torch: after the child's device is prepared
    from .decode import DecodeLoop, _seed

    _seed(sc)
    loop = DecodeLoop(sc, path, target)
    counter = groundtruth.native_counter(mechanism)  # by the module: tests stand one in
    steps: List[Dict[str, Any]] = []
    with SyncGuard(warmup=sc.warmup, exhaustive=target.exhaustive) as g:
        with counter:
            for step in range(sc.steps):
                n0, s0, e0 = counter.count, len(counter.sites), len(g.events)
                with g.step(step):
                    loop.run_step(step)
                evs = g.events[e0:]
                ours_sites: Counter[str] = Counter()
                for e in evs:
                    ours_sites[normalize_site(e.site)] += e.count
                native_sites = Counter(counter.sites[s0:])
                steps.append({
                    "step": step, "syncguard": sum(ours_sites.values()),
                    "native": counter.count - n0,
                    "sites": sorted({e.site for e in evs}),
                    "syncguard_sites": dict(sorted(ours_sites.items())),
                    "native_sites": dict(sorted(native_sites.items())),
                    "sites_agree": ours_sites == native_sites,
                })
    bad = [s for s in steps if s["syncguard"] != s["native"] or not s["sites_agree"]]
    return {"scenario": sc.name, "path": path, "mechanism": mechanism, "steps": steps,
            "disagreements": bad, "agree": len(steps) - len(bad), "total": len(steps)}


def run(scenarios: List[Any], device: str, paths: Optional[List[str]]) -> Dict[str, Any]:
    target = resolve_target(device)
    mechs = MECHANISMS[target.kind]
    passes = [crosscheck_pass(sc, p, target, m)
              for m in mechs for sc in scenarios for p in (paths or list(sc.paths))]
    return {"schema": 1, "env": environment(target.kind, target.name),
            "mechanism": ", ".join(mechs), "passes": passes}


def summary_lines(doc: Dict[str, Any]) -> List[str]:
    lines = [f"cross-check against {doc['mechanism']}:"]
    for p in doc["passes"]:
        state = "agree" if not p["disagreements"] else "DISAGREE"
        lines.append(f"  {p['scenario']} [{p['path']}] vs {p['mechanism']}: {p['agree']}/"
                     f"{p['total']} steps {state}")
        for d in p["disagreements"]:
            ours = ", ".join(f"{k} x{v}" for k, v in d["syncguard_sites"].items()) or "-"
            native = ", ".join(f"{k} x{v}" for k, v in d["native_sites"].items()) or "-"
            lines.append(f"    step {d['step']}: syncguard {d['syncguard']} at {ours}; native "
                         f"{d['native']} at {native}")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    from .runner import RunOptions, prepare  # torch: after --device is read
    ap = argparse.ArgumentParser(prog="python -m syncguard.driving.crosscheck")
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--device", required=True, choices=sorted(MECHANISMS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--paths", action="append", default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    a = ap.parse_args(argv)
    scs = prepare(resolve(a.scenarios), RunOptions(steps=a.steps, warmup=a.warmup))
    doc = run(scs, a.device, a.paths)

    write_text(a.out, json.dumps(doc, indent=1))  # the one writer: atomic, no link followed
    print("\n".join(summary_lines(doc)))
    return 0 if all(not p["disagreements"] for p in doc["passes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
