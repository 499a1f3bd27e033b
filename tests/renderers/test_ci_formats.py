"""``syncguard check`` output formats: text, GitHub annotations, SARIF 2.1.0, JUnit XML."""

from __future__ import annotations

import dataclasses
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from _paths import ROOT, TESTS

from syncguard import SyncEvent, SyncGuard, __version__
from syncguard._words import step_ranges
from syncguard.gate.baseline import Finding
from syncguard.gate.verdicts import Verdict, site_line
from syncguard.renderers import emit_gate as emit
from syncguard.renderers import render_gate as render
from syncguard.renderers.ci import escape_data, escape_property, render_sarif

SCHEMA = ROOT / "syncguard" / "results" / "schemas" / "sarif-2.1.0.json"

Total = Tuple[str, str, int, int, bool]


def _event(filename: str, lineno: int, api: str = "Tensor.__bool__",
           op: str = "aten::_local_scalar_dense", kind: str = "scalar_read",
           function: str = "sample") -> SyncEvent:
    return SyncEvent(kind=kind, api=api, op=op, filename=filename, lineno=lineno,
                     function=function, stack=(), step=None, thread="MainThread")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake repository root as the current directory, with one source file."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "pkg" / "sampler.py"
    src.parent.mkdir()
    src.write_text("\n" * 40)
    return tmp_path


def _report(repo: Path) -> Tuple[List[Total], List[Finding]]:
    src = str(repo / "pkg" / "sampler.py")
    findings = [
        Finding("steady", "legacy", _event(src, 12), 19, list(range(2, 21)), None,
                "19 hidden syncs, budget 0"),
        Finding("steady", "legacy", _event(src, 30, "Tensor.tolist", "aten::_to_copy",
                                           "d2h_copy", "penalty"), 3, [2, 3, 4, 7], None,
                "19 hidden syncs, budget 0"),
    ]
    totals: List[Total] = [("steady", "legacy", 22, 0, True), ("steady", "flag", 0, 0, False)]
    return totals, findings


def _verdicts(totals: List[Total], findings: List[Finding],
              baseline: Any = None) -> List[Verdict]:
    """The gate's verdicts the CI formats render: one per (scenario, path, hidden syncs,
    budget, failed), holding its findings; judged against ``baseline`` (a file name) when
    given."""
    return [Verdict(s, p, n, None if baseline else b, baseline, bad,
                    tuple(f for f in findings if (f.scenario, f.path) == (s, p)), ())
            for s, p, n, b, bad in totals]


# ---------------------------------------------------------------------------- text
def test_step_ranges_are_compact() -> None:
    assert step_ranges([2, 3, 4, 7, 9, 10]) == "2-4, 7, 9-10"
    assert step_ranges([None, None]) == ""


