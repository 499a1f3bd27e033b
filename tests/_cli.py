"""Helpers the tests of several layers share: the CLI run in-process, one-line errors, crafted
scenario and result files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from _paths import DATA

from syncguard.cli import main

#: a small scenario file
SMALL = str(DATA / "scenarios" / "small.toml")


def program_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test that runs a program in-process under ``exec`` needs: its own copy of
    ``sys.path`` (the program's folder goes first) and no torchrun rank in the environment."""
    import sys

    monkeypatch.setattr(sys, "path", sys.path[:])
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def forget(*modules: str) -> None:
    """Drop the program's modules, so the next in-process run imports them afresh."""
    import sys

    for m in modules:
        sys.modules.pop(m, None)


def line_of(path: str, text: str) -> int:
    """The number of the first line of ``path`` that contains ``text``."""
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def cli(capsys: pytest.CaptureFixture, *argv: str) -> Tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"one stderr line expected, got: {err!r}"
    assert lines[0].startswith("syncguard: error: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


def scenario_text(name: str = "u", rid: str = "r", extra: str = "", req: str = "",
                  top: str = "") -> str:
    return (f'name = {json.dumps(name)}\nvocab_size = 64\nsteps = 3\nwarmup = 1\n{top}'
            f'{extra}\n[[requests]]\nid = {json.dumps(rid)}\n{req}')


def write_result(path: Path, *, scenario: str = "s", path_name: str = "legacy",
                 events: Optional[List[Dict[str, Any]]] = None, version: str = "0.1.0",
                 steps: int = 3) -> Path:
    """A crafted result file: ``steps`` counted and timed steps and the given events."""
    lines = [{"type": "header", "schema": 1, "created": 0,
              "env": {"syncguard": version, "torch": "2.13.0", "device": "sim"},
              "scenarios": {}}]
    for e in events or []:
        lines.append({"type": "event", "scenario": scenario, "path": path_name,
                      "pass": "counted", "kind": "scalar_read", "api": "Tensor.__bool__",
                      "op": None, "filename": "model.py", "lineno": 3, "function": "f",
                      "stack": [], "step": 1, "thread": "MainThread", "allowed": False,
                      "reason": None, "warmup": False, "count": 1, **e})
    for pass_ in ("counted", "timed"):
        for i in range(steps):
            lines.append({"type": "step", "scenario": scenario, "path": path_name,
                          "pass": pass_, "step": i, "warmup": i == 0, "batch_size": 2,
                          "branch": "simple", "syncs": 1 if pass_ == "counted" else 0,
                          "allowed": 1, "latency_ms": 1.5})
    lines.append({"type": "footer", "complete": True})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path
