"""Output formats of ``syncguard lint``: ``text`` (one line per finding), ``github`` (workflow
annotations), ``sarif`` (SARIF 2.1.0 for code scanning) and ``json``. Each is
``render_<fmt>(findings, summary) -> str``; paths are as the findings hold them (relative to
the current directory, ``/`` separators)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from .. import _escape
from ..core.sites import norm_line as _norm
from ..core.syncapis import RULES
from ..renderers.annotations import artifact_location, location, sarif_log, workflow_command
from .backends import BOTH, label
from .checker import CERTAIN, Finding
from .context import SERVING


def _run_note(f: Finding) -> str:
    r = f.run
    if not r:
        return ""
    st = r.get("status")
    if st == "confirmed":
        return (f" [confirmed: {r['syncs']} syncs in {r['steps']} steps, "
                f"{r['per_step']:g}/step{_hint(r)}]")
    return f" [{st}]"


def _hint(r: Dict[str, Any]) -> str:
    """``; hoistable: compute it on the host where ...``: the run's lineage verdict on the
    values read there (runs recorded with ``--lineage``), else nothing."""
    lin = r.get("lineage")
    return f"; {lin['hint']}" if isinstance(lin, dict) and lin.get("hint") else ""


def tags(f: Finding) -> str:
    """`` [npu only] [test]``: the backend when not every one, the context when not serving
    code (empty for a serving-code sync on every backend)."""
    out = ""
    if f.backend != BOTH:
        out += f" [{label(f.backend)}]"
    if f.context != SERVING:
        out += f" [{f.context}]"
    return out


def line_of(f: Finding) -> str:
    """``path:line:col: SG103 certain Tensor.item [npu only] [test]: why (in function)``."""
    also = f" (+{', '.join(f.also)})" if f.also else ""
    return (f"{f.where}:{f.line}:{f.col + 1}: {f.rule} {f.severity} {f.api}{tags(f)}: {f.why}"
            f" (in {f.function}){also}{_run_note(f)}")


def _errors(summary: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The files the lint could not read or analyse (``{"path", "line", "message"}``)."""
    return list(summary.get("error_items") or ())


def render_text(findings: Sequence[Finding], summary: Dict[str, Any]) -> str:
    out = [_escape.terminal(line_of(f)) for f in findings]
    for e in _errors(summary):
        out.append(_escape.terminal(f"{e['path']}:{e['line'] or 1}:1: error: {e['message']}"))
    for m in summary.get("misses", []):
        out.append(_escape.terminal(
            f"{m['site']}: miss {m['api']}: synced {m['syncs']}x in a run, not flagged"
            f"{_hint(m)}"))
    out.append(summary_line(summary))
    return "\n".join(out) + "\n"


def summary_line(summary: Dict[str, Any]) -> str:
    c = summary["counts"]
    parts = [f"{summary['reported']} findings ({c['certain']} certain, {c['likely']} likely)",
             f"{c['silent']} host-only silent", f"{c['allowed']} allowed inline"]
    if summary.get("not_failing"):
        parts.append(f"{summary['not_failing']} not failing CI ({summary.get('why_not', '')})")
    if summary.get("baseline_known"):
        parts.append(f"{summary['baseline_known']} known in the baseline")
    if summary.get("runs"):
        r = summary["runs"]
        parts.append(f"runs: {r['confirmed']} confirmed, {r['cleared']} cleared, "
                     f"{r['unexercised']} unexercised, {r['unknown']} not recorded, "
                     f"{len(summary.get('misses', []))} misses")
    secs = summary.get("seconds", 0.0) or 0.0
    rate = summary["files"] / secs if secs > 0 else 0.0
    return (f"syncguard lint: {', '.join(parts)} in {summary['files']} files "
            f"({secs:.2f} s, {rate:.0f} files/s)")


