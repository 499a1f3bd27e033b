"""The README's library snippet runs as written and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_library_snippet_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## As a library", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "no python block under ## As a library"
    script = tmp_path / "snippet.py"
    script.write_text(code.group(1), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "3 3"
    assert lines[1] == ("snippet.py:9 in sampler: Tensor.__bool__ (aten::_local_scalar_dense) "
                        "[scalar_read] x1, step 0")
    assert lines[-1] == "True 3 hidden syncs, budget 0"
