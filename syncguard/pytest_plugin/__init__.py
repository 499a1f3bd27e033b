"""pytest plugin: fail tests whose body makes more hidden host-device syncs than allowed.

Loaded through the ``pytest11`` entry point. Loading it does not import torch: everything that
needs torch is imported inside the hooks of a guarded test.

Which tests are guarded: those marked ``@pytest.mark.syncguard(...)``, those that use the
``syncguard`` fixture, and every test with ``--syncguard`` (ini ``syncguard = true``).
Only the test function's call is measured, not its fixtures.

Budget and allow-list, most specific first:

- the marker: ``@pytest.mark.syncguard(max_syncs=0, device="npu", allow=[...], devices=(...))``;
- ``--syncguard-max-syncs=N`` on the command line, then the ini key ``syncguard_max_syncs``;
- ``[tool.syncguard]`` in the nearest pyproject.toml at or above the rootdir: ``max_syncs =
  N``, ``allow = ["pkg/mod.py:12", {site = "pkg/mod.py:30", reason = "token readback"}]``,
  ``devices = ["cpu"]``, ``exhaustive = true``.

``exhaustive`` (the marker's, else ``--syncguard-exhaustive``, else the ini key
``syncguard_exhaustive``, else ``[tool.syncguard]``) also counts the reads made in C++ that no
Python entry point sees (:func:`syncguard.driving.devices.exhaustive_for` decides per device:
always on a real cuda or npu device, never on the simulated npu, which sees them already).

Allow-lists add up (pyproject's and the marker's); within a test, ``syncguard.allow(reason)``
allows a block of code (in a test that takes the ``syncguard`` fixture, whose name hides the
module, the fixture's ``.allow`` is the same function).

A test over its budget fails with one line (``syncguard: allowed 0 host syncs, saw 3 in steps
2-4``), status letter ``H`` (hidden syncs; not pytest's ``s`` for skipped) / word ``SYNCS``, and
a ``syncguard`` report section listing each site; a test that fails on its own keeps its
failure and gets the section as well. The decision is
:func:`syncguard.gate.verdicts.judge`'s, as for ``syncguard check``.

Baselines: ``--syncguard-baseline FILE`` gates every guarded test against the sites and counts
recorded in FILE (a ``syncguard check`` baseline file; the scenario is the test's node id, the
path ``"test"``): only a site the baseline does not know, or a count above the recorded one,
fails; moved lines still match. ``--syncguard-update-baseline`` records this run's sites in
FILE instead of gating (tests that did not run keep their entries). A test marked
``xfail`` (without ``raises=``) is left out of both: its hidden syncs are its expected
failure, so it is judged on its budget as without a baseline (XFAIL while it syncs; XPASS,
strict or not, once fixed) and never recorded in the baseline file.

``device="cuda"`` on a machine without CUDA skips the test with the reason; ``device`` is one of
``"cpu"``, ``"cuda"``, ``"npu"``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Optional, Tuple

import pytest

from ..driving.devices import AUTOLOAD_VAR, prepare_process
from ..gate.verdicts import judge

# torch-free: the plugin still loads without importing torch
from .baselines import BASELINE_KEY, _BaselineRun
from .report import (
    _fail_on_swallowed,
    _lineage_text,
    _skipped_in_body,
    _xfail_of,
    report_section,
    verdict_line,
)
from .settings import (
    _BASELINE_OPTIONS,
    _OPTIONS,
    _REPORT_ATTR,
    _WROTE_KEY,
    BASELINE_PATH,
    DEFAULTS_KEY,
    GUARD_KEY,
    SECTION,
    SETTINGS_KEY,
    STATUS,
    Defaults,
    Settings,
    _defaults,
    _make_guard,
    _marker_help,
    _prepare_device,
    _pyproject,
    _session_device,
    _settings_for,
)
from .threads import BodyThreads

if TYPE_CHECKING:  # pragma: no cover
    from ..core.guard import SyncGuard


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: List[str]) -> None:
    """Before any conftest imports torch, on a host with torch_npu installed only: load torch
    with torch_npu's autoload made safe (:func:`syncguard.driving.devices.prepare_process`), so
    that a torch_npu that cannot load (CANN missing) leaves the session running and a
    ``device="npu"`` test on the simulated npu, instead of crashing every ``import torch``.
    A healthy torch_npu is loaded as autoload would have loaded it. Costs nothing elsewhere."""
    if os.environ.get(AUTOLOAD_VAR) != "0":  # "0": the user keeps torch_npu unloaded
        prepare_process("auto")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("syncguard", "hidden host-device syncs (syncguard)")
    for flag, ini, kwargs, help_text in _OPTIONS:
        group.addoption(flag, dest=ini, help=help_text, **kwargs)
        # Two literal calls, not a conditional type: mypy >= 2.4 reads `type=` as a TypeForm.
        if ini == "syncguard":
            parser.addini(ini, help=help_text, type="bool", default=False)
        else:
            parser.addini(ini, help=help_text, type="string", default="")
    for flag, dest, kwargs, help_text in _BASELINE_OPTIONS:
        group.addoption(flag, dest=dest, help=help_text, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _marker_help())
    config.stash[DEFAULTS_KEY] = _defaults(config)
    source, table = _pyproject(config)
    _session_device(config, table, f"[tool.syncguard] in {source}")
    path = config.getoption("syncguard_baseline", default=None)
    update = bool(config.getoption("syncguard_update_baseline", default=False))
    if update and not path:
        raise pytest.UsageError("syncguard: --syncguard-update-baseline needs "
                                "--syncguard-baseline FILE (the file to write)")
    if path:
        config.stash[BASELINE_KEY] = _BaselineRun.open(path, update)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    # Settle every guarded test's settings at collection: a bad marker is a usage error
    # before anything runs.
    for item in items:
        settings = _settings_for(item)
        if settings is not None:
            item.stash[SETTINGS_KEY] = settings


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    settings = item.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    kind = _prepare_device(settings.device)
    item.stash[GUARD_KEY] = _make_guard(settings, kind)


@pytest.fixture(name="syncguard")
def _syncguard_fixture(request: pytest.FixtureRequest) -> SyncGuard:
    """The test's guard (a ``syncguard.SyncGuard``): active only while the test function runs.
    Use ``with syncguard.step():`` to mark decode steps, ``with syncguard.allow("why"):`` to
    allow a block, and read ``.count``, ``.events``, ``.sites()``, ``.max_syncs``. Using this
    fixture guards the test (budget as for ``@pytest.mark.syncguard``)."""
    guard = request.node.stash.get(GUARD_KEY, None)
    if guard is None:  # requested through getfixturevalue(): settings were not made at
        # collection, and the guard is entered only if this happens before the call phase
        defaults = request.config.stash.get(DEFAULTS_KEY, None) or Defaults()
        settings = request.node.stash.get(SETTINGS_KEY, None) or defaults.settings
        guard = _make_guard(settings)
        request.node.stash[SETTINGS_KEY] = settings
        request.node.stash[GUARD_KEY] = guard
    return guard


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    guard = item.stash.get(GUARD_KEY, None)
    if guard is None:
        yield
        return
    if not item.config.getoption("syncguard_lineage", default=False):
        # the test function only (fixtures ran in setup and run again in teardown), on its
        # own threads (not a fixture's background thread)
        with BodyThreads(guard), guard:
            yield
        return
    from ..driving.lineage import start_auto  # torch: loading the plugin never imports it

    tracker = start_auto(cpu="cpu" in guard.devices)
    try:
        with BodyThreads(guard), guard:
            yield
    finally:
        tracker.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist (controller): take a worker's recorded baseline sites."""
    run = node.config.stash.get(BASELINE_KEY, None)
    data = getattr(node, "workeroutput", {}).get("syncguard_baseline")
    if run is not None and data:
        run.merge(data)


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(BASELINE_KEY, None)
    if run is None or not run.update:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller writes the file
        workeroutput["syncguard_baseline"] = run.to_json()
        return
    n = run.write()
    session.config.stash[_WROTE_KEY] = f"syncguard: wrote baseline {run.path} ({n} sites)"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    wrote = config.stash.get(_WROTE_KEY, None)
    if wrote:
        terminalreporter.write_line(wrote)
    # a module that imports torch_npu failed to collect on a machine without it: say the
    # one setting that runs it on the simulated npu
    if any(isinstance(r, pytest.CollectReport) and _NO_TORCH_NPU in str(r.longrepr)
           for r in terminalreporter.stats.get("error", [])):
        terminalreporter.write_line(NPU_HINT, yellow=True)


