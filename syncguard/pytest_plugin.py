"""pytest plugin: fail tests whose body makes more hidden host-device syncs than allowed.

Loaded through the ``pytest11`` entry point. Loading it does not import torch: everything that
needs torch is imported inside the hooks of a guarded test.

Which tests are guarded: those marked ``@pytest.mark.syncguard(...)``, those that use the
``syncguard`` fixture, and every test with ``--syncguard`` (ini ``syncguard = true``).
Only the test function's call is measured, not its fixtures.

Budget and allow-list, most specific first:

- the marker: ``@pytest.mark.syncguard(max_syncs=0, device="npu", allow=[...], devices=(...))``;
- ``--syncguard-max-syncs=N`` on the command line, then the ini key ``syncguard_max_syncs``;
- ``[tool.syncguard]`` in the rootdir's pyproject.toml: ``max_syncs = N``, ``allow = ["pkg/
  mod.py:12", {site = "pkg/mod.py:30", reason = "token readback"}]``, ``devices = ["cpu"]``,
  ``exhaustive = true``.

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

import dataclasses
import inspect
import os
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Generator,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import pytest

# torch-free: the plugin still loads without importing torch
from .driving import devices as _devices
from .driving.config import first_flag, to_allow, to_flag
from .driving.devices import EXHAUSTIVE_HELP, exhaustive_for

if TYPE_CHECKING:  # pragma: no cover
    from .core.guard import SyncGuard
    from .gate.verdicts import Verdict

AllowSpec = Union[str, Tuple[str, str], Dict[str, str]]

MARKER = "syncguard"
SECTION = "syncguard"
#: category, letter and word of a test that failed on hidden syncs alone (category "failed",
#: so it stays in pytest's FAILURES section, short summary, failed count and exit code). The
#: letter is ``H`` (hidden syncs): ``S`` read as pytest's ``s`` (skipped).
STATUS = ("failed", "H", "SYNCS")
#: the ``path`` under which the plugin's verdicts are kept in a baseline (scenario: node id)
BASELINE_PATH = "test"
#: values of the marker's ``device`` and ``model`` (driving/devices.py names every device)
DEVICES = _devices.MARKER_DEVICES
MODELS = _devices.HARDWARE
_REPORT_ATTR = "syncguard_over_budget"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one guarded test is held to."""

    max_syncs: int = 0
    allow: Tuple[Tuple[str, str], ...] = ()
    devices: Tuple[str, ...] = ()
    device: Optional[str] = None
    model: Optional[str] = None
    warmup: int = 0
    exhaustive: bool = False


@dataclasses.dataclass(frozen=True)
class Defaults:
    """Session-wide settings from the command line, ini and ``[tool.syncguard]``."""

    enabled: bool = False
    settings: Settings = Settings()
    pyproject: Optional[str] = None


#: session-wide device settings (``--syncguard-device``, ``[tool.syncguard] device``)
SESSION_DEVICES = _devices.SESSION_DEVICES
DEFAULTS_KEY = pytest.StashKey[Defaults]()
BASELINE_KEY = pytest.StashKey["_BaselineRun"]()
_WROTE_KEY = pytest.StashKey[str]()
SETTINGS_KEY = pytest.StashKey[Settings]()
GUARD_KEY = pytest.StashKey["SyncGuard"]()


def syncguard_marker(max_syncs: Optional[int] = None, *, device: Optional[str] = None,
                     allow: Sequence[AllowSpec] = (), devices: Sequence[str] = (),
                     warmup: int = 0, model: Optional[str] = None,
                     exhaustive: Optional[bool] = None) -> Dict[str, Any]:
    """Guard this test: fail it when its body makes more than max_syncs hidden host syncs
    (default: --syncguard-max-syncs, else [tool.syncguard] max_syncs, else 0). device='npu'
    sets up syncguard's simulated npu when torch_npu is missing; device='cpu' counts CPU
    tensors as device-resident (as devices=('cpu',) does). allow: call sites whose syncs are
    allowed ('file.py:12', 'pkg.mod:function', 'function', or (site, reason) pairs). warmup:
    the first N guard.step()s are not counted. model: op sync model ('cuda'/'npu') for devices
    without one. exhaustive: also count reads no Python entry point sees (a 0-d device tensor
    used as a number, e.g. torch.arange(n); TorchScript's bool()/.item()) with a dispatch-level
    net on the test's thread (slower; default --syncguard-exhaustive; always on a real cuda or
    npu device; the simulated npu needs none)."""
    return {"max_syncs": max_syncs, "device": device, "allow": allow, "devices": devices,
            "warmup": warmup, "model": model, "exhaustive": exhaustive}


