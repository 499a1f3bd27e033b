"""Baselines: today's hidden-sync sites and counts, so CI fails only on regressions.

A baseline file records, per scenario and path, every call site that made hidden host syncs
and how many it made. ``syncguard check --baseline FILE`` then fails only on a site the
baseline does not know (a new sync) or on a count above the recorded one; sites that vanished
or got cheaper pass. ``--update-baseline FILE`` writes one.

Sites are identified by :func:`site_key`, not by line number, so editing code above a site (or
in another function) does not turn it into a "new" site.

File format (JSON, UTF-8, sorted for stable diffs)::

    {"format": "syncguard-baseline", "version": 1,
     "sites": [{"scenario": "steady", "path": "legacy", "key": "<site_key>", "count": 19,
                "site": "sglang_ascend_sampling/sampler.py:219", "function": "...",
                "api": "Tensor.__bool__", "op": "aten::_local_scalar_dense",
                "kind": "scalar_read"}, ...]}

``site``, ``function``, ``api``, ``op`` and ``kind`` are for people and messages only; a site
is matched by ``(scenario, path, key)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..core.events import SyncEvent
from ..core.sites import display_path, norm_line
from ..errors import SyncguardError
from ..process.atomic import write_text
from ..process.untrusted import UntrustedError, load_json

FORMAT = "syncguard-baseline"
VERSION = 1
#: The largest baseline file read (a baseline of 100k sites is about 40 MiB).
MAX_FILE_BYTES = 256 << 20

_REQUIRED: Tuple[Tuple[str, type], ...] = (
    ("scenario", str), ("path", str), ("key", str), ("count", int),
)


class BaselineError(SyncguardError, ValueError):
    """A baseline file that cannot be read or is malformed; the message names the file."""


def _upgrade_key(key: str, op: Optional[str]) -> str:
    """A stored key as :func:`site_key` makes it: a key that carries the line's comment (a
    baseline from syncguard 0.0.x) has it dropped (the ``#n`` occurrence index is kept)."""
    parts = key.split("::", 4)
    if len(parts) != 5:
        return key
    head, rest = "::".join(parts[:4]), parts[4]
    lead = f"{op or '-'}::"
    if not rest.startswith(lead):
        return key
    where = rest[len(lead):]
    text, sep, occ = where.rpartition(" #")
    if not sep or not occ.isdigit() or "#" not in text:
        return key
    return f"{head}::{lead}{norm_line(text)} #{occ}"


# ---------------------------------------------------------------------------- locking
@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the folder of ``path`` while the block runs (the file
    itself is replaced by a rename, so it cannot carry the lock; a folder lock leaves no file
    behind). Without ``fcntl`` (Windows) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# ---------------------------------------------------------------------------- findings
@dataclasses.dataclass
class Finding:
    """One site that fails the check: ``count`` hidden syncs at ``event``'s site in
    ``scenario``/``path``, made in ``steps``; ``baseline_count`` is the recorded count (None
    when the site is new or no baseline is used); ``message`` says why it fails."""

    scenario: str
    path: str
    event: SyncEvent
    count: int
    steps: List[int]
    baseline_count: Optional[int]
    message: str


@dataclasses.dataclass(frozen=True)
class BaselineSite:
    """One recorded site (see the module docstring for the fields)."""

    scenario: str
    path: str
    key: str
    count: int
    site: str = ""
    function: str = ""
    api: str = ""
    op: Optional[str] = None
    kind: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, scenario: str, path: str, key: str, count: int, ev: SyncEvent,
           root: Optional[str] = None) -> BaselineSite:
        """The record of ``count`` hidden syncs at ``ev``'s site (``key``: its
        :func:`site_key`), its ``site`` shown relative to ``root``."""
        return cls(scenario=scenario, path=path, key=key, count=count,
                   site=f"{display_path(ev.filename, root)}:{ev.lineno}", function=ev.function,
                   api=ev.api, op=ev.op, kind=ev.kind)


