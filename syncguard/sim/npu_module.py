"""``torch.npu`` for the simulated device: the device module PyTorch looks up by name.

Registered by :func:`syncguard.sim.simulated_device` through
``_setup_privateuseone_for_python_backend(backend_module=...)`` (torch >= 2.9) or
``torch._register_device_module`` (torch 2.7, 2.8), so ``torch.npu`` (or
``torch.<name>``) is this module. It models one device with one in-order queue: work is done
when an op returns, so every wait below is instantaneous. What matters to syncguard is that
every explicit ``synchronize()`` (module, stream, event) is reported as an ``explicit_sync``.

Timing: :class:`Event` records ``time.perf_counter()`` on the host when ``record()`` is called,
and ``elapsed_time`` returns the host-clock difference in milliseconds. On the simulated device
ops run synchronously on the host, so this is the time the host spent between the two records.
"""

from __future__ import annotations

import os
import threading
import time
import types
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from syncguard.core import intercept as _intercept

#: Marks this module as the simulated device's module (a real torch_npu's torch.npu lacks it).
__syncguard_sim__ = True
#: The backend name this module serves; set by syncguard.sim at setup.
_DEVICE_NAME = "npu"

_DeviceLike = Union[None, int, str, torch.device]


#: Observers of the simulated events, ``(on_record, on_wait)`` each called with the event:
#: the modeled timeline adds itself while a step model records (as it records ops as
#: ``syncguard.sim.kernel.RECORDER``); the device never imports the model.
EVENT_OBSERVERS: List[Tuple[Callable[[Any], None], Callable[[Any], None]]] = []


def _report(api: str) -> None:
    _intercept.report_sync("explicit_sync", api=api, op=None, device=_DEVICE_NAME)


def _index(device: _DeviceLike) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        idx = device
    else:
        d = torch.device(device)
        if d.type != _DEVICE_NAME:
            raise ValueError(f"expected a {_DEVICE_NAME} device, got {d}")
        idx = 0 if d.index is None else d.index
    if idx != 0:
        raise RuntimeError(
            f"invalid device ordinal {idx}: the simulated {_DEVICE_NAME} has one device (0)"
        )
    return idx


# ---- device management -----------------------------------------------------------------------


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def init() -> None:
    """Nothing to initialise."""


def _lazy_init() -> None:
    """Nothing to initialise."""


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device: _DeviceLike) -> None:
    _index(device)


def get_device_name(device: _DeviceLike = None) -> str:
    _index(device)
    return "Simulated NPU (syncguard)"


def get_device_capability(device: _DeviceLike = None) -> Tuple[int, int]:
    _index(device)
    return (0, 0)


def get_device_properties(device: _DeviceLike = None) -> Any:
    _index(device)
    _, total = mem_get_info()
    return types.SimpleNamespace(
        name=get_device_name(), total_memory=total, multi_processor_count=1
    )


def is_bf16_supported(including_emulation: bool = False) -> bool:
    return True


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}
_sync_debug_mode = 0


def set_sync_debug_mode(debug_mode: Union[int, str]) -> None:
    """Record the sync debug mode ("default"/"warn"/"error" or 0/1/2), validated as torch_npu
    does. The simulated device does not warn or raise on syncs (syncguard counts them); the
    mode is kept so that code which sets and restores it runs unchanged."""
    global _sync_debug_mode
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               "`warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _sync_debug_mode = int(debug_mode)


def get_sync_debug_mode() -> int:
    return _sync_debug_mode


def utilization(device: _DeviceLike = None) -> int:
    """The device's utilization rate in percent: 0 on the simulated device."""
    _index(device)
    return 0


class device:  # noqa: N801  (mirrors torch.cuda.device)
    """Context manager that "selects" a device; there is only device 0."""

    def __init__(self, device: _DeviceLike) -> None:
        self.idx = _index(device)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


# ---- synchronisation, streams, events ------------------------------------------------------


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for all work on the device: reported as an explicit sync."""
    _index(device)
    _report(f"torch.{_DEVICE_NAME}.synchronize")


_stream_ids = iter(range(1, 1 << 62))
_stream_ids_lock = threading.Lock()


def _next_stream_id() -> int:
    with _stream_ids_lock:
        return next(_stream_ids)


class Stream(torch.Stream):
    """A simulated stream (a ``torch.Stream`` of the device, so ``record_stream`` accepts it).

    All streams share the host's one in-order execution, so waits are immediate.
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> Stream:
        _index(device)
        sid = int(kwargs.pop("stream_id", -1))
        if sid < 0:
            sid = _next_stream_id()
        dev_type = int(torch._C._autograd.DeviceType.PrivateUse1)  # type: ignore[call-overload]
        self = super().__new__(cls, stream_id=sid, device_index=0, device_type=dev_type)
        return self  # type: ignore[no-any-return]

    def __init__(self, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> None:
        self.priority = priority

    def synchronize(self) -> None:
        """Wait for the stream's work: reported as an explicit sync."""
        _report(f"torch.{_DEVICE_NAME}.Stream.synchronize")

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Any) -> None:
        """Device-side wait: no host sync."""

    def wait_event(self, event: Any) -> None:
        """Device-side wait: no host sync."""

    def record_event(self, event: Optional[Event] = None) -> Event:  # type: ignore[override]
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.{_DEVICE_NAME}.Stream device={_DEVICE_NAME}:0 id={self.stream_id}>"


