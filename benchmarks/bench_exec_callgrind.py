"""What does ``syncguard exec`` add to a guarded decode step in machine instructions and cache
misses? Counts under callgrind, not a timing.

The step is ``benchmarks/decode_program.py``'s model (the width ``--hidden``), then one
``.item()``, under ``syncguard exec --device cpu --step``, the whole run under valgrind's
callgrind with its cache simulation. Inside the run, callgrind collects over ``--steps`` steps
recorded and then over the same number of steps with syncguard taken out (its interceptors
removed from torch, the function unwrapped, the hub's guard list empty), each after warm-up
steps: the difference per step is what syncguard adds, in instructions (``Ir``), data reads
and writes, and misses of the first-level caches and of the last level (``ILmr``, ``DLmr``,
``DLmw``: the lines that come from memory, where a decode step's time under ``exec`` goes).
The simulated caches are fixed (32 KiB first-level instruction and data caches, a 1 MiB last
level: one core's share of a server's L2), so the counts are the same on any machine and
load for the same Python and torch.

    python benchmarks/bench_exec_callgrind.py [--steps 40] [--hidden 768] [--base DIR]

Needs valgrind with its headers (``valgrind/callgrind.h``) and a C compiler: callgrind is
switched on and off from the program through a client request, compiled into a small library
at the start. It takes several minutes (torch's import runs under valgrind). ``--base``:
another checkout, measured the same way, at the same time. Results:
``reports/bench/exec_callgrind.json`` and ``.md``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
#: the simulated caches: size, associativity, line (callgrind's --I1, --D1, --LL)
CACHES = {"I1": "32768,8,64", "D1": "32768,8,64", "LL": "1048576,16,64"}
#: the counts callgrind reports, in its order
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
_C = """#include <valgrind/callgrind.h>
void sg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void sg_zero(void) { CALLGRIND_ZERO_STATS; }
void sg_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }
"""


def child(lib: str, steps: int, hidden: int, warm: int = 30) -> None:
    """Run inside ``syncguard exec`` under callgrind: collect ``steps`` steps recorded (dump
    ``on``), then as many with syncguard taken out (dump ``off``)."""
    import ctypes

    import torch

    sys.path.insert(0, str(HERE))
    import decode_program as prog

    from syncguard.core.hub import HUB
    from syncguard.core.intercept import PATCHER

    cg = ctypes.CDLL(lib)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    prog.MODEL = prog.Model(hidden).eval()
    x = torch.randn(8, hidden)
    on = prog.decode_step
    off = getattr(on, "__wrapped__", on)

    def collect(step: Any, tag: bytes) -> None:
        for _ in range(warm):
            step(x)
        cg.sg_zero()
        cg.sg_toggle()
        for _ in range(steps):
            step(x)
        cg.sg_toggle()
        cg.sg_dump(tag)

    with torch.no_grad():
        collect(on, b"on")
        guards, HUB.guards = HUB.guards, []
        PATCHER._uninstall()
        try:
            collect(off, b"off")
        finally:
            PATCHER._install()
            HUB.guards = guards


def _summary(path: Path) -> Tuple[str, List[int]]:
    trigger, counts = "", []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("desc: Trigger:"):
            trigger = line.rsplit(":", 1)[-1].strip()
        elif line.startswith("summary:"):
            counts = [int(v) for v in line.split()[1:]]
    return trigger, counts


def start(checkout: Path, lib: Path, steps: int, hidden: int, tmp: Path,
          tag: str) -> Tuple[Any, Path]:
    """Start one exec run of ``checkout``'s syncguard under callgrind (child mode)."""
    out = tmp / tag
    out.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(HERE)])
    env["OMP_NUM_THREADS"] = "1"
    env.pop("SYNCGUARD_DEBUG", None)
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--cache-sim=yes",
           *(f"--{k}={v}" for k, v in CACHES.items()),
           f"--callgrind-out-file={out}/callgrind.%p",
           sys.executable, "-m", "syncguard", "exec", "--device", "cpu", "--step",
           "decode_program:decode_step", "--out", str(out / "run"), "--force", "--",
           "python", str(Path(__file__).resolve()), "--child", str(lib),
           "--steps", str(steps), "--hidden", str(hidden)]
    log = open(out / "log", "w", encoding="utf-8")
    proc = subprocess.Popen(cmd, cwd=str(tmp), env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc, out


def finish(proc: Any, out: Path, steps: int, tag: str) -> Dict[str, Any]:
    """The per-step difference of the ``on`` and ``off`` dumps of a finished run."""
    code = proc.wait()
    dumps = dict(_summary(p) for p in sorted(out.glob("callgrind.*.*")))
    if code != 0 or "on" not in dumps or "off" not in dumps:
        tail = (out / "log").read_text(encoding="utf-8", errors="replace")[-1500:]
        raise SystemExit(f"{tag}: exec under callgrind exited {code}: {tail}")
    on, off = dumps["on"], dumps["off"]
    return {"steps": steps,
            "added_per_step": {k: round((a - b) / steps, 1)
                               for k, a, b in zip(EVENTS, on, off)},
            "plain_per_step": {k: round(b / steps, 1) for k, b in zip(EVENTS, off)}}


def _lib(tmp: Path) -> Path:
    """Compile the client-request library; one clear line and exit 2 where it cannot be."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_exec_callgrind: valgrind is not installed (it runs the program)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("bench_exec_callgrind: no C compiler (cc or gcc) for the client "
                         "request library")
    src, lib = tmp / "sgcg.c", tmp / "libsgcg.so"
    src.write_text(_C, encoding="utf-8")
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("bench_exec_callgrind: could not build the client request library "
                         f"(valgrind/callgrind.h missing?): {proc.stderr.strip()[:300]}")
    return lib


def markdown(result: Dict[str, Any]) -> str:
    env = result["env"]
    this, base = result["this"], result.get("base")
    shown = ("Ir", "I1mr", "D1mr", "ILmr", "DLmr", "DLmw")
    caches = ", ".join(f"{k} {v}" for k, v in CACHES.items())

    def ll(r: Dict[str, Any]) -> float:
        a = r["added_per_step"]
        return float(a["ILmr"] + a["DLmr"] + a["DLmw"])

    lines = [
        "# `syncguard exec`: machine instructions and cache misses per guarded decode step",
        "",
        f"`{' '.join(['python', 'benchmarks/bench_exec_callgrind.py', *result['argv']])}`",
        "",
        f"Python {env['python']}, torch {env['torch']}, syncguard {env['syncguard']} at "
        f"{(env.get('git_commit') or '?')[:10]}; {env['date']}. Counts under callgrind with "
        f"fixed simulated caches ({caches}: size, ways, line): the same on any machine and "
        "load for the same Python and torch.",
        "",
        f"The decode step of width {result['hidden']} (four layers and a head, then one "
        "`.item()`), `exec --device cpu --step`, counted over "
        f"{this['steps']} steps recorded and as many with syncguard taken out: what syncguard "
        "adds per step.",
        "",
        f"**{this['added_per_step']['Ir']:,.0f} instructions and {ll(this):,.0f} last-level "
        "misses per step**"
        + (f" (`--base` {base['added_per_step']['Ir']:,.0f} and {ll(base):,.0f})."
           if base else "."),
        "",
        "| count | added per step |" + (" base |" if base else "") + " plain step |",
        "|---|---|" + ("---|" if base else "") + "---|",
    ]
    for k in shown:
        row = f"| {k} | {this['added_per_step'][k]:,.0f} |"
        if base:
            row += f" {base['added_per_step'][k]:,.0f} |"
        row += f" {this['plain_per_step'][k]:,.0f} |"
        lines.append(row)
    lines += ["", "Ir: instructions; I1mr, D1mr: first-level instruction and data read "
              "misses; ILmr, DLmr, DLmw: last-level instruction read, data read and data "
              "write misses."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="steps counted each way")
    ap.add_argument("--hidden", type=int, default=768, help="the model's layer width")
    ap.add_argument("--base", type=Path, default=None, help="another checkout, measured beside")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.steps, a.hidden)
        return 0
    from _common import ROOT, environment, write_reports

    with tempfile.TemporaryDirectory(prefix="syncguard-callgrind-") as t:
        tmp = Path(t)
        lib = _lib(tmp)
        runs = [("this", ROOT)] + ([("base", a.base.resolve())] if a.base else [])
        started = [(tag, *start(path, lib, a.steps, a.hidden, tmp, tag)) for tag, path in runs]
        got = {tag: finish(proc, out, a.steps, tag) for tag, proc, out in started}
    args = list(argv if argv is not None else sys.argv[1:])
    result = {"benchmark": "syncguard exec: instructions and cache misses per guarded step",
              "env": environment(), "argv": args, "hidden": a.hidden, "caches": CACHES,
              "this": got["this"], "base": got.get("base")}
    path, md = write_reports("exec_callgrind", result, markdown(result), a.out)
    print(json.dumps({k: v["added_per_step"] for k, v in got.items()}))
    print(f"Wrote {path}\nWrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
