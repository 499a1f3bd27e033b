"""The case study as a plug-in: syncguard knows only subjects, scenario sets and free-form
labels. Entry points (a checkout's over stale metadata), scenario sets and their default
subjects, the result format's labels (older results with ``branch``/``eligible`` fields still
read), the generic per-step and summary columns, and the case study finding its fused op."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Dict, List

import pytest
from _paths import ROOT, TESTS

from syncguard.cli import EXIT_OK, EXIT_USAGE, main
from syncguard.driving import plugins, scenario, subjects
from syncguard.renderers import _tables, terminal
from syncguard.results import analysis, loader
from syncguard.results import format as results
from syncguard.results.writer import ResultWriter

ROOT = ROOT
DATA = TESTS / "data"
#: Written by syncguard 0.1.0 at commit c78a3a0, before branch and eligible became labels:
#: `syncguard run tiny.toml --device sim --paths legacy,flag --repeat 3 --profile none` (a
#: 4-step scenario, a greedy request joining at step 2), host and paths scrubbed. Its steps
#: carry ``branch`` and ``eligible`` as fields and (since subjects) the same in ``labels``.
OLD = DATA / "old" / "result-branch-fields.jsonl"


# -- entry points: a checkout's pyproject.toml over syncguard's installed metadata -----------
@pytest.fixture
def fake_plugins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Point :mod:`syncguard.driving.plugins` at a pyproject.toml and installed metadata of a test's
    making; the caches are cleared before and after."""
    def setup(pyproject: str, installed: List[tuple]) -> None:
        p = tmp_path / "pyproject.toml"
        p.write_text(pyproject, encoding="utf-8")
        monkeypatch.setattr(plugins, "_checkout_pyproject", lambda: str(p))
        monkeypatch.setattr(plugins, "_installed", lambda: tuple(installed))
        plugins._checkout_groups.cache_clear()

    yield setup
    plugins._checkout_groups.cache_clear()  # the real checkout's, read afresh


STALE = [("syncguard", "syncguard.subjects", "legacy", "syncguard.sampling.subject:Legacy"),
         ("syncguard", "syncguard.subjects", "gone", "syncguard.sampling.subject:Gone"),
         ("other-pkg", "syncguard.subjects", "theirs", "other.mod:Theirs"),
         ("other-pkg", "syncguard.subjects", "legacy", "other.mod:Legacy")]


def test_a_checkout_replaces_syncguards_stale_metadata(fake_plugins: Any) -> None:
    """Run from a checkout whose entry points moved (PYTHONPATH, or an editable install made
    before): the checkout's own table wins and the installed syncguard's stale names are gone;
    other distributions' stay, after it."""
    fake_plugins('[project]\nname = "syncguard"\n'
                 '[project.entry-points."syncguard.subjects"]\n'
                 'legacy = "new.place:Legacy"\nflag = "new.place:Flag"\n', STALE)
    assert plugins.group("syncguard.subjects") == {
        "legacy": "new.place:Legacy", "flag": "new.place:Flag", "theirs": "other.mod:Theirs"}
    assert plugins.group("syncguard.scenarios") == {}


def test_an_installed_syncguard_reads_its_metadata_first(fake_plugins: Any) -> None:
    """No checkout of syncguard beside the package (a wheel; another project's pyproject):
    the installed metadata, syncguard's own before other distributions'."""
    fake_plugins('[project]\nname = "not-syncguard"\n', list(reversed(STALE)))
    assert plugins.group("syncguard.subjects") == {
        "legacy": "syncguard.sampling.subject:Legacy", "gone": "syncguard.sampling.subject:Gone",
        "theirs": "other.mod:Theirs"}


def test_the_checkout_lists_the_case_study_without_importing_it() -> None:
    """From this checkout, in a fresh process: the subjects and every scenario of the set are
    found, and nothing of the case study (nor torch) is imported to find them."""
    code = ("import sys; from syncguard.driving import scenario, subjects; "
            "scs = scenario.resolve([]); "
            "print(sorted(subjects.registered()), len(scs), scs[0].paths, "
            "sorted(m for m in sys.modules if m.startswith(('sglang', 'torch'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("['flag', 'flag-recompute', 'legacy'] 7 "
                                   "('legacy', 'flag', 'flag-recompute') []")


