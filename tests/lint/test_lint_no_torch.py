"""``syncguard lint`` and ``show``/``compare``/``check`` of recorded results install and run
like a linter: without torch (issue 36 item 6). Each runs in a real process where ``import
torch`` fails and leaves a mark, so an import swallowed by a ``try`` still shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from _paths import ROOT
from _subprocess import env as clean_env

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

BLOCKER = """\
import os
open(os.environ["SYNCGUARD_TEST_TORCH_MARK"], "a").write("imported\\n")
raise ModuleNotFoundError("No module named 'torch'", name="torch")
"""


def _run(tmp_path: Path, args: List[str]) -> Tuple[int, str, str, bool]:
    block = tmp_path / "block"
    (block / "torch").mkdir(parents=True, exist_ok=True)
    (block / "torch" / "__init__.py").write_text(BLOCKER)
    mark = tmp_path / "torch-imported"
    if mark.exists():
        mark.unlink()
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(block), str(ROOT)])
    env["SYNCGUARD_TEST_TORCH_MARK"] = str(mark)
    proc = subprocess.run([sys.executable, "-m", "syncguard", *args], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=120)
    return proc.returncode, proc.stdout, proc.stderr, mark.exists()


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "old" / "result-branch-fields.jsonl",
                out / "result.jsonl")
    return out


def test_lint_show_compare_check_never_import_torch(tmp_path: Path, recorded: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("import torch\n\ndef f(x_gpu):\n    return x_gpu.item()\n")
    for args, want in [
        (["lint", "src"], 1),
        (["lint", "src", "--format", "sarif", "-o", "out.sarif"], 1),
        (["show", str(recorded)], 0),
        (["compare", str(recorded), str(recorded)], 0),
        (["check", str(recorded), "--max-syncs", "1000"], 0),
        (["check", str(recorded), "--max-syncs", "0", "--format", "github"], 1),
    ]:
        rc, out, err, imported = _run(tmp_path, args)
        assert not imported, (args, err)
        assert rc == want, (args, rc, err)


def test_lint_with_a_lineage_run_never_imports_torch(tmp_path: Path) -> None:
    """``lint --with-run`` reads a recorded ``--lineage`` run (its trees too) and adds the
    count and the verdict without torch; a bad result is still one line, exit 2."""
    from _cli import write_result

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("import torch\n\ndef f(x_gpu):\n    return x_gpu.item()\n")
    lin = {"verdict": "hoistable", "roots": "host data at b.py:9", "ops": "ge, all",
           "uploads": "b.py:9", "digest": "d", "once": 1, "tree_id": "t",
           "tree": [{"op": "all", "in": [{"root": "upload", "label": "host data",
                                          "site": "b.py:9"}]}]}
    res = write_result(tmp_path / "run.jsonl",
                       events=[{"filename": str(src / "a.py"), "lineno": 4, "lineage": lin,
                                "step": i} for i in (1, 2)])
    rc, out, err, imported = _run(tmp_path, ["lint", "src", "--with-run", str(res)])
    assert not imported, err
    assert rc == 1, err
    assert "hoistable: compute it on the host where b.py:9 builds it, the same value every " \
        "step]" in out, out
    (tmp_path / "bad.jsonl").write_text("nope\n")
    rc, out, err, imported = _run(tmp_path, ["lint", "src", "--with-run", "bad.jsonl"])
    assert not imported and rc == 2 and err.count("\n") == 1, err


def test_commands_that_need_torch_say_how_to_get_it(tmp_path: Path) -> None:
    rc, out, err, imported = _run(tmp_path, ["run", "--device", "sim"])
    assert imported and rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'syncguard[torch]'" in lines[0], err
    assert "Traceback" not in err


def test_the_package_and_its_pre_commit_hook_install_without_torch() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert not [d for d in project["dependencies"] if d.split(">")[0].split("=")[0].strip()
                in ("torch", "torch_npu", "torch-npu")]
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["torch"])
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "language: python" in hooks  # installs the package itself: its dependencies only
