"""Device resolution: the one owner of "which device does this run use, and why".

Every front end (``run``, ``check``, ``exec``, ``selftest``, ``calibrate``, the pytest plugin)
asks this module; nothing else decides what ``auto`` means or whether ``torch_npu`` is the real
package. It knows the host states a 910B user meets (``shared/facts/torch-npu-real.md``):

- **healthy**: torch_npu loaded (by torch's backend autoload at ``import torch`` since torch
  2.5, or by an import) and an NPU visible: ``auto`` is the NPU;
- **no-device**: torch_npu loads but ``torch.npu.is_available()`` is False (a container
  without ``/dev/davinci*``, a wrong ``ASCEND_RT_VISIBLE_DEVICES``): ``auto`` falls back to the
  simulated npu and says why; ``--device npu`` is refused with advice that works;
- **broken**: torch_npu is installed but cannot load (CANN missing or not sourced:
  ``libhccl.so: cannot open shared object file``): nothing crashes; ``auto`` falls back to the
  simulated npu with one line naming the missing library and the fix.

Where syncguard starts the process (the CLI, ``exec``), :func:`prepare_process` runs before
torch is imported: it keeps torch from autoloading torch_npu (``TORCH_DEVICE_BACKEND_AUTOLOAD``,
restored right after ``import torch`` so the program's own subprocesses see the user's value),
then loads torch_npu itself, inside a ``try``, only when the run may use the NPU. A torch_npu
that loaded with no NPU visible owns the ``npu`` device name for the rest of the process, so
``auto`` then starts the command afresh (``os.execv``) with torch_npu kept unloaded and the
reason carried over.

Torch-free at import: the CLI's ``--help`` and argument parsing must not pay for importing
torch (seconds on a 910B host with torch_npu).
"""

from __future__ import annotations

import dataclasses
import glob
import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING, List, Optional, Sequence

from ..devicenames import DEVICES, HARDWARE, NPU_KINDS
from ..errors import SyncguardError
from ..standin import is_standin

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: torch's switch for loading the installed backends (torch_npu) at ``import torch``.
AUTOLOAD_VAR = "TORCH_DEVICE_BACKEND_AUTOLOAD"
#: Set for a command started afresh by :func:`prepare_process`: why the NPU is not used.
_REEXEC_REASON_VAR = "SYNCGUARD_NPU_UNUSABLE"
#: ... and the user's own value of :data:`AUTOLOAD_VAR` ("" when it was not set).
_REEXEC_AUTOLOAD_VAR = "SYNCGUARD_USER_AUTOLOAD"

#: The name of ``--device cpu`` in headers: no device tensors, so no sync is counted.
CPU_NAME = "host CPU: no device tensors, no syncs counted (use --device sim to count them)"
#: ... and under ``exec --device cpu``, which counts the host reads of CPU tensors
EXEC_CPU_NAME = "host CPU: reads of CPU tensors counted as a device's would be"
SIM_NAME = "simulated npu (syncguard, CPU)"

#: The usual fix when CANN is missing or not sourced.
CANN_FIX = ("source CANN's set_env.sh (e.g. `source /usr/local/Ascend/ascend-toolkit/"
            "set_env.sh`) before running")
NO_DEVICE_FIX = ("run where the NPU is mapped into the container (/dev/davinci*) and "
                 "ASCEND_RT_VISIBLE_DEVICES names a visible device, or use --device sim")


class DeviceError(SyncguardError, RuntimeError):
    """The requested device cannot be used here (exit code 2)."""


# -- torch_npu: what state is this host in? -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NpuState:
    """torch_npu on this host: ``state`` is ``absent`` (not installed), ``standin``
    (syncguard's stand-in owns the name), ``unloaded`` (installed, kept unloaded for a
    simulated run), ``healthy``, ``no-device`` or ``broken``; ``detail`` is one line saying
    why it is not usable ("" when it is); ``module`` the real torch_npu when loaded."""

    state: str
    detail: str = ""
    module: Optional[ModuleType] = None

    @property
    def usable(self) -> bool:
        return self.state == "healthy"


#: Why torch_npu failed to load in this process (an import is tried once), or None.
_load_failure: Optional[str] = None
#: Why the NPU was found unusable before this process was started afresh, or None.
_reexec_reason: Optional[str] = None


def npu_installed() -> bool:
    """Whether a real ``torch_npu`` can be found (without importing it)."""
    mod = sys.modules.get("torch_npu")
    if mod is not None:
        return not is_standin(mod)
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def _npu_version() -> str:
    try:
        from importlib.metadata import version

        return " " + version("torch_npu")
    except Exception:
        return ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _broken_detail(exc: BaseException) -> str:
    why = _first_line(exc)
    if ".so" in why or "shared object" in why:
        fix = f"CANN is missing or broken: {CANN_FIX}"
    else:
        fix = f"check the CANN install and that torch_npu{_npu_version()} pairs with this torch"
    return f"torch_npu{_npu_version()} is installed but cannot load ({why}); {fix}"


