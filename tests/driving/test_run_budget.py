"""``syncguard run --budget``: one time budget for the whole run, split across the scenarios,
with the expected total printed at the start."""

from __future__ import annotations

import os

from _paths import TESTS

from syncguard.cli import main
from syncguard.driving.runner import DEFAULT_RUN_BUDGET_S, timed_budget
from syncguard.results import format as results

DATA = os.path.join(str(TESTS), "data", "scenarios")
SMALL, SMALL2 = os.path.join(DATA, "small.toml"), os.path.join(DATA, "small_budget.toml")


def test_timed_budget_is_an_equal_share_of_what_is_left():
    # 180 s, 6 scenarios, nothing spent: 30 s each, less the counted pass's 10 s
    assert timed_budget(180.0, 0.0, 6, 10.0) == 20.0
    # the first ones overran: the rest share what is left
    assert timed_budget(180.0, 150.0, 3, 0.0) == 10.0
    # nothing left: 0 (the timed pass still runs its one round)
    assert timed_budget(180.0, 200.0, 2, 5.0) == 0.0
    assert DEFAULT_RUN_BUDGET_S == 180.0


def test_run_prints_the_expected_total_and_keeps_to_the_budget(tmp_path, capsys):
    out = str(tmp_path / "o")
    rc = main(["run", SMALL, SMALL2, "--device", "sim", "--out", out, "--steps", "3",
               "--warmup", "1", "--paths", "legacy,flag", "--budget", "1"])
    assert rc == 0
    err = capsys.readouterr().err
    first = next(ln for ln in err.splitlines() if ln.startswith("syncguard: "))
    assert first.startswith("syncguard: 2 scenarios, 4 scenario paths: expect about 1 s in "
                            "total (--budget 1 s for the whole run"), first
    res = results.load(os.path.join(out, "result.jsonl"))
    rounds = {s.round for s in res.steps if s.pass_ == "timed"}
    assert rounds and len(rounds) < 10  # a 1 s budget does not run the 10-round maximum


def test_no_budget_line_with_repeat(tmp_path, capsys):
    rc = main(["run", SMALL, "--device", "sim", "--out", str(tmp_path / "o"), "--steps", "2",
               "--warmup", "0", "--paths", "flag", "--repeat", "1"])
    assert rc == 0
    assert "1 timed round(s) each (--repeat), no time budget" in capsys.readouterr().err