# -- scenario sets ------------------------------------------------------------------------
SCENARIO = """name = "{name}"
vocab_size = 64
steps = 3
warmup = 1
{subjects}
[[requests]]
id = "r"
"""


def _set(root: Path, pkg: str, files: Dict[str, str], declared: Any = None) -> str:
    """A package ``pkg`` under ``root`` with a scenario folder ``scen``; returns its entry
    point value."""
    folder = root / pkg / "scen"
    folder.mkdir(parents=True)
    (root / pkg / "__init__.py").write_text("raise ImportError('never imported')\n")
    for name, subj in files.items():
        (folder / f"{name}.toml").write_text(SCENARIO.format(name=name, subjects=subj))
    if declared is not None:
        (folder / "_set.toml").write_text(declared)
    return f"{pkg}.scen"


@pytest.fixture
def sets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Register scenario sets (name -> entry point value) and subjects of a test's making."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def setup(groups: Dict[str, Dict[str, str]]) -> None:
        monkeypatch.setattr(plugins, "group", lambda g: dict(groups.get(g, {})))

    return setup


SUBJECTS = {"b-one": "m:B", "a-two": "m:A", "c-three": "m:C"}


def test_a_scenario_without_subjects_runs_its_sets(sets: Any, tmp_path: Path) -> None:
    one = _set(tmp_path, "pkg_one", {"s1": "", "own": 'subjects = ["a-two"]'},
               'description = "one"\nsubjects = ["c-three", "b-one"]\n')
    two = _set(tmp_path, "pkg_two", {"s2": ""}, 'subjects = ["a-two", "c-three"]\n')
    sets({"syncguard.scenarios": {"zz": one, "aa": two}, "syncguard.subjects": SUBJECTS})
    by = {s.name: s for s in scenario.resolve([])}
    assert list(by) == ["s2", "own", "s1"]  # sets by name, each set's files sorted
    assert by["s1"].paths == ("c-three", "b-one")  # its set's, in its order: the baseline first
    assert by["s2"].paths == ("a-two", "c-three")
    assert by["own"].paths == ("a-two",)  # a scenario's own subjects win
    # a file outside every set: what the sets declare (sets by name, each once)
    mine = tmp_path / "mine.toml"
    mine.write_text(SCENARIO.format(name="mine", subjects=""))
    assert scenario.load(str(mine)).paths == ("a-two", "c-three", "b-one")
    assert "pkg_one" not in sys.modules and "pkg_two" not in sys.modules  # found, not imported


def test_no_set_declares_subjects_every_registered_one_runs(sets: Any, tmp_path: Path) -> None:
    value = _set(tmp_path, "pkg_bare", {"s": ""})
    sets({"syncguard.scenarios": {"bare": value}, "syncguard.subjects": SUBJECTS})
    (s,) = scenario.resolve(["s"])
    assert s.paths == ("a-two", "b-one", "c-three")  # by name


def test_no_subject_at_all_is_one_line(sets: Any, tmp_path: Path) -> None:
    sets({})
    mine = tmp_path / "mine.toml"
    mine.write_text(SCENARIO.format(name="mine", subjects=""))
    with pytest.raises(scenario.ScenarioError, match=r"mine.toml: subjects: names no subject"):
        scenario.load(str(mine))
    with pytest.raises(scenario.ScenarioError, match="no scenario set is registered"):
        scenario.resolve([])


def test_scenario_names_resolve_in_the_sets(sets: Any, tmp_path: Path) -> None:
    one = _set(tmp_path, "pkg_a", {"same": "", "only_a": ""}, 'subjects = ["a-two"]\n')
    two = _set(tmp_path, "pkg_b", {"same": ""}, 'subjects = ["a-two"]\n')
    (tmp_path / "pkg_a" / "scen" / "_hidden.toml").write_text("not a scenario")
    sets({"syncguard.scenarios": {"a": one, "b": two}, "syncguard.subjects": SUBJECTS})
    (s,) = scenario.resolve(["only_a"])
    assert Path(s.file) == tmp_path / "pkg_a" / "scen" / "only_a.toml"
    with pytest.raises(scenario.ScenarioError, match="same: a scenario of more than one"):
        scenario.resolve(["same"])
    with pytest.raises(scenario.ScenarioError, match="nope: no such scenario"):
        scenario.resolve(["nope"])
    with pytest.raises(scenario.ScenarioError, match="_hidden: no such scenario"):
        scenario.resolve(["_hidden"])  # "_" files are the set's own, never scenarios
    with pytest.raises(scenario.ScenarioError, match="no such scenario"):  # a name, not a path
        scenario.resolve([os.path.join("..", "..", "pkg_b", "scen", "same")])


