"""A decode loop for the gate's verdicts on a long run's counts: ``step`` syncs once every
call (``item``) and once in an allowed line (``allowed``); through a helper in another file it
syncs once more in steps 0-2 (``early``) and twice in steps 3 and 7 (``late-a``, ``late-b``),
so a per-step budget of 2 fails on steps 3 and 7 only, and the helper's site is called from
one line before those steps and from two others in them. Between steps and around the loop
the program syncs outside every step (``setup``, ``between``, ``after``). ``--steps N`` sets
the number of steps (default 10)."""

import sys

import torch
from budgets_helper import check


def step(x, i):
    tok = int(x.argmax().item())  # sync: item
    if i < 3:
        check(x)  # sync: early
    if i in (3, 7):
        check(x)  # sync: late-a
        check(x)  # sync: late-b
    _ = float(x[0])  # sync: allowed
    return tok


def main():
    n = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10
    x = torch.arange(8.0)
    _ = x.tolist()  # sync: setup
    for i in range(n):
        step(x, i)
        if i % 2 == 0:
            _ = bool(x[1] > 0)  # sync: between
    print(x.sum().item())  # sync: after


if __name__ == "__main__":
    main()
