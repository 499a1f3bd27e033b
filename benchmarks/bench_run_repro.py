"""Do ``syncguard run``'s timing claims reproduce, and does its announced time hold?

Runs the main job (``syncguard run``, its defaults, on the simulated npu) ``--runs`` times one
after the other on this machine, each as its own process timed from outside, with the load
average before and after, and writes ``reports/bench/run_repro.md`` (and ``.json``): each
run's announced time against its wall time, and each scenario path's latency verdict (faster,
slower, no difference beyond the margin, no measurable difference, too thin) side by side,
marked where the runs disagree in words and where in what they claim (faster, slower or
nothing). The run folders go to a temporary folder (``--keep DIR`` keeps them). No thresholds
are asserted: this is a measurement.

    python benchmarks/bench_run_repro.py [--runs 2] [--keep DIR] [-- RUN_ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from _common import REPORTS, environment, write_report

WORDS = ("faster", "slower", "no difference beyond", "a difference not shown beyond",
         "no measurable difference",
         "evidence too thin", "too few rounds", "too few samples", "no latency")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def verdict_word(text: str) -> str:
    """The verdict's class in its words (``"faster"``, ``"no difference beyond 5%"``...)."""
    word = next((w for w in WORDS if w in text), text)
    if word in ("no difference beyond", "a difference not shown beyond"):
        word = f"{word} {text.split(word, 1)[1].split()[0]}"  # with the margin: "... 5%"
    return word


def verdicts(result: Path) -> Dict[str, Dict[str, Any]]:
    """``"scenario path"`` -> the ratio to the scenario's baseline path, its interval,
    rounds, paired steps and the verdict's word (syncguard.results.stats.ratio_verdict)."""
    from syncguard.renderers._common import _ratio_text
    from syncguard.results import analysis, loader

    sm = analysis.summary(loader.load(str(result)))
    out: Dict[str, Dict[str, Any]] = {}
    for r in sm.to_dict("records"):
        if not r["baseline"] or r["path"] == r["baseline"]:
            continue
        text = _ratio_text(r)
        word = verdict_word(text)
        out[f"{r['scenario']} {r['path']}"] = {
            "ratio": float(r["ratio_vs_baseline"]),
            "lo": float(r["ratio_lo"]), "hi": float(r["ratio_hi"]),
            "rounds": int(r["rounds"]), "pairs": int(r["pairs"]), "verdict": word,
            "text": text}
    return out


def one_run(i: int, folder: Path, extra: List[str]) -> Dict[str, Any]:
    out = folder / f"run{i}"
    load_before = _load()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "syncguard", "run", "--out", str(out),
                           *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    said = next((ln for ln in proc.stderr.splitlines() if "expect about" in ln), "")
    m = re.search(r"expect about ([\d.]+) (s|min)", said)
    announced = (float(m.group(1)) * (60.0 if m.group(2) == "min" else 1.0)) if m else None
    threads = None
    if (out / "result.jsonl").is_file():
        with open(out / "result.jsonl", encoding="utf-8") as f:
            threads = json.loads(f.readline()).get("machine", {}).get("torch_threads")
    return {"exit": proc.returncode, "wall_s": round(wall, 1), "announced_s": announced,
            "torch_threads": threads,
            "announced": said, "load_before": load_before, "load_after": _load(),
            "verdicts": verdicts(out / "result.jsonl") if proc.returncode in (0, 1) else {},
            "stderr_tail": proc.stderr[-2000:] if proc.returncode not in (0, 1) else ""}


def markdown(runs: List[Dict[str, Any]], env: Dict[str, Any], args: List[str]) -> str:
    from syncguard.results.stats import fmt_interval

    lines = ["# `syncguard run`, twice on one machine: the announced time and the verdicts",
             "",
             f"`python benchmarks/bench_run_repro.py --runs {len(runs)}"
             + (" -- " + " ".join(args) if args else "") + f"`, {env['date']}, "
             f"{env.get('processor')}, {env['cpu_count']} CPUs, torch {env['torch']}, "
             f"commit {env.get('git_commit', '?')}. Each run is its own `syncguard run` "
             "process, one after the other; wall time from outside the process.", "",
             "| run | torch threads | announced | wall | wall / announced | load average "
             "before | after |", "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        a = r["announced_s"]
        lines.append(f"| {i} | {r.get('torch_threads')} | "
                     + (f"{a:.0f} s | {r['wall_s']:.0f} s | {r['wall_s'] / a:.2f}" if a else
                        f"? | {r['wall_s']:.0f} s | -")
                     + f" | {r['load_before']} | {r['load_after']} |")
    keys = list(dict.fromkeys(k for r in runs for k in r["verdicts"]))
    lines += ["", "Latency verdicts (ratio to the scenario's first path, legacy; 95% CI over "
              "rounds; paired timed steps per path):", "",
              "| scenario path | " + " | ".join(f"run {i}" for i in range(1, len(runs) + 1))
              + " | same words | same claim |", "|---|" + "---|" * len(runs) + "---|---|"]
    same_words = same_claims = 0
    for k in keys:
        vs = [r["verdicts"].get(k) for r in runs]
        cells = [f"{v['verdict']}: {v['ratio']:.2f}x ({fmt_interval(v['lo'], v['hi'])}, "
                 f"{v['rounds']} rounds, {v['pairs']} steps)" if v else "-" for v in vs]
        same = len({v["verdict"] if v else None for v in vs}) == 1
        claim = len({_claim(v) for v in vs}) == 1
        same_words += same
        same_claims += claim
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {'yes' if same else '**no**'} | "
                     f"{'yes' if claim else '**no**'} |")
    lines += ["", f"Verdicts in the same words in every run: {same_words} of {len(keys)}; the "
              f"same claim (faster, slower, or none): {same_claims} of {len(keys)}. A claim "
              "needs the interval beyond the 5% margin; without one, an interval within it "
              "reads no difference beyond 5%, one reaching past the margin a difference not "
              "shown beyond 5% (when it excludes 1.00x) or no measurable difference: none of "
              "them a claim, they differ in how tight that run's interval was.", ""]
    return "\n".join(lines)


def _claim(v: Any) -> Any:
    """What a verdict claims: ``"faster"``, ``"slower"``, ``""`` (no claim), None (no row)."""
    if not v:
        return None
    return v["verdict"] if v["verdict"] in ("faster", "slower") else ""


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--keep", default=None, metavar="DIR", help="keep the run folders here")
    p.add_argument("--name", default="run_repro",
                   help="report name: reports/bench/NAME.md and NAME.json")
    p.add_argument("--render", action="store_true",
                   help="write NAME.md again from NAME.json (no run), the verdict classes "
                   "read from the verdicts' own texts")
    p.add_argument("run_args", nargs="*", help="passed to syncguard run (after --)")
    a = p.parse_args(argv)
    if a.render:
        d = json.loads((REPORTS / f"{a.name}.json").read_text(encoding="utf-8"))
        for r in d["runs"]:
            for v in r["verdicts"].values():
                v["verdict"] = verdict_word(v["text"])
        (REPORTS / f"{a.name}.md").write_text(markdown(d["runs"], d["env"], d["args"]),
                                              encoding="utf-8")
        return 0
    env = environment()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.keep) if a.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        runs = [one_run(i, folder, a.run_args) for i in range(1, a.runs + 1)]
    write_report(a.name, {"env": env, "args": a.run_args, "runs": runs})
    md = markdown(runs, env, a.run_args)
    (REPORTS / f"{a.name}.md").write_text(md, encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
