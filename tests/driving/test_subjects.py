"""Subjects: the built-in paths through the subject protocol give the tokens, branches and
counts recorded before the refactor; a user subject runs through ``--subject``."""

from __future__ import annotations

import json
import os

import pytest
from _paths import ROOT, TESTS

from syncguard.cli import main
from syncguard.driving import devices, runner, scenario, subjects
from syncguard.results import loader

GOLDEN = os.path.join(str(TESTS), "data", "golden", "subjects_before.json")
USER = "subjects_demo.topk_subject:TopKSubject"  # tests/ is on sys.path


def _golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.mark.parametrize("key", sorted(_golden()))
def test_builtin_paths_unchanged(key):
    name, path = key.split("|")
    sc = scenario.resolve([name])[0]
    sc = sc.with_steps(min(sc.steps, 12))
    recs = runner.run_pass(sc, path, devices.resolve_target("sim"), True)
    got = [[r.step, r.tokens, r.labels["branch"], r.labels["eligible"], r.syncs, r.allowed]
           for r in recs]
    assert got == _golden()[key]
    assert all(set(r.labels) == {"branch", "eligible"} for r in recs)


def test_registry():
    reg = subjects.registered()
    assert {"legacy", "flag", "flag-recompute"} <= set(reg)  # the case study's entry points
    assert subjects.known("legacy") and subjects.known("pkg.mod:Obj")
    assert not subjects.known("nope")
    with pytest.raises(subjects.SubjectError, match="unknown subject 'nope'"):
        subjects.load("nope", "--subject")
    with pytest.raises(subjects.SubjectError, match="cannot import"):
        subjects.load("no_such_pkg_x:Obj", "--subject")
    with pytest.raises(subjects.SubjectError, match="not a subject"):
        subjects.load("os:getcwd", "--subject")


def test_user_subject_via_run(tmp_path, capsys):
    out = str(tmp_path / "o")
    rc = main(["run", os.path.join(str(TESTS), "data", "scenarios", "small.toml"),
               "--device", "sim", "--subject", USER, "--paths", "flag", "--out", out,
               "--no-timed"])
    assert rc == 0, capsys.readouterr().err
    res = loader.load(os.path.join(out, "result.jsonl"))
    assert res.paths == ["flag", "topk-sync"]
    mine = [s for s in res.steps if s.path == "topk-sync"]
    # the user's sampler reads the top-k bound back once per step: 6 steps, warm-up 1
    assert [s.syncs for s in mine] == [1] * 6
    assert all(s.labels and s.labels["k"] == 20 for s in mine)  # max top_k (r-0, r-1: 20)
    import pandas as pd

    csv = pd.read_csv(os.path.join(out, "steps.csv"))
    assert set(csv[csv["path"] == "topk-sync"]["labels"]) == {'{"k": 20}'}
    assert {os.path.basename(e["filename"]) for e in res.events
            if e["path"] == "topk-sync" and not e["allowed"]} == {"topk_subject.py"}


def test_user_subject_via_check(capsys):
    small = os.path.join(str(TESTS), "data", "scenarios", "small.toml")
    assert main(["check", small, "--device", "sim", "--subject", USER]) == 1
    assert "topk_subject.py" in capsys.readouterr().out
    assert main(["check", small, "--device", "sim", "--subject", USER,
                 "--max-syncs", "5"]) == 0


def test_bad_subject_is_usage_error(capsys):
    assert main(["check", "--device", "sim", "--subject", "no_such_pkg_x:S"]) == 2
    assert "--subject" in capsys.readouterr().err


def test_ratio_baseline_is_a_parameter(tmp_path, capsys):
    from syncguard.results import analysis

    out = str(tmp_path / "o")
    small = os.path.join(str(TESTS), "data", "scenarios", "small.toml")
    assert main(["run", small, "--device", "sim", "--subject", USER, "--paths", "flag",
                 "--out", out, "--ratio-base", "topk-sync"]) == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    by = {r["path"]: r for r in analysis.summary(res).to_dict("records")}
    assert by["topk-sync"]["baseline"] == "topk-sync" and by["topk-sync"]["ratio_vs_baseline"] == 1
    by = {r["path"]: r for r in analysis.summary(res, baseline="nope").to_dict("records")}
    assert by["flag"]["baseline"] == "flag" and by["flag"]["ratio_vs_baseline"] == 1
    text = capsys.readouterr().out
    assert "vs topk-sync" in text  # the verdict names the baseline
    assert "/topk-sync" in text  # and so does the ratio column's header


def test_entry_point_subjects_are_registered(monkeypatch):
    monkeypatch.setattr(subjects, "_entry_points",
                        lambda: {"mine": USER, "legacy": "elsewhere:Other"})
    reg = subjects.registered()
    assert reg == {"mine": USER, "legacy": "elsewhere:Other"}  # no built-in name table
    assert subjects.label("mine", subjects.load("mine")) == "mine"


