"""The main job's HTML report in a real browser (headless Chromium, which ``.ci/run``
installs): it renders without console errors, with its tables, plots and a trace link that
resolves, and a screenshot is kept."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return ""


@pytest.mark.browser
@pytest.mark.skipif(not _chromium(), reason="no headless Chromium installed (Debian: "
                    "apt-get install chromium; .ci/run installs it)")
def test_main_job_report_renders_in_chromium(tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, "-m", "syncguard", "run", "steady", "--device", "sim",
                          "--repeat", "1", "--out", str(out)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    page = out / "report.html"
    doc = page.read_text(encoding="utf-8")
    for href in re.findall(r'href="([^"#:]+)"', doc):  # every local link resolves
        assert (out / href).is_file(), href
    chromium = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--window-size=1400,1800", "--virtual-time-budget=3000"]
    dom = subprocess.run([chromium, *flags, "--enable-logging=stderr", "--v=0",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=180)
    assert "<table" in dom.stdout, dom.stderr[-2000:]
    assert dom.stdout.count("<table") >= 2 and dom.stdout.count("<svg") >= 1
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "rror" in line or "Uncaught" in line], console
    shot = Path(os.environ.get("SYNCGUARD_ARTIFACTS", tmp_path)) / "report-chromium.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium, *flags, f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, text=True, timeout=180)
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a page with content, not a blank one
