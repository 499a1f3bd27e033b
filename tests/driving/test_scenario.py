"""Scenario files: the built-in set, the schema's validation (one ScenarioError naming the file
and the field for every malformed file), overrides, and the CLI's one-line error for them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest
from _paths import ROOT, TESTS

from sglang_ascend_sampling import PATHS
from syncguard.cli import EXIT_USAGE, main
from syncguard.driving import scenario as sc_mod
from syncguard.driving.scenario import RequestSpec, Scenario, ScenarioError

REQUIRED = ("steady", "boundary", "greedy_mix", "min_p", "seeded", "tiny_vocab", "realistic")
DATA = TESTS / "data" / "scenarios"


# -- built-in scenarios ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def builtins() -> Dict[str, Scenario]:
    loaded = sc_mod.resolve([])  # every scenarios/*.toml; raises on a duplicate name
    by_name = {s.name: s for s in loaded}
    assert len(by_name) == len(loaded), "built-in scenario names must be unique"
    return by_name


def _all_requests(s: Scenario) -> List[RequestSpec]:
    return list(s.requests) + [r for e in s.events for r in e.join]


def test_every_builtin_file_parses_with_a_unique_name(builtins: Dict[str, Scenario]) -> None:
    files = sc_mod.builtin_paths()
    assert files, "no built-in scenarios found"
    assert sorted(s.file for s in builtins.values()) == sorted(files)
    for s in builtins.values():
        assert s.name and s.description, s.file
        assert 0 <= s.warmup < s.steps, s.file
        assert s.paths and set(s.paths) <= set(PATHS), s.file
        assert set(s.max_syncs) <= set(PATHS), s.file
        ids = [r.id for r in _all_requests(s)]
        assert len(ids) == len(set(ids)), s.file
        # the stored text is the file's, so a result can name exactly what ran
        with open(s.file, encoding="utf-8") as f:
            assert s.text == f.read()


@pytest.mark.parametrize("name", REQUIRED)
def test_required_builtin_exists_and_resolves_by_name(name: str,
                                                      builtins: Dict[str, Scenario]) -> None:
    assert name in builtins
    (by_name,) = sc_mod.resolve([name])
    assert by_name == builtins[name]
    assert os.path.basename(by_name.file) == f"{name}.toml"


def test_builtin_steady(builtins: Dict[str, Scenario]) -> None:
    s = builtins["steady"]
    reqs = _all_requests(s)
    assert len(reqs) > 1
    assert all(r.top_k == 20 for r in reqs)
    assert not s.events  # steady: the batch never changes


def test_builtin_boundary(builtins: Dict[str, Scenario]) -> None:
    s = builtins["boundary"]
    assert {r.top_k for r in _all_requests(s)} == {1, 1024, 1025, -1}
    assert any(e.join for e in s.events), "boundary needs a join (merge)"
    assert any(e.finish for e in s.events), "boundary needs a finish (filter)"
    # the request that leaves is one that joined earlier (1025: not eligible)
    joined_at = {r.id: e.step for e in s.events for r in e.join}
    for e in s.events:
        for rid in e.finish:
            assert rid in joined_at and joined_at[rid] < e.step


def test_builtin_realistic(builtins: Dict[str, Scenario]) -> None:
    s = builtins["realistic"]
    assert len(s.requests) == 64
    assert s.vocab_size == 151936
    assert s.steps == 50


def test_builtin_tiny_vocab(builtins: Dict[str, Scenario]) -> None:
    s = builtins["tiny_vocab"]
    assert s.vocab_size <= 1024
    assert any(r.top_k == -1 for r in _all_requests(s))


def test_builtin_greedy_min_p_seeded(builtins: Dict[str, Scenario]) -> None:
    assert any(r.temperature == 0.0 for r in builtins["greedy_mix"].requests)
    assert any(r.temperature > 0.0 for r in _all_requests(builtins["greedy_mix"]))
    assert any(r.min_p > 0.0 for r in _all_requests(builtins["min_p"]))
    seeded = builtins["seeded"]
    assert seeded.deterministic
    assert any(r.seed is not None for r in seeded.requests)


def test_unknown_builtin_name_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError) as ei:
        sc_mod.resolve(["no_such_scenario"])
    msg = str(ei.value)
    assert "no_such_scenario" in msg and "steady" in msg


def test_the_same_name_twice_is_an_error(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(_doc(), encoding="utf-8")
    b.write_text(_doc(), encoding="utf-8")
    with pytest.raises(ScenarioError) as ei:
        sc_mod.resolve([str(a), str(b)])
    assert str(ei.value).startswith(f"{b}: name:")


# -- a valid file ----------------------------------------------------------------------------
def _doc(top: str = "", req: str = "", tail: str = "", *, name: str = 'name = "bad"',
         steps: str = "steps = 4", warmup: str = "warmup = 1") -> str:
    """A valid scenario (requests r-0 and r-1) with pieces added or replaced."""
    return (f"{name}\nvocab_size = 64\n{steps}\n{warmup}\n{top}\n\n"
            f"[[requests]]\nid = \"r\"\ncount = 2\ntop_k = 5\n{req}\n\n{tail}\n")


def test_base_document_is_valid() -> None:
    s = sc_mod.parse(_doc(), "base.toml")
    assert [r.id for r in s.requests] == ["r-0", "r-1"]
    assert s.paths == PATHS and s.max_syncs == {}


def test_valid_file_parses_every_field(tmp_path: Path) -> None:
    text = """
