"""The SGLang Ascend case study as three subjects (:mod:`syncguard.subjects`): ``legacy``
(the device check: one hidden sync per step), ``flag`` (the host flag, the fix) and
``flag-recompute`` (the flag recomputed when a request leaves). Registered as entry points of
``syncguard.subjects`` in ``pyproject.toml``; syncguard never imports this package. Labels per
step: ``branch`` (greedy, simple, fused, generic) and ``eligible`` (the host flag
``npu_top_k_top_p_eligible`` after the step)."""

from __future__ import annotations

from typing import Any, Sequence

from syncguard.driving.subjects import Sampled, SubjectContext

from .batch import SamplingBatchInfo, SamplingRequest
from .ops import fused_ops_for
from .params import SamplingParams
from .sampler import check_path, sample


class SGLangAscendSubject:
    """SGLang's Ascend sampler on one dispatch ``path`` (legacy, flag, flag-recompute)."""

    path = "flag"

    def __init__(self, path: str = "") -> None:
        self.name = check_path(path or self.path)
        self._ctx: Any = None
        self._ops: Any = None

    def build(self, requests: Sequence[Any], ctx: SubjectContext) -> SamplingBatchInfo:
        self._ctx = ctx
        self._ops = fused_ops_for(ctx.device)  # the real torch_npu on an NPU, else the stand-in
        reqs = [SamplingRequest(rid=r.id, params=SamplingParams(
            temperature=r.temperature, top_p=r.top_p, top_k=r.top_k, min_p=r.min_p,
            seed=r.seed)) for r in requests]
        return SamplingBatchInfo.build(reqs, ctx.device, deterministic=ctx.deterministic)

    def join(self, state: SamplingBatchInfo, requests: Sequence[Any]) -> SamplingBatchInfo:
        state.merge(self.build(requests, self._ctx))
        return state

    def finish(self, state: SamplingBatchInfo, keep: Sequence[int]) -> SamplingBatchInfo:
        state.filter(list(keep), recompute_flags=self.name == "flag-recompute")
        return state

    def sample(self, state: SamplingBatchInfo, logits: Any, positions: Any) -> Sampled:
        res = sample(logits, state, self.name, positions, torch_npu=self._ops)
        return Sampled(res.ids, {"branch": res.branch,
                                 "eligible": bool(state.npu_top_k_top_p_eligible)})


class LegacySubject(SGLangAscendSubject):
    path = "legacy"


class FlagSubject(SGLangAscendSubject):
    path = "flag"


class FlagRecomputeSubject(SGLangAscendSubject):
    path = "flag-recompute"
