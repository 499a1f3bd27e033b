"""The one decision of whether a run counts with the dispatch-level net
(:func:`syncguard.driving.devices.exhaustive_for`) and the one parser of its flag
(:func:`syncguard.driving.config.to_flag`)."""

from __future__ import annotations

import pytest

from syncguard.driving.config import KEYS, first_flag, to_flag
from syncguard.driving.devices import exhaustive_for, resolve_target


@pytest.mark.parametrize("kind, asked, net", [
    ("cuda", False, True), ("npu", False, True),  # a real device: always
    ("sim", True, False), ("sim", False, False),  # its backend sees every op already
    ("cpu", False, False), ("cpu", True, True),   # cpu mode: when asked
    (None, False, False), (None, True, True),     # not known (the plugin without device=)
])
def test_exhaustive_for(kind, asked, net) -> None:
    assert exhaustive_for(kind, asked) is net


def test_the_cpu_target_carries_the_users_flag() -> None:
    assert resolve_target("cpu").exhaustive is False
    t = resolve_target("cpu", exhaustive=True)
    assert t.kind == "cpu" and t.asked_exhaustive and t.exhaustive


@pytest.mark.parametrize("value, text, out", [
    (None, False, None), (True, False, True), (False, False, False),
    ("", True, None), ("true", True, True), ("Yes", True, True), ("off", True, False),
    ("0", True, False),
])
def test_to_flag(value, text, out) -> None:
    assert to_flag(value, "where", text) is out


@pytest.mark.parametrize("value, text", [("yes", False), (1, False), ("maybe", True), ([], True)])
def test_to_flag_refuses_with_the_place(value, text) -> None:
    with pytest.raises(ValueError, match=r"^where: must be true or false, got "):
        to_flag(value, "where", text)


def test_first_flag_takes_the_most_specific_and_checks_all() -> None:
    assert first_flag((None, "a", False), (False, "b", False), (True, "c", False)) is False
    assert first_flag((None, "a", False), ("", "b", True), (True, "c", False)) is True
    assert first_flag() is False
    with pytest.raises(ValueError, match="^c: "):
        first_flag((True, "a", False), ("x", "c", False))
    assert "exhaustive" in KEYS