name = "full"
description = "every field"
vocab_size = 300
dtype = "bfloat16"
steps = 10
warmup = 3
seed = 9
deterministic = true
paths = ["flag", "legacy"]

[logits]
scale = 2
workload = 8

[[requests]]
id = "a"
temperature = 1
top_p = 0.5
top_k = -1
min_p = 0.25
seed = 4

[[requests]]
id = "b"
count = 1

# listed out of order: applied by step
[[events]]
step = 6
finish = ["late-1", "a"]

[[events]]
step = 2
join = [{ id = "late", count = 2, top_k = 7 }]
finish = ["b-0"]

[expect]
max_syncs = { flag = 0, legacy = 12 }
"""
    p = tmp_path / "full.toml"
    p.write_text(text, encoding="utf-8")
    s = sc_mod.load(str(p))
    assert (s.name, s.vocab_size, s.dtype, s.steps, s.warmup, s.seed) == (
        "full", 300, "bfloat16", 10, 3, 9)
    assert s.deterministic and s.paths == ("flag", "legacy")
    assert s.logits_scale == 2.0 and isinstance(s.logits_scale, float) and s.workload == 8
    a, b = s.requests
    assert a == RequestSpec("a", 1.0, 0.5, -1, 0.25, 4)
    assert b.id == "b-0"  # an explicit count always numbers the ids
    assert [e.step for e in s.events] == [2, 6]
    assert [r.id for r in s.events[0].join] == ["late-0", "late-1"]
    assert s.events_at(6)[0].finish == ("late-1", "a")
    assert s.max_syncs == {"flag": 0, "legacy": 12}
    assert s.file == str(p) and s.text == text and len(s.sha256) == 64


def test_with_steps_drops_later_events_and_keeps_warmup_below_steps() -> None:
    s = sc_mod.parse(_doc(tail='[[events]]\nstep = 3\nfinish = ["r-0"]\n'), "x.toml")
    short = s.with_steps(3)
    assert short.steps == 3 and short.events == () and short.warmup == 1
    assert s.with_steps(2, 0).warmup == 0
    assert s.with_steps(1).warmup == 0
    assert s.with_steps(8).events == s.events
    with pytest.raises(ScenarioError, match=r"x\.toml: steps:"):
        s.with_steps(0)


# -- malformed files: one ScenarioError naming the file and the field ------------------------
_EV = "[[events]]\nstep = {step}\n{body}\n"

# id -> (document, field the message must name, what it must say about it)
BAD: Dict[str, Tuple[str, Optional[str], str]] = {
    # unknown keys
    "unknown-top-level": (_doc(top='colour = "red"'), "colour", "unknown key"),
    "unknown-in-logits": (_doc(tail="[logits]\nsclae = 2.0\n"), "logits.sclae", "unknown key"),
    "unknown-in-request": (_doc(req="topk = 3"), "requests[0].topk", "unknown key"),
    "unknown-in-event": (_doc(tail=_EV.format(step=1, body='finsh = ["r-0"]')),
                         "events[0].finsh", "unknown key"),
    "unknown-in-join": (_doc(tail=_EV.format(step=1, body='join = [{ id = "j", topk = 3 }]')),
                        "events[0].join[0].topk", "unknown key"),
    "unknown-in-expect": (_doc(tail="[expect]\nmax_sync = { flag = 0 }\n"),
                          "expect.max_sync", "unknown key"),
    # wrong types
    "steps-string": (_doc(steps='steps = "4"'), "steps", "must be int"),
    "vocab-float": (_doc().replace("vocab_size = 64", "vocab_size = 64.0"), "vocab_size",
                    "must be int"),
    "deterministic-int": (_doc(top="deterministic = 1"), "deterministic", "must be bool"),
    "top_k-bool": (_doc(req="top_k = true").replace("top_k = 5\n", ""), "requests[0].top_k",
                   "must be int"),
    "temperature-string": (_doc(req='temperature = "hot"'), "requests[0].temperature",
                           "must be float"),
    "temperature-bool": (_doc(req="temperature = false"), "requests[0].temperature",
                         "must be float"),
    "name-int": (_doc(name="name = 3"), "name", "must be str"),
    "logits-not-table": (_doc(top="logits = 3"), "logits", "must be dict"),
    "requests-not-list": (_doc().replace("[[requests]]", "[requests]"), "requests",
                          "must be list"),
    "request-not-table": (_doc(top="requests = [1]").split("[[requests]]")[0], "requests[0]",
                          "must be a table"),
    "finish-string": (_doc(tail=_EV.format(step=1, body='finish = "r-0"')),
                      "events[0].finish", "must be list"),
    "finish-int-item": (_doc(tail=_EV.format(step=1, body="finish = [0]")),
                        "events[0].finish[0]", "request id string"),
    "paths-string": (_doc(top='paths = "legacy"'), "paths", "must be list"),
    "dtype-unknown": (_doc(top='dtype = "float64"'), "dtype", "must be one of"),
    # missing / empty
    "name-missing": (_doc(name=""), "name", "is required"),
    "name-empty": (_doc(name='name = ""'), "name", "must not be empty"),
    "requests-missing": ('name = "bad"\nvocab_size = 64\nsteps = 4\n', "requests",
                         "is required"),
    "requests-empty": (_doc(top="requests = []").split("[[requests]]")[0], "requests",
                       "at least one request"),
    "request-id-empty": (_doc(tail='[[requests]]\nid = ""\n'), "requests[1].id",
                         "must not be empty"),
    # parameters out of range
    "top_k-0": (_doc(req="top_k = 0").replace("top_k = 5\n", ""), "requests[0].top_k",
                "-1 (no top-k) or >= 1"),
    "top_k--2": (_doc(req="top_k = -2").replace("top_k = 5\n", ""), "requests[0].top_k",
                 "-1 (no top-k) or >= 1"),
    "top_p-0": (_doc(req="top_p = 0"), "requests[0].top_p", "must be > 0"),
    "top_p-0.0": (_doc(req="top_p = 0.0"), "requests[0].top_p", "must be > 0"),
    "top_p-1.5": (_doc(req="top_p = 1.5"), "requests[0].top_p", "must be <= 1"),
    "min_p-2": (_doc(req="min_p = 2"), "requests[0].min_p", "must be <= 1"),
    "min_p--0.1": (_doc(req="min_p = -0.1"), "requests[0].min_p", "must be >= 0"),
    "temperature--1": (_doc(req="temperature = -1"), "requests[0].temperature",
                       "must be >= 0"),
    "temperature-nan": (_doc(req="temperature = nan"), "requests[0].temperature", "finite"),
    "top_p-nan": (_doc(req="top_p = nan"), "requests[0].top_p", "finite"),
    "scale-inf": (_doc(tail="[logits]\nscale = inf\n"), "logits.scale", "finite"),
    "workload-negative": (_doc(tail="[logits]\nworkload = -1\n"), "logits.workload",
                          "must be >= 0"),
    "count-0": (_doc(tail='[[requests]]\nid = "z"\ncount = 0\n'), "requests[1].count",
                "must be >= 1"),
    "seed-negative": (_doc(top="seed = -1"), "seed", "must be >= 0"),
    "vocab-1": (_doc().replace("vocab_size = 64", "vocab_size = 1"), "vocab_size",
                "must be >= 2"),
    "steps-0": (_doc(steps="steps = 0", warmup=""), "steps", "must be >= 1"),
    "steps-negative": (_doc(steps="steps = -3", warmup=""), "steps", "must be >= 1"),
    "warmup-eq-steps": (_doc(warmup="warmup = 4"), "warmup", "must be < steps"),
    "warmup-gt-steps": (_doc(warmup="warmup = 9"), "warmup", "must be < steps"),
    "warmup-negative": (_doc(warmup="warmup = -1"), "warmup", "must be >= 0"),
    "event-step-past-end": (_doc(tail=_EV.format(step=4, body='finish = ["r-0"]')),
                            "events[0].step", "must be < steps"),
    # events and the batch
    "finish-not-in-batch": (_doc(tail=_EV.format(step=1, body='finish = ["ghost"]')),
                            "events[0].finish[0]", "'ghost' is not in the batch at step 1"),
    "finish-already-left": (_doc(tail=_EV.format(step=1, body='finish = ["r-0"]')
                                 + _EV.format(step=2, body='finish = ["r-1", "r-0"]')),
                            "events[1].finish[1]", "'r-0' is not in the batch at step 2"),
    "finish-already-left-listed-first": (
        _doc(tail=_EV.format(step=3, body='finish = ["r-0"]')
             + _EV.format(step=1, body='finish = ["r-0"]')),
        "events[0].finish[0]", "'r-0' is not in the batch at step 3"),
    "finish-twice-in-one-event": (_doc(tail=_EV.format(step=1, body='finish = ["r-0", "r-0"]')),
                                  "events[0].finish[1]", "is not in the batch"),
    "finish-before-join": (_doc(tail=_EV.format(step=1, body='finish = ["late"]')
                                + _EV.format(step=2, body='join = [{ id = "late" }]')),
                           "events[0].finish[0]", "'late' is not in the batch at step 1"),
    "finish-empties-batch": (_doc(tail=_EV.format(step=1, body='finish = ["r-0", "r-1"]')),
                             "events[0]", "empty"),
    # paths
    "paths-unknown": (_doc(top='paths = ["legacy", "bogus"]'), "paths[1]",
                      "unknown path 'bogus'"),
    "paths-empty": (_doc(top="paths = []"), "paths", "at least one path"),
    "paths-duplicate": (_doc(top='paths = ["flag", "flag"]'), "paths[1]", "duplicate path"),
    "max_syncs-unknown-path": (_doc(tail="[expect]\nmax_syncs = { bogus = 0 }\n"),
                               "expect.max_syncs.bogus", "unknown path"),
    "max_syncs-negative": (_doc(tail="[expect]\nmax_syncs = { flag = -1 }\n"),
                           "expect.max_syncs.flag", "integer >= 0"),
    "max_syncs-bool": (_doc(tail="[expect]\nmax_syncs = { flag = true }\n"),
                       "expect.max_syncs.flag", "integer >= 0"),
    # duplicate ids
    "duplicate-ids": (_doc(tail='[[requests]]\nid = "a"\n\n[[requests]]\nid = "a"\n'),
                      "requests", "duplicate request id 'a'"),
    "duplicate-ids-by-count": (_doc(tail='[[requests]]\nid = "r-1"\n'), "requests",
                               "duplicate request id 'r-1'"),
    "join-reuses-id": (_doc(tail=_EV.format(step=1, body='join = [{ id = "r-0" }]')),
                       "events[0].join", "'r-0' is already used"),
    "join-reuses-left-id": (_doc(tail=_EV.format(step=1, body='finish = ["r-0"]')
                                 + _EV.format(step=2, body='join = [{ id = "r-0" }]')),
                            "events[1].join", "'r-0' is already used"),
    # not TOML at all
    "invalid-toml": ('name = "bad\nvocab_size = 64\n', None, "not valid TOML"),
    "invalid-toml-duplicate-key": (_doc(top="steps = 5"), None, "not valid TOML"),
}


def _check_message(msg: str, path: str, field: Optional[str], reason: str) -> None:
    assert "\n" not in msg, f"one line expected: {msg!r}"
    if field is None:
        assert msg.startswith(f"{path}: {reason}"), msg
    else:
        assert msg.startswith(f"{path}: {field}: "), msg
        assert reason in msg[len(f"{path}: {field}: "):], msg


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_file_gives_one_error_naming_file_and_field(case: str,
                                                              tmp_path: Path) -> None:
    text, field, reason = BAD[case]
    p = tmp_path / f"{case}.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as ei:
        sc_mod.load(str(p))
    _check_message(str(ei.value), str(p), field, reason)


def test_unreadable_file_is_a_scenario_error(tmp_path: Path) -> None:
    p = tmp_path / "missing.toml"
    with pytest.raises(ScenarioError, match="cannot read"):
        sc_mod.load(str(p))
    with pytest.raises(ScenarioError, match="missing.toml"):
        sc_mod.resolve([str(p)])


def _error_lines(err: str) -> List[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


@pytest.mark.parametrize("case", sorted(BAD))
def test_cli_check_reports_malformed_file_in_one_line(case: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    text, field, reason = BAD[case]
    p = tmp_path / f"{case}.toml"
    p.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["check", str(p), "--device", "sim"]) == EXIT_USAGE
    cap = capsys.readouterr()
    lines = _error_lines(cap.err)
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("syncguard: error: ")
    _check_message(lines[0][len("syncguard: error: "):], str(p), field, reason)
    assert "Traceback" not in cap.err + cap.out


def test_cli_run_rejects_malformed_file_before_writing_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text, field, _ = BAD["top_p-1.5"]
    p = tmp_path / "bad.toml"
    p.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["run", str(p), "--device", "sim", "--out", str(out)]) == EXIT_USAGE
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and str(p) in lines[0] and field in lines[0]
    assert not out.exists()


def test_fixture_scenarios_are_valid() -> None:
    """The small files the CLI tests run must stay valid (and small)."""
    seen: Set[str] = set()
    for p in sorted(DATA.glob("*.toml")):
        s = sc_mod.load(str(p))
        assert s.name not in seen
        seen.add(s.name)
        assert s.vocab_size <= 1024 and len(_all_requests(s)) <= 8


def test_wheel_ships_the_builtin_scenarios(tmp_path: Path) -> None:
    # `syncguard run` on its defaults must work from an installed wheel, not only a checkout
    import subprocess
    import sys
    import zipfile

    pytest.importorskip("setuptools")
    root = ROOT
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp_path), str(root)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("syncguard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    case = root / "scenarios"  # the top-level folder; the package's scenarios/ links to it
    assert (root / "sglang_ascend_sampling" / "scenarios").resolve() == case.resolve()
    builtin = {f"sglang_ascend_sampling/scenarios/{p.name}" for p in case.glob("*.toml")}
    assert builtin and builtin <= names
    assert "sglang_ascend_sampling/scenarios/_set.toml" in builtin
    assert {"syncguard/core/opmodels/npu.json", "syncguard/core/opmodels/cuda.json"} <= names
    # installed from the wheel alone (no checkout beside it): the scenario set and the
    # subjects are found through the wheel's entry points, without importing the case study
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-index", "--target", str(site), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    code = ("import sys; from syncguard.driving import scenario, subjects; "
            "scs = scenario.resolve([]); (t,) = scenario.resolve(['tiny_vocab']); "
            "print(len(scs), t.paths, sorted(subjects.registered()), "
            "t.file.startswith(sys.argv[1]), 'sglang_ascend_sampling' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path),
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == (
        f"{len(builtin) - 1} ('legacy', 'flag', 'flag-recompute') "
        f"['flag', 'flag-recompute', 'legacy'] True False")


# ------------------------------------------- what the built-in scenarios are there to show
def _passes(name: str) -> dict:
    from syncguard.driving import devices, runner
    from syncguard.driving.scenario import resolve

    (sc,) = resolve([name])
    target = devices.resolve_target("sim")
    return {p: runner.run_pass(sc, p, target, counted=True) for p in PATHS}


def test_builtin_boundary_shows_the_flag_staying_false_after_the_wide_request_leaves() -> None:
    recs = _passes("boundary")
    br = {p: [r.labels["branch"] for r in rs] for p, rs in recs.items()}
    elig = {p: [r.labels["eligible"] for r in rs] for p, rs in recs.items()}
    # steps 0-3: every path fused; 4-7: the top_k=1025 request makes every path generic
    for p in PATHS:
        assert br[p][:4] == ["fused"] * 4 and br[p][4:8] == ["generic"] * 4, (p, br[p])
    # steps 8-11: the request left; legacy's device check and the recomputed flag see it,
    # the upstream flag stays False (no recompute on filter)
    assert br["legacy"][8:12] == ["fused"] * 4
    assert br["flag-recompute"][8:12] == ["fused"] * 4
    assert br["flag"][8:12] == ["generic"] * 4 and elig["flag"][8:12] == [False] * 4
    assert elig["flag-recompute"][8:12] == [True] * 4
    # legacy pays one hidden sync per counted step at the device check, the flag paths none
    assert [r.syncs for r in recs["legacy"] if not r.warmup] == [1] * 18
    assert sum(r.syncs for p in ("flag", "flag-recompute") for r in recs[p]) == 0
    # the host's time inside those syncs, per step (CPU time here; the wait on hardware)
    assert all(r.sync_wait_us is not None and r.sync_wait_us > 0
               for r in recs["legacy"] if r.syncs)
    assert all(r.sync_wait_us == 0.0 for r in recs["flag"])


def test_builtin_tiny_vocab_legacy_switches_branch_after_the_in_place_rewrite() -> None:
    recs = _passes("tiny_vocab")
    assert [r.labels["branch"] for r in recs["legacy"]] == ["generic"] + ["fused"] * 11
    assert [r.labels["branch"] for r in recs["flag"]] == ["generic"] * 12
    assert [r.labels["eligible"] for r in recs["flag"]] == [False] * 12
    # same inputs, different branches: the tokens part ways after step 0
    assert recs["legacy"][0].tokens == recs["flag"][0].tokens
    assert any(a.tokens != b.tokens for a, b in zip(recs["legacy"][1:], recs["flag"][1:]))


def test_builtin_seeded_gives_identical_tokens_on_legacy_and_flag() -> None:
    recs = _passes("seeded")
    assert [r.labels["branch"] for r in recs["legacy"]] == [r.labels["branch"]
                                                          for r in recs["flag"]]
    assert [r.tokens for r in recs["legacy"]] == [r.tokens for r in recs["flag"]]
    assert sum(r.syncs for r in recs["flag"]) == 0
    assert all(r.syncs == 1 for r in recs["legacy"] if not r.warmup)