_USAGE = ("usage: @pytest.mark.syncguard(max_syncs=0, device='cpu'|'cuda'|'npu', "
          "allow=['file.py:12', ...], devices=['cpu', ...], warmup=0, model='cuda'|'npu', "
          "exhaustive=False)")


def _marker_help() -> str:
    doc = " ".join((syncguard_marker.__doc__ or "").split())
    params = inspect.signature(syncguard_marker).parameters.values()
    sig = ", ".join(f"{p.name}={p.default!r}" for p in params)
    return f"{MARKER}({sig}): {doc}"


# ---------------------------------------------------------------------------- options
_OPTIONS: Tuple[Tuple[str, str, Dict[str, Any], str], ...] = (
    ("--syncguard", "syncguard",
     {"action": "store_true", "default": None},
     "guard every test: fail it when its body makes hidden host-device syncs over the budget"),
    ("--syncguard-device", "syncguard_device",
     {"action": "store", "default": None, "choices": SESSION_DEVICES},
     "set up the simulated npu and the torch_npu stand-in before collection, so test modules "
     "that `import torch_npu` run on a CPU-only machine: 'sim' always, 'auto' unless a usable "
     "torch_npu is installed (default: [tool.syncguard] device)"),
    ("--syncguard-max-syncs", "syncguard_max_syncs",
     {"action": "store", "type": int, "default": None, "metavar": "N"},
     "hidden host syncs a guarded test may make (default: [tool.syncguard] max_syncs, else 0);"
     " a marker's max_syncs wins"),
    ("--syncguard-exhaustive", "syncguard_exhaustive",
     {"action": "store_true", "default": None},
     f"{EXHAUSTIVE_HELP} (default: [tool.syncguard] exhaustive; a marker's exhaustive "
     "wins)"),
)
#: command-line only (no ini key): a baseline belongs to a run, not to a project's defaults
_BASELINE_OPTIONS: Tuple[Tuple[str, str, Dict[str, Any], str], ...] = (
    ("--syncguard-baseline", "syncguard_baseline", {"default": None, "metavar": "FILE"},
     "gate guarded tests against the sites and counts recorded in FILE: only a new site or a "
     "count above the recorded one fails (the budget is not used)"),
    ("--syncguard-update-baseline", "syncguard_update_baseline",
     {"action": "store_true", "default": False},
     "record this run's hidden-sync sites of guarded tests in --syncguard-baseline FILE "
     "instead of gating them (tests that did not run keep their entries)"),
    ("--syncguard-lineage", "syncguard_lineage", {"action": "store_true", "default": False},
     "track where each value a guarded test reads came from, and say per site whether the "
     "read can be hoisted to the host (run's and exec's --lineage; a Python call per op)"),
)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: List[str]) -> None:
    """Before any conftest imports torch, on a host with torch_npu installed only: load torch
    with torch_npu's autoload made safe (:func:`syncguard.driving.devices.prepare_process`), so
    that a torch_npu that cannot load (CANN missing) leaves the session running and a
    ``device="npu"`` test on the simulated npu, instead of crashing every ``import torch``.
    A healthy torch_npu is loaded as autoload would have loaded it. Costs nothing elsewhere."""
    from .driving.devices import AUTOLOAD_VAR, prepare_process

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


def _option(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name, default=None)
    return value if value is not None else config.getini(name)


def _to_devices(value: Any, where: str) -> Tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, (list, tuple)) and all(isinstance(d, str) and d for d in value)):
        raise ValueError(f"{where}: must be a list of device type names such as "
                         f"('cpu',), got {value!r}")
    return tuple(value)


