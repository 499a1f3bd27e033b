"""``syncguard show`` and ``syncguard compare``: their options and the one call each that
loads result files and renders them, in the terminal and to an output file (written
atomically, never through a symbolic link)."""

from __future__ import annotations

import dataclasses
from typing import List, Optional

from ..console import stdout_console
from ..errors import EXIT_OK, UsageError
from ..process.atomic import output_path, write_file
from ..renderers import RENDERERS, compare_renderer_for_path, renderer_for_path
from ..results.loader import load


@dataclasses.dataclass
class ShowOptions:
    """``syncguard show``'s options: the result file, the output file (None: the terminal),
    ``--force`` and the terminal's ``--width``."""

    result: str
    output: Optional[str] = None
    force: bool = False
    width: Optional[int] = None


def show(opts: ShowOptions) -> int:
    """Render ``opts.result`` in the terminal, or write it to ``opts.output`` as its extension
    picks; the exit code of ``show``."""
    if opts.output:
        output_path(opts.output, opts.force)  # before any work: a folder, socket... refused
    res = load(opts.result)
    if opts.output:
        try:
            render = renderer_for_path(opts.output)
        except ValueError as exc:  # unknown extension: bad input, not an internal error
            raise UsageError(f"--output: {exc}") from None
        write_file(opts.output, render(res))  # temp file + rename: never through a link
        return EXIT_OK
    RENDERERS["terminal"].render(res, stdout_console(opts.width))
    return EXIT_OK


@dataclasses.dataclass
class CompareOptions:
    """``syncguard compare``'s options: result files ``a`` and ``b`` (None: two ``paths`` of
    ``a``, by default the first two it ran), the output file, ``--force`` and ``--width``."""

    a: str
    b: Optional[str] = None
    paths: Optional[List[str]] = None
    output: Optional[str] = None
    force: bool = False
    width: Optional[int] = None


def compare_runs(opts: CompareOptions) -> int:
    """Compare two runs, or two paths of one run, in the terminal and to ``opts.output``; the
    exit code of ``compare``."""
    # pandas (the comparison's tables): `show` and `compare --help` never load it
    from ..results.analysis import compare, compare_paths

    writer, output = None, opts.output
    if output is not None:
        try:
            writer = compare_renderer_for_path(output)
        except ValueError as exc:
            raise UsageError(f"-o {exc}") from None
        output_path(output, opts.force)  # a folder, socket... refused before any work
    a = load(opts.a)
    console = stdout_console(opts.width)  # a closed pipe (`| head`) exits quietly
    if opts.b is not None:
        if opts.paths:
            raise UsageError("--paths: compare either two runs or two paths of one run")
        df = compare(a, load(opts.b))
        title = f"{opts.a} (A) vs {opts.b} (B)"
        labels = (opts.a, opts.b)
    else:
        if not opts.paths and len(a.paths) < 2:
            raise UsageError(f"--paths: {opts.a} has fewer than two paths ("
                             f"{', '.join(a.paths) or 'none'}): compare it with a run B")
        p, q = opts.paths or a.paths[:2]
        for x in (p, q):
            if x not in a.paths:
                raise UsageError(f"--paths: {x!r} is not in {opts.a} (has {', '.join(a.paths)})")
        df = compare_paths(a, p, q)
        title = f"{opts.a}: {p} (A) vs {q} (B)"
        labels = (f"{opts.a} [{p}]", f"{opts.a} [{q}]")
    RENDERERS["terminal"].render_compare(df, console=console, title=title)
    if writer is not None and output is not None:
        text = writer.render_compare(df, *labels, title=title)
        write_file(output, text, "-o ", newline="")  # atomic; never through a symlink
    return EXIT_OK
