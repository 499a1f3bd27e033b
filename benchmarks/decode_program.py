"""A decode loop of about 1 ms a step with one host read per step: the program
``bench_exec_cost.py`` runs plain and under ``syncguard exec`` (not a benchmark itself).

    python benchmarks/decode_program.py --steps 2000 --times OUT.json [--hidden 384]

Each step: four ``hidden x hidden`` layers on a batch of 8 and the next token read back with
``.item()`` (the one read). The loop times every call of :func:`decode_step` itself
(``perf_counter`` around the call, so under ``exec`` the step hook, the guard and the writing
of the step's result line are inside), keeps the times in a preallocated array (no growth of
its own), and writes them at exit together with the process's memory: ``VmRSS`` and
``RssAnon`` (the process's own pages: unlike shared-library pages, not dropped when the
machine reclaims memory), and the ``RssAnon`` of its child processes (under ``exec``, the drain
that writes the result file) at 10%, 50% and 90% of the steps and the loop's end, ``VmHWM`` (the
peak) at the loop's end and at exit (under ``exec``, exit comes after syncguard's reports),
and, when Python traces allocations (``PYTHONTRACEMALLOC=1``), the traced heap's current
size and peak at those points.
"""

from __future__ import annotations

import argparse
import array
import atexit
import json
import os
import time
import tracemalloc
from typing import Any, Dict, List, Optional

import torch


def _status_kb(key: str) -> Optional[int]:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _children_anon_kb() -> Optional[int]:
    """The own pages (``RssAnon``) of this process's child processes, summed (under ``exec``:
    the drain that writes the result file); None where /proc cannot tell."""
    total = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as f:
                for pid in f.read().split():
                    with open(f"/proc/{pid}/status", encoding="ascii") as st:
                        for line in st:
                            if line.startswith("RssAnon:"):
                                total += int(line.split()[1])
    except (OSError, ValueError):
        return None
    return total


class Model(torch.nn.Module):
    def __init__(self, hidden: int, layers: int = 4, vocab: int = 512) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden)
                                          for _ in range(layers))
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x))
        return self.head(x)


MODEL: Optional[Model] = None


def decode_step(x: torch.Tensor) -> int:
    """One decode step: the model, then the next token read back (one host read)."""
    assert MODEL is not None
    logits = MODEL(x)
    return int(logits[0].argmax().item())


def main() -> None:
    global MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--times", required=True, help="JSON file the step times go to")
    ap.add_argument("--alternate", type=int, default=0,
                    help="under exec: blocks of N steps alternate between the step as exec "
                         "records it and the same step with syncguard's recording off (the "
                         "function unwrapped, the hub's guard list empty; see --off for its "
                         "interceptors); each step's block is written (off_steps)")
    ap.add_argument("--off", choices=("plain", "idle"), default="plain",
                    help="with --alternate: what the off blocks run. plain (the default): "
                         "syncguard's interceptors are removed from torch for the block too, "
                         "so the step is the plain program's; idle: they stay, each returning "
                         "at its first check")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    MODEL = Model(a.hidden).eval()
    x = torch.randn(8, a.hidden)
    times = array.array("d", bytes(8 * a.steps))
    marks = {int(a.steps * f): f"{int(f * 100)}%" for f in (0.1, 0.5, 0.9)}
    rss: Dict[str, Optional[int]] = {}
    anon: Dict[str, Optional[int]] = {}
    children: Dict[str, Optional[int]] = {}
    traced: Dict[str, int] = {}
    off_steps: List[int] = []
    out: Dict[str, object] = {"steps": a.steps, "hidden": a.hidden, "rss_kb": rss,
                              "rss_anon_kb": anon, "traced_kb": traced,
                              "children_anon_kb": children}

    def trace(at: str) -> None:
        if tracemalloc.is_tracing():
            now, peak = tracemalloc.get_traced_memory()
            traced[f"{at}_current"], traced[f"{at}_peak"] = now // 1024, peak // 1024

    def write() -> None:
        rss["hwm_exit"] = _status_kb("VmHWM")
        anon["exit"] = _status_kb("RssAnon")
        trace("exit")
        out["step_s"] = list(times)
        with open(a.times, "w", encoding="utf-8") as f:
            json.dump(out, f)

    atexit.register(write)  # under exec: after syncguard's reports
    clock = time.perf_counter
    off_step = decode_step
    held: List[Any] = []  # while an off block runs: the guards taken off the hub

    def switch(off: bool) -> None:
        """Turn syncguard's recording off (or on again) between blocks, outside the timing."""
        from syncguard.core.hub import HUB
        from syncguard.core.intercept import PATCHER

        if off:
            held.append(HUB.guards)
            HUB.guards = []
            if a.off == "plain":
                PATCHER._uninstall()  # torch as the plain program has it
        else:
            if a.off == "plain":
                PATCHER._install()
            HUB.guards = held.pop()

    if a.alternate:
        off_step = getattr(decode_step, "__wrapped__", decode_step)  # exec's wrapper's
        out["off_steps"] = off_steps
        out["off"] = a.off
    was_off = False
    with torch.no_grad():
        for i in range(a.steps):
            if i in marks:
                rss[marks[i]] = _status_kb("VmRSS")
                anon[marks[i]] = _status_kb("RssAnon")
                children[marks[i]] = _children_anon_kb()
                trace(marks[i])
            off = bool(a.alternate) and (i // a.alternate) % 2 == 1
            if off != was_off:
                switch(off)
                was_off = off
            if off:
                t0 = clock()
                off_step(x)
                times[i] = clock() - t0
                off_steps.append(i)
                continue
            t0 = clock()
            decode_step(x)
            times[i] = clock() - t0
        if was_off:
            switch(False)  # exec's guard ends with its interceptors, as it began
    rss["loop_end"] = _status_kb("VmRSS")
    rss["hwm_loop_end"] = _status_kb("VmHWM")
    anon["loop_end"] = _status_kb("RssAnon")
    children["loop_end"] = _children_anon_kb()
    trace("loop_end")


if __name__ == "__main__":
    main()
