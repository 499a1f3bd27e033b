"""One scripted decode loop: a scenario's requests joining and leaving, per-step logits, the
subject sampling, and the engine's token readback; plus the device-event timer of a step.
The counted pass (:mod:`syncguard.driving.runner`) and the timed pass
(:mod:`syncguard.driving.timing`) both drive it."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from ..core.events import HostSyncError
from ..core.hub import allow
from ..core.intercept import suppressed
from ..core.lineage import mark_input
from ..model.timeline import device_work
from . import subjects
from .devices import Target
from .scenario import Scenario
from .staging import HostStager
from .subjects import SubjectError, as_sampled, check_ids, user_error

READBACK = "engine token readback (the one intended sync per step)"

Progress = Callable[[str, str, str, int, int], None]  # scenario, path, pass, step, total


# -- one decode loop ------------------------------------------------------------------------
class DecodeLoop:
    """A scenario's decode loop driving one subject (:mod:`syncguard.subjects`): joins and
    leaves, per-(request, step) logits, sampling, and the engine's token readback at the end
    of each step. ``path`` names the subject (a registered name or ``MODULE:OBJ``)."""

    def __init__(self, scenario: Scenario, path: str, target: Target,
                 subject: Optional[Any] = None) -> None:
        self.sc, self.path, self.target = scenario, path, target
        self.subject = subject if subject is not None else subjects.load(path)
        self.name = subjects.label(path, self.subject)
        dev = target.device
        all_reqs = list(scenario.requests) + [r for e in scenario.events for r in e.join]
        self.slot = {r.id: i for i, r in enumerate(all_reqs)}
        dtype = getattr(torch, scenario.dtype)
        ctx = subjects.SubjectContext(dev, scenario.deterministic, scenario.seed)
        with allow("setup: logits bank and workload"):
            g = torch.Generator().manual_seed(scenario.seed)
            bank = torch.randn(len(all_reqs), scenario.vocab_size, generator=g)
            self.bank = (bank * scenario.logits_scale).to(dtype).to(dev)
            n = scenario.workload
            self.work = (torch.randn(n, n, generator=g) / max(n, 1) ** 0.5).to(dev) if n else None
            self.state = self._call("build", list(scenario.requests), ctx)
            self.live: List[str] = [r.id for r in scenario.requests]
            self.start: Dict[str, int] = {r.id: 0 for r in scenario.requests}
            self._refresh(0)

    def _call(self, method: str, *args: Any) -> Any:
        """The subject's ``method``; an exception raised in the user's code becomes one
        :class:`~syncguard.subjects.SubjectError` line naming the subject and file:line."""
        try:
            return getattr(self.subject, method)(*args)
        except (SubjectError, HostSyncError):
            raise
        except Exception as exc:
            err = user_error(self.name, method, exc)
            if err is None:
                raise
            raise err from exc

    def _stage(self, values: List[int]) -> torch.Tensor:
        return HostStager(self.target.device).stage(values, torch.int64)

    def _refresh(self, step: int) -> None:
        """Rebuild the per-row slot and position tensors (pinned, non-blocking) after the
        batch changed: no host read of device data."""
        self.slots = self._stage([self.slot[r] for r in self.live])
        self.positions = self._stage([16 + step - self.start[r] for r in self.live])

    def apply_events(self, step: int) -> None:
        changed = False
        for ev in self.sc.events_at(step):
            if ev.finish:
                gone = set(ev.finish)
                keep = [i for i, r in enumerate(self.live) if r not in gone]
                self.state = self._call("finish", self.state, keep)
                self.live = [self.live[i] for i in keep]
                changed = True
            if ev.join:
                self.state = self._call("join", self.state, list(ev.join))
                for r in ev.join:
                    self.live.append(r.id)
                    self.start[r.id] = step
                changed = True
        if changed:
            self._refresh(step)

    def logits(self, step: int) -> torch.Tensor:
        rows = torch.index_select(self.bank, 0, self.slots)
        return torch.roll(rows, shifts=(step * 7919) % self.sc.vocab_size, dims=1).contiguous()

    def run_step(self, step: int) -> Tuple[List[int], Dict[str, Any]]:
        """One step: events, logits, the subject's sampling, the token readback (allowed).
        Returns the tokens and the subject's labels."""
        self.apply_events(step)
        if self.sc.forward_ms:  # exists only in the modeled timeline (syncguard.model.timeline)
            device_work("forward (modeled)", self.sc.forward_ms)
        logits = self.logits(step)
        mark_input(logits, "logits (the model's output)")
        if self.work is not None:
            y = self.work
            for _ in range(4):
                y = torch.tanh(y @ self.work)
        res = as_sampled(self._call("sample", self.state, logits, self.positions))
        check_ids(self.name, res.ids, len(self.live))
        with allow(READBACK):
            tokens = res.ids.tolist()
        self.positions.add_(1)
        return tokens, dict(res.labels)


# -- passes ----------------------------------------------------------------------------------
class DeviceTimer:
    """Device time of a step from device events (CUDA or NPU); None elsewhere."""

    def __init__(self, target: Target) -> None:
        mod = {"cuda": torch.cuda, "npu": getattr(torch, "npu", None)}.get(target.kind)
        self.mod = mod

    def start(self) -> Any:
        if self.mod is None:
            return None
        a, b = self.mod.Event(enable_timing=True), self.mod.Event(enable_timing=True)
        a.record()
        return a, b

    def stop(self, h: Any) -> None:
        if h is not None:
            h[1].record()

    def elapsed(self, h: Any) -> Optional[float]:
        """Device ms between the two events. The end event was recorded after the token
        readback, so waiting for it costs next to nothing, but ``elapsed_time`` refuses an
        event not yet complete: wait for it, as syncguard's own read (never counted)."""
        if h is None:
            return None

        with suppressed():
            h[1].synchronize()
        return float(h[0].elapsed_time(h[1]))


def _seed(sc: Scenario) -> None:
    torch.manual_seed(sc.seed)


def label_fields(labels: Dict[str, Any]) -> Dict[str, Any]:
    """A step's :class:`StepRecord` fields from its subject's labels: the labels themselves
    (free-form; the result format knows no subject's names)."""
    return {"labels": labels or None}
