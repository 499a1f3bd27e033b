"""Batch sampling metadata (SGLang's ``SamplingBatchInfo``), re-implemented.

Device tensors, one row per request, plus host flags computed from the request parameters
when the batch is built. The host flag ``npu_top_k_top_p_eligible`` is the fix of
"[NPU] Avoid device synchronization in Ascend sampling": the sampler reads it instead of
reducing ``top_ks`` on the device every step.

Tensors go to the device the way the newest upstream does it: Python lists are written into
pinned host staging buffers and copied with ``non_blocking=True`` (no host wait). Where pinned
memory is not available the copy falls back to pageable memory, and :attr:`build_mode` says so.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Union

import torch

from sglang_ascend_sampling.params import NPU_TOP_K_MAX, TOP_K_ALL, SamplingParams
from syncguard.driving.staging import BUILD_HOST, HostStager

#: A merged batch whose parts were staged differently.
BUILD_MIXED = "mixed"

#: Seed used under deterministic inference when a request sets none.
DEFAULT_SEED = 42

DeviceLike = Union[str, torch.device]


@dataclasses.dataclass(frozen=True)
class SamplingRequest:
    """One request of a batch: its id (for reports) and its normalised parameters."""

    rid: str
    params: SamplingParams


RequestLike = Union[SamplingRequest, SamplingParams]


def _as_request(item: RequestLike, index: int) -> SamplingRequest:
    if isinstance(item, SamplingRequest):
        return item
    if isinstance(item, SamplingParams):
        return SamplingRequest(rid=f"req-{index}", params=item)
    raise TypeError(
        f"requests must hold SamplingRequest or SamplingParams, got {type(item).__name__}"
    )


def compute_flags(params: Sequence[SamplingParams]) -> Dict[str, bool]:
    """The host flags of a batch, from request parameters only (no device data)."""
    top_ks = [p.top_k_int for p in params]
    return {
        "is_all_greedy": all(k <= 1 for k in top_ks),
        "need_top_p_sampling": any(p.top_p != 1.0 for p in params),
        "need_top_k_sampling": any(k != TOP_K_ALL for k in top_ks),
        "need_min_p_sampling": any(p.min_p > 0.0 for p in params),
        "npu_top_k_top_p_eligible": all(1 <= k <= NPU_TOP_K_MAX for k in top_ks),
    }


@dataclasses.dataclass(eq=False, repr=False)
class SamplingBatchInfo:
    """Sampling metadata of a running batch.

    Device tensors: ``temperatures`` [bs, 1] float32, ``top_ps`` [bs] float32, ``top_ks`` [bs]
    int32, ``min_ps`` [bs] float32, ``sampling_seed`` [bs] int64 (only when deterministic).
    Host bools: ``is_all_greedy``, ``need_top_p_sampling``, ``need_top_k_sampling``,
    ``need_min_p_sampling``, ``npu_top_k_top_p_eligible``. ``requests`` keeps each row's id and
    host parameters. ``build_mode`` says how the tensors reached the device; ``filter_mode``
    how the last filter's index tensor did (``None`` before any filter).
    """

    temperatures: torch.Tensor
    top_ps: torch.Tensor
    top_ks: torch.Tensor
    min_ps: torch.Tensor
    sampling_seed: Optional[torch.Tensor]
    is_all_greedy: bool
    need_top_p_sampling: bool
    need_top_k_sampling: bool
    need_min_p_sampling: bool
    npu_top_k_top_p_eligible: bool
    requests: List[SamplingRequest]
    device: torch.device
    deterministic: bool = False
    build_mode: str = BUILD_HOST
    pin_fallback_reason: Optional[str] = None
    filter_mode: Optional[str] = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        requests: Sequence[RequestLike],
        device: DeviceLike,
        deterministic: bool = False,
    ) -> SamplingBatchInfo:
        """Build the batch metadata from request parameters (host lists -> device tensors).

        ``requests`` holds :class:`SamplingRequest` or bare :class:`SamplingParams` (given ids
        ``req-<index>``). Seeds are made only when ``deterministic``: the request's seed or 42.
        """
        reqs = [_as_request(item, i) for i, item in enumerate(requests)]
        params = [r.params for r in reqs]
        bs = len(params)
        stager = HostStager(device)
        temperatures = stager.stage([p.temperature for p in params], torch.float32, (bs, 1))
        top_ps = stager.stage([p.top_p for p in params], torch.float32)
        top_ks = stager.stage([p.top_k_int for p in params], torch.int32)
        min_ps = stager.stage([p.min_p for p in params], torch.float32)
        sampling_seed: Optional[torch.Tensor] = None
        if deterministic:
            seeds = [DEFAULT_SEED if p.seed is None else p.seed for p in params]
            sampling_seed = stager.stage(seeds, torch.int64)
        flags = compute_flags(params)
        return cls(
            temperatures=temperatures,
            top_ps=top_ps,
            top_ks=top_ks,
            min_ps=min_ps,
            sampling_seed=sampling_seed,
            requests=reqs,
            device=stager.device,
            deterministic=deterministic,
            build_mode=stager.mode or BUILD_HOST,
            pin_fallback_reason=stager.fallback_reason,
            **flags,  # type: ignore[arg-type]  # the five host bools, by name
        )

    # ------------------------------------------------------------------ views
    @property
    def batch_size(self) -> int:
        return len(self.requests)

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def rids(self) -> List[str]:
        return [r.rid for r in self.requests]

    @property
    def params(self) -> List[SamplingParams]:
        return [r.params for r in self.requests]

    def flags(self) -> Dict[str, bool]:
        """The current host flags (as stored, not recomputed)."""
        return {
            "is_all_greedy": self.is_all_greedy,
            "need_top_p_sampling": self.need_top_p_sampling,
            "need_top_k_sampling": self.need_top_k_sampling,
            "need_min_p_sampling": self.need_min_p_sampling,
            "npu_top_k_top_p_eligible": self.npu_top_k_top_p_eligible,
        }

    def _set_flags(self, flags: Dict[str, bool]) -> None:
        self.is_all_greedy = flags["is_all_greedy"]
        self.need_top_p_sampling = flags["need_top_p_sampling"]
        self.need_top_k_sampling = flags["need_top_k_sampling"]
        self.need_min_p_sampling = flags["need_min_p_sampling"]
        self.npu_top_k_top_p_eligible = flags["npu_top_k_top_p_eligible"]

    def __repr__(self) -> str:
        # Never print tensor values: printing a device tensor reads it back (a D2H copy).
        flags = ", ".join(f"{k}={v}" for k, v in self.flags().items())
        return (
            f"SamplingBatchInfo(bs={self.batch_size}, device={self.device}, "
            f"build_mode={self.build_mode!r}, deterministic={self.deterministic}, {flags})"
        )

    # ------------------------------------------------------------------ lifecycle
    def merge(self, other: SamplingBatchInfo) -> SamplingBatchInfo:
        """Append ``other``'s rows in place (a new batch joins); returns ``self``.

        Tensors are concatenated on the device; ``is_all_greedy`` and
        ``npu_top_k_top_p_eligible`` are ANDed, every ``need_*`` is ORed.
        """
        if other.device != self.device:
            raise ValueError(
                f"cannot merge batches on different devices: {self.device} and {other.device}"
            )
        seeds = self._merge_seeds(other)
        self.temperatures = torch.cat([self.temperatures, other.temperatures], dim=0)
        self.top_ps = torch.cat([self.top_ps, other.top_ps], dim=0)
        self.top_ks = torch.cat([self.top_ks, other.top_ks], dim=0)
        self.min_ps = torch.cat([self.min_ps, other.min_ps], dim=0)
        self.sampling_seed = seeds
        self.deterministic = self.sampling_seed is not None
        self.is_all_greedy = self.is_all_greedy and other.is_all_greedy
        self.npu_top_k_top_p_eligible = (
            self.npu_top_k_top_p_eligible and other.npu_top_k_top_p_eligible
        )
        self.need_top_p_sampling = self.need_top_p_sampling or other.need_top_p_sampling
        self.need_top_k_sampling = self.need_top_k_sampling or other.need_top_k_sampling
        self.need_min_p_sampling = self.need_min_p_sampling or other.need_min_p_sampling
        self.requests = self.requests + other.requests
        if other.build_mode != self.build_mode:
            self.build_mode = BUILD_MIXED
        self.pin_fallback_reason = self.pin_fallback_reason or other.pin_fallback_reason
        return self

    def _merge_seeds(self, other: SamplingBatchInfo) -> Optional[torch.Tensor]:
        mine, theirs = self.sampling_seed, other.sampling_seed
        if mine is not None and theirs is not None:
            return torch.cat([mine, theirs], dim=0)
        if mine is None and theirs is None:
            return None
        # One side is deterministic, the other not: allowed only when that side is empty.
        if mine is None and self.batch_size == 0:
            return theirs
        if theirs is None and other.batch_size == 0:
            return mine
        raise ValueError(
            "cannot merge a deterministic batch (with sampling_seed) with a non-deterministic one"
        )

    def filter(
        self, keep_indices: Sequence[int], recompute_flags: bool = False
    ) -> SamplingBatchInfo:
        """Keep the rows ``keep_indices`` (finished requests leave), in place; returns ``self``.

        Rows are gathered with a device index tensor staged like :meth:`build` (pinned,
        non-blocking). Upstream recomputes no host flag here, so an ineligible request that
        has left keeps ``npu_top_k_top_p_eligible`` False. ``recompute_flags=True`` (used only
        by the "flag-recompute" path) recomputes every host flag from the remaining requests'
        host parameters, which promotes the batch back to the fused branch.
        """
        keep = [int(i) for i in keep_indices]
        bs = self.batch_size
        for i in keep:
            if not 0 <= i < bs:
                raise IndexError(f"filter index {i} out of range for a batch of {bs}")
        stager = HostStager(self.device)
        index = stager.stage(keep, torch.int64)
        self.filter_mode = stager.mode
        self.temperatures = torch.index_select(self.temperatures, 0, index)
        self.top_ps = torch.index_select(self.top_ps, 0, index)
        self.top_ks = torch.index_select(self.top_ks, 0, index)
        self.min_ps = torch.index_select(self.min_ps, 0, index)
        if self.sampling_seed is not None:
            self.sampling_seed = torch.index_select(self.sampling_seed, 0, index)
        self.requests = [self.requests[i] for i in keep]
        if recompute_flags:
            self._set_flags(compute_flags(self.params))
        return self
