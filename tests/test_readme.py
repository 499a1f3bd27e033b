"""The README's and the docs' snippets run as written and print what they say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block(text: str, heading: str, lang: str) -> str:
    section = text.split(heading, 1)[1]
    code = re.search(rf"```{lang}\n(.*?)```", section, re.S)
    assert code, f"no {lang} block under {heading}"
    return code.group(1)


def _run(args, cwd, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=600, env=env,
                          **kw)


def _api_snippet(tmp_path: Path, heading: str, name: str) -> List[str]:
    """Run docs/api.md's python block under ``heading`` as ``name`` in ``tmp_path``: its
    output lines (it must exit 0)."""
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    script = tmp_path / name
    script.write_text(_block(api, heading, "python"), encoding="utf-8")
    proc = _run([sys.executable, str(script)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_library_snippet_runs_as_written(tmp_path: Path) -> None:
    lines = _api_snippet(tmp_path, "## As a library", "snippet.py")
    assert lines[0] == "3 3"
    assert lines[1] == ("snippet.py:9 in sampler: Tensor.__bool__ (aten::_local_scalar_dense) "
                        "[scalar_read] x1, step 0")
    assert lines[-1] == "True 3 hidden syncs, budget 0"


def test_readme_exec_quick_start_prints_its_first_line(tmp_path: Path) -> None:
    """The exec command as written: exit 1 (the gate), and the first line it shows."""
    cmd = _block(README, "## Your program, unchanged", "bash").replace("\\\n", " ").split()
    assert cmd[:2] == ["syncguard", "exec"]
    out = tmp_path / "o"
    proc = _run([sys.executable, "-m", "syncguard", *cmd[1:2], "--out", str(out), *cmd[2:]],
                ROOT)
    assert proc.returncode == 1, proc.stderr
    shown = " ".join(_block(README, "The first line on stderr is the answer", "").split())
    assert " ".join(proc.stderr.splitlines()[0].split()) in shown
    assert shown.startswith(" ".join(proc.stderr.splitlines()[0].split())[:60])


def test_readme_multiprocess_exec_prints_its_first_line(tmp_path: Path) -> None:
    """The engine-shaped launcher as written: exit 1 (the gate, in the scheduler process),
    and the first line it shows (its pid aside)."""
    section = README.split("## Your program, unchanged", 1)[1].split("Engines decode", 1)[1]
    lines = _block(section, "from the tests:", "bash").strip().splitlines()
    assert lines[0].startswith("cd ")
    cmd = lines[1].split()
    assert cmd[:2] == ["syncguard", "exec"]
    out = tmp_path / "o"
    proc = _run([sys.executable, "-m", "syncguard", "exec", "--out", str(out), *cmd[2:]],
                ROOT / lines[0].split()[1])
    assert proc.returncode == 1, proc.stderr
    shown = " ".join(re.search(r"```\n(1 hidden sync.*?)```", section, re.S).group(1).split())
    first = " ".join(proc.stderr.splitlines()[0].split())
    assert re.sub(r"pid [0-9]+", "pid N", first) == re.sub(r"pid [0-9]+", "pid N", shown)


def test_readme_plugin_snippet_passes_and_catches_a_sync(tmp_path: Path) -> None:
    code = _block(README, "## A test: the pytest plugin", "python")
    (tmp_path / "test_ok.py").write_text(code, encoding="utf-8")
    bad = code.replace("assert probs.shape == (4, 32)", "assert probs.sum().item() > 0")
    assert bad != code
    (tmp_path / "test_bad.py").write_text(bad, encoding="utf-8")
    ok = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_ok.py"],
              tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    fail = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_bad.py"],
                tmp_path)
    assert fail.returncode == 1 and "saw 1 in the test body" in fail.stdout, fail.stdout


def test_readme_lint_quick_start_shows_its_finding() -> None:
    cmd = _block(README, "## Code no run reached", "bash").split()
    proc = _run([sys.executable, "-m", "syncguard", *cmd[1:]], ROOT)
    shown = _block(README, "syncguard lint sglang_ascend_sampling/\n```", "").strip()
    printed = proc.stdout.strip().splitlines()
    # every line as the README shows it; the summary's timing (seconds, files/s) aside
    assert printed[:-1] == shown.splitlines()[:-1], proc.stdout
    assert printed[-1].startswith(shown.splitlines()[-1]), proc.stdout


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_pages_are_in_the_site(page: str) -> None:
    """Every page is in mkdocs.yml's nav (CI builds the site with --strict)."""
    assert f": {page}" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_docs_reading_a_run_snippet_runs_on_an_exec_result(tmp_path: Path) -> None:
    """docs/api.md's ``syncguard.load`` snippet, on the folder an ``exec`` wrote."""
    prog = tmp_path / "loop.py"
    prog.write_text("import torch\n"
                    "def step(x):\n"
                    "    return x * 2\n"
                    "x = torch.ones(3)\n"
                    "for _ in range(4):\n"
                    "    x = step(x)\n"
                    "    if x.sum() > 1e9:\n"
                    "        break\n", encoding="utf-8")
    proc = _run([sys.executable, "-m", "syncguard", "exec", "--device", "cpu", "--out", "out",
                 "--max-syncs", "0", "--loop", "loop:step", "--", "python", "loop.py"], tmp_path)
    assert proc.returncode == 1, proc.stderr  # the read on every step fails the default gate
    lines = _api_snippet(tmp_path, "## Reading a recorded run", "read.py")
    assert lines[0] == "exec cpu True"
    assert lines[1].endswith(": 4}"), lines
    site, api_name, count = lines[2].split()
    assert site.endswith("loop.py:7") and api_name == "Tensor.__bool__" and count == "4"


#: a word that reads as a commit hash: 7 to 40 hex digits, at least one a letter and one a digit
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def _hashes(paths: List[Path]) -> List[str]:
    return [f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{i}: {m.group()}"
            for p in paths
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            for m in _HASH.finditer(line)]


def test_the_user_docs_cite_no_commit_hashes() -> None:
    """The user docs name a state of the code in words or by date; a commit hash is the
    provenance of a measurement and stays in its record under ``reports/bench/``."""
    pages = [ROOT / "README.md", ROOT / "reports" / "README.md",
             *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
    assert not _hashes(pages)


def test_the_hash_check_sees_a_hash(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("1.09x against 94bcd99's 1.10x, 1,214 bytecodes on 2026-12-07\n",
                    encoding="utf-8")
    assert _hashes([page]) == [f"{page}:1: 94bcd99"]