def render_github(findings: Sequence[Finding], summary: Dict[str, Any]) -> str:
    out = []
    for f in findings:
        level = "error" if f.severity == CERTAIN else "warning"
        msg = f"{f.severity}{tags(f)}: {f.why} (in {f.function}){_run_note(f)}"
        if f.cell is not None:
            msg = f"cell {f.cell}: {msg}"
        out.append(workflow_command(level, f.path, f.line, f"syncguard {f.rule} {f.api}", msg,
                                    col=f.col + 1, end_line=f.end_line))
    for e in _errors(summary):
        out.append(workflow_command("error", e["path"], e["line"] or 1,
                                    "syncguard lint: file not linted", e["message"]))
    out.append(summary_line(summary))
    return "\n".join(out) + "\n"


def render_sarif(findings: Sequence[Finding], summary: Dict[str, Any]) -> str:
    ids = sorted(RULES)
    index = {r: i for i, r in enumerate(ids)}
    rules = [{
        "id": r, "name": RULES[r].name,
        "shortDescription": {"text": RULES[r].short},
        "fullDescription": {"text": RULES[r].help},
        "help": {"text": RULES[r].help + " Suppress one line with "
                 "`# syncguard: allow[reason]`."},
        "defaultConfiguration": {"level": "warning"},
    } for r in ids]
    results: List[Dict[str, Any]] = []
    for f in findings:
        props: Dict[str, Any] = {"severity": f.severity, "api": f.api, "function": f.function,
                                 "value": f.value, "context": f.context,
                                 "backend": f.backend}
        if f.run:
            props["run"] = f.run
        if f.cell is not None:
            props["cell"] = f.cell
        results.append({
            "ruleId": f.rule, "ruleIndex": index[f.rule],
            "level": "error" if f.severity == CERTAIN else "warning",
            "message": {"text": ("" if f.cell is None else f"cell {f.cell}: ")
                        + f"{f.api}{tags(f)}: {f.why} ({f.severity}, in "
                        f"{f.function}){_run_note(f)}"},
            "locations": [location(f.path, {"startLine": f.line, "startColumn": f.col + 1,
                                            "endLine": max(f.line, f.end_line)})],
            "partialFingerprints": {"syncguardLint/v1": finding_key(f)},
            "properties": props,
        })
    for e in _errors(summary):
        results.append({
            "ruleId": "syncguard-lint-error", "level": "error",
            "message": {"text": f"file not linted: {e['message']}"},
            "locations": [location(e["path"], {"startLine": max(1, int(e["line"] or 1))})],
        })
    invocation = {"executionSuccessful": not summary.get("errors"),
                  "toolExecutionNotifications": [
                      {"level": "error", "message": {"text": e["message"]},
                       "locations": [{"physicalLocation": {
                           "artifactLocation": artifact_location(e["path"])}}]}
                      for e in _errors(summary)]}
    log = sarif_log("syncguard-lint", rules, results, invocation,
                    {"files": summary["files"], "counts": summary["counts"]})
    # columns count characters (code points), as Python's columns do; SARIF's default is
    # UTF-16 code units, which differ from them past the Basic Multilingual Plane
    log["runs"][0]["columnKind"] = "unicodeCodePoints"
    return json.dumps(_escape.json_safe(log), indent=2) + "\n"


def finding_dict(f: Finding) -> Dict[str, Any]:
    d = {k: getattr(f, k) for k in ("path", "line", "col", "end_line", "rule", "api", "why",
                                    "severity", "value", "function", "text", "allowed",
                                    "also", "run", "context", "backend")}
    if f.cell is not None:
        d["cell"] = f.cell
    d["key"] = finding_key(f)
    return d


def render_json(findings: Sequence[Finding], summary: Dict[str, Any]) -> str:
    return json.dumps(_escape.json_safe({"format": "syncguard-lint", "version": 1,
                                  "summary": summary,
                                  "findings": [finding_dict(f) for f in findings]}),
                      indent=2) + "\n"


def finding_key(f: Finding, occurrence: Optional[int] = None) -> str:
    """A line identity that survives lines moving: path, function, rule, API and the line's
    text (comment dropped, whitespace collapsed); see :mod:`.baseline`."""
    key = f"{f.path}::{f.function}::{f.rule}::{f.api}::{_norm(f.text)}"
    return key if occurrence is None else f"{key} #{occurrence}"


RENDERERS = {"text": render_text, "github": render_github, "sarif": render_sarif,
             "json": render_json}
