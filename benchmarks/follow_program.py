"""The program ``bench_follow.py`` runs under ``syncguard exec``: the same decode loop (a
matmul of about 1 ms and one read per step) in this process and then in ``--children`` spawn
children started one after the other. Prints one JSON line: each child's start (from
``Process.start()`` to the first step's start, in ms: the interpreter, torch's import and,
when followed, syncguard's set-up) and the median step time of the parent and of each child
(us, timed by the program itself)."""

import json
import multiprocessing as mp
import statistics
import sys
import time

import torch

WIDTH, STEPS = 384, 200


def loop(q=None, t_start=None):
    import syncguard

    if t_start is not None:
        q.put(("start", (time.perf_counter() - t_start) * 1e3))
    w = torch.randn(WIDTH, WIDTH)
    x = torch.randn(8, WIDTH)
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        with syncguard.step("decode"):
            for _ in range(4):
                x = torch.tanh(x @ w)
            if bool(x[0, 0] > 1e9):  # one read per step
                break
        times.append((time.perf_counter() - t0) * 1e6)
    med = statistics.median(times[20:])
    if q is not None:
        q.put(("step", med))
    return med


def main(children):
    out = {"parent_step_us": loop(), "child_start_ms": [], "child_step_us": []}
    ctx = mp.get_context("spawn")
    for _ in range(children):
        q = ctx.Queue()
        p = ctx.Process(target=loop, args=(q, time.perf_counter()))
        p.start()
        got = dict(q.get() for _ in range(2))
        p.join()
        out["child_start_ms"].append(got["start"])
        out["child_step_us"].append(got["step"])
    print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
