"""How much slower is a sampling step on the simulated "npu" than on plain CPU tensors?

One decode-sized sampling step (softmax, descending sort, top-k mask, cumulative sum, top-p
mask; batch 32 x vocab 151936, float32, no host read) runs on CPU tensors and on the simulated
device, interleaved in one process (the order alternates each round) so both see the same
machine state; the medians of N steps are compared (target: the simulated step under 1.3x the
CPU one), and the median of the per-round ratios is reported too. A tiny elementwise op is
timed the same way to show the fixed per-op cost of the Python backend. Results go to
``reports/bench/sim.json`` with the machine, versions, git commit and date. No thresholds are
asserted: this is a measurement.

    python benchmarks/bench_sim.py [--repeats 15] [--batch 32] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List

import torch
from _common import (
    REPORTS,
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

from syncguard.sim import simulated_device

TARGET_RATIO = 1.3

__all__ = ["TARGET_RATIO", "main", "sampling_step"]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--out", type=Path, default=REPORTS / "sim.json")
    args = ap.parse_args(argv)
    env = environment()

    dev = simulated_device()
    logits, top_ks, top_ps = sampling_inputs(args.batch, args.vocab)
    inputs = {
        "cpu": (logits, top_ks, top_ps),
        "sim": (logits.to(dev), top_ks.to(dev), top_ps.to(dev)),
    }
    # Same answer on both (the simulated device runs the same CPU kernels).
    a, b = sampling_step(*inputs["cpu"]), sampling_step(*inputs["sim"])
    assert torch.equal(a[0], b[0].cpu()) and torch.equal(a[1], b[1].cpu())

    step = interleaved(
        {k: (lambda n, v=v: time_block(lambda: sampling_step(*v), n)) for k, v in inputs.items()},
        args.repeats,
        args.warmup,
    )
    small = {"cpu": torch.randn(4, 8), "sim": torch.randn(4, 8).to(dev)}
    tiny = interleaved(
        {k: (lambda n, v=v: time_block(lambda: v * 2, n)) for k, v in small.items()},
        args.repeats,
        1,
        inner=200,
    )

    cpu_ms = median(step["cpu"]) * 1e3
    sim_ms = median(step["sim"]) * 1e3
    ratio = sim_ms / cpu_ms
    paired = paired_ratio(step["sim"], step["cpu"])
    op_cpu_us = median(tiny["cpu"]) * 1e6
    op_sim_us = median(tiny["sim"]) * 1e6
    result: Dict[str, Any] = {
        "benchmark": "sampling step: softmax + sort + top-k mask + cumsum + top-p mask",
        "shape": [args.batch, args.vocab],
        "dtype": "float32",
        "params": {
            "batch": args.batch,
            "vocab": args.vocab,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "tiny_op_inner": 200,
        },
        "repeats": args.repeats,
        "statistic": "median; rounds interleaved, order alternating",
        "cpu_step_ms": round(cpu_ms, 3),
        "sim_step_ms": round(sim_ms, 3),
        "ratio_sim_over_cpu": round(ratio, 4),
        "ratio_sim_over_cpu_paired": round(paired, 4),
        "target_ratio": TARGET_RATIO,
        "within_target": ratio < TARGET_RATIO,
        "tiny_op_cpu_us": round(op_cpu_us, 2),
        "tiny_op_sim_us": round(op_sim_us, 2),
        "per_op_overhead_us": round(op_sim_us - op_cpu_us, 2),
        "cpu_step_ms_all": rounded(step["cpu"], 1e3),
        "sim_step_ms_all": rounded(step["sim"], 1e3),
        "env": env,
        # kept at the top level for readers of the first version of this report
        **{
            k: env[k]
            for k in (
                "torch",
                "python",
                "platform",
                "machine",
                "processor",
                "cpu_count",
                "torch_threads",
            )
        },
    }
    path = write_report("sim", result, args.out)
    print(f"sampling step {args.batch}x{args.vocab} float32, median of {args.repeats}:")
    print(f"  cpu {cpu_ms:9.2f} ms")
    print(
        f"  sim {sim_ms:9.2f} ms   ratio {ratio:.3f} (paired {paired:.3f})  "
        f"(target < {TARGET_RATIO})"
    )
    print(
        f"tiny op (4x8 mul): cpu {op_cpu_us:.1f} us, sim {op_sim_us:.1f} us "
        f"(+{op_sim_us - op_cpu_us:.1f} us per op on the simulated device)"
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
