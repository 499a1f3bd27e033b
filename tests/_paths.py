"""Where the tests' shared files are, for test modules in any layer folder."""

from __future__ import annotations

from pathlib import Path

#: the tests/ folder
TESTS = Path(__file__).resolve().parent
#: the repository root
ROOT = TESTS.parent
#: tests/data
DATA = TESTS / "data"
