"""The one untrusted-file loader (:mod:`syncguard.process.untrusted`) under every reader: baselines
(check and the pytest plugin), profiles, scenarios, configs and results that are not UTF-8,
UTF-16, nested 100k deep, FIFOs, devices or folders, or hold numbers beyond physical ranges:
one line naming the file and field, exit 2, never a traceback and never a hang."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
from _cli import SMALL, cli, one_error_line, scenario_text, write_result
from _paths import ROOT

from syncguard.cli import EXIT_USAGE

SHIPPED = ROOT / "syncguard" / "model" / "profiles" / "910b.json"
BASELINE = json.dumps({"format": "syncguard-baseline", "version": 1, "sites": []})

BAD_BYTES: List[Tuple[str, bytes, str]] = [
    ("latin-1", BASELINE.replace("[]", '[{"scenario": "caf\xe9"}]').encode("latin-1"),
     "UTF-8"),
    ("utf-16", BASELINE.encode("utf-16"), "UTF-16"),
    ("nested 100k deep", b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    ("NaN", BASELINE.replace("[]", "NaN").encode(), "NaN is not JSON"),
    ("1e999", BASELINE.replace("[]", "1e999").encode(), "overflows"),
]


def _argv(kind: str, path: Path, tmp_path: Path) -> List[str]:
    res = write_result(tmp_path / "r.jsonl")
    return {
        "baseline": ["check", str(res), "--baseline", str(path)],
        "profile": ["run", SMALL, "--device", "sim", "--profile", str(path), "--out",
                    str(tmp_path / "o"), "--no-timed", "--steps", "2", "--warmup", "0"],
        "scenario": ["check", str(path), "--device", "sim"],
        "config": ["check", SMALL, "--device", "sim", "--config", str(path)],
        "result": ["show", str(path)],
    }[kind]


_SUFFIX = {"baseline": ".json", "profile": ".json", "scenario": ".toml",
           "config": ".toml", "result": ".jsonl"}


@pytest.mark.parametrize("kind", ["baseline", "profile"])
@pytest.mark.parametrize("what,content,why", BAD_BYTES, ids=[w for w, _, _ in BAD_BYTES])
def test_bad_json_files_are_exit_2_in_one_line(kind: str, what: str, content: bytes, why: str,
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / f"bad{_SUFFIX[kind]}"
    p.write_bytes(content)
    rc, _, err = cli(capsys, *_argv(kind, p, tmp_path))
    line = one_error_line(err)
    assert rc == EXIT_USAGE and str(p) in line and why in line, line


def _with_timeout(fn: Callable[[], object], seconds: float = 20) -> None:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked reading a FIFO"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["baseline", "profile", "scenario", "config", "result"])
def test_a_fifo_is_refused_without_blocking(kind: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / f"fifo{_SUFFIX[kind]}"
    os.mkfifo(p)
    got: List[Tuple[int, str]] = []
    _with_timeout(lambda: got.append(cli(capsys, *_argv(kind, p, tmp_path))[::2]))
    rc, err = got[0]
    line = one_error_line(err)
    assert rc == EXIT_USAGE and "a FIFO" in line and str(p) in line, line


@pytest.mark.parametrize("kind", ["baseline", "profile", "config"])
def test_a_folder_is_refused(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / f"dir{_SUFFIX[kind]}"
    p.mkdir()
    rc, _, err = cli(capsys, *_argv(kind, p, tmp_path))
    assert rc == EXIT_USAGE and "a folder" in one_error_line(err)


@pytest.mark.parametrize("value,why", [(1e308, "physical range"), (5e-324, "physical range"),
                                       (1e7, "physical range")])
@pytest.mark.parametrize("key", ["kernel_us", "mem_gbps", "matmul_tflops_16"])
def test_profile_numbers_outside_physical_ranges_are_refused_before_the_run(
        key: str, value: float, why: str, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    doc = json.loads(SHIPPED.read_text(encoding="utf-8"))
    doc["params"][key]["value"] = value
    if key == "kernel_us" and value == 5e-324:
        pytest.skip("a tiny time is a valid time")
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    rc, _, err = cli(capsys, *_argv("profile", p, tmp_path))
    line = one_error_line(err)
    assert rc == EXIT_USAGE and f"params.{key}.value" in line and why in line, line
    assert not (tmp_path / "o" / "result.jsonl").exists()


@pytest.mark.parametrize("where", ["top", "request"])
def test_a_seed_above_2_64_is_refused(where: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture) -> None:
    text = (scenario_text(top=f"seed = {2 ** 64}\n") if where == "top"
            else scenario_text(req=f"seed = {2 ** 64}\n"))
    p = tmp_path / "s.toml"
    p.write_text(text, encoding="utf-8")
    rc, _, err = cli(capsys, "check", str(p), "--device", "sim")
    line = one_error_line(err)
    assert rc == EXIT_USAGE and "seed" in line and str(p) in line


def test_plugin_baseline_not_utf8_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """Not an INTERNALERROR with a traceback."""
    (pytester.path / "b.json").write_bytes(BASELINE.encode("utf-16"))
    pytester.makepyfile("def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("--syncguard-baseline", "b.json")
    text = res.stdout.str() + res.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert "UTF-16" in text and res.ret == pytest.ExitCode.USAGE_ERROR


def test_what_syncguard_writes_never_holds_nan_or_infinity(tmp_path: Path) -> None:
    from syncguard.process import untrusted as _untrusted
    from syncguard.results.writer import ResultWriter

    w = ResultWriter(str(tmp_path / "r.jsonl"), {"x": float("inf"), "y": [float("nan")]})
    w.close(True)
    for line in (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} written"))
    assert _untrusted.dumps({"a": float("-inf")}) == '{"a": null}'


def _mutations(valid: bytes, seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    b = bytearray(valid)
    for _ in range(rng.randint(1, 8)):
        if not b:
            break
        op = rng.randrange(4)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] = rng.randrange(256)
        elif op == 1:
            del b[i:i + rng.randint(1, 20)]
        elif op == 2:
            b[i:i] = rng.choice([b"[", b"{", b"1e999", b"NaN", b"\xff", b'"', b"-1", b"\x00"])
        else:
            b = b[:i]
    return bytes(b)


@pytest.mark.parametrize("seed", range(40))
def test_random_baseline_and_profile_mutations_raise_only_their_error(
        seed: int, tmp_path: Path) -> None:
    """Fuzz: a mutated baseline or profile loads or raises the reader's own one-line error
    (exit 2 in the CLI), never anything else."""
    from syncguard.gate.baseline import Baseline, BaselineError, BaselineSite
    from syncguard.model.profile import ProfileError, load_profile

    good = tmp_path / "good.json"
    Baseline([BaselineSite("s", "p", f"k{i}", i, site="a.py:1") for i in range(3)]).save(
        str(good))
    for valid, load, err in ((good.read_bytes(), Baseline.load, BaselineError),
                             (SHIPPED.read_bytes(), load_profile, ProfileError)):
        p = tmp_path / "m.json"
        p.write_bytes(_mutations(valid, seed))
        try:
            load(str(p))
        except err as exc:
            assert "\n" not in str(exc) and str(p) in str(exc)


@pytest.mark.parametrize("stack", [[{"bogus": 1}], [1], [{"filename": "a.py", "lineno": "3",
                                                          "function": "f"}]])
def test_a_crafted_stack_frame_is_exit_2(stack: list, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    """A recorded event's stack is read back as frames by check: a bad one was exit 3."""
    res = write_result(tmp_path / "r.jsonl", events=[{"stack": stack}])
    rc, _, err = cli(capsys, "check", str(res))
    assert rc == EXIT_USAGE and "event.stack[0]" in one_error_line(err)
