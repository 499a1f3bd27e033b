"""Every example in examples/ runs, and finds the sync it is there to show."""

from __future__ import annotations

import os
import sys

import pytest

from syncguard.cli import main
from syncguard.results import format as results
from syncguard.results import loader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
SMALL = os.path.join(ROOT, "tests", "data", "scenarios", "small.toml")


def _line(path: str, text: str) -> int:
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


@pytest.fixture
def clean_imports(monkeypatch):
    monkeypatch.setattr(sys, "path", sys.path[:])
    yield
    for m in ("tinylm", "fastsample", "fastsample_subject"):
        sys.modules.pop(m, None)


def test_decode_loop_example(tmp_path, clean_imports, capsys):
    script = os.path.join(EXAMPLES, "decode_loop", "generate.py")
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--step", "tinylm:TinyLM.decode_step",
               "--max-syncs", "0", "--", "python", script, "--tokens", "5"])
    assert rc == 1  # the sanity check syncs on every step
    assert "generated 5 tokens for 4 sequences" in capsys.readouterr().out
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [(s.path, s.syncs) for s in res.steps] == [("TinyLM.decode_step", 1)] * 5
    tinylm = os.path.join(EXAMPLES, "decode_loop", "tinylm.py")
    assert {(e["filename"], e["lineno"]) for e in res.events if not e["allowed"]
            and e["path"] != results.OUTSIDE_PATH} == {
        (tinylm, _line(tinylm, "if (next_ids < 0).any()"))}


def test_sampler_subject_example(tmp_path, clean_imports, monkeypatch, capsys):
    monkeypatch.chdir(os.path.join(EXAMPLES, "sampler_subject"))
    subject = "fastsample_subject:FastSampleSubject"
    assert main(["check", SMALL, "--device", "sim", "--subject", subject]) == 1
    fast = os.path.join(EXAMPLES, "sampler_subject", "fastsample.py")
    assert f"fastsample.py:{_line(fast, 'fast path: the hidden sync')}" in (
        capsys.readouterr().out)
    out = str(tmp_path / "o")
    assert main(["run", SMALL, "--device", "sim", "--subject", subject, "--no-timed",
                 "--out", out]) == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert [s.syncs for s in res.steps] == [1] * 6
    assert {s.labels["top_p"] for s in res.steps if s.labels} == {"on"}
