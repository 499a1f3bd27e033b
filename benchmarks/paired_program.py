"""The decode loop ``bench_exec_paired.py`` runs under ``syncguard exec`` (not a benchmark
itself): the step of ``decode_program.py`` (about 1 ms, one ``.item()``), with the way
``exec`` records a finished step taken from this checkout or from another one (``--base``)
step by step, in random order within each pair of steps.

    python -m syncguard exec --device cpu --step paired_program:decode_step --out OUT -- \\
        python paired_program.py --steps 3000 --base DIR --times OUT.json

What is swapped (:data:`SWAPPED`, or each ``--swap module:Class.attribute``):
``ExecSession._record`` and ``DrainWriter.exec_step``, the code a finished step runs in the
program's process from its counts to the drain's pipe (the base must have the drain, from
7b99208 on; ``--swap`` names others for an older base). The
other checkout is imported under another package name (``syncguard_base``), so both are
loaded at once; its methods run on this checkout's objects. The times are written as a list
of ``[variant, seconds]`` in step order (variant 0: this checkout, 1: the base).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_program  # noqa: E402  (its model and step)

#: the methods swapped per step unless ``--swap`` names others (``module:Class.attribute``,
#: the module under ``syncguard.``)
SWAPPED = ("execute.session:ExecSession._record", "results.drain:DrainWriter.exec_step")
VARIANT = [0]


def _base_package(base: Path) -> str:
    """Import checkout ``base``'s syncguard as ``syncguard_base`` (a folder of links)."""
    link_dir = tempfile.mkdtemp(prefix="syncguard-base-")
    atexit.register(shutil.rmtree, link_dir, True)
    (Path(link_dir) / "syncguard_base").symlink_to((base / "syncguard").resolve(),
                                                  target_is_directory=True)
    sys.path.insert(0, link_dir)
    return "syncguard_base"


def swap(base: Path, names: Tuple[str, ...] = SWAPPED) -> None:
    """Make each method of ``names`` run this checkout's or the base's by :data:`VARIANT`."""
    pkg = _base_package(base)
    for name in names:
        mod, _, rest = name.partition(":")
        cls, _, attr = rest.partition(".")
        owner = getattr(importlib.import_module(f"syncguard.{mod}"), cls)
        ours = getattr(owner, attr)
        theirs = getattr(getattr(importlib.import_module(f"{pkg}.{mod}"), cls), attr)
        fns: Tuple[Callable[..., Any], ...] = (ours, theirs)

        def pick(*a: Any, _fns: Tuple[Callable[..., Any], ...] = fns, **kw: Any) -> Any:
            return _fns[VARIANT[0]](*a, **kw)

        setattr(owner, attr, pick)


def decode_step(x: torch.Tensor) -> int:
    return decode_program.decode_step(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=800)
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--times", required=True)
    ap.add_argument("--swap", action="append", default=None,
                    help="module:Class.attribute to swap (repeat); default: SWAPPED")
    a = ap.parse_args()
    swap(a.base, tuple(a.swap) if a.swap else SWAPPED)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    decode_program.MODEL = decode_program.Model(a.hidden).eval()
    x = torch.randn(8, a.hidden)
    rng = random.Random(0)
    seq: List[Tuple[int, float]] = []
    clock = time.perf_counter
    order = [0, 1]
    with torch.no_grad():
        for i in range(a.steps):
            if i % 2 == 0:
                rng.shuffle(order)
            # the first steps run this checkout's code: its per-name totals are made first
            VARIANT[0] = order[i % 2] if i >= 2 else 0
            t0 = clock()
            decode_step(x)
            seq.append((VARIANT[0], clock() - t0))
    with open(a.times, "w", encoding="utf-8") as f:
        json.dump(seq, f)


if __name__ == "__main__":
    main()
