"""The pytest plugin's settings: the marker, the options, ``[tool.syncguard]``, and for each
guarded test the budget, device and guard it gets (one place decides them all)."""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

import pytest

from .. import simulated_device
from ..core.hub import allow as _allow

# torch-free: the plugin still loads without importing torch
from ..devicenames import HARDWARE, MARKER_DEVICES, SESSION_DEVICES
from ..driving.config import config_file, first_flag, load_tool_table, to_allow, to_flag
from ..driving.devices import AUTOLOAD_VAR, EXHAUSTIVE_HELP, exhaustive_for, npu_state
from ..gate.verdicts import budget_count

if TYPE_CHECKING:  # pragma: no cover
    from ..core.guard import SyncGuard



AllowSpec = Union[str, Tuple[str, str], Dict[str, str]]


MARKER = "syncguard"


SECTION = "syncguard"


#: category, letter and word of a test that failed on hidden syncs alone (category "failed",
#: so it stays in pytest's FAILURES section, short summary, failed count and exit code). The
#: letter is ``H`` (hidden syncs): ``S`` read as pytest's ``s`` (skipped).
STATUS = ("failed", "H", "SYNCS")


#: the ``path`` under which the plugin's verdicts are kept in a baseline (scenario: node id)
BASELINE_PATH = "test"


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


DEFAULTS_KEY = pytest.StashKey[Defaults]()




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
    return budget_count(value, where)


def _pyproject(config: pytest.Config) -> Tuple[Optional[str], Dict[str, Any]]:
    """The configuration file (:func:`syncguard.driving.config.config_file`: pytest's own
    ``pyproject.toml`` when it read one, else the nearest at or above its rootdir) and its
    ``[tool.syncguard]`` table."""
    ini = config.inipath
    path = config_file(str(ini) if ini is not None and ini.name == "pyproject.toml" else None,
                       str(config.rootpath))
    if path is None:
        return None, {}
    try:
        return path, load_tool_table(path)
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
        if npu_state(load=os.environ.get(AUTOLOAD_VAR) != "0").usable:
            return
    try:
        simulated_device("npu", torch_npu=True)
    except Exception as exc:  # one line: a real torch_npu is loaded, or torch is too old
        raise pytest.UsageError(f"syncguard: device={value!r}: the simulated npu could not be "
                                f"set up: {exc}") from None


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
            device = _to_choice(kw["device"], MARKER_DEVICES, f"{where}: device") or device
            model = _to_choice(kw["model"], HARDWARE, f"{where}: model") or model
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

    state = npu_state(load=os.environ.get(AUTOLOAD_VAR) != "0")
    if state.usable:
        return "npu"
    try:
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
    from ..core.guard import SyncGuard  # torch: loading the plugin never imports it

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
            #: the test body's threads while it runs (:class:`.threads.BodyThreads`), whose
            #: reads alone count; None: every thread's
            self.body_threads: Optional[Set[int]] = None

        def accepts(self, device: Optional[str]) -> bool:
            body = self.body_threads
            if body is not None and threading.get_ident() not in body:
                return False  # a fixture's thread, started before the body
            return super().accepts(device)

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
