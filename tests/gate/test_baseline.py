"""Baselines: site keys that survive moved lines, the file format, and regressions only."""

from __future__ import annotations

import importlib.util
import itertools
import json
import linecache
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Tuple

import pytest

from syncguard import SyncEvent, SyncGuard
from syncguard import allow as syncguard_allow
from syncguard.core.sites import caller_text, display_path, key_path, site_key
from syncguard.gate.baseline import Baseline, BaselineError, Finding

# A decode loop with three sites: A every step, B `repeat` times a step, C only with `extra`.
WORKLOAD = '''\
def decode(x, steps, guard, extra=False, repeat=1):
    for _ in range(steps):
        with guard.step():
            if x[0] > -1:
                pass
            for _ in range(repeat):
                x.tolist()
            if extra:
                x.sum().item()
'''

_counter = itertools.count()


def _load(path: Path) -> ModuleType:
    linecache.checkcache(str(path))  # the file may have been rewritten in this process
    spec = importlib.util.spec_from_file_location(f"workload_{next(_counter)}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _observe(path: Path, **kw: Any) -> Tuple[Dict[str, Dict[str, Any]], List[SyncEvent]]:
    """Run the workload under a guard and group its hidden syncs as ``syncguard check``
    does: site_key -> {"event", "count", "steps"}."""
    import torch

    mod = _load(path)
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        mod.decode(x, 3, g, **kw)
    grouped: Dict[str, Dict[str, Any]] = {}
    for e in g.counted_events:
        grp = grouped.setdefault(site_key(e), {"event": e, "count": 0, "steps": []})
        grp["count"] += e.count
        if e.step not in grp["steps"]:
            grp["steps"].append(e.step)
    return grouped, g.counted_events


def _observed(grouped: Dict[str, Dict[str, Any]], scenario: str = "sc",
              path: str = "legacy") -> Dict[str, Dict[str, Any]]:
    return {f"{scenario}|{path}|{k}": {"count": g["count"], "event": g["event"]}
            for k, g in grouped.items()}


@pytest.fixture
def workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "pkg" / "workload.py"
    p.parent.mkdir()
    p.write_text(WORKLOAD)
    return p


def _shift(path: Path) -> None:
    """Insert blank and comment lines above every site (top of file and inside the loop)."""
    text = path.read_text()
    text = "# a header comment\n\n\n" + text.replace(
        "        with guard.step():\n",
        "        # a comment above the sites\n\n        with guard.step():\n")
    path.write_text(text)


# ---------------------------------------------------------------------------- site keys
def test_site_key_survives_lines_moving(workload: Path) -> None:
    before, evs_before = _observe(workload)
    _shift(workload)
    after, evs_after = _observe(workload)
    assert set(before) == set(after) and len(before) == 2
    # ... although every line number changed.
    assert {e.lineno for e in evs_before}.isdisjoint({e.lineno for e in evs_after})


def test_site_key_parts(workload: Path) -> None:
    grouped, _ = _observe(workload)
    keys = sorted(grouped)
    assert keys[0].startswith("pkg/workload.py::decode::")  # relative to the current dir
    tolist = next(k for k in keys if "Tensor.tolist" in k)
    assert tolist == "pkg/workload.py::decode::d2h_copy::Tensor.tolist::aten::_to_copy::" \
                     "x.tolist() #0"
    assert all(str(os.sep + "tmp") not in k for k in keys)


def test_identical_lines_in_one_function_are_distinct_sites(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    import torch

    monkeypatch.chdir(tmp_path)
    p = tmp_path / "twice.py"
    p.write_text("def f(x):\n    x.tolist()\n    x.tolist()\n\n\ndef g(x):\n    x.tolist()\n")
    mod = _load(p)
    with SyncGuard(devices=("cpu",)) as g:
        mod.f(torch.arange(2))
        mod.g(torch.arange(2))
    keys = [site_key(e) for e in g.events]
    assert len(set(keys)) == 3
    assert keys[0].endswith("x.tolist() #0") and keys[1].endswith("x.tolist() #1")
    assert keys[2].startswith("twice.py::g::") and keys[2].endswith("#0")


def test_site_key_ignores_comments_on_the_line(workload: Path, tmp_path: Path) -> None:
    """Editing only a comment on a site's line keeps the site; a '#' in a string is code; a
    baseline written while keys still held the comment matches too."""
    base = _baseline_from(workload, tmp_path)
    workload.write_text(WORKLOAD.replace("x.tolist()\n", "x.tolist()  # the readback\n"))
    assert base.compare("sc", "legacy", _observe(workload)[0]) == []
    grouped, _ = _observe(workload)
    assert any(k.endswith("::x.tolist() #0") for k in grouped)
    # an old file: its key holds the comment of the line as it was then
    data = json.loads((tmp_path / "baseline.json").read_text())
    for s in data["sites"]:
        s["key"] = s["key"].replace("x.tolist() #0", "x.tolist() # old note #0")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert Baseline.load(str(old)).compare("sc", "legacy", grouped) == []
    from syncguard.core.sites import strip_comment

    assert strip_comment("    s = '#x'  # c").rstrip() == "s = '#x'"
    assert strip_comment('    """ text # not a comment') == '    """ text # not a comment'


def test_site_key_without_source_uses_the_line_number() -> None:
    ev = SyncEvent("scalar_read", "Tensor.item", None, "<string>", 3, "<module>", (), None,
                   "MainThread")
    assert site_key(ev) == "<string>::<module>::scalar_read::Tensor.item::-::line 3"


def test_paths_relative_to_root_or_package(tmp_path: Path) -> None:
    inside = str(tmp_path / "a" / "b.py")
    assert display_path(inside, str(tmp_path)) == "a/b.py"
    assert display_path(inside, str(tmp_path / "elsewhere")) == inside.replace(os.sep, "/")
    import sglang_ascend_sampling.sampler as sampler

    # An installed (or editable) package keys the same from any working directory.
    assert key_path(sampler.__file__, str(tmp_path)) == "sglang_ascend_sampling/sampler.py"


# ---------------------------------------------------------------------------- the file
def test_save_load_round_trip(workload: Path, tmp_path: Path) -> None:
    grouped, _ = _observe(workload)
    path = tmp_path / "out" / "baseline.json"
    Baseline.from_observed(_observed(grouped)).save(str(path))
    data = json.loads(path.read_text())
    assert data["format"] == "syncguard-baseline" and data["version"] == 1
    sites = data["sites"]
    assert [s["key"] for s in sites] == sorted(s["key"] for s in sites)
    tolist = next(s for s in sites if s["api"] == "Tensor.tolist")
    assert tolist["count"] == 3 and tolist["op"] == "aten::_to_copy"
    assert tolist["site"] == "pkg/workload.py:7" and tolist["function"] == "decode"
    assert tolist["scenario"] == "sc" and tolist["path"] == "legacy"
    loaded = Baseline.load(str(path))
    assert loaded.sites == Baseline.from_observed(_observed(grouped)).sites
    assert loaded.source == str(path)


@pytest.mark.parametrize("content, fragment", [
    ("{", "not valid JSON"),
    ("[]", "is not a syncguard baseline"),
    ('{"format": "other", "version": 1, "sites": []}', "is not a syncguard baseline"),
    ('{"format": "syncguard-baseline", "version": 2, "sites": []}', "has version 2"),
    ('{"format": "syncguard-baseline", "version": 1, "sites": {}}', '"sites" must be a list'),
    ('{"format": "syncguard-baseline", "version": 1, "sites": [1]}', "sites[0] must be"),
    ('{"format": "syncguard-baseline", "version": 1, "sites": [{"scenario": "s", "path": "p",'
     ' "key": "k", "count": "3"}]}', "sites[0].count must be a int"),
    ('{"format": "syncguard-baseline", "version": 1, "sites": [{"scenario": "s", "path": "p",'
     ' "key": "k", "count": -1}]}', "sites[0].count must be >= 0"),
])
def test_malformed_baseline_names_the_file(tmp_path: Path, content: str, fragment: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(BaselineError) as info:
        Baseline.load(str(p))
    assert isinstance(info.value, ValueError)
    assert str(p) in str(info.value) and fragment in str(info.value)


def test_missing_baseline_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="cannot read baseline .*nope.json"):
        Baseline.load(str(tmp_path / "nope.json"))


# ---------------------------------------------------------------------------- regressions
def _baseline_from(workload: Path, tmp_path: Path, **kw: Any) -> Baseline:
    grouped, _ = _observe(workload, **kw)
    path = tmp_path / "baseline.json"
    Baseline.from_observed(_observed(grouped)).save(str(path))
    return Baseline.load(str(path))


def test_unchanged_sites_pass_even_after_lines_shift(workload: Path, tmp_path: Path) -> None:
    base = _baseline_from(workload, tmp_path)
    assert base.compare("sc", "legacy", _observe(workload)[0]) == []
    _shift(workload)
    assert base.compare("sc", "legacy", _observe(workload)[0]) == []


def test_new_site_is_caught(workload: Path, tmp_path: Path) -> None:
    base = _baseline_from(workload, tmp_path)
    _shift(workload)
    (f,) = base.compare("sc", "legacy", _observe(workload, extra=True)[0])
    assert isinstance(f, Finding)
    assert f.event.api == "Tensor.item" and f.count == 3 and f.steps == [0, 1, 2]
    assert f.baseline_count is None and f.message == "new site, not in the baseline"
    assert (f.scenario, f.path) == ("sc", "legacy")


def test_increased_count_is_caught(workload: Path, tmp_path: Path) -> None:
    base = _baseline_from(workload, tmp_path)
    _shift(workload)
    (f,) = base.compare("sc", "legacy", _observe(workload, repeat=3)[0])
    assert f.event.api == "Tensor.tolist" and f.count == 9 and f.baseline_count == 3
    assert f.message == "count 9 > baseline 3"


def test_fewer_syncs_and_vanished_sites_pass(workload: Path, tmp_path: Path) -> None:
    base = _baseline_from(workload, tmp_path, extra=True, repeat=2)
    assert base.compare("sc", "legacy", _observe(workload)[0]) == []


def test_sites_are_per_scenario_and_path(workload: Path, tmp_path: Path) -> None:
    base = _baseline_from(workload, tmp_path)
    grouped = _observe(workload)[0]
    assert len(base.compare("sc", "flag", grouped)) == 2
    assert len(base.compare("other", "legacy", grouped)) == 2


# ---------------------------------------------------------------------------- the command
def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "syncguard", "check", "steady", "--paths", "legacy", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_check_command_with_a_baseline(tmp_path: Path) -> None:
    # steady: 2 warm-up steps, then one hidden sync per step on the legacy path.
    r = _check(tmp_path, "--steps", "4", "--update-baseline", "baseline.json")
    assert r.returncode == 0, r.stderr
    assert "Wrote baseline.json (1 sites)" in r.stderr
    (site,) = json.loads((tmp_path / "baseline.json").read_text())["sites"]
    assert site["count"] == 2 and site["key"].startswith("sglang_ascend_sampling/sampler.py::")

    r = _check(tmp_path, "--steps", "4", "--baseline", "baseline.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK    steady [legacy]: 2 hidden syncs, none new or above the baseline" in r.stdout

    r = _check(tmp_path, "--steps", "6", "--baseline", "baseline.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL  steady [legacy]: 4 hidden syncs, 1 site new or above the baseline" in r.stdout
    assert "(count 4 > baseline 2)" in r.stdout


# ---------------------------------------------------------------------------- the gate
def _events(path: Path, **kw: Any) -> List[SyncEvent]:
    import torch

    mod = _load(path)
    with SyncGuard(devices=("cpu",), warmup=kw.pop("warmup", 0)) as g:
        with syncguard_allow("planted"):
            torch.arange(2).tolist()
        mod.decode(torch.arange(4), 3, g, **kw)
    return g.events


def test_gate_budget_counts_hidden_syncs_only(workload: Path) -> None:
    from syncguard.gate.verdicts import judge

    evs = _events(workload)  # A and B every step: 6 hidden, one allowed
    assert any(e.allowed for e in evs)
    ok = judge(evs, max_syncs=6, scenario="sc", path="legacy")
    assert not ok.failed and ok.hidden == 6 and ok.findings == ()
    assert ok.line() == "6 hidden syncs, budget 6" and len(ok.sites) == 2
    bad = judge(evs, max_syncs=5, scenario="sc", path="legacy")
    assert bad.failed and [f.count for f in bad.findings] == [3, 3]
    assert (bad.scenario, bad.path, bad.hidden, bad.max_syncs, bad.failed) == (
        "sc", "legacy", 6, 5, True)
    # decode is a helper of this file's _events: each site names that caller
    first = next(e for e in evs if not e.allowed)
    called = f", called from {caller_text(first.filename, first.stack)}"
    assert called.endswith(" in _events")
    assert bad.site_lines() == [
        f"pkg/workload.py:4 in decode{called}: Tensor.__bool__ (aten::_local_scalar_dense) x3, "
        "steps 0-2",
        f"pkg/workload.py:7 in decode{called}: Tensor.tolist (aten::_to_copy) x3, steps 0-2"]


def test_gate_skips_warmup_steps(workload: Path) -> None:
    from syncguard.gate.verdicts import judge

    v = judge(_events(workload, warmup=2), max_syncs=2)
    assert not v.failed and v.hidden == 2
    assert all(s.steps == (2,) for s in v.sites)


def test_gate_against_a_baseline_new_known_and_moved(workload: Path) -> None:
    from syncguard.gate.verdicts import baseline_from, judge

    base = baseline_from([judge(_events(workload), scenario="t", path="p")])
    assert len(base) == 2
    known = judge(_events(workload), baseline=base, scenario="t", path="p")
    assert not known.failed and known.max_syncs is None
    _shift(workload)  # every site moves down: still the same sites
    moved = judge(_events(workload), baseline=base, scenario="t", path="p")
    assert not moved.failed, moved.site_lines()
    new = judge(_events(workload, extra=True), baseline=base, scenario="t", path="p")
    assert new.failed and [f.event.api for f in new.findings] == ["Tensor.item"]
    assert new.line() == "9 hidden syncs, 1 site new or above baseline"
    assert new.site_lines()[0].endswith("x3, steps 0-2  (new site, not in the baseline)")


def test_gate_baseline_update_keeps_what_was_not_judged(workload: Path) -> None:
    from syncguard.gate.verdicts import baseline_from, judge

    v1 = judge(_events(workload), scenario="a", path="p")
    v2 = judge(_events(workload, extra=True), scenario="b", path="p")
    old = baseline_from([v1, v2])
    assert len(old) == 5
    # a run of "a" alone, now without syncs, replaces a's sites and keeps b's
    new = baseline_from([judge([], scenario="a", path="p")], keep=old)
    assert {s.scenario for s in new.sites} == {"b"} and len(new) == 3


def test_gate_rejects_a_negative_budget() -> None:
    from syncguard.gate.verdicts import judge

    with pytest.raises(ValueError, match="max_syncs: must be an integer >= 0"):
        judge([], max_syncs=-1)


def test_one_site_line_for_events_ci_and_the_gate(workload: Path) -> None:
    from syncguard.core.events import site_line
    from syncguard.gate.verdicts import judge
    from syncguard.gate.verdicts import site_line as ci_site_line

    evs = [e for e in _events(workload) if not e.allowed]
    ev = evs[0]
    caller = caller_text(ev.filename, ev.stack)
    one = site_line(ev.filename, ev.lineno, ev.function, ev.api, ev.op, 3, [0, 1, 2],
                    caller=caller)
    assert one.startswith(f"pkg/workload.py:4 in decode, called from {caller}: Tensor.__bool__")
    assert one.endswith(" x3, steps 0-2")
    v = judge(evs, max_syncs=0)
    assert v.site_lines()[0] == one == ci_site_line(v.findings[0])
    assert ev.describe() == site_line(ev.filename, ev.lineno, ev.function, ev.api, ev.op, 1,
                                      [0], kind=ev.kind, caller=caller)
    assert "[scalar_read] x1, step 0" in ev.describe()
