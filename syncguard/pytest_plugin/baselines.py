"""``--syncguard-baseline`` and ``--syncguard-update-baseline``: the tests' sites and counts
against (or recorded into) one baseline file, merged across xdist workers."""

from __future__ import annotations

import os
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
)

import pytest

# torch-free: the plugin still loads without importing torch

if TYPE_CHECKING:  # pragma: no cover
    pass

from ..gate.baseline import Baseline, BaselineError
from ..gate.verdicts import baseline_from
from .settings import BASELINE_PATH


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
        if update and not os.path.exists(path):
            return cls(path, update, None)
        try:
            return cls(path, update, Baseline.load(path))
        except BaselineError as exc:
            raise pytest.UsageError(f"syncguard: --syncguard-baseline: {exc}") from None

    def record(self, nodeid: str, verdict: Any, root: str) -> None:
        self.judged.append(nodeid)
        self.sites += [s.to_dict() for s in baseline_from([verdict], root=root).sites]

    def to_json(self) -> Dict[str, Any]:
        return {"judged": self.judged, "sites": self.sites}

    def merge(self, data: Dict[str, Any]) -> None:
        self.judged += data.get("judged", [])
        self.sites += data.get("sites", [])

    def write(self) -> int:
        data = {"format": "syncguard-baseline", "version": 1, "sites": list(self.sites)}
        new = Baseline.from_dict(data, source=self.path)
        # read again under a lock: another session may have written it since this one began
        judged = [(nodeid, BASELINE_PATH) for nodeid in self.judged]
        return len(Baseline.update(self.path, new.sites, judged))


#: the session's baseline run, in the config's stash
BASELINE_KEY = pytest.StashKey[_BaselineRun]()