@pytest.mark.parametrize("declared, field", [
    ('subjects = "a-two"', "subjects: must be list"),
    ('subjects = ["a-two", "a-two"]', "subjects[1]: duplicate subject"),
    ('subjects = ["a-two"]\ncolour = 1', "colour: unknown key"),
    ('subjects = [', "not valid TOML"),
    ("subjects = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('subjects = ["nope"]', "subjects (the default 'nope'): unknown path 'nope'"),
])
def test_a_bad_set_file_is_one_line(sets: Any, tmp_path: Path, declared: str,
                                    field: str) -> None:
    value = _set(tmp_path, "pkg_bad", {"s": ""}, declared)
    sets({"syncguard.scenarios": {"bad": value}, "syncguard.subjects": SUBJECTS})
    with pytest.raises(scenario.ScenarioError) as exc:
        scenario.resolve([])
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg
    assert "_set.toml" in msg or "s.toml" in msg


def test_a_set_whose_folder_is_gone_is_named(sets: Any, tmp_path: Path) -> None:
    sets({"syncguard.scenarios": {"lost": "no_such_pkg_xyz.scenarios"}})
    with pytest.raises(scenario.ScenarioError,
                       match=r"scenario set 'lost'.*no_such_pkg_xyz.scenarios.*folder not found"):
        scenario.resolve([])
    own = tmp_path / "own.toml"  # a scenario file still runs: the broken set is not needed
    own.write_text(SCENARIO.format(name="own", subjects='subjects = ["m:A"]'))
    assert scenario.resolve([str(own)])[0].paths == ("m:A",)


# -- the result format: labels, older results ------------------------------------------------
def test_step_records_carry_only_labels() -> None:
    names = {f for f in results.StepRecord.__dataclass_fields__}
    assert not names & {"branch", "eligible"}
    assert not {"branch", "eligible"} & set(results.STEP_COLUMNS)
    assert "torch_npu" not in subjects.SubjectContext.__dataclass_fields__


@pytest.mark.parametrize("old, labels", [
    ({"branch": "fused", "eligible": False}, {"branch": "fused", "eligible": False}),
    ({"branch": "", "eligible": None, "labels": {"phase": "prefill"}}, {"phase": "prefill"}),
    ({"branch": "", "eligible": None, "labels": None}, None),
    ({"branch": "fused", "labels": {"branch": "generic", "k": 1}},
     {"branch": "generic", "k": 1}),
])
def test_older_step_fields_become_labels(old: Dict[str, Any], labels: Any) -> None:
    d = {"scenario": "s", "path": "p", "pass": "counted", "step": 0, "warmup": False,
         "batch_size": 1, "syncs": 0, "allowed": 1, "latency_ms": None, **old}
    assert results.StepRecord.from_dict(d).labels == labels


@pytest.mark.parametrize("with_labels", [True, False])
def test_an_older_result_still_reads(tmp_path: Path, with_labels: bool,
                                     capsys: pytest.CaptureFixture) -> None:
    """A result written before the move (and, without ``labels``, one written before
    subjects): branch and eligible are labels, and every report shows them as before."""
    path = OLD
    if not with_labels:
        path = tmp_path / "result.jsonl"
        lines = [json.loads(x) for x in OLD.read_text().splitlines()]
        for o in lines:
            o.pop("labels", None)
        path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    res = loader.load(str(path))
    assert res.paths == ["legacy", "flag"] and len(res.steps) == 32
    by = {(s.path, s.pass_, s.round, s.step): s.labels for s in res.steps}
    # the request with top_k 1025 joins at step 2: generic from there, the flag False
    assert by[("legacy", "counted", None, 1)] == {"branch": "fused", "eligible": True}
    assert by[("flag", "counted", None, 2)] == {"branch": "generic", "eligible": False}
    assert by[("flag", "timed", 2, 3)] == {"branch": "generic", "eligible": False}
    sm = {r["path"]: r for r in analysis.summary(res).to_dict("records")}
    assert sm["legacy"]["branches"] == "generic 2, fused 1" == sm["flag"]["branches"]
    assert sm["legacy"]["ratio_vs_baseline"] == 1.0 and sm["flag"]["baseline"] == "legacy"
    ps = analysis.per_step(res, "tiny")
    assert list(ps["legacy.branch"]) == ["fused", "fused", "generic", "generic"]
    assert json.loads(res.steps_df()["labels"][0]) == {"branch": "fused", "eligible": True}
    assert main(["show", str(path), "--width", "200"]) == EXIT_OK
    out = capsys.readouterr().out
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "Per step: tiny")
    rows = [ln.split() for ln in lines[start:]]
    assert ["branch", "syncs", "ms", "branch", "syncs", "ms"] in [r[2:8] for r in rows], out
    assert ["2", "3", "generic", "1"] in [r[:4] for r in rows], out