def _visible_devices_note() -> str:
    v = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    var = "ASCEND_RT_VISIBLE_DEVICES is not set" if v is None else \
        f"ASCEND_RT_VISIBLE_DEVICES={v!r}"
    nodes = len(glob.glob("/dev/davinci[0-9]*"))
    return f"{var}, {nodes} /dev/davinci* device node{'' if nodes == 1 else 's'}"


def _no_device_detail() -> str:
    return (f"torch_npu{_npu_version()} loads but no NPU is visible: torch.npu.is_available() "
            f"is False ({_visible_devices_note()}); {NO_DEVICE_FIX}")


def _forget_partial_import() -> None:
    """Drop what a failed ``import torch_npu`` left in ``sys.modules``."""
    for name in [m for m in sys.modules if m == "torch_npu" or m.startswith("torch_npu.")]:
        del sys.modules[name]


def _loaded_state(mod: ModuleType) -> NpuState:
    import torch

    try:
        ok = bool(torch.npu.is_available())  # type: ignore[attr-defined]
    except Exception as exc:
        return NpuState("no-device", f"torch.npu.is_available() failed ({_first_line(exc)}); "
                        f"{NO_DEVICE_FIX}", mod)
    return NpuState("healthy", "", mod) if ok else NpuState("no-device", _no_device_detail(), mod)


def npu_state(load: bool = True) -> NpuState:
    """The state of torch_npu in this process. With ``load``, an installed torch_npu that is
    not loaded yet is imported (once per process; a failure is remembered, never raised)."""
    global _load_failure
    if _reexec_reason is not None:
        return NpuState("no-device", _reexec_reason)
    mod = sys.modules.get("torch_npu")
    if mod is not None:
        return NpuState("standin") if is_standin(mod) else _loaded_state(mod)
    if _load_failure is not None:
        return NpuState("broken", _load_failure)
    if not npu_installed():
        return NpuState("absent")
    if not load:
        return NpuState("unloaded")
    import torch  # noqa: F401  (torch_npu imports it; keep a torch failure out of the try)

    saved = os.environ.get(AUTOLOAD_VAR)
    try:
        mod = importlib.import_module("torch_npu")
    except Exception as exc:  # ImportError (no CANN), RuntimeError (torch mismatch), ...
        _forget_partial_import()
        _load_failure = _broken_detail(exc)
        return NpuState("broken", _load_failure)
    finally:  # torch_npu sets the switch to 0 while it loads and restores it only at the end
        _set_env(AUTOLOAD_VAR, saved)
    return NpuState("standin") if is_standin(mod) else _loaded_state(mod)


def _set_env(name: str, value: Optional[str]) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def prepare_process(kind: Optional[str], argv: Optional[Sequence[str]] = None) -> None:
    """Before syncguard's own command imports torch: keep a broken torch_npu from crashing
    ``import torch``, and load torch_npu only where the run may use the NPU.

    ``kind`` is the command's ``--device`` (None: a command that needs no device, such as
    ``show``). ``argv`` (the command's arguments, without the program name) is what an
    ``auto`` run is started afresh with when torch_npu loaded but no NPU is visible. Does
    nothing when torch is already imported (an embedding process decides itself).
    """
    global _reexec_reason
    reason = os.environ.pop(_REEXEC_REASON_VAR, None)
    if reason is not None:  # started afresh by the code below: keep torch_npu unloaded
        _reexec_reason = reason
        user = os.environ.pop(_REEXEC_AUTOLOAD_VAR, "")
        _import_torch_without_autoload(user or None)
        return
    if "torch" in sys.modules or not npu_installed():
        return
    if kind is None:  # show, compare...: no device and no program of the user's run here
        os.environ[AUTOLOAD_VAR] = "0"  # if torch is imported at all, without torch_npu
        return
    user_autoload = os.environ.get(AUTOLOAD_VAR)
    _import_torch_without_autoload(user_autoload)
    if kind not in NPU_KINDS:
        return  # sim, cpu, cuda, no device: the real torch_npu stays unloaded
    state = npu_state()
    if state.state == "no-device" and kind == "auto" and argv is not None:
        _restart_without_npu(state.detail, user_autoload, argv)


def _import_torch_without_autoload(user_value: Optional[str]) -> None:
    os.environ[AUTOLOAD_VAR] = "0"
    try:
        import torch  # noqa: F401
    finally:
        _set_env(AUTOLOAD_VAR, user_value)


def _restart_without_npu(reason: str, user_autoload: Optional[str],
                         argv: Sequence[str]) -> None:
    """torch_npu owns the ``npu`` name now, so the simulated npu cannot exist in this
    process: start the same command afresh with torch_npu unloaded and the reason noted."""
    os.environ[_REEXEC_REASON_VAR] = reason
    os.environ[_REEXEC_AUTOLOAD_VAR] = user_autoload or ""
    os.environ[AUTOLOAD_VAR] = "0"
    cmd: List[str] = [sys.executable, "-m", "syncguard", *argv]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os.execv(sys.executable, cmd)


