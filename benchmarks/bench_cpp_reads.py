"""What does counting the reads made in C++ cost ``--device cpu`` (``--exhaustive``)?

In cpu mode the Python-level interceptors see every read made through a Python entry point
(``t.item()``, ``bool(t)``...); the reads made in C++ (a 0-d tensor used as a number,
``torch.full((n,), t)``, ``torch.arange(t)``; TorchScript's ``aten::Bool``/``aten::item``) are
seen only by the guard's dispatch-level net (``SyncGuard(exhaustive=True)``), which puts every
ATen op through Python. This measures that net on a decode-step-like loop: a tiny decoder
(embedding, two layers of layer norm, attention over a fixed 64-token cache and an MLP, then
the logits and a greedy pick), with one read per step (the stop check
``bool((token == eos).any())``), in three variants interleaved round by round in one process:

* ``plain``: no guard;
* ``cpu``: ``SyncGuard(devices=("cpu",))``, what ``exec --device cpu`` counts with by default;
* ``cpu_exhaustive``: ``SyncGuard(devices=("cpu",), exhaustive=True)``, what
  ``exec --device cpu --exhaustive`` counts with.

Each guarded block enters its guard, times ``--inner`` steps, exits, and checks that the guard
counted exactly one read per step (a sanity check, not a timing threshold). Reported: the
median per-step time of each variant (process CPU time by default, one torch thread: the
machine this ran on is shared, and its load is recorded), the paired ratios over ``plain``
and over ``cpu``, the ATen ops per step and the net's cost per op; then the cost per op of
one small op under a bare dispatch mode (with and without torch's ``_disable_dynamo`` wrapper),
the cpu-mode guard and the net, to tell the mode machinery's share from syncguard's.

    python benchmarks/bench_cpp_reads.py [--repeats 101] [--inner 20] [--clock process|wall]

Results go to ``reports/bench/cpp_reads.json`` (``cpp_reads_wall.json`` with ``--clock wall``),
a summary to ``reports/bench/cpp_reads.md``. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any, Callable, Dict, Optional

import torch
from _common import environment, interleaved, median, paired_ratio, rounded, write_report
from torch.utils._python_dispatch import TorchDispatchMode

from syncguard import SyncGuard

VARIANTS: Dict[str, Optional[Dict[str, Any]]] = {
    "plain": None,
    "cpu": {"devices": ("cpu",)},
    "cpu_exhaustive": {"devices": ("cpu",), "exhaustive": True},
}


class TinyDecoder(torch.nn.Module):
    """A decode step's shape of work: per token, two pre-norm layers (attention over a fixed
    cache, an MLP), the logits and a greedy pick."""

    def __init__(self, vocab: int, hidden: int, layers: int, cache: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            self.layers.append(torch.nn.ModuleDict({
                "n1": torch.nn.LayerNorm(hidden), "qkv": torch.nn.Linear(hidden, 3 * hidden),
                "o": torch.nn.Linear(hidden, hidden), "n2": torch.nn.LayerNorm(hidden),
                "up": torch.nn.Linear(hidden, 4 * hidden),
                "down": torch.nn.Linear(4 * hidden, hidden)}))
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, vocab)
        self.k = torch.randn(layers, cache, hidden)
        self.v = torch.randn(layers, cache, hidden)

    def forward(self, token: torch.Tensor) -> torch.Tensor:
        x = self.embed(token)  # [1, hidden]
        for i, layer in enumerate(self.layers):
            h = layer["n1"](x)
            q, _, _ = layer["qkv"](h).chunk(3, dim=-1)
            att = torch.softmax(q @ self.k[i].T / self.k.shape[-1] ** 0.5, dim=-1)
            x = x + layer["o"](att @ self.v[i])
            x = x + layer["down"](torch.nn.functional.gelu(layer["up"](layer["n2"](x))))
        return self.head(self.norm(x)).argmax(dim=-1)


def make_step(model: TinyDecoder, eos: int) -> Callable[[], bool]:
    token = torch.tensor([1])

    @torch.no_grad()
    def step() -> bool:
        nonlocal token
        token = model(token)
        return bool((token == eos).any())  # the stop check: the step's one host read

    return step


class _OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


class _BareMode(TorchDispatchMode):
    """A dispatch mode that only runs the op: the floor of any dispatch-level net."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class _BareModeNoDynamoWrapper(_BareMode):
    """The same without torch's ``_disable_dynamo`` wrapper around ``__torch_dispatch__``
    (what that wrapper costs per op)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def per_op(repeats: int, inner: int, clock: Callable[[], float]) -> Dict[str, Any]:
    """Cost per op of one small op (``torch.add`` of two 4-element tensors) under each layer."""
    x = torch.ones(4)
    variants: Dict[str, Callable[[], Any]] = {
        "plain": contextlib.nullcontext, "bare_mode": _BareMode,
        "bare_mode_no_dynamo_wrapper": _BareModeNoDynamoWrapper,
        "cpu": lambda: SyncGuard(devices=("cpu",)),
        "cpu_exhaustive": lambda: SyncGuard(devices=("cpu",), exhaustive=True)}

    def runner(make: Callable[[], Any]) -> Callable[[int], float]:
        def run(n: int) -> float:
            with make():
                t0 = clock()
                for _ in range(n):
                    torch.add(x, x)
                return (clock() - t0) / n
        return run

    times = interleaved({k: runner(v) for k, v in variants.items()}, repeats, warmup=1,
                        inner=inner)
    return {"op": "torch.add of two 4-element float tensors", "repeats": repeats,
            "inner": inner, "median_us": {k: round(median(v) * 1e6, 2) for k, v in times.items()}}


def ops_per_step(step: Callable[[], bool]) -> int:
    with _OpCounter() as c:
        step()
    return c.n


def _runner(step: Callable[[], bool], kwargs: Optional[Dict[str, Any]], what: str,
            clock: Callable[[], float]) -> Callable[[int], float]:
    def run(inner: int) -> float:
        with SyncGuard(**kwargs) if kwargs is not None else contextlib.nullcontext() as g:
            t0 = clock()
            for _ in range(inner):
                step()
            t = (clock() - t0) / inner
        if g is not None:
            assert g.count == inner, f"{what}: expected {inner} reads (one per step), got {g!r}"
        return t

    return run


CLOCKS = {"process": time.process_time, "wall": time.perf_counter}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=101)
    ap.add_argument("--inner", type=int, default=20, help="steps per timed block")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--cache", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="process",
                    help="process CPU time (default: steadier while other processes load "
                    "the machine; one torch thread, so it is the step's own time) or wall")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = TinyDecoder(a.vocab, a.hidden, a.layers, a.cache).eval()
    step = make_step(model, eos=-1)  # never stops: every step reads once
    n_ops = ops_per_step(step)
    runners = {k: _runner(step, kw, k, CLOCKS[a.clock]) for k, kw in VARIANTS.items()}
    load_before = os.getloadavg()
    times = interleaved(runners, a.repeats, warmup=2, inner=a.inner)
    load_after = os.getloadavg()
    med = {k: median(v) for k, v in times.items()}
    net_us = (med["cpu_exhaustive"] - med["cpu"]) * 1e6
    result: Dict[str, Any] = {
        "benchmark": "cpu mode: the dispatch-level net (--exhaustive) on a decode-step-like loop",
        "env": {**environment(), "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
                "loadavg_1_5_15_after": [round(x, 2) for x in load_after]},
        "command": "python benchmarks/bench_cpp_reads.py " + " ".join(
            f"--{k} {v}" for k, v in vars(a).items()),
        "step": (f"tiny decoder, vocab {a.vocab}, hidden {a.hidden}, {a.layers} layers, "
                 f"cache {a.cache}, greedy; one host read per step (the stop check)"),
        "params": {**vars(a), "variants": VARIANTS,
                   "statistic": f"{a.clock} time; median over rounds of the mean per step; "
                                "ratios: median of per-round ratios (variants interleaved, "
                                "order rotated)"},
        "aten_ops_per_step": n_ops,
        "median_us": {k: round(v * 1e6, 1) for k, v in med.items()},
        "ratio_over_plain": {k: round(paired_ratio(times[k], times["plain"]), 3)
                             for k in ("cpu", "cpu_exhaustive")},
        "exhaustive_over_cpu": round(paired_ratio(times["cpu_exhaustive"], times["cpu"]), 3),
        "net_us_per_step": round(net_us, 1),
        "net_us_per_op": round(net_us / n_ops, 2),
        "all_us": {k: rounded(v, 1e6, 1) for k, v in times.items()},
        "per_op": per_op(max(11, a.repeats // 5), 2000, CLOCKS[a.clock]),
    }
    path = write_report("cpp_reads" if a.clock == "process" else f"cpp_reads_{a.clock}", result)
    print(f"{n_ops} ATen ops per step; median per step: "
          + ", ".join(f"{k} {v:.1f} us" for k, v in result["median_us"].items()))
    print(f"ratio over plain: {result['ratio_over_plain']}; exhaustive/cpu "
          f"{result['exhaustive_over_cpu']}x; the net: {result['net_us_per_step']} us per step, "
          f"{result['net_us_per_op']} us per op")
    print(f"per op ({result['per_op']['op']}): {result['per_op']['median_us']}")
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
