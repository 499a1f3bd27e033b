"""Compare two runs (A B: two result files) or two paths of one run (A --paths P Q):
hidden syncs and latency side by side, differences marked."""

from __future__ import annotations

import argparse

from ..console import stdout_console, wrote
from ..errors import EXIT_OK, UsageError
from ..process.atomic import write_text
from ..renderers import RENDERERS, compare_renderer_for_path
from ..results.analysis import compare, compare_paths
from ..results.run import load
from .common import add_output_arguments, add_width_argument, output_path


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
    writer = None
    if args.output is not None:
        try:
            writer = compare_renderer_for_path(args.output)
        except ValueError as exc:
            raise UsageError(f"-o {exc}") from None
        output_path(args.output, args.force)  # a folder, socket... refused before any work
    a = load(args.a).result
    console = stdout_console(args.width)  # a closed pipe (`| head`) exits quietly
    if args.b is not None:
        if args.paths:
            raise UsageError("--paths: compare either two runs or two paths of one run")
        df = compare(a, load(args.b).result)
        title = f"{args.a} (A) vs {args.b} (B)"
        labels = (args.a, args.b)
    else:
        if not args.paths and len(a.paths) < 2:
            raise UsageError(f"--paths: {args.a} has fewer than two paths ("
                             f"{', '.join(a.paths) or 'none'}): compare it with a run B")
        p, q = args.paths or a.paths[:2]
        for x in (p, q):
            if x not in a.paths:
                raise UsageError(f"--paths: {x!r} is not in {args.a} (has {', '.join(a.paths)})")
        df = compare_paths(a, p, q)
        title = f"{args.a}: {p} (A) vs {q} (B)"
        labels = (f"{args.a} [{p}]", f"{args.a} [{q}]")
    RENDERERS["terminal"].render_compare(df, console=console, title=title)
    if writer is not None:
        text = writer.render_compare(df, *labels, title=title)

        try:
            write_text(args.output, text, newline="")  # atomic; never through a symlink
        except OSError as exc:
            raise UsageError(f"-o {args.output}: cannot write: {exc.strerror}") from None
        wrote(args.output)
    return EXIT_OK
