"""``syncguard lint --with-run``: an ``exec`` run of a decode loop whose branches are not all
taken confirms the taken branch's sync (with its count per step), leaves the untaken
branches' lines unexercised and clears a host-only line; the line recorder behind it."""

from __future__ import annotations

import json
import os
import re
import sys
import threading

import pytest
from _cli import cli, one_error_line, write_result
from _paths import TESTS

from syncguard.cli import main
from syncguard.core.events import SyncEvent
from syncguard.lint import candidates
from syncguard.lint.lines import LineRecorder
from syncguard.results.format import StepRecord
from syncguard.results.writer import ResultWriter

HERE = os.path.join(str(TESTS), "data", "lint")
BRANCHY = os.path.join(HERE, "branchy.py")


def _line(text: str) -> int:
    with open(BRANCHY) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError(text)


def _lint_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    rc = main(["lint", *argv, "--format", "json", "--show-silent", "--fail-on", "never"])
    assert rc == 0
    return json.loads(capsys.readouterr().out)


def test_exec_run_confirms_clears_and_leaves_unexercised(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(HERE)
    out = str(tmp_path / "run")
    rc = main(["exec", "--device", "sim", "--out", out, "--force", "--record-lines",
               "branchy.py", "--", "python", "branchy.py"])
    assert rc == 0
    doc = _lint_json(capsys, "branchy.py", "--with-run", out)
    by_line = {f["line"]: f for f in doc["findings"]}
    taken = by_line[_line("taken branch's sync")]
    assert taken["run"]["status"] == "confirmed"
    assert (taken["run"]["syncs"], taken["run"]["steps"], taken["run"]["per_step"]) == (3, 3, 1)
    assert by_line[_line("accepted = ids.nonzero()")]["run"]["status"] == "unexercised"
    assert by_line[_line("n = int(ids.sum())")]["run"]["status"] == "unexercised"
    host = by_line[_line("host-only: cleared")]
    assert host["severity"] == "silent" and host["run"]["status"] == "cleared"
    runs = doc["summary"]["runs"]
    assert (runs["confirmed"], runs["cleared"], runs["unexercised"]) == (1, 1, 2)
    assert doc["summary"]["misses"] == []
    # the text form says it on each line
    main(["lint", "branchy.py", "--with-run", out, "--fail-on", "never"])
    text = capsys.readouterr().out
    assert "[confirmed: 3 syncs in 3 steps, 1/step]" in text and "[unexercised]" in text


def _result(folder, filename: str, lineno: int, api: str = "Tensor.item") -> str:
    os.makedirs(folder, exist_ok=True)
    w = ResultWriter(os.path.join(folder, "result.jsonl"), {"scenarios": {}})
    ev = SyncEvent("scalar_read", api, "aten::_local_scalar_dense", filename, lineno, "f",
                   (), 0, "MainThread")
    w.step(StepRecord("p", "main", "exec", 0, False, 1, 1, 0, 1.0), [ev])
    w.close(True)
    return str(folder)


def test_results_without_recorded_lines_still_read_and_misses_listed(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(
        "import torch\n\ndef f(x: torch.Tensor):\n    a = x.item()\n    b = helper(x)\n")
    src = str(tmp_path / "m.py")
    out = _result(tmp_path / "r1", src, 4)
    doc = _lint_json(capsys, "m.py", "--with-run", out)
    assert doc["findings"][0]["run"]["status"] == "confirmed"
    out2 = _result(tmp_path / "r2", src, 5, "Tensor.__bool__")
    doc = _lint_json(capsys, "m.py", "--with-run", out2)
    assert doc["findings"][0]["run"]["status"] == "unknown"  # the run recorded no lines
    assert doc["summary"]["misses"] == [{"site": "m.py:5", "api": "Tensor.__bool__",
                                         "syncs": 1}]
    (tmp_path / "clean.py").write_text("import torch\n\ndef g(x):\n    return x + 1\n")
    out3 = _result(tmp_path / "r3", str(tmp_path / "clean.py"), 4)
    doc = _lint_json(capsys, "clean.py", "--with-run", out3)  # no finding in the file
    assert doc["summary"]["misses"] == [{"site": "clean.py:4", "api": "Tensor.item",
                                         "syncs": 1}]
    assert main(["lint", "m.py", "--with-run", str(tmp_path / "absent")]) == 2


def test_line_recorder_records_only_candidate_lines(tmp_path):
    mod = tmp_path / "recmod.py"
    mod.write_text("import torch\n\n\ndef f(x, go):\n    a = x.sum().item()\n"
                   "    if go:\n        return x.tolist()\n    return a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import recmod
        cands = candidates([str(mod)])
        assert sorted(next(iter(cands.values()))) == [5, 7]
        before = sys.gettrace()
        with LineRecorder(cands) as rec:
            import torch

            recmod.f(torch.ones(2), False)
            t = threading.Thread(target=recmod.f, args=(torch.ones(2), False))
            t.start()
            t.join()
        assert sys.gettrace() is before
        assert rec.executed == {os.path.realpath(mod): [5]}
        assert rec.mechanism in ("sys.monitoring", "sys.settrace")
        note = rec.note()
        assert note["kind"] == "lines" and "1 of 2 candidate lines" in note["message"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("recmod", None)


def test_line_recorder_without_candidates_does_nothing():
    before = sys.gettrace()
    with LineRecorder({}) as rec:
        pass
    assert rec.mechanism == "" and sys.gettrace() is before


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
def test_line_recorder_uses_sys_monitoring_on_312(tmp_path):  # pragma: no cover - 3.12+
    with LineRecorder({str(tmp_path / "x.py"): [1]}) as rec:
        pass
    assert rec.mechanism == "sys.monitoring"


def test_run_records_lines_in_the_counted_pass(tmp_path, capsys):
    sampling = os.path.join(os.path.dirname(HERE), "..", "..", "sglang_ascend_sampling")
    sampling = os.path.normpath(sampling)
    out = str(tmp_path / "run")
    rc = main(["run", "steady", "--device", "sim", "--paths", "legacy", "--steps", "2",
               "--warmup", "0", "--no-timed", "--record-lines", sampling, "--out", out,
               "--force"])
    assert rc == 0
    doc = _lint_json(capsys, sampling, "--with-run", out)
    status = {f["api"]: f["run"]["status"] for f in doc["findings"]
              if f["path"].endswith("sampler.py")}
    assert status["Tensor.__bool__"] == "confirmed"  # the legacy path's sync
    assert status["torch.multinomial"] == "cleared"  # no host check on the npu model
    assert main(["run", "steady", "--device", "sim", "--record-lines", "absent/",
                 "--out", str(tmp_path / "r2")]) == 2


# ------------------------------------------------------------ a --lineage run beside the lint
SAMPLING = os.path.normpath(os.path.join(HERE, "..", "..", "..", "sglang_ascend_sampling"))


@pytest.fixture(scope="module")
def lineage_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The case study's legacy path under ``syncguard run --lineage``."""
    out = str(tmp_path_factory.mktemp("lineage") / "run")
    assert main(["run", "steady", "--device", "sim", "--paths", "legacy", "--steps", "4",
                 "--no-timed", "--lineage", "--out", out, "--force"]) == 0
    return out


def _sampling_lines() -> tuple:
    with open(os.path.join(SAMPLING, "sampler.py")) as f:
        read = next(i for i, ln in enumerate(f, 1)
                    if 'if hasattr(torch_npu, "npu_top_k_top_p") and torch.all(' in ln)
    with open(os.path.join(SAMPLING, "batch.py")) as f:
        upload = next(i for i, ln in enumerate(f, 1) if "top_ks = stager.stage(" in ln)
    return read, upload


def test_with_run_adds_the_count_and_the_lineage_hint_in_every_format(
        lineage_run: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The legacy read at sampler.py: counted N times at run time, and hoistable from the
    top-k upload at batch.py, in the text, JSON, SARIF and GitHub outputs."""
    monkeypatch.chdir(os.path.dirname(SAMPLING))
    read, upload = _sampling_lines()
    hint = (f"hoistable: compute it on the host where sglang_ascend_sampling/batch.py:{upload} "
            f"builds it, the same value every step")
    doc = _lint_json(capsys, "sglang_ascend_sampling", "--with-run", lineage_run)
    mine = [f for f in doc["findings"] if f["path"].endswith("sampler.py") and f["line"] == read]
    assert len(mine) == 1, [(f["path"], f["line"]) for f in doc["findings"]]
    f = mine[0]
    run = f["run"]
    assert run["status"] == "confirmed" and run["syncs"] == run["steps"] >= 2, run
    assert run["lineage"] == {"verdict": "hoistable", "hint": hint,
                              "uploads": f"sglang_ascend_sampling/batch.py:{upload}",
                              "same": 1}, run
    note = f"[confirmed: {run['syncs']} syncs in {run['steps']} steps, 1/step; {hint}]"
    base = ["lint", "sglang_ascend_sampling", "--with-run", lineage_run, "--fail-on", "never"]
    capsys.readouterr()
    assert main(base) == 0
    text = capsys.readouterr().out
    (line,) = [ln for ln in text.splitlines()
               if ln.startswith(f"sglang_ascend_sampling/sampler.py:{read}:")]
    assert line.endswith(note), line
    assert main([*base, "--format", "github"]) == 0
    gh = [ln for ln in capsys.readouterr().out.splitlines() if f",line={read}," in ln]
    assert len(gh) == 1 and gh[0].endswith(note), gh
    assert main([*base, "--format", "sarif"]) == 0
    sarif = json.loads(capsys.readouterr().out)
    (res,) = [r for r in sarif["runs"][0]["results"]
              if r["locations"][0]["physicalLocation"]["region"]["startLine"] == read]
    assert res["message"]["text"].endswith(note), res["message"]
    assert res["properties"]["run"]["lineage"]["verdict"] == "hoistable"


def test_with_run_hints_a_miss_and_says_nothing_without_lineage(tmp_path, monkeypatch,
                                                                 capsys) -> None:
    """A miss (a sync the lint did not flag) carries the hint too; a run without --lineage
    adds none."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(
        "import torch\n\ndef f(x: torch.Tensor):\n    a = x.item()\n    b = helper(x)\n")
    src = str(tmp_path / "m.py")
    lin = {"verdict": "device", "roots": "step input logits; host data at b.py:2",
           "ops": "gt", "uploads": "b.py:2", "digest": "", "once": 0}
    res = tmp_path / "r" / "result.jsonl"
    res.parent.mkdir()
    write_result(res, events=[{"filename": src, "lineno": 4, "lineage": lin},
                              {"filename": src, "lineno": 5, "lineage": lin}])
    doc = _lint_json(capsys, "m.py", "--with-run", str(res))
    hint = ("depends on device results (step input logits): keep the decision on the device "
            "or read it one step late")
    assert doc["findings"][0]["run"]["lineage"]["hint"] == hint
    assert doc["summary"]["misses"][0]["lineage"]["hint"] == hint
    main(["lint", "m.py", "--with-run", str(res), "--fail-on", "never"])
    assert f"synced 1x in a run, not flagged; {hint}" in capsys.readouterr().out
    plain = tmp_path / "p.jsonl"
    write_result(plain, events=[{"filename": src, "lineno": 4}])
    doc = _lint_json(capsys, "m.py", "--with-run", str(plain))
    assert "lineage" not in doc["findings"][0]["run"]
    main(["lint", "m.py", "--with-run", str(plain), "--fail-on", "never"])
    assert re.search(r" \[confirmed: 1 syncs in 1 steps, [0-9.]+/step\]\n",
                     capsys.readouterr().out)


@pytest.mark.parametrize("what", ["missing", "not-a-result", "empty-folder", "json-list"])
def test_a_bad_result_is_one_line_naming_it_before_the_lint_runs(what, tmp_path, monkeypatch,
                                                                 capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("import torch\n\ndef f(x: torch.Tensor):\n    x.item()\n")
    bad = tmp_path / "bad"
    if what == "not-a-result":
        bad = tmp_path / "bad.jsonl"
        bad.write_text("hello\n")
    elif what == "empty-folder":
        bad.mkdir()
    elif what == "json-list":
        bad = tmp_path / "bad.json"
        bad.write_text("[1, 2]\n")
    rc, out, err = cli(capsys, "lint", "m.py", "--with-run", str(bad), "--format", "json")
    assert rc == 2 and out == "", (out, err)
    line = one_error_line(err)
    assert line.startswith(f"syncguard: error: --with-run {bad}:"), err
