"""Render a result file (complete or interrupted) in the terminal, or write it as another
format: the output file's extension picks the renderer (.md, .html, .json, .csv)."""

from __future__ import annotations

import argparse
import os

NAME = "show"
HELP = "render a result file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="a result.jsonl written by `syncguard run`")
    p.add_argument("-o", "--output", default=None,
                   help="write to this file instead of the terminal (.md, .html, .json, .csv)")
    p.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    p.add_argument("--width", type=int, default=None, help="terminal width for the tables")


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .. import results
    from ..renderers import renderer_for_path, terminal
    from . import EXIT_OK, UsageError, report_width

    res = results.load(args.result)
    if args.output:
        if os.path.exists(args.output) and not args.force:
            raise UsageError(f"{args.output} exists; pass --force to overwrite")
        try:
            render = renderer_for_path(args.output)
        except ValueError as exc:  # unknown extension: bad input, not an internal error
            raise UsageError(f"--output: {exc}") from None
        text = render(res)
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror}") from None
        Console(stderr=True).print(f"Wrote {args.output}")
        return EXIT_OK
    terminal.render(res, Console(width=report_width(args.width)))
    return EXIT_OK