def test_baseline_carries_over_from_run_to_check(tmp_path, capsys):
    """A baseline written from a run folder matches a later check of the same subject: both
    name the subject by its display name (``topk-sync``), not by its MODULE:OBJ spec."""
    small = os.path.join(str(TESTS), "data", "scenarios", "small.toml")
    out, base = str(tmp_path / "o"), str(tmp_path / "b.json")
    assert main(["run", small, "--device", "sim", "--subject", USER, "--paths", "flag",
                 "--out", out, "--no-timed"]) == 0
    assert main(["check", out, "--update-baseline", base]) == 0
    with open(base) as f:
        assert {s["path"] for s in json.load(f)["sites"]} == {"topk-sync"}
    capsys.readouterr()
    assert main(["check", small, "--device", "sim", "--subject", USER, "--paths", "flag",
                 "--baseline", base]) == 0, capsys.readouterr().out
    # and the other way round: a baseline written by check matches check
    assert main(["check", small, "--device", "sim", "--subject", USER, "--paths", "flag",
                 "--update-baseline", base]) == 0
    with open(base) as f:
        assert {s["path"] for s in json.load(f)["sites"]} == {"topk-sync"}


BROKEN = "subjects_demo.broken_subjects:"


@pytest.mark.parametrize("obj, message", [
    ("RaisesKeyError", "subject raises: sample() raised KeyError: 'oops' at "
                       "tests/subjects_demo/broken_subjects.py:22"),
    ("WrongShape", "subject wrong-shape: sample() returned ids of shape [1] for a batch of 2; "
                   "expected shape [2]"),
    ("FloatIds", "subject float-ids: sample() returned ids of dtype float32; expected an "
                 "integer dtype"),
])
def test_errors_in_a_user_subject_blame_it(obj, message, capsys, monkeypatch):
    """A bug in the user's subject is bad input (exit 2, one line naming the subject, the
    exception and the user's file:line), not syncguard's internal error; ids of the wrong
    shape or dtype never pass as "0 hidden syncs"."""
    monkeypatch.chdir(str(ROOT))
    small = os.path.join("tests", "data", "scenarios", "small.toml")
    assert main(["check", small, "--device", "sim", "--subject", BROKEN + obj,
                 "--paths", "flag"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"syncguard: error: {message}"
    assert main(["check", small, "--device", "sim", "--subject", BROKEN + "Fine",
                 "--paths", "flag"]) == 0


def _scenario_with_budget(tmp_path, budget):
    small = os.path.join(str(TESTS), "data", "scenarios", "small.toml")
    with open(small) as f:
        text = f.read()
    text = text.replace('seed = 11\n', f'seed = 11\nsubjects = ["flag", "{USER}"]\n')
    path = tmp_path / "budget.toml"
    path.write_text(text + f"\n\n[expect]\nmax_syncs = {budget}\n")
    return str(path)


def test_expect_max_syncs_takes_a_subjects_display_name_or_spec(tmp_path, capsys):
    """[expect] max_syncs accepts a listed subject by its display name or its MODULE:OBJ spec
    (topk-sync makes 5 hidden syncs after warm-up); an unknown key lists the valid ones."""
    for key in ("topk-sync", f'"{USER}"'):
        assert main(["check", _scenario_with_budget(tmp_path, f"{{ {key} = 5 }}"),
                     "--device", "sim"]) == 0, capsys.readouterr().err
        assert main(["check", _scenario_with_budget(tmp_path, f"{{ {key} = 4 }}"),
                     "--device", "sim"]) == 1
    capsys.readouterr()
    assert main(["check", _scenario_with_budget(tmp_path, "{ nope = 4 }"), "--device", "sim"]) == 2
    err = capsys.readouterr().err
    assert "expect.max_syncs.nope: unknown path or subject; valid: legacy, flag, " \
           f"flag-recompute, {USER}, topk-sync" in err


def test_cpu_device_says_it_counts_nothing(capsys):
    """On --device cpu the guard sees only host tensors: a subject known to sync
    (int(top_ks.max())) counts 0 there, and the device's name says syncs are not counted
    rather than that there is nothing to sync; no Python warning leaks onto stderr."""
    target = devices.resolve_target("cpu")
    assert "no syncs counted" in target.name and "nothing to sync" not in target.name
    small = os.path.join(str(TESTS), "data", "scenarios", "small.toml")
    sc = scenario.resolve([small])[0]
    recs = runner.run_pass(sc, USER, target, True)
    assert sum(r.syncs for r in recs) == 0
    assert main(["check", small, "--device", "cpu", "--subject", USER]) == 0
    assert "Warning" not in capsys.readouterr().err
