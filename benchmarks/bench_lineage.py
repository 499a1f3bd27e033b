"""What does lineage tracking (``--lineage``) cost a guarded step?

The step is the sampling step of ``_common.sampling_step`` plus the legacy Ascend range check
(``bool(torch.all((top_ks >= 1) & (top_ks <= 1024)))``: one host read per step, so each step
also pays for one lineage summary), at a tiny size (batch 1 x vocab 32) and a decode size
(batch 8 x vocab 32000, smaller than bench_guard's: the simulated device copies its values).
Variants, interleaved round by round in one process:

* ``cpu_plain`` / ``cpu_guard`` / ``cpu_lineage``: CPU tensors; no guard; inside
  ``SyncGuard(devices=("cpu",))``; the same with the tracker on (a ``TorchDispatchMode``);
* ``sim_plain`` / ``sim_guard`` / ``sim_lineage``: the simulated npu; no guard; inside
  ``SyncGuard()``; the same with the tracker on (the backend's op observers).

Each guarded block checks it counted exactly one read per step (and, with lineage, that the
read's verdict is hoistable): a sanity check, not a timing threshold. Reported: median
per-step time of each variant, lineage-on over lineage-off ratios (median of per-round
ratios) and the added microseconds per step.

    python benchmarks/bench_lineage.py [--repeats 9] [--inner 20]

Results go to ``reports/bench/lineage.json``. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Tuple

import torch
from _common import (
    environment,
    interleaved,
    median,
    paired_ratio,
    rounded,
    sampling_inputs,
    sampling_step,
    time_block,
    write_report,
)

from syncguard import SyncGuard
from syncguard.driving.lineage import start_for
from syncguard.sim import simulated_device

SIZES = {"tiny": (1, 32), "decode": (8, 32000)}


def step(logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor) -> None:
    sampling_step(logits, top_ks, top_ps)
    if torch.all((top_ks >= 1) & (top_ks <= 1024)):
        pass


def _runner(kind: str, variant: str, inputs: Tuple[torch.Tensor, ...]
            ) -> Callable[[int], float]:
    def run(inner: int) -> float:
        fn = lambda: step(*inputs)  # noqa: E731
        if variant == "plain":
            return time_block(fn, inner)
        tracker = start_for(kind) if variant == "lineage" else None
        try:
            with SyncGuard(devices=("cpu",) if kind == "cpu" else ()) as g:
                t = time_block(fn, inner)
        finally:
            if tracker is not None:
                tracker.stop()
        reads = [e for e in g.events if e.kind == "scalar_read"]
        assert len(reads) == inner, f"{kind}/{variant}: {len(reads)} reads for {inner} steps"
        if variant == "lineage":
            # the inputs were made before tracking: the verdict must say so, not guess
            assert all(e.lineage and e.lineage["verdict"] == "unknown" for e in reads)
        return t

    return run


def measure(batch: int, vocab: int, repeats: int, inner: int) -> Dict[str, Any]:
    cpu = sampling_inputs(batch, vocab)
    dev = simulated_device()
    sim = tuple(t.to(dev) for t in cpu)
    runners: Dict[str, Callable[[int], float]] = {}
    for kind, inputs in (("cpu", cpu), ("sim", sim)):
        for variant in ("plain", "guard", "lineage"):
            runners[f"{kind}_{variant}"] = _runner(kind, variant, inputs)
    times = interleaved(runners, repeats, warmup=1, inner=inner)
    per_step = {k: [t / inner for t in v] for k, v in times.items()}
    out: Dict[str, Any] = {
        "median_us_per_step": {k: round(median(v) * 1e6, 2) for k, v in per_step.items()},
        "lineage_over_guard": {k: round(paired_ratio(per_step[f"{k}_lineage"],
                                                     per_step[f"{k}_guard"]), 4)
                               for k in ("cpu", "sim")},
        "guard_over_plain": {k: round(paired_ratio(per_step[f"{k}_guard"],
                                                   per_step[f"{k}_plain"]), 4)
                             for k in ("cpu", "sim")},
        "lineage_added_us_per_step": {
            k: round((median(per_step[f"{k}_lineage"]) - median(per_step[f"{k}_guard"])) * 1e6,
                     2) for k in ("cpu", "sim")},
        "all_us_per_step": {k: rounded(v, 1e6, 2) for k, v in per_step.items()},
    }
    return out


def main(argv: List[str] = None) -> None:  # type: ignore[assignment]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--inner", type=int, default=20)
    args = ap.parse_args(argv)
    result: Dict[str, Any] = {"benchmark": "lineage", "env": environment(),
                              "params": {"repeats": args.repeats, "inner": args.inner,
                                         "sizes": SIZES}}
    for name, (b, v) in SIZES.items():
        result[name] = measure(b, v, args.repeats, args.inner)
        print(name, result[name]["median_us_per_step"], "lineage/guard",
              result[name]["lineage_over_guard"])
    print("wrote", write_report("lineage", result))


if __name__ == "__main__":
    main()
