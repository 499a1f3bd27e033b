"""Baseline updates from several sessions at once: the file is read again and merged under a
lock when written, so no session's sites are lost."""

from __future__ import annotations

import threading
from pathlib import Path

from syncguard.gate.baseline import Baseline, BaselineSite, locked
from syncguard.pytest_plugin.baselines import _BaselineRun


def _site(nodeid: str, key: str) -> dict:
    return BaselineSite(nodeid, "test", key, 1).to_dict()


def test_two_sessions_updating_one_baseline_keep_both_their_sites(tmp_path: Path) -> None:
    """Both read the file at start (it does not exist yet), each records its own tests (a
    disjoint -k), and the one that writes last used to drop the other's sites."""
    path = str(tmp_path / "baseline.json")
    a, b = _BaselineRun.open(path, True), _BaselineRun.open(path, True)
    a.judged, a.sites = ["t.py::a"], [_site("t.py::a", "ka")]
    b.judged, b.sites = ["t.py::b"], [_site("t.py::b", "kb")]
    a.write()
    b.write()
    got = {(s.scenario, s.key) for s in Baseline.load(path).sites}
    assert got == {("t.py::a", "ka"), ("t.py::b", "kb")}


def test_a_session_still_replaces_its_own_tests_sites(tmp_path: Path) -> None:
    path = str(tmp_path / "baseline.json")
    Baseline([BaselineSite("t.py::a", "test", "old", 3),
              BaselineSite("t.py::c", "test", "kc", 1)]).save(path)
    run = _BaselineRun.open(path, True)
    run.judged, run.sites = ["t.py::a"], [_site("t.py::a", "new")]
    run.write()
    got = {(s.scenario, s.key) for s in Baseline.load(path).sites}
    assert got == {("t.py::a", "new"), ("t.py::c", "kc")}


def test_the_lock_is_exclusive(tmp_path: Path) -> None:
    path = str(tmp_path / "baseline.json")
    order = []

    def other() -> None:
        with locked(path):
            order.append("b")

    with locked(path):
        t = threading.Thread(target=other)
        t.start()
        t.join(0.3)
        order.append("a")
    t.join(5)
    assert order == ["a", "b"]
    assert list(tmp_path.iterdir()) == []  # the lock leaves no file behind
