"""Resource bombs in scenario files are refused before anything is expanded, and the batch
bookkeeping stays linear however many requests are live."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _cli import cli, one_error_line

from syncguard.cli import EXIT_USAGE
from syncguard.driving import scenario

HEAD = 'name = "bomb"\nvocab_size = 8\nsteps = 3\nwarmup = 1\n'


def test_inline_requests_with_counts_are_refused_before_expanding(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """1 MiB of inline tables with count = 4096 declare about 1.7e8 requests: refused in one
    line naming the limit, before any is built (it used to grow memory without bound)."""
    entry = '{id="r%d",count=4096},'
    body, size = [], 0
    while size < (1 << 20) - 200:
        body.append(entry % len(body))
        size += len(body[-1])
    p = tmp_path / "bomb.toml"
    p.write_text(HEAD + "requests = [" + "".join(body).rstrip(",") + "]\n", encoding="utf-8")
    t0 = time.perf_counter()
    rc, _, err = cli(capsys, "check", str(p), "--device", "sim")
    assert time.perf_counter() - t0 < 20
    line = one_error_line(err)
    assert rc == EXIT_USAGE and "SYNCGUARD_MAX_REQUESTS" in line and str(p) in line, line


def test_the_request_limit_can_be_raised_on_purpose(monkeypatch: pytest.MonkeyPatch) -> None:
    text = HEAD + '[[requests]]\nid = "r"\ncount = 4096\n[[requests]]\nid = "s"\ncount = 10\n'
    monkeypatch.setenv("SYNCGUARD_MAX_REQUESTS", "4000")
    with pytest.raises(scenario.ScenarioError, match="4106 requests declared"):
        scenario.parse(text, "x.toml")
    monkeypatch.setenv("SYNCGUARD_MAX_REQUESTS", "5000")
    assert len(scenario.parse(text, "x.toml").requests) == 4106


def test_finishing_many_of_many_live_requests_is_linear() -> None:
    """An event finishing 30k of 60k live requests: list.remove made it quadratic."""
    n = 60_000
    reqs = "".join('[[requests]]\nid = "r"\ncount = 4096\n'.replace('"r"', f'"r{k}"')
                   for k in range(n // 4096)) + f'[[requests]]\nid = "z"\ncount = {n % 4096}\n'
    finish = ", ".join(f'"r{k}-{i}"' for k in range(n // 4096) for i in range(0, 4096, 2))
    text = HEAD + reqs + f"[[events]]\nstep = 1\nfinish = [{finish}]\n"
    t0 = time.perf_counter()
    sc = scenario.parse(text, "many.toml")
    assert time.perf_counter() - t0 < 10
    assert len(sc.events[0].finish) == (n // 4096) * 2048
