"""Render a result file (complete or interrupted) in the terminal, or write it as another
format: the output file's extension picks the renderer (.md, .html, .json, .csv). The file is
written atomically, and a symbolic link at --output is replaced (with --force), never followed.
When the reader of stdout goes away (`syncguard show X | head`), show stops quietly (exit 141)."""

from __future__ import annotations

import argparse

from ..driving.show import ShowOptions, show
from .common import add_output_arguments, add_width_argument, options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="a result.jsonl written by `syncguard run`")
    add_output_arguments(p, "write to this file instead of the terminal (.md, .html, .json, "
                         ".csv)")
    add_width_argument(p)


def main(args: argparse.Namespace) -> int:
    opts = options(ShowOptions, args)
    return show(opts)