class Baseline:
    """Recorded hidden-sync sites and counts, per scenario and path."""

    def __init__(self, sites: Optional[List[BaselineSite]] = None,
                 source: Optional[str] = None) -> None:
        self.source = source
        self._sites: Dict[Tuple[str, str, str], BaselineSite] = {}
        for s in sites or []:
            self._sites[(s.scenario, s.path, s.key)] = s

    @property
    def sites(self) -> List[BaselineSite]:
        return [self._sites[k] for k in sorted(self._sites)]

    def __len__(self) -> int:
        return len(self._sites)

    def get(self, scenario: str, path: str, key: str) -> Optional[BaselineSite]:
        return self._sites.get((scenario, path, key))

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_observed(cls, observed: Dict[str, Dict[str, Any]],
                      root: Optional[str] = None) -> Baseline:
        """From ``{"scenario|path|site_key": {"count": int, "event": SyncEvent}}``."""
        sites: List[BaselineSite] = []
        for k, v in observed.items():
            parts = k.split("|", 2)
            if len(parts) != 3:
                raise ValueError(f"observed key must be 'scenario|path|site_key', got {k!r}")
            sites.append(BaselineSite.of(parts[0], parts[1], parts[2], int(v["count"]),
                                         v["event"], root))
        return cls(sites)

    def merged(self, sites: Iterable[BaselineSite],
               judged: Iterable[Tuple[str, str]]) -> Baseline:
        """The one merge of a baseline with a run's sites: ``sites`` plus this baseline's
        sites of every (scenario, path) not in ``judged`` (what the run judged: a run of some
        scenarios, paths or tests does not forget the others)."""
        done = set(judged)
        return Baseline([s for s in self.sites if (s.scenario, s.path) not in done]
                        + list(sites))

    # -- files ---------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, "version": VERSION,
                "sites": [s.to_dict() for s in self.sites]}

    def save(self, path: str) -> None:
        """Write the baseline as JSON (atomically: a temporary file, then a rename; a device or
        FIFO at ``path`` is written in place, never replaced: :mod:`syncguard.process.atomic`)."""
        write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")

    @classmethod
    def update(cls, path: str, sites: List[BaselineSite],
               judged: Iterable[Tuple[str, str]]) -> Baseline:
        """Write ``path`` as the file's baseline :meth:`merged` with ``sites`` (``judged``:
        the (scenario, path) pairs this run judged). The file is read again and written under
        an exclusive lock (:func:`locked`), so two runs updating one baseline (two pytest
        sessions with disjoint ``-k``) both keep their sites."""
        with locked(path):
            old = cls.load(path) if os.path.lexists(path) else cls()
            out = old.merged(sites, judged)
            out.save(path)
        return out

    @classmethod
    def load(cls, path: str) -> Baseline:
        """Read a baseline file; :class:`BaselineError` (a ValueError) names the file and the
        problem when it is missing, not JSON, of another format or version, or malformed."""
        try:  # a regular UTF-8 file, size and nesting bounded, never blocking on a FIFO
            data = load_json(path, "baseline", MAX_FILE_BYTES)
        except UntrustedError as exc:
            if exc.strerror:
                raise BaselineError(f"cannot read baseline {path}: {exc.strerror}") from None
            raise BaselineError(f"baseline {exc}") from None
        return cls.from_dict(data, source=path)

    @classmethod
    def from_dict(cls, data: Any, source: Optional[str] = None) -> Baseline:
        where = f"baseline {source}" if source else "baseline"
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BaselineError(f"{where} is not a syncguard baseline (expected an object with "
                                f'"format": "{FORMAT}")')
        version = data.get("version")
        if version != VERSION:
            raise BaselineError(f"{where} has version {version!r}; this syncguard reads "
                                f"version {VERSION} (re-create it with --update-baseline)")
        raw = data.get("sites")
        if not isinstance(raw, list):
            raise BaselineError(f'{where}: "sites" must be a list')
        sites: List[BaselineSite] = []
        for i, s in enumerate(raw):
            if not isinstance(s, dict):
                raise BaselineError(f"{where}: sites[{i}] must be an object")
            for name, typ in _REQUIRED:
                val = s.get(name)
                if not isinstance(val, typ) or isinstance(val, bool):
                    raise BaselineError(f"{where}: sites[{i}].{name} must be a "
                                        f"{typ.__name__}, got {val!r}")
            if s["count"] < 0:
                raise BaselineError(f"{where}: sites[{i}].count must be >= 0")
            op = s.get("op")
            sites.append(BaselineSite(
                scenario=s["scenario"], path=s["path"], key=_upgrade_key(s["key"], op),
                count=s["count"],
                site=str(s.get("site", "")), function=str(s.get("function", "")),
                api=str(s.get("api", "")), op=None if op is None else str(op),
                kind=str(s.get("kind", "")),
            ))
        return cls(sites, source=source)

    # -- checking ------------------------------------------------------------------------
    def compare(self, scenario: str, path: str,
                grouped: Dict[str, Dict[str, Any]]) -> List[Finding]:
        """Regressions of one scenario/path against the baseline.

        ``grouped`` maps :func:`site_key` to ``{"event": SyncEvent, "count": int, "steps":
        [int | None]}``. Returns one :class:`Finding` per site that is new ("new site, not in
        the baseline") or made more syncs than recorded ("count 3 > baseline 1"), largest
        count first. Unchanged, cheaper and vanished sites give nothing.
        """
        out: List[Finding] = []
        for key, g in grouped.items():
            count = int(g["count"])
            steps = sorted({int(s) for s in g.get("steps", ()) if s is not None})
            rec = self.get(scenario, path, key)
            if rec is None:
                out.append(Finding(scenario, path, g["event"], count, steps, None,
                                   "new site, not in the baseline"))
            elif count > rec.count:
                out.append(Finding(scenario, path, g["event"], count, steps, rec.count,
                                   f"count {count} > baseline {rec.count}"))
        out.sort(key=lambda f: (-f.count, f.event.filename, f.event.lineno))
        return out