class ExternalStream(Stream):
    """A stream allocated elsewhere (``stream_ptr``, an ``aclrtStream`` on a 910B); on the
    simulated device it is one more in-order stream."""

    def __new__(cls, stream_ptr: int, device: _DeviceLike = None,  # type: ignore[misc]
                **kwargs: Any) -> ExternalStream:
        return super().__new__(cls, device, **kwargs)  # type: ignore[return-value]

    def __init__(self, stream_ptr: int, device: _DeviceLike = None, **kwargs: Any) -> None:
        super().__init__(device)
        self.stream_ptr = stream_ptr


_default_stream: Optional[Stream] = None
_default_lock = threading.Lock()
_tls = threading.local()


def default_stream(device: _DeviceLike = None) -> Stream:
    global _default_stream
    _index(device)
    if _default_stream is None:
        with _default_lock:
            if _default_stream is None:
                _default_stream = Stream(stream_id=0)
    return _default_stream


def current_stream(device: _DeviceLike = None) -> Stream:
    """The current stream of this thread (the default stream unless one was set)."""
    _index(device)
    s: Optional[Stream] = getattr(_tls, "stream", None)
    return s if s is not None else default_stream()


def is_current_stream_capturing() -> bool:
    """No graph capture on the simulated device."""
    return False


def set_stream(stream: Optional[Stream]) -> None:
    _tls.stream = stream


class StreamContext:
    """``with torch.npu.stream(s):`` makes ``s`` this thread's current stream."""

    def __init__(self, stream: Optional[Stream]) -> None:
        self.stream = stream
        self._prev: Optional[Stream] = None

    def __enter__(self) -> Optional[Stream]:
        self._prev = getattr(_tls, "stream", None)
        if self.stream is not None:
            _tls.stream = self.stream
        return self.stream

    def __exit__(self, *exc: Any) -> None:
        _tls.stream = self._prev


def stream(stream: Optional[Stream]) -> StreamContext:
    return StreamContext(stream)


class Event:
    """A simulated event. ``record`` stamps the host clock (``time.perf_counter``)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._time: Optional[float] = None

    def record(self, stream: Optional[Stream] = None) -> None:
        self._time = time.perf_counter()
        for on_record, _ in list(EVENT_OBSERVERS):  # the modeled timeline, when it records
            on_record(self)

    def wait(self, stream: Optional[Stream] = None) -> None:
        """Make a stream wait for the event: device-side, no host sync."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Wait on the host for the event: reported as an explicit sync."""
        for _, on_wait in list(EVENT_OBSERVERS):  # modeled: the host waits for earlier work
            on_wait(self)
        _report(f"torch.{_DEVICE_NAME}.Event.synchronize")

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event's and ``end_event``'s records (host clock)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self) -> str:
        state = "recorded" if self._time is not None else "unrecorded"
        return f"<torch.{_DEVICE_NAME}.Event {state}>"


# ---- random numbers: the simulated device draws from the CPU default generator -----------------


def manual_seed(seed: int) -> None:
    torch.random.default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    torch.random.default_generator.seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return int(torch.random.default_generator.initial_seed())


def get_rng_state(device: _DeviceLike = None) -> torch.Tensor:
    return torch.random.default_generator.get_state()


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = None) -> None:
    torch.random.default_generator.set_state(new_state)


# ---- memory: harmless answers ----------------------------------------------------------------


def mem_get_info(device: _DeviceLike = None) -> Tuple[int, int]:
    """(free, total) bytes: the host's available and physical memory where known."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return (os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page)
    except (ValueError, OSError, AttributeError):
        return (64 << 30, 64 << 30)


def memory_allocated(device: _DeviceLike = None) -> int:
    return 0


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return 0


def memory_reserved(device: _DeviceLike = None) -> int:
    return 0


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return 0


def memory_stats(device: _DeviceLike = None) -> Dict[str, Any]:
    return {}


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    return None


def empty_cache() -> None:
    return None

