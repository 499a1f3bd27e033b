"""``check RESULT --allow SITE`` / ``--config F`` on a recorded run: applied to the recorded
events as in the run; a missing or malformed config is one line, exit 2 (they used to be
ignored without a word)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import cli, one_error_line, write_result

from syncguard.cli import EXIT_OK, EXIT_OVER, EXIT_USAGE


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no ./pyproject.toml
    return write_result(tmp_path / "r.jsonl", events=[{}])  # one hidden sync at model.py:3 f


@pytest.mark.parametrize("site", ["model.py:3", "f"])
def test_allow_applies_to_a_recorded_run(site: str, recorded: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    assert cli(capsys, "check", str(recorded))[0] == EXIT_OVER
    rc, out, err = cli(capsys, "check", str(recorded), "--allow", site)
    assert rc == EXIT_OK, out + err


def test_config_allow_applies_to_a_recorded_run(recorded: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[tool.syncguard]\nallow = [{site = "model.py:3", reason = "ok"}]\n',
                   encoding="utf-8")
    rc, out, err = cli(capsys, "check", str(recorded), "--config", str(cfg))
    assert rc == EXIT_OK, out + err


@pytest.mark.parametrize("content", [None, b"[tool.syncguard\n", b"[tool.syncguard]\nx = 1\n"])
def test_a_missing_or_malformed_config_is_refused(content: bytes, recorded: Path,
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    cfg = tmp_path / "cfg.toml"
    if content is not None:
        cfg.write_bytes(content)
    rc, _, err = cli(capsys, "check", str(recorded), "--config", str(cfg))
    assert rc == EXIT_USAGE and str(cfg) in one_error_line(err)
