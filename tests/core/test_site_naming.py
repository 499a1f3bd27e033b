"""syncguard.core.sites, the one owner of how a site reads: paths, ``file:line`` texts, function
names, the caller of a helper, and the site's own frame in the guard's per-site grouping.
(Site keys, which survive moved lines, are tested with the baselines: tests/gate/test_baseline.py;
every front end and format together: tests/renderers/test_site_reads.py. Not named test_sites.py:
test_plugin's pytester runs write a test_sites.py of their own.)"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import syncguard
from syncguard.core import sites
from syncguard.core.events import Frame

PKG = os.path.dirname(os.path.abspath(syncguard.__file__))


def _fr(filename: str, lineno: int, function: str, qualname: str = "") -> Dict[str, Any]:
    return {"filename": filename, "lineno": lineno, "function": function, "qualname": qualname}


# -- paths ------------------------------------------------------------------------------------
def test_a_path_reads_relative_to_the_current_directory_or_base(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = str(tmp_path / "pkg" / "mod.py")
    monkeypatch.chdir(tmp_path)
    assert sites.shown_path(inside) == os.path.join("pkg", "mod.py")
    assert sites.shown_path(inside, base=str(tmp_path / "pkg")) == "mod.py"
    other = os.path.join(os.path.dirname(str(tmp_path)), "elsewhere", "x.py")
    assert sites.shown_path(other) == other  # outside: absolute, as is


def test_an_installed_file_reads_from_site_packages_on() -> None:
    sp = os.path.join(os.sep, "venv", "lib", "site-packages", "sglang", "srt", "x.py")
    assert sites.shown_path(sp) == os.path.join("sglang", "srt", "x.py")


@pytest.mark.parametrize("name, shown", [
    ("<string>", "<string>"), ("relative/x.py", "relative/x.py"), (None, "?"),
    (float("nan"), "?"),
])
def test_pseudo_relative_and_missing_file_names(name: Any, shown: str) -> None:
    assert sites.shown_path(name) == shown


def test_a_recorded_site_reads_with_its_path_shortened(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inside = str(tmp_path / "a b" / "m.py")
    assert sites.shown_site(f"{inside}:12") == os.path.join("a b", "m.py") + ":12"
    assert sites.shown_site("<string>:1") == "<string>:1"
    assert sites.shown_site(inside) == os.path.join("a b", "m.py")  # no line: a file name
    assert sites.shown_site(f"{inside}:x") == f"{os.path.join('a b', 'm.py')}:x"
    assert sites.shown_site(None) == sites.shown_site(float("nan")) == "?"


def test_renderers_shorten_sites_through_sites(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.renderers._common import short_path, short_site

    monkeypatch.chdir(tmp_path)
    for s in (f"{tmp_path / 'p.py'}:3", "<string>:1", str(tmp_path / "p.py"), "x.py:y"):
        assert short_site(s) == sites.shown_site(s)
    assert short_path(str(tmp_path / "p.py")) == sites.shown_path(str(tmp_path / "p.py"))


# -- texts ------------------------------------------------------------------------------------
def test_frame_and_site_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    f = str(tmp_path / "stopping.py")
    assert sites.frame_text(f, 14) == "stopping.py:14"
    assert sites.frame_text(f, 14, "__call__") == "stopping.py:14 in __call__"
    assert sites.site_text(f, 14, "Stop.__call__") == "stopping.py:14 in Stop.__call__"
    assert (sites.site_text(f, 14, "__call__", caller="generate.py:25 in decode_loop")
            == "stopping.py:14 in __call__, called from generate.py:25 in decode_loop")
    assert sites.frame_text(f, 14, base=os.path.dirname(str(tmp_path))) == os.path.join(
        tmp_path.name, "stopping.py") + ":14"


# -- function names ---------------------------------------------------------------------------
def test_the_function_reads_by_its_qualified_name_where_recorded() -> None:
    site = [_fr("s.py", 3, "sample", "Sampler.sample"), _fr("u.py", 9, "main")]
    assert sites.function_name("sample", site) == "Sampler.sample"
    assert sites.function_name("sample", [Frame("s.py", 3, "sample", "Sampler.sample")]) == (
        "Sampler.sample")
    # no stack, no qualified name (Python < 3.11), or a stack of another function: as given
    assert sites.function_name("sample") == "sample"
    assert sites.function_name("sample", [_fr("s.py", 3, "sample")]) == "sample"
    assert sites.function_name("sample", [_fr("s.py", 3, "other", "Other.other")]) == "sample"
    assert sites.function_name("sample", [{"filename": "s.py", "lineno": "x"}]) == "sample"


# -- callers ----------------------------------------------------------------------------------
def test_the_caller_is_the_first_frame_outside_the_sites_file() -> None:
    stack = [_fr("/u/stopping.py", 14, "__call__"), _fr("/u/stopping.py", 30, "check"),
             _fr("/u/generate.py", 25, "decode_loop", "Gen.decode_loop"),
             _fr("/u/main.py", 3, "<module>")]
    assert sites.caller_of("/u/stopping.py", stack) == ("/u/generate.py", 25, "Gen.decode_loop")
    assert sites.caller_text("/u/stopping.py", stack, base="/u") == (
        "generate.py:25 in Gen.decode_loop")
    assert sites.caller_of("/u/stopping.py", stack[:2]) is None  # one file all the way
    assert sites.caller_text("/u/stopping.py", stack[:2]) == ""
    assert sites.caller_of("/u/stopping.py", None) is None


@pytest.mark.parametrize("driver", [
    os.path.join(PKG, "driving", "runner.py"),  # syncguard's own driving code
    os.path.join(os.sep, "venv", "site-packages", "_pytest", "python.py"),
    os.path.join(os.sep, "venv", "site-packages", "pluggy", "_callers.py"),
    "<string>",
    os.path.join(os.path.dirname(os.__file__), "runpy.py"),  # the standard library
])
def test_the_harness_is_never_the_caller(driver: str) -> None:
    stack = [_fr("/u/helper.py", 4, "helper"), _fr(driver, 10, "drive")]
    assert sites.caller_of("/u/helper.py", stack) is None


def test_the_case_study_and_installed_packages_are_callers() -> None:
    # code under test, not the harness
    sampler = os.path.join(os.path.dirname(PKG.rstrip(os.sep)), "sglang_ascend_sampling",
                           "sampler.py")
    lib = os.path.join(os.path.dirname(os.__file__), "site-packages", "lib", "x.py")
    for caller in (sampler, lib):
        stack = [_fr("/u/helper.py", 4, "helper"), _fr(caller, 10, "f")]
        assert sites.caller_of("/u/helper.py", stack) == (caller, 10, "f")


# -- grouping: the guard's sites carry the site's own frame -----------------------------------
class _Picker:
    def pick(self, x: Any) -> bool:
        return bool(x.sum() > 0)  # the site


def test_the_guards_sites_name_the_function_as_every_report_does() -> None:
    import torch

    from syncguard import SyncGuard

    x = torch.ones(3)
    with SyncGuard(devices=("cpu",)) as g:
        for _ in range(2):
            _Picker().pick(x)
    (s,) = g.sites()
    assert s["count"] == 2 and s["function"] == "pick"
    assert [(f["filename"], f["lineno"]) for f in s["stack"]] == [(s["filename"], s["lineno"])]
    qualified = "_Picker.pick" if sys.version_info >= (3, 11) else "pick"
    assert sites.function_name(s["function"], s["stack"]) == qualified
    assert sites.caller_text(s["filename"], s["stack"]) == ""  # callers may differ: none kept
    json.dumps(g.sites())  # plain data


def test_plugin_site_lines_use_the_qualified_name(tmp_path: Path) -> None:
    from syncguard.pytest_plugin.report import _site_lines

    site: Dict[str, Any] = {"filename": str(tmp_path / "m.py"), "lineno": 5, "function": "pick",
                            "api": "Tensor.__bool__", "op": None, "count": 1, "steps": [],
                            "stack": [_fr(str(tmp_path / "m.py"), 5, "pick", "Picker.pick")]}
    lines: List[str] = _site_lines([site], str(tmp_path))
    assert lines == ["  m.py:5 in Picker.pick: Tensor.__bool__ x1"]
