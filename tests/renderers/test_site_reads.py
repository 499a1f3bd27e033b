"""The same site reads identically in ``run``, ``exec``, ``check`` (every gate format, on a
recorded run and on a scenario), every report format and the pytest plugin (issue 20).

One hidden sync (``if torch.all(x > 0):`` in ``Picker.pick``) in a helper file under a folder
whose name every escaping touches (``lib & co``: an HTML/XML entity, a URI escape, a space),
driven by an ``exec`` program, by a subject (``--subject MODULE:OBJ``) of a scenario and by a
guarded test. Every output is decoded as its format says (HTML entities and tags, XML, URIs,
workflow-command properties), then every mention of the file must be the site as
:mod:`syncguard.core.sites` names it, and where a sentence names the site, with its function. The
raw exports (``result.json``, ``events.csv``, a trace slice's ``args``) keep the recorded
file name and line: those must read as the site through :mod:`syncguard.core.sites`."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Dict, List, Tuple
from urllib.parse import unquote

import pytest
from _paths import TESTS
from _subprocess import env

from syncguard.cli import main
from syncguard.core import sites
from syncguard.renderers import GATE_RENDERERS, REGISTRY, REPORT_FILES

SMALL = str(TESTS / "data" / "scenarios" / "small.toml")
LIB = "lib & co"

SITE_SRC = '''import torch


class Picker:
    def pick(self, x):
        if torch.all(x > 0):  # the site
            return 1
        return 0
'''
SITE_LINE = SITE_SRC.splitlines().index("        if torch.all(x > 0):  # the site") + 1

PROG_SRC = '''import torch

from site_prog import Picker

x = torch.ones(4, device="npu")
for _ in range(3):
    Picker().pick(x)
'''

SUBJECT_SRC = '''import torch
from site_prog import Picker
from subjects_demo.broken_subjects import _Base  # a batch that is just its size


class SiteSubject(_Base):
    name = "site"

    def sample(self, state, logits, positions):
        Picker().pick(logits)
        return torch.argmax(logits, dim=-1)
'''

TEST_SRC = '''import pytest
import torch

from site_prog import Picker


@pytest.mark.syncguard(max_syncs=0, devices=("cpu",))
def test_pick():
    Picker().pick(torch.ones(4))
'''

#: the function as reports name it: the qualified name where Python records one (3.11+)
FN = "Picker.pick" if sys.version_info >= (3, 11) else "pick"

#: name -> (the output's text, its format)
Outputs = Dict[str, Tuple[str, str]]


def _call(*argv: str) -> Tuple[int, str, str]:
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(list(argv))
    return rc, so.getvalue(), se.getvalue()


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> Tuple[str, str, Outputs]:
    """Every front end run once on the site, in one folder; returns the site's ``path:line``
    as :func:`syncguard.core.sites.frame_text` names it, the folder, and every output."""
    root = tmp_path_factory.mktemp("site")
    lib = root / LIB
    lib.mkdir()
    for name, src in (("site_prog.py", SITE_SRC), ("prog.py", PROG_SRC),
                      ("site_subject.py", SUBJECT_SRC), ("test_site.py", TEST_SRC)):
        (lib / name).write_text(src, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # rootdir: root
    site = sites.frame_text(str(lib / "site_prog.py"), SITE_LINE, base=str(root))
    out: Outputs = {}
    old_cwd, old_path = os.getcwd(), sys.path[:]
    os.chdir(root)
    sys.path.insert(0, str(lib))  # the subject, named as MODULE:OBJ
    try:
        rc, so, se = _call("exec", "--device", "sim", "--out", "ex", "--max-syncs", "0",
                           "--width", "200", "--", "python", f"{LIB}/prog.py")
        assert rc == 1, se
        out["exec stdout"], out["exec stderr"] = (so, "terminal"), (se, "terminal")
        for name, fmt in REPORT_FILES.items():
            out[f"exec OUT/{name}"] = ((root / "ex" / name).read_text(encoding="utf-8"), fmt)
        rc, _, se = _call("show", "ex/result.jsonl", "-o", "shown.txt")
        assert rc == 0, se
        out["show -o .txt"] = ((root / "shown.txt").read_text(encoding="utf-8"), "terminal")
        subject = ("--device", "sim", "--subject", "site_subject:SiteSubject")
        for fmt in GATE_RENDERERS:
            rc, so, se = _call("check", "ex", "--format", fmt)
            assert rc == 1, se
            out[f"check OUT --format {fmt}"] = (so, fmt)
            rc, so, se = _call("check", SMALL, *subject, "--format", fmt)
            assert rc == 1, se
            out[f"check SCENARIO --format {fmt}"] = (so, fmt)
        rc, so, se = _call("run", SMALL, *subject, "--no-timed", "--out", "rn", "--width", "200")
        assert rc == 0, se
        out["run stdout"] = (so, "terminal")
        for name, fmt in REPORT_FILES.items():
            out[f"run OUT/{name}"] = ((root / "rn" / name).read_text(encoding="utf-8"), fmt)
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path
        for m in ("site_prog", "site_subject"):
            sys.modules.pop(m, None)
    e = env()  # the plugin of this syncguard (a relative PYTHONPATH would not find it)
    e["PYTHONPATH"] = os.pathsep.join([str(Path(sites.__file__).parent.parent),
                                       *filter(None, [e.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:benchmark", "-p", "no:hypothesispytest",
                           f"{LIB}/test_site.py"], cwd=root, env=e, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the guarded test fails
    out["pytest plugin"] = (proc.stdout, "terminal")
    return site, str(root), out


# -- decoding: each format's own escaping undone ----------------------------------------------
def _text(s: str, site: str, root: str) -> List[str]:
    return [s]


def _markdown(s: str, site: str, root: str) -> List[str]:
    return [html.unescape(s).replace("`", "")]  # code spans read as their text


def _html(s: str, site: str, root: str) -> List[str]:
    s = re.sub(r"</?(?:wbr|code|strong|em|span|a)\b[^>]*>", "", s)  # inside a sentence
    return [html.unescape(re.sub(r"<[^>]*>", " ", s))]  # any other tag ends a cell or line


def _xml(s: str, site: str, root: str) -> List[str]:
    root = ET.fromstring(s)
    return [t for el in root.iter() for t in [el.text or "", *el.attrib.values()]]


_ANNOTATION = re.compile(r"::error file=(?P<file>[^,]*),line=(?P<line>\d+),[^:]*::(?P<msg>.*)")


def _github(s: str, site: str, root: str) -> List[str]:
    """The text summary and each annotation's message; each annotation's location (its
    ``file`` and ``line`` properties) must be the site."""
    texts = []
    for line in s.splitlines():
        m = _ANNOTATION.fullmatch(line)
        if m is None:
            texts.append(line)
            continue
        assert f"{unquote(m['file'])}:{m['line']}" == site, line
        texts.append(unquote(m["msg"]))
    return texts


def _sarif(s: str, site: str, root: str) -> List[str]:
    """Each result's location (``artifactLocation`` URI and ``startLine``), which must be the
    site, and its message."""
    texts = []
    for run in json.loads(s)["runs"]:
        for res in run["results"]:
            loc = res["locations"][0]["physicalLocation"]
            uri = unquote(loc["artifactLocation"]["uri"])
            where = f"{uri}:{loc['region']['startLine']}"
            assert where == site, loc
            texts += [where, res["message"]["text"]]
    return texts


def _recorded(filename: str, lineno: object, site: str, root: str) -> None:
    """A recorded (raw) location, read as sites.py reads it, is the site (or another file)."""
    if os.path.basename(filename) == "site_prog.py":
        assert sites.frame_text(filename, lineno, base=root) == site, (filename, lineno)


def _csv_events(s: str, site: str, root: str) -> List[str]:
    """A raw export of the recorded events, as ``result.json``: ``site`` is the recorded
    ``filename:lineno``, which read as sites.py reads them is the site."""
    for r in csv.DictReader(io.StringIO(s)):
        assert r["site"] == f"{r['filename']}:{r['lineno']}", r
        _recorded(r["filename"], r["lineno"], site, root)
    return []


def _json_result(s: str, site: str, root: str) -> List[str]:
    """The result document is the recorded data: each event's file and line."""
    for e in json.loads(s)["events"]:
        _recorded(e["filename"], e["lineno"], site, root)
    return []