def test_text(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    totals, findings = _report(repo)
    emit("text", _verdicts(totals, findings), None)
    assert capsys.readouterr().out.splitlines() == [
        "syncguard check: 1 of 2 scenario paths failed (gate: budget)",
        "FAIL  steady [legacy]: 22 hidden syncs, budget 0",
        "      pkg/sampler.py:12 in sample: Tensor.__bool__ (aten::_local_scalar_dense) x19, "
        "steps 2-20",
        "      pkg/sampler.py:30 in penalty: Tensor.tolist (aten::_to_copy) x3, steps 2-4, 7",
        "OK    steady [flag]: 0 hidden syncs, budget 0",
    ]


def test_text_with_baseline_says_why(repo: Path) -> None:
    src = str(repo / "pkg" / "sampler.py")
    findings = [Finding("s", "legacy", _event(src, 5), 3, [1, 2, 3], 1, "count 3 > baseline 1")]
    out = render("text", _verdicts([("s", "legacy", 3, 0, True)], findings, "base.json"))
    assert "(gate: baseline base.json)" in out
    assert "FAIL  s [legacy]: 3 hidden syncs, 1 site new or above the baseline" in out
    assert out.rstrip().endswith("x3, steps 1-3  (count 3 > baseline 1)")


def test_site_line_without_steps_or_op(repo: Path) -> None:
    ev = _event(str(repo / "pkg" / "sampler.py"), 3, op=None)  # type: ignore[arg-type]
    assert site_line(Finding("s", "p", ev, 1, [], None, "")) == \
        "pkg/sampler.py:3 in sample: Tensor.__bool__ x1"


# ---------------------------------------------------------------------------- github
def test_github_escaping() -> None:
    assert escape_data("100% sure\r\nnext") == "100%25 sure%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotations(repo: Path) -> None:
    totals, findings = _report(repo)
    out = render("github", _verdicts(totals, findings))
    assert out.startswith(render("text", _verdicts(totals, findings)))
    ann = [line for line in out.splitlines() if line.startswith("::")]
    assert ann == [
        "::error file=pkg/sampler.py,line=12,title=syncguard::hidden host sync in sample: "
        "Tensor.__bool__ (aten::_local_scalar_dense) x19 in steps 2-20 [steady/legacy]: "
        "19 hidden syncs, budget 0",
        "::error file=pkg/sampler.py,line=30,title=syncguard::hidden host sync in penalty: "
        "Tensor.tolist (aten::_to_copy) x3 in steps 2-4, 7 [steady/legacy]: "
        "19 hidden syncs, budget 0",
    ]


def test_github_escapes_file_names_and_messages(repo: Path) -> None:
    odd = repo / "we,ird:dir"
    odd.mkdir()
    f = Finding("s", "p", _event(str(odd / "m.py"), 4), 1, [], None, "50% over\nbudget")
    out = render("github", _verdicts([("s", "p", 1, 0, True)], [f]))
    (line,) = [x for x in out.splitlines() if x.startswith("::")]
    assert line.startswith("::error file=we%2Cird%3Adir/m.py,line=4,title=syncguard::")
    assert line.endswith("50%25 over%0Abudget")


# ---------------------------------------------------------------------------- sarif
@pytest.fixture(scope="module")
def sarif_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def test_sarif_is_valid_and_complete(repo: Path, sarif_validator: Any, tmp_path: Path) -> None:
    totals, findings = _report(repo)
    out = tmp_path / "reports" / "syncguard.sarif"
    emit("sarif", _verdicts(totals, findings), str(out))
    log: Dict[str, Any] = json.loads(out.read_text())
    errors = sorted(sarif_validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]

    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "syncguard" and driver["version"]
    assert driver["informationUri"].startswith("https://")
    rule_ids = [r["id"] for r in driver["rules"]]
    assert "hidden-sync/scalar_read" in rule_ids and "hidden-sync/d2h_copy" in rule_ids
    first, second = run["results"]
    assert first["ruleId"] == "hidden-sync/scalar_read" and first["level"] == "error"
    assert rule_ids[first["ruleIndex"]] == first["ruleId"]
    assert "Tensor.__bool__" in first["message"]["text"]
    loc = first["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/sampler.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 12}
    assert second["ruleId"] == "hidden-sync/d2h_copy"
    assert second["properties"]["steps"] == [2, 3, 4, 7]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")


def test_the_schema_rejects_a_broken_log(repo: Path, sarif_validator: Any) -> None:
    log = render_sarif(_verdicts(*_report(repo)))
    log["runs"][0]["results"][0]["level"] = "fatal"
    del log["runs"][0]["tool"]["driver"]["name"]
    assert len(list(sarif_validator.iter_errors(log))) == 2


def test_sarif_of_a_clean_run_is_valid(sarif_validator: Any) -> None:
    log = render_sarif(_verdicts([("s", "flag", 0, 0, False)], []))
    assert not list(sarif_validator.iter_errors(log))
    assert log["runs"][0]["results"] == []


def test_sarif_from_real_events_outside_the_repo(sarif_validator: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    x = torch.arange(3)
    with SyncGuard(devices=("cpu",)) as g:
        x.tolist()
    (ev,) = g.events
    monkeypatch.chdir(tmp_path)  # this test file is now outside the "repository"
    log = render_sarif(_verdicts([("s", "p", 1, 0, True)],
                                 [Finding("s", "p", ev, 1, [], None, "m")]))
    assert not list(sarif_validator.iter_errors(log))
    art = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert art["uri"].startswith("file:///") and "uriBaseId" not in art


def test_sarif_to_stdout(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    totals, findings = _report(repo)
    emit("sarif", _verdicts(totals, findings), "-")
    log = json.loads(capsys.readouterr().out)
    assert len(log["runs"][0]["results"]) == 2


# ---------------------------------------------------------------------------- junit
def test_junit(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    totals, findings = _report(repo)
    out = tmp_path / "junit.xml"
    emit("junit", _verdicts(totals, findings), str(out))
    # the machine format went to the file; the summary still reaches the CI log
    assert capsys.readouterr().out.startswith("syncguard check: 1 of 2")
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("syncguard.steady", "legacy"), ("syncguard.steady", "flag")]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "22 hidden syncs, budget 0"
    text = failure.text or ""
    assert "pkg/sampler.py:12 in sample: Tensor.__bool__ (aten::_local_scalar_dense) x19, " \
           "steps 2-20" in text
    assert "pkg/sampler.py:30 in penalty: Tensor.tolist (aten::_to_copy) x3" in text
    assert cases[1].find("failure") is None


def test_junit_escapes_markup(repo: Path) -> None:
    f = Finding("a<b", "p&q", _event(str(repo / "pkg" / "sampler.py"), 2, function="<lambda>"),
                1, [], None, "m")
    root = ET.fromstring(render("junit", _verdicts([("a<b", "p&q", 1, 0, True)], [f])).encode())
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("classname") == "syncguard.a<b"
    failure = case.find("failure")
    assert failure is not None and "in <lambda>" in (failure.text or "")


def test_junit_classname_keeps_a_dotted_scenario_in_one_piece() -> None:
    # an exec run's scenario is the script's file name; CI viewers split classnames at dots
    from syncguard.renderers.ci import render_junit

    doc = ET.fromstring(render_junit(_verdicts([("marked.py", "step", 1, 0, True)], [])))
    case = doc.find(".//testcase")
    assert case is not None and case.get("classname") == "syncguard.marked_py"


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format 'html'"):
        render("html", [])


def test_output_file_is_written_under_new_directories(repo: Path) -> None:
    totals, findings = _report(repo)
    emit("text", _verdicts(totals, findings), os.path.join("a", "b", "out.txt"))
    assert (repo / "a" / "b" / "out.txt").read_text().startswith("syncguard check:")


# ---------------------------------------------------------------------------- goldens
GOLDEN_DIR = TESTS / "data" / "golden"


def _golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("SYNCGUARD_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"golden file {path} missing: run with SYNCGUARD_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"differs from {path}"


@pytest.mark.parametrize("fmt, name", [("text", "check.txt"), ("github", "check.github.txt"),
                                       ("sarif", "check.sarif.json"),
                                       ("junit", "check.junit.xml")])
@pytest.mark.parametrize("baseline", [None, "baseline.json"])
def test_golden_ci_formats(repo: Path, fmt: str, name: str, baseline: Any) -> None:
    totals, findings = _report(repo)
    if baseline:
        findings = [dataclasses.replace(findings[0], baseline_count=None,
                                        message="new site, not in the baseline"),
                    dataclasses.replace(findings[1], baseline_count=1,
                                        message="count 3 > baseline 1")]
        name = name.replace("check.", "check-baseline.")
    text = render(fmt, _verdicts(totals, findings, baseline))
    root = str(repo).replace(os.sep, "/")
    _golden(name, text.replace(root, "<ROOT>").replace(f"syncguard {__version__}", "syncguard V")
            .replace(f'"{__version__}"', '"V"'))


def test_counts_of_one_read_in_the_singular(repo: Path) -> None:
    """One hidden sync, one scenario path, one step: no "1 hidden syncs", "all 1 scenario
    paths", "in steps 0"; and the baseline's reason is not a parenthesis in a parenthesis."""
    from syncguard.gate.baseline import Baseline
    from syncguard.gate.verdicts import judge
    from syncguard.renderers.ci import annotation_message, render_text

    src = str(repo / "pkg" / "sampler.py")
    ev = dataclasses.replace(_event(src, 12), step=0)
    verdict = judge([ev], max_syncs=0, scenario="s", path="p")
    assert verdict.line() == "1 hidden sync, budget 0"
    assert verdict.findings[0].message == "1 hidden sync, budget 0"
    assert annotation_message(verdict.findings[0]).startswith(
        "hidden host sync in sample: Tensor.__bool__ (aten::_local_scalar_dense) x1 in step 0 ")
    text = render_text([verdict])
    assert text.splitlines()[:2] == ["syncguard check: 1 of 1 scenario path failed (gate: "
                                     "budget)", "FAIL  s [p]: 1 hidden sync, budget 0"]
    ok = render_text(_verdicts([("s", "p", 0, 0, False)], []))
    assert ok.splitlines()[0] == "syncguard check: 1 scenario path OK (gate: budget)"
    against = judge([ev], baseline=Baseline([]), scenario="s", path="p")
    (line,) = against.site_lines()
    assert line.endswith("x1, step 0  (new site, not in the baseline)")
    assert render("text", _verdicts([("s", "p", 2, 0, False), ("s", "q", 0, 0, False)],
                                    [])).startswith(
        "syncguard check: all 2 scenario paths OK")