# -- generic columns: the branch label where reported, the baseline named --------------------
def _result(tmp_path: Path, labels: Dict[str, Any]) -> results.RunResult:
    """Two paths of one scenario; ``labels[path]``: the labels each step of it reports."""
    w = ResultWriter(str(tmp_path / "r.jsonl"), {"scenarios": {"s": {}}})
    for path, lab in labels.items():
        for pass_ in ("counted", "timed"):
            for step in range(4):
                w.step(results.StepRecord("s", path, pass_, step, step == 0, 2, 0, 1,
                                          1.0 + step, labels=lab,
                                          round=step % 3 if pass_ == "timed" else None), [])
    w.close(True)
    return loader.load(str(tmp_path / "r.jsonl"))


def test_the_per_step_table_shows_a_branch_column_where_a_subject_reports_one(
        tmp_path: Path) -> None:
    res = _result(tmp_path, {"mine": {"k": 3}, "other": {"branch": "fast"}})
    t = _tables.per_step_tbl(res, "s")
    headers = [c.header for c in t.columns]
    assert "other branch" in headers and "mine branch" not in headers  # no "-" column
    assert "mine syncs" in headers
    sm = analysis.summary(res)
    assert list(sm["path"]) == ["mine", "other"]  # the order they ran: no built-in order
    assert list(sm["branches"]) == ["", "fast 3"]
    assert list(sm["baseline"]) == ["mine", "mine"]  # the first path, whatever its name
    text = terminal.render(res, width=200)
    assert "ratio vs mine" in text or "/mine" in text


def test_compare_defaults_to_the_first_two_paths_it_ran(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    _result(tmp_path, {"fast": {}, "slow": {}})
    assert main(["compare", str(tmp_path / "r.jsonl"), "--width", "200"]) == EXIT_OK
    assert "fast (A) vs slow (B)" in capsys.readouterr().out
    one = tmp_path / "one"
    one.mkdir()
    _result(one, {"only": {}})
    assert main(["compare", str(one / "r.jsonl")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "fewer than two paths (only)" in err and len(err.strip().splitlines()) == 1


# -- the case study finds its fused op itself ----------------------------------------------
def test_the_case_study_finds_the_fused_op_by_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import syncguard.sim.torch_npu_standin as standin
    from sglang_ascend_sampling.ops import fused_ops_for

    npu, cuda = types.SimpleNamespace(type="npu"), types.SimpleNamespace(type="cuda")
    real = types.ModuleType("torch_npu")
    real.npu_top_k_top_p = lambda *a: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_npu", real)
    assert fused_ops_for(npu) is real  # the real torch_npu, on the NPU
    assert fused_ops_for(cuda) is standin  # the stand-in everywhere else
    monkeypatch.setitem(sys.modules, "torch_npu", standin)
    assert fused_ops_for(npu) is standin  # the simulated npu
    monkeypatch.delitem(sys.modules, "torch_npu")
    assert fused_ops_for(npu) is standin and hasattr(fused_ops_for(npu), "npu_top_k_top_p")
