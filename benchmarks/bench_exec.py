"""What does ``syncguard exec``'s step hook cost?

Per call of a trivial function (returns its argument), interleaved round by round:

* ``plain``: the function itself, not named by any ``--step`` (the hooks never touch it; the
  ``unnamed_with_hooks`` variant runs it while another function of the program is hooked
  and the post-import finder is on ``sys.meta_path``);
* ``step_idle``: wrapped as a step, syncguard not running (the wrapper's cost in a program
  that ships ``@syncguard.step`` markers);
* ``marker_idle``: ``with syncguard.step():`` around the call, syncguard not running;
* ``step_hook``: wrapped as a step with a recorder whose begin/end do nothing: the hook's
  own cost per step call (outermost-step bookkeeping, lock, two calls);
* ``step_nested``: a nested step call inside an open step (recursion: no new step);
* ``step_session``: wrapped as a step under a real exec session (guard step, timing,
  StepRecord, the result line written and flushed; fsync'ed about once a second, not per
  step): exec's per-step cost of its own, with no sync in the step. What a guarded decode
  step costs a program end to end is ``bench_exec_cost.py``'s.

Also the post-import finder's cost per import of an unrelated module (``find_spec`` miss).

    python benchmarks/bench_exec.py [--repeats 21] [--inner 20000] [--session-inner 200]

Results go to ``reports/bench/exec.json``; aim: step_hook - plain < 5 us. Nothing is
asserted about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import types
from typing import Any, Dict

from _common import environment, interleaved, median, paired_ratio, rounded, write_report

from syncguard.core import steps
from syncguard.driving.devices import resolve_target
from syncguard.execute.hooks import StepHooks, _PostImportFinder, parse_step
from syncguard.execute.session import ExecSession
from syncguard.results.writer import ResultWriter

AIM_US = 5.0


def work(x: Any) -> Any:
    return x


class NullRecorder:
    def begin(self, name: str) -> None:
        pass

    def end(self, name: str) -> None:
        pass


def _loop(fn: Any, inner: int) -> float:
    import time

    t0 = time.perf_counter()
    for i in range(inner):
        fn(i)
    return (time.perf_counter() - t0) / inner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--inner", type=int, default=20000)
    ap.add_argument("--session-inner", type=int, default=200)
    a = ap.parse_args()

    stepped = steps.wrap_step(work, "work")

    def marker(x: Any) -> Any:
        with steps.step():
            return work(x)

    # a module with one hooked function, and our unnamed one beside it
    mod = types.ModuleType("sg_bench_mod")
    mod.hooked = lambda x: x  # type: ignore[attr-defined]
    sys.modules["sg_bench_mod"] = mod
    hooks = StepHooks([parse_step("sg_bench_mod:hooked"), parse_step("sg_bench_never:f")])

    def with_recorder(rec: Any, fn: Any) -> Any:
        def run(inner: int) -> float:
            prev = steps.set_recorder(rec)
            try:
                return _loop(fn, inner)
            finally:
                steps.set_recorder(prev)
        return run

    def nested(inner: int) -> float:
        prev = steps.set_recorder(NullRecorder())
        try:
            with steps.step("outer"):
                return _loop(stepped, inner)
        finally:
            steps.set_recorder(prev)

    def unnamed_with_hooks(inner: int) -> float:
        hooks.install()
        try:
            return _loop(work, inner)
        finally:
            hooks.uninstall()

    runners = {
        "plain": lambda n: _loop(work, n),
        "unnamed_with_hooks": unnamed_with_hooks,
        "step_idle": lambda n: _loop(stepped, n),
        "marker_idle": lambda n: _loop(marker, n),
        "step_hook": with_recorder(NullRecorder(), stepped),
        "step_nested": nested,
    }
    times = interleaved(runners, a.repeats, warmup=1, inner=a.inner)

    # the whole per-step cost under a real session (writes and flushes one line per step)
    target = resolve_target("sim")
    with tempfile.TemporaryDirectory() as d:
        writer = ResultWriter(os.path.join(d, "result.jsonl"), {"bench": True})
        session = ExecSession("bench", writer, target)
        with session:
            sess = interleaved({"plain": lambda n: _loop(work, n),
                                "step_session": with_recorder(session, stepped)},
                               a.repeats, warmup=1, inner=a.session_inner)
        writer.close(True)

    # the finder's cost for an unrelated import (a miss: it looks at the name only)
    finder = _PostImportFinder(hooks)
    hooks.install()
    try:
        miss = interleaved({"find_spec_miss": lambda n: _loop(
            lambda i: finder.find_spec("json.decoder"), n)}, a.repeats, inner=a.inner)
    finally:
        hooks.uninstall()
    sys.modules.pop("sg_bench_mod", None)

    us = {k: round(median(v) * 1e6, 4) for k, v in times.items()}
    over = {k: round((median(v) - median(times["plain"])) * 1e6, 4) for k, v in times.items()}
    result: Dict[str, Any] = {
        "benchmark": "syncguard exec step hook overhead per call",
        "env": environment(),
        "params": {"repeats": a.repeats, "inner": a.inner, "session_inner": a.session_inner,
                   "statistic": "median over rounds of the mean per call; variants "
                                "interleaved, order rotated each round"},
        "aim_us": {"step_hook_overhead": AIM_US},
        "per_call_us": us,
        "overhead_vs_plain_us": over,
        "ratio_vs_plain": {k: round(paired_ratio(v, times["plain"]), 3) for k, v in
                           times.items()},
        "spread_us": {k: [min(rounded(v, 1e6, 4)), max(rounded(v, 1e6, 4))]
                      for k, v in times.items()},
        "session": {
            "per_step_us": round(median(sess["step_session"]) * 1e6, 2),
            "plain_us": round(median(sess["plain"]) * 1e6, 4),
            "spread_us": [min(rounded(sess["step_session"], 1e6, 2)),
                          max(rounded(sess["step_session"], 1e6, 2))],
            "note": "includes writing and flushing one result line per step (fsync about "
                    "once a second)",
        },
        "finder_miss_us": round(median(miss["find_spec_miss"]) * 1e6, 4),
        "verdict": ("step hook overhead {:.2f} us per step call (aim < {} us); unnamed "
                    "functions {:+.3f} us".format(over["step_hook"], AIM_US,
                                                  over["unnamed_with_hooks"])),
    }
    path = write_report("exec", result)
    print(result["verdict"])
    print(f"per call (us): {us}")
    print(f"session per step: {result['session']['per_step_us']} us; finder miss: "
          f"{result['finder_miss_us']} us")
    print(f"Wrote {path}")


if __name__ == "__main__":
    main()
