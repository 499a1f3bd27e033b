"""Render a result file (complete or interrupted) in the terminal, or write it as another
format: the output file's extension picks the renderer (.md, .html, .json, .csv). The file is
written atomically, and a symbolic link at --output is replaced (with --force), never followed.
When the reader of stdout goes away (`syncguard show X | head`), show stops quietly (exit 141)."""

from __future__ import annotations

import argparse

from ..console import stdout_console, wrote
from ..errors import EXIT_OK, UsageError
from ..process.atomic import write_text
from ..renderers import RENDERERS, renderer_for_path
from ..results.run import load
from .common import add_output_arguments, add_width_argument, output_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("result", help="a result.jsonl written by `syncguard run`")
    add_output_arguments(p, "write to this file instead of the terminal (.md, .html, .json, "
                         ".csv)")
    add_width_argument(p)


def main(args: argparse.Namespace) -> int:
    if args.output:
        output_path(args.output, args.force)  # before any work: a folder, socket... refused
    res = load(args.result).result
    if args.output:
        try:
            render = renderer_for_path(args.output)
        except ValueError as exc:  # unknown extension: bad input, not an internal error
            raise UsageError(f"--output: {exc}") from None
        text = render(res)
        try:
            write_text(args.output, text)  # temp file + rename: never through a link
        except OSError as exc:
            raise UsageError(f"{args.output}: cannot write: {exc.strerror}") from None
        wrote(args.output)
        return EXIT_OK
    RENDERERS["terminal"].render(res, stdout_console(args.width))
    return EXIT_OK