_NO_TORCH_NPU = "No module named 'torch_npu'"
#: what the summary says when a module could not be collected for want of torch_npu
NPU_HINT = ("syncguard: a test module imports torch_npu, which is not installed here: "
            "[tool.syncguard] device = \"sim\" in pyproject.toml collects and runs it on "
            "the simulated npu (docs/plugin.md)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, Any, None]:
    outcome = yield
    if call.when != "call":
        return
    guard: Optional[SyncGuard] = item.stash.get(GUARD_KEY, None)
    if guard is None:
        return

    report: pytest.TestReport = outcome.get_result()
    if _fail_on_swallowed(report, call, guard):
        return
    settings = item.stash.get(SETTINGS_KEY, None) or Settings()
    max_syncs = settings.max_syncs
    root = str(item.config.rootpath)
    run = item.config.stash.get(BASELINE_KEY, None)
    xf = _xfail_of(item)
    expects_syncs = xf is not None and getattr(xf, "raises", None) is None
    if expects_syncs:  # its syncs are its expected failure: its budget judges it, never a
        run = None     # baseline, and it is not recorded in one (see the module docstring)
    base = run.base if run is not None and not run.update else None
    gate = judge(guard.events, max_syncs=max_syncs, baseline=base, scenario=item.nodeid,
                 path=BASELINE_PATH, root=root)
    if run is not None and run.update:
        run.record(item.nodeid, gate, root)
    if not guard.events:
        return
    report.user_properties.append(("syncguard_hidden_syncs", guard.count))
    # While a baseline is being recorded nothing is gated (as check --update-baseline).
    over = gate.failed and not (run is not None and run.update)
    # The test body passed: hidden syncs over the budget are its only failure. A test that
    # failed on its own keeps its failure; the section then carries the sync verdict too.
    # Under xfail the sync failure is the expected failure (XFAIL, not XPASS), unless the
    # marker names the exception it expects (raises=...): then it is a real failure.
    sync_failure = over and call.excinfo is None and not _skipped_in_body(report)
    section = report_section(guard, gate, root, verdict=not sync_failure)
    why = _lineage_text(guard.events, root)
    report.sections.append((SECTION, section + ("\n" + why if why else "")))
    if not sync_failure:
        return
    line = verdict_line(gate)
    if xf is not None and getattr(xf, "raises", None) is None:
        report.outcome = "skipped"
        report.wasxfail = getattr(xf, "reason", "") or ""  # type: ignore[attr-defined]
        report.longrepr = line
        return
    report.outcome = "failed"
    if hasattr(report, "wasxfail"):
        del report.wasxfail  # type: ignore[attr-defined]
    report.longrepr = line
    setattr(report, _REPORT_ATTR, True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # The verdict is given; drop the events so a long session does not keep them all.
    if GUARD_KEY in item.stash:
        del item.stash[GUARD_KEY]


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config
                             ) -> Optional[Tuple[str, str, Tuple[str, Dict[str, bool]]]]:
    if report.when == "call" and report.failed and getattr(report, _REPORT_ATTR, False):
        return STATUS[0], STATUS[1], (STATUS[2], {"red": True})
    return None
