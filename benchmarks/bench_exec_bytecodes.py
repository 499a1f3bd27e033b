"""How much Python does ``syncguard exec`` run per guarded decode step? A count, not a timing.

The step is ``benchmarks/decode_program.py``'s ``decode_step`` (the model, then one ``.item()``)
under ``syncguard exec --device cpu --step decode_program:decode_step``. Inside that run the
program counts, with an opcode tracer (``sys.settrace`` with ``f_trace_opcodes``), the Python
bytecodes each code object executes over ``--steps`` steps recorded, and over the same steps
with syncguard taken out (its interceptors removed from torch, the function unwrapped, the
hub's guard list empty): the difference per step, by function, is what syncguard's Python
adds to a step.

Unlike a timing, the count does not move with the machine or its load: two runs of the same
checkout give the same figures, so a change of a few bytecodes shows. On a decode step the
time syncguard adds is mostly its code and data coming back into the caches after the
model's work (``bench_exec_cost.py``, ``bench_cold_read.py``), which grows with what it runs;
the count is a proxy for that, not a measure of it.

    python benchmarks/bench_exec_bytecodes.py [--steps 10] [--base DIR]

``--base``: another checkout (e.g. a ``git worktree`` of an older commit), counted the same
way beside this one. Results: ``reports/bench/exec_bytecodes.json`` and ``.md``. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Counter, Dict, List, Optional

HERE = Path(__file__).resolve().parent


def _count(step: Any, x: Any, steps: int, warm: int = 20) -> Counter[str]:
    """Bytecodes each code object runs over ``steps`` calls of ``step(x)``, after ``warm``
    calls from the same line (a read's stack is looked up by its frames' instructions: the
    counted calls find what the first ones left, as a loop's steps do)."""
    counts: Counter[str] = collections.Counter()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        code = frame.f_code
        key = f"{code.co_name} ({os.path.basename(code.co_filename)})"

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    try:
        for i in range(warm + steps):
            if i == warm:
                sys.settrace(tracer)
            step(x)
    finally:
        sys.settrace(None)
    return counts


def child(out: str, steps: int) -> None:
    """Run inside ``syncguard exec``: count with syncguard on and out, write the per-step
    difference by function to ``out``."""
    import torch

    sys.path.insert(0, str(HERE))
    import decode_program as prog

    from syncguard.core.hub import HUB
    from syncguard.core.intercept import PATCHER

    torch.manual_seed(0)
    prog.MODEL = prog.Model(64).eval()  # the width changes torch's work, not syncguard's
    x = torch.randn(8, 64)
    on = prog.decode_step
    off = getattr(on, "__wrapped__", on)
    with torch.no_grad():
        recorded = _count(on, x, steps)
        guards, HUB.guards = HUB.guards, []
        PATCHER._uninstall()
        try:
            plain = _count(off, x, steps)
        finally:
            PATCHER._install()
            HUB.guards = guards
    added = {k: (v - plain.get(k, 0)) / steps for k, v in recorded.items()}
    added = {k: round(v, 1) for k, v in added.items() if abs(v) >= 0.05}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"steps": steps, "by_function": added,
                   "total": round(sum(added.values()), 1)}, f)


def measure(checkout: Path, steps: int, tmp: Path, tag: str) -> Dict[str, Any]:
    """One exec run of ``checkout``'s syncguard over this file in child mode."""
    out = tmp / f"{tag}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(HERE)])
    env["OMP_NUM_THREADS"] = "1"
    env.pop("SYNCGUARD_DEBUG", None)
    cmd = [sys.executable, "-m", "syncguard", "exec", "--device", "cpu", "--step",
           "decode_program:decode_step", "--out", str(tmp / f"{tag}-out"), "--force", "--",
           "python", str(Path(__file__).resolve()), "--child", str(out), "--steps", str(steps)]
    proc = subprocess.run(cmd, cwd=str(tmp), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"{tag}: exec exited {proc.returncode}: {proc.stderr[-2000:]}")
    data: Dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def markdown(result: Dict[str, Any]) -> str:
    env = result["env"]
    this, base = result["this"], result.get("base")
    lines = [
        "# `syncguard exec`: Python bytecodes per guarded decode step",
        "",
        f"`{' '.join(['python', 'benchmarks/bench_exec_bytecodes.py', *result['argv']])}`",
        "",
        f"Python {env['python']}, torch {env['torch']}, syncguard {env['syncguard']} at "
        f"{(env.get('git_commit') or '?')[:10]}; {env['date']}. A count: the same on any "
        "machine and load for the same Python and torch.",
        "",
        f"One `.item()` per step, `exec --device cpu --step`, counted over {this['steps']} "
        "steps recorded and the same steps with syncguard taken out (interceptors removed, "
        "the function unwrapped): bytecodes syncguard adds per step, by function.",
        "",
        f"**Total: {this['total']:.0f} per step**"
        + (f" (`--base` {base['total']:.0f})." if base else "."),
        "",
        "| function | per step |" + (" base |" if base else ""),
        "|---|---|" + ("---|" if base else ""),
    ]
    names = sorted(set(this["by_function"]) | set((base or {}).get("by_function", {})),
                   key=lambda k: -max(this["by_function"].get(k, 0),
                                      (base or {}).get("by_function", {}).get(k, 0)))
    for k in names:
        row = f"| `{k}` | {this['by_function'].get(k, 0):.1f} |"
        if base:
            row += f" {base['by_function'].get(k, 0):.1f} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="steps counted each way")
    ap.add_argument("--base", type=Path, default=None, help="another checkout, counted beside")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.steps)
        return 0
    from _common import ROOT, environment, write_reports

    with tempfile.TemporaryDirectory(prefix="syncguard-bytecodes-") as t:
        tmp = Path(t)
        this = measure(ROOT, a.steps, tmp, "this")
        base = measure(a.base.resolve(), a.steps, tmp, "base") if a.base else None
    args = list(argv if argv is not None else sys.argv[1:])
    result = {"benchmark": "syncguard exec: Python bytecodes per guarded decode step",
              "env": environment(), "argv": args, "this": this, "base": base}
    path, md = write_reports("exec_bytecodes", result, markdown(result), a.out)
    print(f"{this['total']:.0f} bytecodes per step"
          + (f" (base {base['total']:.0f})" if base else ""))
    print(f"Wrote {path}\nWrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