def _to_choice(value: Any, choices: Tuple[str, ...], where: str) -> Optional[str]:
    if value is None or value in choices:
        return value  # type: ignore[no-any-return]
    raise ValueError(f"{where}: must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _to_allow(value: Any, where: str) -> Tuple[Tuple[str, str], ...]:
    if not isinstance(value, (list, tuple, str, dict)):
        raise ValueError(f"{where}: allow must be a list of call sites such as "
                         f"['file.py:12'], got {value!r}")
    return to_allow(value, where)


def _to_count(value: Any, where: str) -> int:
    from .gate.verdicts import budget_count

    return budget_count(value, where)


def _pyproject(config: pytest.Config) -> Tuple[Optional[str], Dict[str, Any]]:
    from .driving.config import load_tool_table

    ini = config.inipath
    path = ini if ini is not None and ini.name == "pyproject.toml" else None
    if path is None:
        cand = config.rootpath / "pyproject.toml"
        path = cand if cand.is_file() else None
    if path is None:
        return None, {}
    try:
        return str(path), load_tool_table(str(path))
    except ValueError as exc:
        raise pytest.UsageError(f"syncguard: {exc}") from None


def _defaults(config: pytest.Config) -> Defaults:
    source, table = _pyproject(config)
    where = f"[tool.syncguard] in {source}"
    try:
        max_syncs = 0
        if "max_syncs" in table:
            max_syncs = _to_count(table["max_syncs"], f"{where}: max_syncs")
        ini = config.getini("syncguard_max_syncs")
        if ini not in ("", None):
            max_syncs = _to_count(ini, "ini syncguard_max_syncs")
        opt = config.getoption("syncguard_max_syncs", default=None)
        if opt is not None:
            max_syncs = _to_count(opt, "--syncguard-max-syncs")
        allow = _to_allow(table.get("allow", ()), where)
        devices = _to_devices(table.get("devices", ()), f"{where}: devices")
        exhaustive = first_flag(
            (config.getoption("syncguard_exhaustive", default=None), "--syncguard-exhaustive",
             False),
            (config.getini("syncguard_exhaustive"), "ini syncguard_exhaustive", True),
            (table.get("exhaustive"), f"{where}: exhaustive", False))
    except ValueError as exc:
        raise pytest.UsageError(f"syncguard: {exc}") from exc
    enabled = bool(_option(config, "syncguard"))
    return Defaults(enabled, Settings(max_syncs=max_syncs, allow=allow, devices=devices,
                                      exhaustive=exhaustive), source)


def _session_device(config: pytest.Config, table: Dict[str, Any], where: str) -> None:
    """``--syncguard-device``, the ini key or ``[tool.syncguard] device``: ``"sim"`` sets up
    the simulated npu and the torch_npu stand-in now, before any test module is collected, so
    NPU test modules (``import torch_npu``, ``device="npu"``) run unchanged on CPU-only CI;
    ``"auto"`` does so unless a usable torch_npu is installed (then the real NPU runs them)."""
    value = _option(config, "syncguard_device") or table.get("device")
    if value in (None, ""):
        return
    if value not in SESSION_DEVICES:
        raise pytest.UsageError(f"syncguard: {where}: device: must be one of "
                                f"{', '.join(map(repr, SESSION_DEVICES))}, got {value!r}")
    if value == "auto":
        from .driving.devices import AUTOLOAD_VAR, npu_state

        if npu_state(load=os.environ.get(AUTOLOAD_VAR) != "0").usable:
            return
    try:
        from . import simulated_device

        simulated_device("npu", torch_npu=True)
    except Exception as exc:  # one line: a real torch_npu is loaded, or torch is too old
        raise pytest.UsageError(f"syncguard: device={value!r}: the simulated npu could not be "
                                f"set up: {exc}") from None


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


# ---------------------------------------------------------------------------- per test
def _settings_for(item: pytest.Item) -> Optional[Settings]:
    defaults = item.config.stash.get(DEFAULTS_KEY, None) or Defaults()
    marks = list(item.iter_markers(MARKER))
    uses_fixture = MARKER in getattr(item, "fixturenames", ())
    if not (marks or defaults.enabled or uses_fixture):
        return None
    s = defaults.settings
    max_syncs, allow, devices = s.max_syncs, list(s.allow), list(s.devices)
    device, model, warmup, exhaustive = s.device, s.model, s.warmup, s.exhaustive
    for mark in reversed(marks):  # farthest (module, class) first; the closest wins
        where = f"@pytest.mark.{MARKER} on {item.nodeid}"
        try:
            kw = syncguard_marker(*mark.args, **mark.kwargs)
        except TypeError as exc:
            raise pytest.UsageError(f"{where}: {exc}\n{_USAGE}") from exc
        try:
            if kw["max_syncs"] is not None:
                max_syncs = _to_count(kw["max_syncs"], f"{where}: max_syncs")
            allow.extend(_to_allow(kw["allow"], where))
            devices.extend(_to_devices(kw["devices"], f"{where}: devices"))
            warmup = _to_count(kw["warmup"], f"{where}: warmup")
            device = _to_choice(kw["device"], DEVICES, f"{where}: device") or device
            model = _to_choice(kw["model"], MODELS, f"{where}: model") or model
            asked = to_flag(kw["exhaustive"], f"{where}: exhaustive")
        except ValueError as exc:
            raise pytest.UsageError(f"{exc}\n{_USAGE}") from exc
        exhaustive = asked if asked is not None else exhaustive
    if device == "cpu" and "cpu" not in devices:
        devices.append("cpu")
    return Settings(max_syncs, tuple(allow), tuple(dict.fromkeys(devices)), device, model,
                    warmup, exhaustive)


def _prepare_device(device: Optional[str]) -> Optional[str]:
    """Make the test's device exist: CUDA or a skip; for ``npu``, the real NPU when torch_npu
    is usable (:func:`syncguard.driving.devices.npu_state`: loads, and an NPU is visible), else the
    simulated npu, else a skip saying why neither can run the test. Returns the device's kind
    as :class:`syncguard.driving.devices.Target` names it (``sim`` for the simulated npu;
    ``cpu``, or None when the marker names no device)."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("syncguard: device='cuda' but CUDA is not available here")
        return "cuda"
    if device != "npu":
        return device
    from .driving.devices import AUTOLOAD_VAR, npu_state

    state = npu_state(load=os.environ.get(AUTOLOAD_VAR) != "0")
    if state.usable:
        return "npu"
    try:
        from . import simulated_device

        simulated_device("npu")
        return "sim"
    except Exception as exc:
        if state.module is not None:  # loaded but no NPU: it owns "npu", so no simulation
            pytest.skip(f"syncguard: device='npu': {state.detail}; the simulated npu cannot "
                        f"stand in while torch_npu is loaded (run with "
                        f"TORCH_DEVICE_BACKEND_AUTOLOAD=0 to use it)")
        pytest.fail(f"syncguard: device='npu' needs torch_npu or syncguard's simulated device, "
                    f"which could not be set up: {type(exc).__name__}: {exc}", pytrace=False)


_GUARD_CLASSES: Dict[type, type] = {}


def _guard_class() -> type:
    from .core.guard import SyncGuard
    from .core.hub import allow as _allow

    # Keyed by the base class: an in-process pytester run may import syncguard.core.guard afresh.
    cached = _GUARD_CLASSES.get(SyncGuard)
    if cached is not None:
        return cached

    class PytestSyncGuard(SyncGuard):
        """The guard of one test (the ``syncguard`` fixture): a :class:`SyncGuard` active
        during the test's call, with ``max_syncs`` (the test's budget) and ``allow(reason)``
        (:func:`syncguard.allow`, reachable here because the fixture's name hides the module).
        """

        allow = staticmethod(_allow)

        def __init__(self, max_syncs: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.max_syncs = max_syncs

    _GUARD_CLASSES.clear()
    _GUARD_CLASSES[SyncGuard] = PytestSyncGuard
    return PytestSyncGuard


def _make_guard(settings: Settings, kind: Optional[str] = None) -> SyncGuard:
    """The test's guard; ``kind``: its device as :func:`_prepare_device` found it (None: not
    known), which with the ``exhaustive`` setting decides the dispatch net."""
    cls = _guard_class()
    guard: SyncGuard = cls(settings.max_syncs, on_sync="count", devices=settings.devices,
                           allow_sites=settings.allow, warmup=settings.warmup,
                           model=settings.model,
                           exhaustive=exhaustive_for(kind, settings.exhaustive))
    return guard


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
        with guard:  # the test function only: fixtures ran in setup and run again in teardown
            yield
        return
    from .driving.lineage import start_auto

    tracker = start_auto(cpu="cpu" in guard.devices)
    try:
        with guard:
            yield
    finally:
        tracker.stop()


# ---------------------------------------------------------------------------- baselines
class _BaselineRun:
    """The session's ``--syncguard-baseline``: the baseline tests are gated against, or (with
    ``--syncguard-update-baseline``) the sites this run records, written at the session's end.
    Under xdist each worker sends what it recorded to the controller, which writes the file."""

    def __init__(self, path: str, update: bool, base: Any) -> None:
        self.path = path
        self.update = update
        self.base = base  # syncguard.gate.baseline.Baseline (None: updating a file not yet there)
        self.judged: List[str] = []
        self.sites: List[Dict[str, Any]] = []

    @classmethod
    def open(cls, path: str, update: bool) -> _BaselineRun:
        import os

        from .gate.baseline import Baseline, BaselineError

        if update and not os.path.exists(path):
            return cls(path, update, None)
        try:
            return cls(path, update, Baseline.load(path))
        except BaselineError as exc:
            raise pytest.UsageError(f"syncguard: --syncguard-baseline: {exc}") from None

    def record(self, nodeid: str, verdict: Any, root: str) -> None:
        from .gate.verdicts import baseline_from

        self.judged.append(nodeid)
        self.sites += [s.to_dict() for s in baseline_from([verdict], root=root).sites]

    def to_json(self) -> Dict[str, Any]:
        return {"judged": self.judged, "sites": self.sites}

    def merge(self, data: Dict[str, Any]) -> None:
        self.judged += data.get("judged", [])
        self.sites += data.get("sites", [])

    def write(self) -> int:
        from .gate.baseline import Baseline

        data = {"format": "syncguard-baseline", "version": 1, "sites": list(self.sites)}
        new = Baseline.from_dict(data, source=self.path)
        # read again under a lock: another session may have written it since this one began
        judged = [(nodeid, BASELINE_PATH) for nodeid in self.judged]
        return len(Baseline.update(self.path, new.sites, judged))


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


# ---------------------------------------------------------------------------- verdict
#: a hint when hidden syncs are host-to-device copies, the mark of inputs built in the body
FIXTURE_HINT = ("build inputs such as torch.tensor(..., device=...) in a fixture, which is "
                "not measured")


def verdict_line(verdict: Verdict) -> str:
    """``syncguard: `` and the gate's :meth:`~syncguard.gate.verdicts.Verdict.test_line`
    (``allowed 0 host syncs, saw 3 in steps 2-4``). When host-to-device copies are among the
    hidden syncs, a hint to build inputs in a fixture follows."""
    from .core.events import H2D_COPY

    text = f"syncguard: {verdict.test_line()}"
    h2d = sum(s.count for s in verdict.sites if s.event.kind == H2D_COPY)
    if h2d:
        text += f" ({h2d} host-to-device cop{'y' if h2d == 1 else 'ies'}: {FIXTURE_HINT})"
    return text


def _site_lines(sites: List[Dict[str, Any]], root: str) -> List[str]:
    from .core.events import site_line
    from .core.sites import caller_text, function_name

    return ["  " + site_line(s["filename"], s["lineno"],
                             function_name(s["function"], s.get("stack")), s["api"], s["op"],
                             s["count"], s["steps"], root=root,
                             caller=caller_text(s["filename"], s.get("stack"), root))
            for s in sorted(sites, key=lambda s: (-s["count"], s["filename"], s["lineno"]))]


def report_section(guard: SyncGuard, gate: Verdict, root: str, verdict: bool = True) -> str:
    """The ``syncguard`` report section: the verdict (unless ``verdict=False``: it is the
    failure's own text then) and every site (file:line, function, API, op, count, steps);
    allowed syncs listed apart with their reasons. ``gate``: the test's
    :class:`syncguard.gate.verdicts.Verdict`; against a baseline the failing sites say why."""
    lines = [verdict_line(gate)] if verdict else []
    hidden = guard.sites()
    if hidden:
        lines.append("hidden host syncs by site (file:line in function: API (op) xcount):")
        lines += _site_lines(hidden, root)
    if gate.max_syncs is None and gate.findings:
        lines.append("new or above the baseline:")
        lines += ["  " + t for t in gate.site_lines(root)]
    allowed = [s for s in guard.sites(include_allowed=True) if s["allowed"]]
    if allowed:
        lines.append(f"allowed host syncs ({guard.allowed_count}, not counted):")
        reasons = {(e.filename, e.lineno, e.api): e.reason for e in guard.events if e.allowed}
        allowed.sort(key=lambda s: (-s["count"], s["filename"], s["lineno"]))
        for s, text in zip(allowed, _site_lines(allowed, root)):
            reason = reasons.get((s["filename"], s["lineno"], s["api"]))
            lines.append(f"{text} -- {reason}" if reason else text)
    if gate.failed:
        lines.append('to allow one: `with syncguard.allow("why"):` around it, or '
                     'allow=["file.py:line"] in the marker or [tool.syncguard]')
    return "\n".join(lines) + "\n"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, Any, None]:
    outcome = yield
    if call.when != "call":
        return
    guard: Optional[SyncGuard] = item.stash.get(GUARD_KEY, None)
    if guard is None:
        return
    from .gate.verdicts import judge

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


def _lineage_text(events: List[Any], root: str) -> str:
    """One line per hidden site whose read values were tracked (``--syncguard-lineage``)."""
    from ._escape import one_line
    from .core.lineage_words import site_verdict, verdict_text
    from .core.sites import shown_site

    by_site: Dict[str, List[Any]] = {}
    for e in events:
        if e.lineage is not None and not e.allowed and not e.warmup:
            by_site.setdefault(e.site, []).append(e.lineage)
    lines = []
    for site, lins in by_site.items():
        v = site_verdict(lins)
        if v is not None:
            lines.append("  " + one_line(f"{shown_site(site, root)}: {verdict_text(v)}"))
    return "\n".join(["why, and how to remove it (lineage):", *lines]) if lines else ""


def _fail_on_swallowed(report: pytest.TestReport, call: pytest.CallInfo[None],
                       guard: SyncGuard) -> bool:
    """A test that passed although a ``SyncGuard(on_sync="raise")`` inside it raised a
    HostSyncError its code caught (twice: the error and the guard's re-raise at exit) fails:
    the guard raised, the code swallowed it, and the outcome may be wrong output."""
    swallowed = getattr(guard, "swallowed", ())
    if not swallowed or call.excinfo is not None or not report.passed:
        return False
    ev = swallowed[0]
    report.outcome = "failed"
    report.longrepr = (f"syncguard: {len(swallowed)} HostSyncError(s) raised and caught by the "
                       f"code under test, first at {ev.site} in {ev.function}(): {ev.api}")
    return True


def _skipped_in_body(report: pytest.TestReport) -> bool:
    """``pytest.skip()`` inside the test body (not an xfail outcome)."""
    return report.skipped and not hasattr(report, "wasxfail")


def _xfail_of(item: pytest.Item) -> Any:
    """The evaluated xfail mark of ``item`` (pytest's own, so conditions and ``run=`` are
    honoured), or None."""
    try:
        from _pytest.skipping import xfailed_key
    except ImportError:  # pragma: no cover - very old or future pytest
        return None
    return item.stash.get(xfailed_key, None)


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
