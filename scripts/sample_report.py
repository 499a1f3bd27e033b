"""Regenerate the curated sample in ``reports/sample/``: the Markdown report and one PNG plot per
scenario of the main job (``syncguard run`` on the simulated npu), plus where the full run went.

    python scripts/sample_report.py [--full DIR] [extra `syncguard run` arguments]

The full run (result.jsonl, result.json, CSVs, report.html, trace.json: about 12 MB) is
written to ``--full`` (default: a temporary folder) and not committed; the sample keeps what a
reader opens from the repository.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "reports" / "sample"


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", default=None, help="folder for the full run (default: temporary)")
    args, extra = ap.parse_known_args(argv)
    full = Path(args.full or tempfile.mkdtemp(prefix="syncguard-sample-"))
    cmd = [sys.executable, "-m", "syncguard", "run", "--device", "sim", "--out", str(full),
           "--force", *extra]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc not in (0, 1):  # 1: the legacy path's hidden syncs, which the sample shows
        return rc

    from syncguard.renderers.html import plot_figure
    from syncguard.results import loader

    SAMPLE.mkdir(parents=True, exist_ok=True)
    for old in SAMPLE.glob("*.png"):
        old.unlink()
    shutil.copyfile(full / "report.md", SAMPLE / "report.md")
    res = loader.load(str(full / "result.jsonl"))
    for scenario in res.scenarios:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", scenario)
        plot_figure(res, scenario).savefig(SAMPLE / f"plot-{name}.png", dpi=80,
                                           metadata={"Software": None})
    print(f"Wrote {SAMPLE.relative_to(ROOT)}/: report.md and {len(res.scenarios)} plots "
          f"(full run in {full})")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main(sys.argv[1:]))