# -- the target of a run --------------------------------------------------------------------
#: The one flag that asks for the dispatch-level net in cpu mode, by the same name everywhere:
#: ``--exhaustive`` (``exec``, ``run``), ``--syncguard-exhaustive`` / ini ``syncguard_exhaustive``
#: / marker ``exhaustive=True`` (the pytest plugin), ``exhaustive = true`` in
#: ``[tool.syncguard]``. Its help, shared by every front end:
EXHAUSTIVE_HELP = ("also count the reads made in C++ that no Python entry point sees (a 0-d "
                   "tensor used as a number: torch.full((n,), t), torch.arange(t); "
                   "TorchScript's bool(t), t.item()), with a dispatch-level net on the "
                   "guard's thread: every op goes through Python, so cpu mode takes it only "
                   "when asked; cuda and npu always have it, the simulated npu needs none "
                   "(docs/device-modes.md)")


def exhaustive_for(kind: Optional[str], asked: bool = False) -> bool:
    """The one decision of whether a guard on device ``kind`` counts with the dispatch-level
    net (``SyncGuard(exhaustive=True)``), which sees the reads made in C++ that no Python
    entry point sees. ``asked``: the user's ``exhaustive`` flag (:data:`EXHAUSTIVE_HELP`).

    - ``cuda``, ``npu`` (a real device): always: a read missed there is a real sync.
    - ``sim``: never. Its backend classifies every op on every thread already, and a dispatch
      mode above it breaks ``torch.tensor(..., device="npu")``.
    - ``cpu``, or a kind not known (the plugin without ``device=``): when asked. The net puts
      every ATen op through Python (1.5x to 1.6x the steps of a small decode loop, see
      ``reports/bench/cpp_reads.md``), so cpu mode does not pay for it unasked.
    """
    if kind in HARDWARE:
        return True
    if kind == "sim":
        return False
    return asked


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a run executes: ``kind`` as resolved (sim, npu, cuda, cpu), the torch device, a
    human name, ``note``: why ``auto`` did not take the NPU ("" when it did, or when it
    was not asked), and ``asked_exhaustive``: the user's ``exhaustive`` flag."""

    kind: str
    device: torch.device
    name: str
    note: str = ""
    asked_exhaustive: bool = False

    @property
    def exhaustive(self) -> bool:
        """Whether the guard counts with the dispatch net too (:func:`exhaustive_for`)."""
        return exhaustive_for(self.kind, self.asked_exhaustive)


def resolve_target(kind: str = "auto", gpu: bool = False, exhaustive: bool = False) -> Target:
    """The device to run on. ``auto``: the NPU when torch_npu is usable, else (with ``gpu``,
    as ``exec`` asks: the user's code runs as it is) a visible CUDA GPU, else the simulated
    npu, with the reason in ``note``. ``exhaustive``: the user's flag (kept on the target,
    decided by :func:`exhaustive_for`). Raises :class:`DeviceError` with one line saying what
    is missing and what to do."""
    t = _resolve(kind, gpu)
    return dataclasses.replace(t, asked_exhaustive=True) if exhaustive else t


def _resolve(kind: str, gpu: bool) -> Target:
    import torch

    if kind not in DEVICES:
        raise DeviceError(f"--device: unknown device {kind!r}; valid: {', '.join(DEVICES)}")
    note = ""
    if kind in NPU_KINDS:
        state = npu_state()
        if state.usable:
            dev = torch.device("npu", torch.npu.current_device())  # type: ignore[attr-defined]
            name = torch.npu.get_device_name(dev.index)  # type: ignore[attr-defined]
            return Target("npu", dev, str(name))
        if kind == "npu":
            why = state.detail or (
                "torch_npu is not installed (pip install the torch_npu release that pairs with "
                f"torch {torch.__version__}, on an Ascend host with CANN); or use --device sim")
            raise DeviceError(f"--device npu: {why}")
        if state.state in ("no-device", "broken"):
            note = f"auto: not the NPU: {state.detail}"
        if gpu and torch.cuda.is_available():
            dev = torch.device("cuda", torch.cuda.current_device())
            return Target("cuda", dev, torch.cuda.get_device_name(dev), note)
        kind = "sim"
    if kind == "sim":
        from ..sim import SimulatedDeviceError, simulated_device

        try:
            dev = simulated_device("npu", torch_npu=True)
        except SimulatedDeviceError as exc:
            if note:
                raise DeviceError(f"{note}; and the simulated npu cannot be set up: {exc}") \
                    from None
            raise DeviceError(f"--device sim: {exc}") from None
        return Target("sim", dev, SIM_NAME, note)
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError("--device cuda: torch.cuda.is_available() is False (torch "
                              f"{torch.__version__}); use --device sim")
        dev = torch.device("cuda", torch.cuda.current_device())
        return Target("cuda", dev, torch.cuda.get_device_name(dev))
    # the guard counts reads of device tensors only (SyncGuard devices): on plain CPU tensors
    # every count is 0 by construction, which the name says where reports show the counts
    return Target("cpu", torch.device("cpu"), CPU_NAME)

