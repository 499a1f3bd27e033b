"""Compare two runs (A B: two result files) or two paths of one run (A --paths P Q):
hidden syncs and latency side by side, differences marked."""

from __future__ import annotations

import argparse

from ..driving.show import CompareOptions, compare_runs
from .common import add_output_arguments, add_width_argument, options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="result file A")
    p.add_argument("b", nargs="?", default=None, help="result file B")
    p.add_argument("--paths", nargs=2, metavar=("P", "Q"), default=None,
                   help="compare two paths of run A (default when B is absent: the first two it "
                   "ran, in that order)")
    add_width_argument(p)
    add_output_arguments(p, "also write the comparison to FILE: .md Markdown (for a PR "
                         "comment), .html or .csv; an existing file needs --force", "FILE")


def main(args: argparse.Namespace) -> int:
    opts = options(CompareOptions, args)
    return compare_runs(opts)
