"""Device profiles for the modeled timeline: the parameters a replay reads, each naming its
source (a public spec with a link, ``estimate`` with the reasoning, or ``calibrated`` with
versions), loaded from the shipped ``profiles/<name>.json`` or a user's file and checked field by
field (:class:`ProfileError` names the file and the field)."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, List, Optional, Tuple

from ..errors import SyncguardError
from ..process.untrusted import UntrustedError, load_json

#: Folder of the shipped profiles (``<name>.json``).
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
#: The profile a run uses unless ``--profile`` says otherwise.
DEFAULT_PROFILE = "910b"
#: Numeric parameters every profile must give (unit in the file).
NUMERIC = ("mem_gbps", "matmul_tflops_16", "matmul_tflops_32", "vector_tflops", "kernel_us",
           "launch_us", "view_us", "submit_us", "sync_rtt_us", "h2d_gbps", "d2h_gbps",
           "copy_us", "forward_launch_us")
#: Parameters a profile may give (older profile files without them still load, with these
#: values, which model what those files modeled: no queue limit, one pass, full efficiency).
OPTIONAL: Dict[str, float] = {"queue_depth": 0.0, "sort_passes": 1.0, "matmul_half_rows": 0.0}
SOURCES = ("spec", "estimate", "calibrated")
#: What a profile's numbers may be, by unit (the last part of the name): (lowest, highest,
#: unit). Beyond these no device exists, and the model's sums overflow (1e308 us) or divide
#: by almost nothing (5e-324 GB/s).
PHYSICAL: Dict[str, Tuple[float, float, str]] = {
    "us": (0.0, 1e6, "us"),  # up to one second per launch, kernel or sync
    "gbps": (1e-6, 1e6, "GB/s"),  # a measured CPU stand-in can be slow: only absurd is out
    "tflops": (1e-6, 1e6, "TFLOP/s"),
    "depth": (0.0, 1e7, "launches"),  # queue_depth: 0 means no limit
    "passes": (1.0, 64.0, "passes"),  # sort_passes over memory
    "rows": (0.0, 1e9, "rows"),  # matmul_half_rows: 0 means full efficiency
}


class ProfileError(SyncguardError, ValueError):
    """A profile that cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """A device profile: ``values`` (numbers, units as in :data:`NUMERIC` names: us, GB/s,
    TFLOP/s), ``combine`` (``"max"`` or ``"sum"``), and each parameter's ``sources`` line."""

    name: str
    file: str
    device: str
    stack: str
    values: Dict[str, float]
    combine: str
    sources: Dict[str, str]
    calibrated: Optional[Dict[str, Any]] = None

    def header(self) -> Dict[str, Any]:
        """What a result header records about the model (the full parameter set)."""
        return {"profile": self.name, "file": self.file, "device": self.device,
                "stack": self.stack, "combine": self.combine, "values": dict(self.values),
                "sources": dict(self.sources), "calibrated": self.calibrated,
                "label": "modeled (not measured)"}


def profile_names() -> List[str]:
    """The shipped profiles' names."""
    try:
        return sorted(n[:-5] for n in os.listdir(PROFILE_DIR) if n.endswith(".json"))
    except OSError:
        return []


def parse_profile(doc: Any, file: str) -> Profile:
    """Validate a profile document. Raises :class:`ProfileError` naming ``file`` and field."""
    if not isinstance(doc, dict):
        raise ProfileError(f"{file}: not a profile (a JSON object)")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{file}: name: must be a non-empty string")
    params = doc.get("params")
    if not isinstance(params, dict):
        raise ProfileError(f"{file}: params: must be an object")
    values: Dict[str, float] = {}
    sources: Dict[str, str] = {}
    for key in (*NUMERIC, *OPTIONAL, "combine"):
        p = params.get(key)
        if p is None and key in OPTIONAL:
            values[key] = OPTIONAL[key]
            sources[key] = "default: not in the profile file"
            continue
        if not isinstance(p, dict) or "value" not in p:
            raise ProfileError(f"{file}: params.{key}: missing (an object with value and "
                               f"source)")
        src = p.get("source")
        if src not in SOURCES:
            raise ProfileError(f"{file}: params.{key}.source: must be one of "
                               f"{', '.join(SOURCES)}, got {src!r}")
        why = p.get("why")
        if not isinstance(why, str) or not why.strip():
            raise ProfileError(f"{file}: params.{key}.why: every parameter says where its "
                               f"value comes from (a link, the reasoning, or the versions)")
        sources[key] = f"{src}: {why}"
        v = p["value"]
        if key == "combine":
            if v not in ("max", "sum"):
                raise ProfileError(f"{file}: params.combine.value: must be max or sum, "
                                   f"got {v!r}")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            raise ProfileError(f"{file}: params.{key}.value: must be a number >= 0, got {v!r}")
        lo, hi, unit = PHYSICAL[key.rsplit("_", 1)[-1] if not key.startswith("matmul")
                                else "tflops"]
        if not lo <= v <= hi:
            raise ProfileError(f"{file}: params.{key}.value: {v!r} {unit} is outside the "
                               f"physical range {lo:g} to {hi:g} {unit}")
        values[key] = float(v)
    unknown = sorted(set(params) - set(NUMERIC) - set(OPTIONAL) - {"combine"})
    if unknown:
        raise ProfileError(f"{file}: params.{unknown[0]}: unknown parameter")
    cal = doc.get("calibrated")
    if cal is not None and not isinstance(cal, dict):
        raise ProfileError(f"{file}: calibrated: must be null or an object of versions")
    return Profile(name, file, str(doc.get("device", "")), str(doc.get("stack", "")), values,
                   str(params["combine"]["value"]), sources, cal)


def load_profile(name_or_file: Optional[str] = None) -> Profile:
    """A shipped profile by name (``910b``, ``h200``) or a profile file. Raises
    :class:`ProfileError`."""
    spec = name_or_file or DEFAULT_PROFILE
    path = spec if (os.sep in spec or spec.endswith(".json")) else os.path.join(
        PROFILE_DIR, f"{spec}.json")
    if not os.path.lexists(path):
        raise ProfileError(f"--profile: {spec}: no such profile file or shipped profile "
                           f"(shipped: {', '.join(profile_names())})")
    try:  # a regular UTF-8 file, size and nesting bounded, never blocking on a FIFO
        doc = load_json(path, "profile", 1 << 20)
    except UntrustedError as exc:
        raise ProfileError(str(exc)) from None
    return parse_profile(doc, path)
