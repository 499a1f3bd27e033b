"""CI output of ``syncguard check``: text, GitHub workflow annotations, SARIF 2.1.0, JUnit XML.

Each format is a function of the gate's verdicts (:class:`syncguard.gate.verdicts.Verdict`),
registered in the renderer registry and written through
:func:`syncguard.renderers.emit_gate`. The verdicts' own text
(:meth:`~syncguard.gate.verdicts.Verdict.row`, :meth:`~syncguard.gate.verdicts.Verdict.brief`,
:meth:`~syncguard.gate.verdicts.Verdict.site_lines`, :func:`syncguard.gate.verdicts.summary`)
every format prints as is: this module lays it out and escapes it. Paths in every format are
relative to the current directory (the repository root in CI) with ``/`` separators, absolute
when a file lies outside.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import _escape
from .._words import plural, steps_phrase
from ..core.events import KINDS
from ..core.lineage_words import site_verdict, verdict_text
from ..core.sites import caller_text, display_path, function_name, site_key
from ..gate.baseline import Finding
from ..gate.verdicts import Verdict, summary
from .annotations import (  # noqa: F401  (information_uri: this module's name for it)
    SARIF_SCHEMA_URI,
    information_uri,
    location,
    sarif_log,
    workflow_command,
)

_KIND_HELP: Dict[str, str] = {
    "scalar_read": "A Python read of one device scalar (bool(), .item(), int(), float(), an "
                   "`if` on a device tensor) makes the host wait for the device.",
    "d2h_copy": "A device-to-host copy (.tolist(), .cpu(), .numpy(), printing) makes the "
                "host wait for the device.",
    "data_dependent": "An op whose output shape depends on device data (boolean-mask "
                      "indexing, nonzero, unique...) makes the host wait for the device.",
    "h2d_copy": "A host-to-device copy the host waits for (blocking, or non-blocking from "
                "pageable memory).",
    "explicit_sync": "An explicit synchronize() on the device, a stream or an event.",
    "in_kernel": "A device kernel that reads device data on the host internally (from the "
                 "backend's op sync model).",
}


# ---------------------------------------------------------------------------- text
def _finding_sort(f: Finding) -> Tuple[int, str, int]:
    return (-f.count, f.event.filename, f.event.lineno)


def _findings(verdicts: Sequence[Verdict]) -> List[Finding]:
    """Every failing site of ``verdicts``, the most syncs first."""
    return sorted((f for v in verdicts for f in v.findings), key=_finding_sort)


def _baseline(verdicts: Sequence[Verdict]) -> Optional[str]:
    """The baseline file the verdicts were judged against (None: budgets only)."""
    return next((v.baseline for v in verdicts if v.baseline), None)


#: Failing sites listed per scenario path in the text format (the most syncs first; the
#: rest counted in one line): the machine formats list them all.
TEXT_MAX_SITES = 20


#: what ``check`` and ``exec`` call one verdict in the gate's first line
_UNITS = {"check": "scenario path", "exec": "budget check"}


def render_text(verdicts: Sequence[Verdict], command: str = "check") -> str:
    """The gate's summary line, one :meth:`~syncguard.gate.verdicts.Verdict.row` per verdict, and
    under each failing one its :meth:`~syncguard.gate.verdicts.Verdict.site_lines` (against a
    baseline each says why it fails), at most :data:`TEXT_MAX_SITES` of them, then a line counting
    the rest. ``command``: ``check`` (scenario paths) or ``exec`` (its budget checks:
    each ``--loop``/``--step`` name's total and per-step count, and the reads outside every
    step, which are not a step: "1 of 2 budget checks failed")."""
    head = f"syncguard {command}: {summary(verdicts, _UNITS.get(command, 'scenario path'))}"
    lines = [_escape.terminal(head)]
    for v in verdicts:
        lines.append(_escape.terminal(v.row()))
        if v.failed:
            for text in v.site_lines(most=TEXT_MAX_SITES):
                lines.append("      " + _escape.terminal(text))
            if len(v.findings) > TEXT_MAX_SITES:
                rest = v.findings[TEXT_MAX_SITES:]
                lines.append(f"      ... and {len(rest)} more failing sites "
                             f"({plural(sum(f.count for f in rest), 'hidden sync')}): every "
                             f"site is in the sarif, junit and github formats and the reports")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- github
def escape_data(s: str) -> str:
    """Escape a workflow-command message (:func:`syncguard._escape.gh_data`)."""
    return _escape.gh_data(s)


def escape_property(s: str) -> str:
    """Escape a workflow-command property value (:func:`syncguard._escape.gh_property`)."""
    return _escape.gh_property(s)


def annotation_message(f: Finding) -> str:
    ev = f.event
    op = f" ({ev.op})" if ev.op else ""
    steps = steps_phrase(f.steps)
    where = f" in {steps}" if steps else ""
    caller = caller_text(ev.filename, ev.stack)
    called = f", called from {caller}" if caller else ""
    fn = function_name(ev.function, ev.stack)
    text = (f"hidden host sync in {fn}{called}: {ev.api}{op} x{f.count}{where} "
            f"[{f.scenario}/{f.path}]: {f.message}")
    if isinstance(ev.lineage, dict):  # --lineage: why the value is on the device, the fix
        v = site_verdict([ev.lineage])
        if v is not None:
            text += f" Lineage: {verdict_text(v)}"
    return text


def render_github(verdicts: Sequence[Verdict], command: str = "check") -> str:
    """The text summary, then one ``::error file=,line=,title=syncguard::`` per finding."""
    out = [render_text(verdicts, command)]
    for f in _findings(verdicts):
        out.append(workflow_command("error", display_path(f.event.filename), f.event.lineno,
                                    "syncguard", annotation_message(f)) + "\n")
    return "".join(out)


# ---------------------------------------------------------------------------- sarif
def _rule_id(kind: str) -> str:
    return f"hidden-sync/{kind}"


def render_sarif(verdicts: Sequence[Verdict]) -> Dict[str, Any]:
    """A SARIF 2.1.0 log: one rule per sync kind, one ``error`` result per finding; each
    verdict's totals in the run's properties (``budget`` 0 where a baseline judged it)."""
    rules = [{
        "id": _rule_id(k),
        "name": "HiddenHostSync" + "".join(p.title() for p in k.split("_")),
        "shortDescription": {"text": f"Hidden host-device sync ({k})"},
        "fullDescription": {"text": _KIND_HELP.get(k, "A hidden host-device sync.")},
        "help": {"text": _KIND_HELP.get(k, "") + " Keep the value on the device, compute it on "
                 "the host from host data, or allow it with syncguard.allow(reason)."},
        "defaultConfiguration": {"level": "error"},
    } for k in KINDS]
    index = {k: i for i, k in enumerate(KINDS)}
    results: List[Dict[str, Any]] = []
    for f in _findings(verdicts):
        ev = f.event
        kind = ev.kind if ev.kind in index else KINDS[0]
        props: Dict[str, Any] = {
            "scenario": f.scenario, "path": f.path, "count": f.count, "steps": list(f.steps),
            "api": ev.api, "op": ev.op, "kind": ev.kind, "function": ev.function,
        }
        if f.baseline_count is not None:
            props["baselineCount"] = f.baseline_count
        results.append({
            "ruleId": _rule_id(kind),
            "ruleIndex": index[kind],
            "level": "error",
            "message": {"text": annotation_message(f)},
            "locations": [location(ev.filename, {"startLine": max(1, ev.lineno)})],
            "partialFingerprints": {"syncguardSite/v1": site_key(ev)},
            "properties": props,
        })
    log = sarif_log("syncguard", rules, results, {"executionSuccessful": True}, {
        "totals": [{"scenario": v.scenario, "path": v.path, "hiddenSyncs": v.hidden,
                    "budget": v.max_syncs if v.max_syncs is not None else 0,
                    "failed": v.failed}
                   for v in verdicts],
    })
    baseline = _baseline(verdicts)
    if baseline:
        log["runs"][0]["properties"]["baseline"] = baseline
    return log


def render_sarif_json(verdicts: Sequence[Verdict]) -> str:
    """:func:`render_sarif` as the JSON text written."""
    return json.dumps(_escape.json_safe(render_sarif(verdicts)), indent=2) + "\n"


# ---------------------------------------------------------------------------- junit
def render_junit(verdicts: Sequence[Verdict]) -> str:
    """JUnit XML: one testcase per verdict (classname ``syncguard.<scenario>``, name the
    path); a failing one holds a ``failure`` with the verdict's
    :meth:`~syncguard.gate.verdicts.Verdict.brief` and its site lines. Dots in the scenario (an exec
    run's ``marked.py``) become ``_``: CI viewers split classnames at dots into packages."""
    n_fail = sum(1 for v in verdicts if v.failed)
    suites = ET.Element("testsuites", name="syncguard", tests=str(len(verdicts)),
                        failures=str(n_fail), errors="0")
    suite = ET.SubElement(suites, "testsuite", name="syncguard check", tests=str(len(verdicts)),
                          failures=str(n_fail), errors="0", skipped="0", time="0")
    for v in verdicts:
        # each text one line of its own (a name's newline never starts a line of the file, so
        # no line can begin "::error::" for a CI log that prints it), XML-safe
        x = _escape.junit_text
        classname = "syncguard." + v.scenario.replace(".", "_")
        case = ET.SubElement(suite, "testcase", classname=x(classname), name=x(v.path),
                             time="0")
        if v.failed:
            fail = ET.SubElement(case, "failure", type="syncguard.HiddenSyncs",
                                 message=x(v.brief()))
            fail.text = "\n".join(x(line) for line in [v.brief()] + v.site_lines()) + "\n"
        else:
            out = ET.SubElement(case, "system-out")
            out.text = x(v.brief()) + "\n"
    ET.indent(suites)
    buf = io.BytesIO()
    ET.ElementTree(suites).write(buf, encoding="utf-8", xml_declaration=True)
    return buf.getvalue().decode("utf-8") + "\n"
