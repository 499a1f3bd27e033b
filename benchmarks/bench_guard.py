"""What does an active SyncGuard cost a step that makes no host read?

The sampling step (softmax, descending sort, top-k mask with ``masked_fill_``, cumulative sum,
top-p mask with ``masked_fill_``; float32 CPU tensors) runs at two sizes, a decode-sized one
(batch 32 x vocab 151936) and a tiny one (batch 1 x vocab 32), in five variants interleaved
round by round in one process:

* ``none``: no guard (torch unpatched);
* ``guard``: inside ``SyncGuard()``. CPU tensors are not device tensors, so nothing is counted,
  but every interceptor is installed and runs its classifier: that is the overhead measured;
* ``guard_cpu``: inside ``SyncGuard(devices=("cpu",))``: the classifiers treat CPU tensors as
  device-resident (the step still reads nothing, so the count stays 0);
* ``guard_cpu_model``: ``SyncGuard(devices=("cpu",), model="npu")``: as above, and the op sync
  model is consulted for ``masked_fill_`` too (the longest classifier path in this step);
* ``guard_exhaustive``: ``SyncGuard(exhaustive=True)``: the dispatch-level net on top, every
  ATen op of the step through a Python ``TorchDispatchMode`` (what real-device runs use).

Each guarded block enters the guard, times its steps, exits, and checks ``count == 0`` and no
event (a sanity check, not a timing threshold). Reported: median per-step time of each variant
and the guard/no-guard ratio (median of per-round ratios; aims: < 1.1x large, < 2x tiny).

The tiny step is then broken down: each intercepted call in the step timed alone, with and
without the guard (wall-clock overhead per call and per step), ``guard.step()`` and guard
enter/exit, and a cProfile of the guarded tiny step listing syncguard's own functions.

    python benchmarks/bench_guard.py [--repeats 15] [--tiny-repeats 101] [--tiny-inner 200]

Results go to ``reports/bench/guard.json``. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

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

AIMS = {"large": 1.1, "tiny": 2.0}

#: variant -> SyncGuard keyword arguments (None: no guard)
VARIANTS: Dict[str, Optional[Dict[str, Any]]] = {
    "none": None,
    "guard": {},
    "guard_cpu": {"devices": ("cpu",)},
    "guard_cpu_model": {"devices": ("cpu",), "model": "npu"},
    "guard_exhaustive": {"exhaustive": True},
}

Inputs = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _check_quiet(g: SyncGuard, what: str) -> None:
    """The step reads nothing: a guard that saw a sync means the benchmark is wrong."""
    assert g.count == 0 and g.allowed_count == 0 and not g.events, (
        f"{what}: expected no sync, got {g!r}: {[e.describe() for e in g.events[:3]]}"
    )


def _runner(
    fn: Callable[[], Any], kwargs: Optional[Dict[str, Any]], what: str
) -> Callable[[int], float]:
    """Times ``inner`` calls of ``fn``, inside a fresh guard (entered and exited outside the
    timed region) unless ``kwargs`` is None."""

    def run(inner: int) -> float:
        if kwargs is None:
            return time_block(fn, inner)
        with SyncGuard(**kwargs) as g:
            t = time_block(fn, inner)
        _check_quiet(g, what)
        return t

    return run


def measure_step(inputs: Inputs, repeats: int, inner: int, warmup: int) -> Dict[str, Any]:
    fn = lambda: sampling_step(*inputs)  # noqa: E731
    runners = {k: _runner(fn, kw, k) for k, kw in VARIANTS.items()}
    times = interleaved(runners, repeats, warmup=warmup, inner=inner)
    out: Dict[str, Any] = {
        "median_us": {k: round(median(v) * 1e6, 2) for k, v in times.items()},
        "ratio_over_none": {
            k: round(paired_ratio(v, times["none"]), 4) for k, v in times.items() if k != "none"
        },
        "ratio_of_medians": {
            k: round(median(v) / median(times["none"]), 4) for k, v in times.items() if k != "none"
        },
        "overhead_us_per_step": {
            k: round((median(v) - median(times["none"])) * 1e6, 2)
            for k, v in times.items()
            if k != "none"
        },
        "all_us": {k: rounded(v, 1e6, 2) for k, v in times.items()},
    }
    return out


# -- breakdown of the tiny step ----------------------------------------------------------------
def step_no_getitem(
    logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The step with ``x[None, :]``/``x[:, None]`` spelled ``unsqueeze`` (not intercepted):
    only the two ``masked_fill_`` calls go through syncguard."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    ranks = torch.arange(logits.size(-1), device=logits.device)
    sorted_probs.masked_fill_(ranks.unsqueeze(0) >= top_ks.unsqueeze(1), 0.0)
    cum = torch.cumsum(sorted_probs, dim=-1)
    sorted_probs.masked_fill_((cum - sorted_probs) > top_ps.unsqueeze(1), 0.0)
    return sorted_probs, sorted_idx


def step_unpatched(
    logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The same masks with no intercepted call at all (``unsqueeze``, multiply by the keep
    mask): the control, whose guard overhead should be nil."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    ranks = torch.arange(logits.size(-1), device=logits.device)
    sorted_probs = sorted_probs * (ranks.unsqueeze(0) < top_ks.unsqueeze(1))
    cum = torch.cumsum(sorted_probs, dim=-1)
    sorted_probs = sorted_probs * ((cum - sorted_probs) <= top_ps.unsqueeze(1))
    return sorted_probs, sorted_idx


def in_step_attribution(inputs: Inputs, repeats: int, inner: int) -> Dict[str, Any]:
    """Guard overhead of three spellings of the step, each against its own unguarded run:
    all intercepted calls (the step), only the two ``masked_fill_``, none (the control). The
    differences attribute the step's overhead to ``__getitem__`` and ``masked_fill_`` as they
    run inside the step (a tight loop of one call alone underestimates it)."""
    steps: Dict[str, Callable[..., Any]] = {
        "step": sampling_step,
        "no_getitem": step_no_getitem,
        "unpatched": step_unpatched,
    }
    runners: Dict[str, Callable[[int], float]] = {}
    for name, f in steps.items():
        fn = functools.partial(f, *inputs)
        runners[f"{name}/none"] = _runner(fn, None, name)
        runners[f"{name}/guard"] = _runner(fn, {}, name)
    t = interleaved(runners, repeats, warmup=1, inner=inner)
    over = {n: (median(t[f"{n}/guard"]) - median(t[f"{n}/none"])) * 1e6 for n in steps}
    return {
        "median_us": {k: round(median(v) * 1e6, 2) for k, v in t.items()},
        "ratio": {n: round(paired_ratio(t[f"{n}/guard"], t[f"{n}/none"]), 4) for n in steps},
        "overhead_us": {n: round(v, 2) for n, v in over.items()},
        "attributed_us_per_step": {
            "Tensor.__getitem__ x3": round(over["step"] - over["no_getitem"], 2),
            "Tensor.masked_fill_ x2": round(over["no_getitem"] - over["unpatched"], 2),
            "rest (control)": round(over["unpatched"], 2),
        },
    }


def intercepted_calls(inputs: Inputs) -> Dict[str, Tuple[str, Callable[[], Any], int]]:
    """Each patched entry point the step goes through (label -> (Tensor attribute, a call like
    the step's, calls per step)); the profile's classifier call counts confirm them."""
    logits, top_ks, top_ps = inputs
    probs, _ = torch.sort(torch.softmax(logits, -1), -1, descending=True)
    ranks = torch.arange(logits.size(-1))
    mask = ranks[None, :] >= top_ks[:, None]
    return {
        "Tensor.__getitem__ (x[None, :] / x[:, None])": ("__getitem__", lambda: ranks[None, :], 3),
        "Tensor.masked_fill_ (bool mask, float value)": (
            "masked_fill_",
            lambda: probs.masked_fill_(mask, 0.0),
            2,
        ),
    }


def _floor_runner(fn: Callable[[], Any], attr: str) -> Optional[Callable[[int], float]]:
    """Times ``fn`` inside ``SyncGuard()`` with ``Tensor.<attr>``'s interceptor swapped for one
    built by syncguard's own ``_wrap`` around a classifier that returns None at once: the cost
    of the patch itself (Python wrapper and dispatch), without any classification. None when
    syncguard's internals no longer fit (a private API)."""
    try:
        from syncguard.core.intercept import _wrap
    except ImportError:
        return None

    def null(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        return None

    def run(inner: int) -> float:
        with SyncGuard() as g:
            cur = vars(torch.Tensor)[attr]
            setattr(torch.Tensor, attr, _wrap(cur.__wrapped__, f"Tensor.{attr}", null))
            try:
                t = time_block(fn, inner)
            finally:
                setattr(torch.Tensor, attr, cur)
        _check_quiet(g, f"floor {attr}")
        return t

    return run


def breakdown(inputs: Inputs, repeats: int, inner: int) -> Dict[str, Any]:
    calls = intercepted_calls(inputs)
    per_call: Dict[str, Any] = {}
    for name, (attr, fn, n) in calls.items():
        runners = {k: _runner(fn, kw, name) for k, kw in VARIANTS.items()}
        floor = _floor_runner(fn, attr)
        if floor is not None:
            runners["wrapper_only"] = floor
        t = interleaved(runners, repeats, warmup=1, inner=inner)
        base = median(t["none"])
        per_call[name] = {
            "calls_per_step": n,
            "none_us": round(base * 1e6, 3),
            **{f"{k}_us": round(median(v) * 1e6, 3) for k, v in t.items() if k != "none"},
            **{
                f"{k}_overhead_us_per_step": round((median(v) - base) * 1e6 * n, 2)
                for k, v in t.items()
                if k != "none"
            },
        }

    # guard.step() marking and guard enter/exit (install + remove every patch)
    def step_marks(inner_: int) -> float:
        with SyncGuard() as g:

            def one() -> None:
                with g.step():
                    pass

            return time_block(one, inner_)

    def enter_exit() -> None:
        with SyncGuard():
            pass

    t2 = interleaved(
        {"step_mark": step_marks, "enter_exit": lambda n: time_block(enter_exit, n)},
        max(11, repeats // 4),
        warmup=1,
        inner=max(10, inner // 10),
    )
    return {
        "per_intercepted_call": per_call,
        "guard_step_context_us": round(median(t2["step_mark"]) * 1e6, 3),
        "guard_enter_exit_us": round(median(t2["enter_exit"]) * 1e6, 2),
    }


def profile_tiny(
    inputs: Inputs, steps: int, kwargs: Dict[str, Any], top: int = 14
) -> List[Dict[str, Any]]:
    """cProfile of ``steps`` guarded tiny steps: syncguard's functions, per step (profiler
    overhead inflates every figure; the shares are what matter)."""
    pr = cProfile.Profile()
    with SyncGuard(**kwargs) as g:
        pr.enable()
        for _ in range(steps):
            sampling_step(*inputs)
        pr.disable()
    _check_quiet(g, "profile")
    st = pstats.Stats(pr)
    rows: List[Dict[str, Any]] = []
    for (fname, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        short = fname if fname == "~" else "/".join(Path(fname).parts[-2:])
        rows.append(
            {
                "function": f"{short}:{line}({func})" if fname != "~" else func,
                "calls_per_step": round(nc / steps, 2),
                "tottime_us_per_step": round(tt / steps * 1e6, 2),
                "cumtime_us_per_step": round(ct / steps * 1e6, 2),
            }
        )
    rows.sort(key=lambda r: -r["tottime_us_per_step"])
    return rows[:top]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="rounds of the large step")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--tiny-batch", type=int, default=1)
    ap.add_argument("--tiny-vocab", type=int, default=32)
    ap.add_argument("--tiny-repeats", type=int, default=101, help="rounds of the tiny step")
    ap.add_argument("--tiny-inner", type=int, default=200, help="tiny steps per timed block")
    ap.add_argument("--profile-steps", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    large_in = sampling_inputs(args.batch, args.vocab)
    tiny_in = sampling_inputs(args.tiny_batch, args.tiny_vocab)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"{len(VARIANTS)} variants interleaved",
        flush=True,
    )
    tiny = measure_step(tiny_in, args.tiny_repeats, args.tiny_inner, warmup=2)
    print("tiny done", flush=True)
    large = measure_step(large_in, args.repeats, 1, warmup=args.warmup)
    print("large done", flush=True)
    bd = breakdown(tiny_in, args.tiny_repeats, args.tiny_inner * 5)
    attr = in_step_attribution(tiny_in, args.tiny_repeats, args.tiny_inner)
    prof = profile_tiny(tiny_in, args.profile_steps, {})
    prof_cpu = profile_tiny(tiny_in, args.profile_steps, {"devices": ("cpu",)})

    sizes = {
        "large": (large, [args.batch, args.vocab]),
        "tiny": (tiny, [args.tiny_batch, args.tiny_vocab]),
    }
    result: Dict[str, Any] = {
        "benchmark": "SyncGuard overhead on a sampling step with no host read",
        "step": "softmax + sort + top-k masked_fill_ + cumsum + top-p masked_fill_, float32, "
        "CPU tensors",
        "env": environment(),
        "params": {
            **{k: v for k, v in vars(args).items() if k != "out"},
            "variants": {
                k: (
                    None
                    if v is None
                    else {kk: list(vv) if isinstance(vv, tuple) else vv for kk, vv in v.items()}
                )
                for k, v in VARIANTS.items()
            },
            "statistic": "median; ratio = median of per-round ratios (ABCD rounds, "
            "order rotated each round)",
        },
        "aims": AIMS,
        "sizes": {},
        "tiny_breakdown": {
            "in_step": attr,
            **bd,
            "profile_guard": prof,
            "profile_guard_cpu": prof_cpu,
        },
    }
    for name, (m, shape) in sizes.items():
        r = m["ratio_over_none"]["guard"]
        result["sizes"][name] = {
            "shape": shape,
            "inner": args.tiny_inner if name == "tiny" else 1,
            **m,
            "within_aim": {k: v < AIMS[name] for k, v in m["ratio_over_none"].items()},
        }
        result["sizes"][name]["guard_ratio"] = r
    path = write_report("guard", result, args.out)

    print(
        f"\nper-step median (us) and guard/no-guard ratio; {args.repeats} rounds large, "
        f"{args.tiny_repeats} x {args.tiny_inner} tiny"
    )
    for name, (m, shape) in sizes.items():
        print(
            f"  {name:5s} {shape[0]}x{shape[1]}: none {m['median_us']['none']:.1f}"
            f"  (aim < {AIMS[name]}x)"
        )
        for k in VARIANTS:
            if k != "none":
                print(
                    f"    {k:16s} {m['median_us'][k]:12.1f}   ratio "
                    f"{m['ratio_over_none'][k]:.3f}   +{m['overhead_us_per_step'][k]:.1f} us"
                )
    a = attr["attributed_us_per_step"]
    print(
        "tiny step, SyncGuard() overhead by spelling (us per step): "
        + ", ".join(
            f"{k} +{v:.1f} (x{attr['ratio'][k]:.2f})" for k, v in attr["overhead_us"].items()
        )
    )
    print("  attributed: " + ", ".join(f"{k} {v:.1f} us" for k, v in a.items()))
    print("tiny step, each intercepted call alone in a loop (overhead per step, us):")
    for name, row in bd["per_intercepted_call"].items():
        print(
            f"  {name:46s} x{row['calls_per_step']}: guard +"
            f"{row['guard_overhead_us_per_step']:.1f}, guard_cpu +"
            f"{row['guard_cpu_overhead_us_per_step']:.1f}, guard_cpu_model +"
            f"{row['guard_cpu_model_overhead_us_per_step']:.1f}"
            + (
                f"; wrapper alone +{row['wrapper_only_overhead_us_per_step']:.1f}"
                if "wrapper_only_us" in row
                else ""
            )
        )
    print(
        f"  guard.step() context {bd['guard_step_context_us']:.2f} us; "
        f"guard enter+exit {bd['guard_enter_exit_us']:.1f} us"
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
