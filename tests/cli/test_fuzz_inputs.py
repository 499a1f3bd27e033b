"""Fuzzing the untrusted inputs: malformed scenario files and result files.

Every malformed file is exit 2 with exactly one line on stderr naming the file, and never a
traceback or an internal error (exit 3). Seeded random mutations of a valid result file may
load (exit 0) or not (exit 2), but every renderer must cope with whatever loads."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from _paths import TESTS

from syncguard.cli import EXIT_OK, EXIT_USAGE, main

# -- scenario files ----------------------------------------------------------------------------
BASE = """name = "fz"
vocab_size = 64
dtype = "float32"
steps = 3
warmup = 1

[logits]
scale = 3.0

[[requests]]
id = "r"
count = 2
top_k = 8

[[events]]
step = 1
join = [{ id = "j" }]
"""


def _sub(old: str, new: str) -> bytes:
    assert old in BASE, old
    return BASE.replace(old, new, 1).encode("utf-8")


SCENARIOS: List[Tuple[str, bytes]] = [
    ("empty", b""),
    ("not toml", b"this is not toml\n"),
    ("latin-1 byte", _sub('name = "fz"', 'name = "fz"\ndescription = "d') + b'\xe9"\n'),
    ("utf-16", BASE.encode("utf-16")),
    ("nul bytes", b"\x00" * 64),
    ("random bytes", bytes(random.Random(1).randrange(256) for _ in range(4096))),
    ("arrays 100k deep", BASE.encode() + b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("inline tables deep", BASE.encode() + b"y = " + b"{a=" * 50_000 + b"1" + b"}" * 50_000
     + b"\n"),
    ("over 1 MiB", BASE.encode() + b"# " + b"x" * (1 << 20) + b"\n"),
    ("name missing", _sub('name = "fz"\n', "")),
    ("name int", _sub('name = "fz"', "name = 3")),
    ("name newline", _sub('name = "fz"', 'name = "fz\\n::error::x"')),
    ("name escape", _sub('name = "fz"', 'name = "fz\\u001b[31m"')),
    ("name spaces", _sub('name = "fz"', 'name = "f z"')),
    ("id newline", _sub('id = "r"', 'id = "r\\n::add-mask::x"')),
    ("join id control", _sub('id = "j"', 'id = "j\\u0007"')),
    ("vocab 1", _sub("vocab_size = 64", "vocab_size = 1")),
    ("vocab 2**40", _sub("vocab_size = 64", "vocab_size = 1099511627776")),
    ("vocab string", _sub("vocab_size = 64", 'vocab_size = "64"')),
    ("vocab float", _sub("vocab_size = 64", "vocab_size = 64.5")),
    ("dtype unknown", _sub('dtype = "float32"', 'dtype = "int8"')),
    ("steps 0", _sub("steps = 3", "steps = 0")),
    ("steps 2**63-1", _sub("steps = 3", "steps = 9223372036854775807")),
    ("warmup = steps", _sub("warmup = 1", "warmup = 3")),
    ("warmup negative", _sub("warmup = 1", "warmup = -1")),
    ("scale 1e308", _sub("scale = 3.0", "scale = 1e308")),
    ("scale inf", _sub("scale = 3.0", "scale = inf")),
    ("scale nan", _sub("scale = 3.0", "scale = nan")),
    ("scale negative", _sub("scale = 3.0", "scale = -1.0")),
    ("float16 scale 1e5", _sub('dtype = "float32"', 'dtype = "float16"').replace(
        b"scale = 3.0", b"scale = 1e5")),
    ("workload 16384", _sub("scale = 3.0", "scale = 3.0\nworkload = 16384")),
    ("memory 4096 x 4M vocab", _sub("vocab_size = 64", "vocab_size = 4194304").replace(
        b"count = 2", b"count = 4096")),
    ("top_k int64 max", _sub("top_k = 8", "top_k = 9223372036854775807")),
    ("top_k 0", _sub("top_k = 8", "top_k = 0")),
    ("top_k string", _sub("top_k = 8", 'top_k = "8"')),
    ("top_p 0", _sub("top_k = 8", "top_p = 0.0")),
    ("min_p 2", _sub("top_k = 8", "min_p = 2.0")),
    ("temperature -1", _sub("top_k = 8", "temperature = -1.0")),
    ("temperature bool", _sub("top_k = 8", "temperature = true")),
    ("count 0", _sub("count = 2", "count = 0")),
    ("count 10**6", _sub("count = 2", "count = 1000000")),
    ("seed negative", _sub("top_k = 8", "seed = -5")),
    ("requests missing", BASE.split("[[requests]]")[0].encode()),
    ("requests a string", _sub("[[requests]]\n", 'requests = "r"\n[x]\n')),
    ("unknown key", _sub("steps = 3", "steps = 3\nstepz = 4")),
    ("unknown request key", _sub("top_k = 8", "top_k = 8\ntopk = 8")),
    ("duplicate ids", _sub('id = "j"', 'id = "r-0"')),
    ("event step >= steps", _sub("step = 1", "step = 3")),
    ("event finish unknown", _sub("join = [{ id = \"j\" }]", 'finish = ["nobody"]')),
    ("event empties batch", _sub("join = [{ id = \"j\" }]", 'finish = ["r-0", "r-1"]')),
    ("finish not a string", _sub("join = [{ id = \"j\" }]", "finish = [1]")),
    ("paths unknown", _sub("warmup = 1", 'warmup = 1\npaths = ["fast"]')),
    ("paths empty", _sub("warmup = 1", "warmup = 1\npaths = []")),
    ("max_syncs bad path", BASE.encode() + b'\n[expect]\nmax_syncs = { fast = 1 }\n'),
    ("max_syncs negative", BASE.encode() + b'\n[expect]\nmax_syncs = { flag = -1 }\n'),
    ("logits a string", _sub("[logits]\nscale = 3.0\n", 'logits = "big"\n')),
]


@pytest.mark.parametrize("what,content", SCENARIOS, ids=[w for w, _ in SCENARIOS])
def test_malformed_scenario_is_exit_2_with_one_line(what: str, content: bytes, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    def no_alloc(*a: Any, **k: Any) -> Any:  # a variant that gets this far must not take
        raise AssertionError("a malformed scenario reached the decode loop")  # 69 GB

    monkeypatch.setattr(torch, "randn", no_alloc)
    p = tmp_path / "fz.toml"
    p.write_bytes(content)
    for argv in (["check", str(p), "--device", "sim"],
                 ["run", str(p), "--device", "sim", "--out", str(tmp_path / "out")]):
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == EXIT_USAGE, (what, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("syncguard: error: "), (what, err)
        assert str(p) in lines[0] and "Traceback" not in err
        assert "\x1b" not in err and "\x00" not in err
        assert not (tmp_path / "out").exists()


def test_enough_scenario_variants() -> None:
    assert len(SCENARIOS) >= 40


# -- result files ------------------------------------------------------------------------------
HEADER = {"type": "header", "schema": 1, "env": {"syncguard": "0.1.0", "device": "sim"}}
STEP = {"type": "step", "scenario": "s", "path": "legacy", "pass": "counted", "step": 1,
        "warmup": False, "batch_size": 2, "branch": "simple", "syncs": 1, "allowed": 1,
        "latency_ms": 1.0}
EVENT = {"type": "event", "scenario": "s", "path": "legacy", "pass": "counted",
         "kind": "scalar_read", "api": "Tensor.item", "op": None, "filename": "m.py",
         "lineno": 3, "function": "f", "stack": [], "step": 1, "thread": "MainThread",
         "allowed": False, "reason": None, "warmup": False, "count": 1, "wait_us": None}


def _lines(*objs: Any) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode("utf-8")


def _step(**kw: Any) -> Dict[str, Any]:
    return {**STEP, **kw}


def _event(**kw: Any) -> Dict[str, Any]:
    return {**EVENT, **kw}


def _doc(**kw: Any) -> bytes:
    doc = {"header": HEADER, "steps": [STEP], "events": [], "notes": [], "footer": None, **kw}
    return ('{"header": ' + json.dumps(doc.pop("header")) + ", " + json.dumps(doc)[1:]
            ).encode("utf-8")


_no_syncs = {k: v for k, v in STEP.items() if k != "syncs"}
RESULTS: List[Tuple[str, bytes]] = [
    ("empty", b""),
    ("whitespace", b"  \n\n\t\n"),
    ("random bytes", bytes(random.Random(2).randrange(256) for _ in range(4096))),
    ("utf-16", _lines(HEADER, STEP).decode().encode("utf-16")),
    ("utf-16 no bom", _lines(HEADER, STEP).decode().encode("utf-16-le")),
    ("latin-1 in a string", _lines(HEADER).replace(b"sim", b"s\xe9m")),
    ("json nested 100k deep", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("object nested deep", _lines(HEADER) + b'{"type": "event", "x": ' + b'{"a": ' * 100_000
     + b"1" + b"}" * 100_000 + b"}\n"),
    ("toml", b'name = "x"\nsteps = 3\n'),
    ("no header", _lines(STEP)),
    ("schema 2", _lines({**HEADER, "schema": 2}, STEP)),
    ("schema string", _lines({**HEADER, "schema": "1"}, STEP)),
    ("a number line", b"42\n" + _lines(HEADER)),
    ("null line", _lines(HEADER) + b"null\n"),
    ("list line", _lines(HEADER) + b"[1, 2]\n"),
    ("torn middle line", _lines(HEADER) + b'{"type": "st\n' + _lines(STEP)),
    ("syncs many", _lines(HEADER, _step(syncs="many"))),
    ("step [1, 2]", _lines(HEADER, _step(step=[1, 2]))),
    ("step negative", _lines(HEADER, _step(step=-1))),
    ("step bool", _lines(HEADER, _step(step=True))),
    ("step 2**80", _lines(HEADER, _step(step=2 ** 80))),
    ("step 1e400", _lines(HEADER).decode().encode() + json.dumps(_step()).replace(
        '"step": 1,', '"step": 1e400,').encode() + b"\n"),
    ("syncs missing", _lines(HEADER, _no_syncs)),
    ("latency string", _lines(HEADER, _step(latency_ms="fast"))),
    ("latency NaN", _lines(HEADER) + json.dumps(_step(latency_ms=math.nan)).encode() + b"\n"),
    ("latency Infinity", _lines(HEADER) + json.dumps(_step(latency_ms=math.inf)).encode()
     + b"\n"),
    ("warmup string", _lines(HEADER, _step(warmup="no"))),
    ("scenario null", _lines(HEADER, _step(scenario=None))),
    ("scenario object", _lines(HEADER, _step(scenario={"a": 1}))),
    ("tokens strings", _lines(HEADER, _step(tokens=["a"]))),
    ("branch 1 MB", _lines(HEADER, _step(branch="b" * 100_000))),
    ("event filename int", _lines(HEADER, _event(filename=5), STEP)),
    ("event lineno string", _lines(HEADER, _event(lineno="x"), STEP)),
    ("event count negative", _lines(HEADER, _event(count=-1), STEP)),
    ("event allowed string", _lines(HEADER, _event(allowed="yes"), STEP)),
    ("event without scenario", _lines(HEADER, {k: v for k, v in EVENT.items()
                                               if k != "scenario"}, STEP)),
    ("event wait_us list", _lines(HEADER, _event(wait_us=[1]), STEP)),
    ("document not json", b'{"header": {"schema": 1}, "steps": [' + b"\n"),
    ("document header list", b'{"header": [1], "steps": []}'),
    ("document steps object", _doc(steps={"a": 1})),
    ("document step bad", _doc(steps=[_step(syncs="many")])),
    ("document events ints", _doc(events=[1, 2])),
    ("document notes strings", _doc(notes=["x"])),
    ("document footer string", _doc(footer="done")),
]


def _one_line(err: str, path: Path, what: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("syncguard: error: "), (what, err)
    assert str(path) in lines[0] and "Traceback" not in err, (what, err)


@pytest.mark.parametrize("what,content", RESULTS, ids=[w for w, _ in RESULTS])
def test_malformed_result_is_exit_2_with_one_line(what: str, content: bytes, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "r.jsonl"
    p.write_bytes(content)
    out = tmp_path / "r.md"
    for argv in (["show", str(p)], ["show", str(p), "-o", str(out)], ["compare", str(p),
                                                                     str(p)]):
        capsys.readouterr()
        rc = main(argv)
        cap = capsys.readouterr()
        assert rc == EXIT_USAGE, (what, argv, cap.err)
        _one_line(cap.err, p, what)
        assert cap.out == "" and not out.exists()


def test_enough_result_variants() -> None:
    assert len(RESULTS) >= 40


def test_malformed_files_in_a_real_process(tmp_path: Path) -> None:
    """No traceback from the real console script either (a few variants, one process each)."""
    for i, (what, content) in enumerate(RESULTS[:6]):
        p = tmp_path / f"r{i}.jsonl"
        p.write_bytes(content)
        proc = subprocess.run([sys.executable, "-m", "syncguard", "show", str(p)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == EXIT_USAGE, (what, proc.stderr)
        _one_line(proc.stderr, p, what)


# -- seeded random mutations: exit 0 or 2, never 3 --------------------------------------------
_ODD: List[Any] = [None, "x", "", -1, 0, 1.5, 2 ** 70, True, [], {}, [1, "a"], {"a": None},
                   "\x1b[2J", "`<img src=x onerror=alert(1)>`", "a\n::error::x", 1e300,
                   "$\\frac{$", "a$x$b", "[bold red]x[/]", "=cmd|' /c calc'!A0"]


def _valid_result_objs() -> List[Dict[str, Any]]:
    objs: List[Dict[str, Any]] = [dict(HEADER)]
    for i in range(4):
        objs.append(_event(step=i, lineno=3 + i % 2, allowed=i == 0))
    for pass_ in ("counted", "timed"):
        for path in ("legacy", "flag"):
            for i in range(4):
                objs.append(_step(step=i, path=path, **{"pass": pass_}, warmup=i == 0,
                                  syncs=1 if path == "legacy" and pass_ == "counted" else 0))
    objs.append({"type": "note", "message": "n"})
    objs.append({"type": "footer", "complete": True})
    return objs


@pytest.mark.parametrize("seed", range(40))
def test_random_mutations_never_crash_a_renderer(seed: int, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    rng = random.Random(seed)
    objs = _valid_result_objs()
    for _ in range(rng.randint(1, 3)):
        obj = rng.choice(objs)
        key = rng.choice(sorted(obj))
        obj[key] = rng.choice(_ODD)
    p = tmp_path / "r.jsonl"
    p.write_bytes(_lines(*objs))
    for argv in (["show", str(p), "--width", "120"],
                 *(["show", str(p), "-o", str(tmp_path / f"r{ext}")]
                   for ext in (".md", ".html", ".json", ".csv", ".txt"))):
        capsys.readouterr()
        rc = main(argv)
        cap = capsys.readouterr()
        assert rc in (EXIT_OK, EXIT_USAGE), (seed, argv, cap.err)
        if rc == EXIT_USAGE:
            _one_line(cap.err, p, f"seed {seed}")
        assert "\x1b" not in cap.out


# -- configs: pyproject.toml's [tool.syncguard] ------------------------------------------------
CONFIGS: List[Tuple[str, bytes]] = [
    ("latin-1", b'[tool.syncguard]\nallow = ["caf\xe9.py:1"]\n'),
    ("nested deep", b"[tool.syncguard]\nx = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("tool not a table", b"tool = 3\n"),
    ("syncguard not a table", b"[tool]\nsyncguard = 3\n"),
    ("unknown key", b"[tool.syncguard]\nalow = []\n"),
    ("allow entry int", b"[tool.syncguard]\nallow = [1]\n"),
    ("not toml", b"[tool.syncguard\n"),
]


@pytest.mark.parametrize("what,content", CONFIGS, ids=[w for w, _ in CONFIGS])
def test_malformed_config_is_exit_2_with_one_line(what: str, content: bytes, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    from syncguard.driving.config import load_tool_table

    p = tmp_path / "pyproject.toml"
    p.write_bytes(content)
    try:
        load_tool_table(str(p))  # the loader the plugin and check share
    except ValueError as exc:
        assert str(p) in str(exc) and "\n" not in str(exc)
    small = str(TESTS / "data" / "scenarios" / "small.toml")
    capsys.readouterr()
    rc = main(["check", small, "--device", "sim", "--path", "flag", "--config", str(p)])
    cap = capsys.readouterr()
    assert rc == EXIT_USAGE, (what, cap.err)
    _one_line(cap.err, p, what)
