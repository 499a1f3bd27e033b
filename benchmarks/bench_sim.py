"""How much slower is a sampling step on the simulated "npu" than on plain CPU tensors?

One decode-sized sampling step (softmax, descending sort, top-k mask, cumulative sum, top-p
mask; batch 32 x vocab 151936, float32, no host read) runs on CPU tensors and on the simulated
device, interleaved in one process so both see the same machine state; the median of N steps
is compared (target: the simulated step under 1.3x the CPU one). A tiny elementwise op is
timed the same way to show the fixed per-op cost of the Python backend. Results go to
``reports/bench/sim.json``. No thresholds are asserted: this is a measurement.

    python benchmarks/bench_sim.py [--repeats 15] [--batch 32] [--vocab 151936]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from syncguard.sim import simulated_device  # noqa: E402

TARGET_RATIO = 1.3


def sampling_step(logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    ranks = torch.arange(logits.size(-1), device=logits.device)
    sorted_probs.masked_fill_(ranks[None, :] >= top_ks[:, None], 0.0)
    cum = torch.cumsum(sorted_probs, dim=-1)
    sorted_probs.masked_fill_((cum - sorted_probs) > top_ps[:, None], 0.0)
    return sorted_probs, sorted_idx


def _time(fn: Callable[[], Any], inner: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def interleaved(fns: Dict[str, Callable[[], Any]], repeats: int, warmup: int, inner: int = 1
                ) -> Dict[str, List[float]]:
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            times[k].append(_time(fn, inner))
    return times


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "sim.json")
    args = ap.parse_args(argv)

    dev = simulated_device()
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(args.batch, args.vocab, generator=g)
    top_ks = torch.randint(1, 1024, (args.batch,), generator=g)
    top_ps = torch.rand(args.batch, generator=g) * 0.5 + 0.5
    inputs = {"cpu": (logits, top_ks, top_ps),
              "sim": (logits.to(dev), top_ks.to(dev), top_ps.to(dev))}
    # Same answer on both (the simulated device runs the same CPU kernels).
    a, b = sampling_step(*inputs["cpu"]), sampling_step(*inputs["sim"])
    assert torch.equal(a[0], b[0].cpu()) and torch.equal(a[1], b[1].cpu())

    step = interleaved({k: (lambda v=v: sampling_step(*v)) for k, v in inputs.items()},
                       args.repeats, args.warmup)
    small = {"cpu": torch.randn(4, 8), "sim": torch.randn(4, 8).to(dev)}
    tiny = interleaved({k: (lambda v=v: v * 2) for k, v in small.items()}, args.repeats, 1,
                       inner=200)

    cpu_ms = statistics.median(step["cpu"]) * 1e3
    sim_ms = statistics.median(step["sim"]) * 1e3
    ratio = sim_ms / cpu_ms
    op_cpu_us = statistics.median(tiny["cpu"]) * 1e6
    op_sim_us = statistics.median(tiny["sim"]) * 1e6
    result: Dict[str, Any] = {
        "benchmark": "sampling step: softmax + sort + top-k mask + cumsum + top-p mask",
        "shape": [args.batch, args.vocab],
        "dtype": "float32",
        "repeats": args.repeats,
        "statistic": "median",
        "cpu_step_ms": round(cpu_ms, 3),
        "sim_step_ms": round(sim_ms, 3),
        "ratio_sim_over_cpu": round(ratio, 4),
        "target_ratio": TARGET_RATIO,
        "within_target": ratio < TARGET_RATIO,
        "tiny_op_cpu_us": round(op_cpu_us, 2),
        "tiny_op_sim_us": round(op_sim_us, 2),
        "per_op_overhead_us": round(op_sim_us - op_cpu_us, 2),
        "cpu_step_ms_all": [round(t * 1e3, 3) for t in step["cpu"]],
        "sim_step_ms_all": [round(t * 1e3, 3) for t in step["sim"]],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"sampling step {args.batch}x{args.vocab} float32, median of {args.repeats}:")
    print(f"  cpu {cpu_ms:9.2f} ms")
    print(f"  sim {sim_ms:9.2f} ms   ratio {ratio:.3f}  (target < {TARGET_RATIO})")
    print(f"tiny op (4x8 mul): cpu {op_cpu_us:.1f} us, sim {op_sim_us:.1f} us "
          f"(+{op_sim_us - op_cpu_us:.1f} us per op on the simulated device)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