def _trace(s: str, site: str, root: str) -> List[str]:
    """The slices' names; their ``args`` keep the recorded site."""
    events = json.loads(s)["traceEvents"]
    for e in events:
        recorded = (e.get("args") or {}).get("site")
        if recorded and e.get("cat") == "sync":
            filename, _, lineno = recorded.rpartition(":")
            _recorded(filename, lineno, site, root)
    return [e.get("name", "") for e in events]


#: format -> (decoder, whether the site must be named there, whether a sentence names it
#: with its function)
DECODERS: Dict[str, Tuple[Callable[[str, str, str], List[str]], bool, bool]] = {
    "terminal": (_text, True, True), "markdown": (_markdown, True, True),
    "html": (_html, True, True), "csv-steps": (_text, False, False),
    "csv-events": (_csv_events, False, False), "csv-sites": (_csv_events, False, False),
    "json": (_json_result, False, False),
    "trace": (_trace, False, False), "text": (_text, True, True),
    "github": (_github, True, True), "sarif": (_sarif, True, False),
    "junit": (_xml, True, True),
}

#: outputs that must name the site (reports of a run without a modeled timeline have no
#: sync slices in trace.json; the simulated run's have)
NAMED_ALSO = {"run OUT/trace.json"}


def test_every_format_of_the_registry_has_a_decoder_here() -> None:
    assert {r.name for r in REGISTRY} <= set(DECODERS)


OUTPUT_NAMES = (["exec stdout", "exec stderr", "show -o .txt", "run stdout", "pytest plugin"]
                + [f"{w} OUT/{n}" for w in ("exec", "run") for n in REPORT_FILES]
                + [f"check {w} --format {f}" for w in ("OUT", "SCENARIO")
                   for f in GATE_RENDERERS])


@pytest.mark.parametrize("name", OUTPUT_NAMES)
def test_the_site_reads_as_sites_names_it(reads: Tuple[str, str, Outputs], name: str) -> None:
    site, root, outputs = reads
    assert site == f"{LIB}/site_prog.py:{SITE_LINE}"
    raw, fmt = outputs[name]
    decode, named, sentence = DECODERS[fmt]
    text = "\n".join(decode(raw, site, root))
    mentions = [ln for ln in text.splitlines() if "site_prog.py" in ln]
    # every mention of the file is the site, spelled as sites.py spells it: not a longer
    # path ending in it, not another line
    spelled = re.findall(r"(?<![\w./\\-])" + re.escape(site) + r"(?!\d)", text)
    assert text.count("site_prog.py") == len(spelled), "\n".join(mentions)
    if named or name in NAMED_ALSO:
        assert spelled, f"{name}: the site is not named:\n{text[:3000]}"
    if sentence:
        assert f"{site} in {FN}" in text, "\n".join(mentions)
    if FN != "pick":  # the function by its qualified name, as every report names it
        assert not re.search(r"\bin pick\b", text), "\n".join(mentions)
