"""SGLang's Ascend sampling before and after the sync fix, re-implemented for syncguard.

- :mod:`~syncguard.sampling.params`: :class:`SamplingParams` (normalised, validated).
- :mod:`~syncguard.sampling.batch`: :class:`SamplingBatchInfo` (device tensors + host flags).
- :mod:`~syncguard.sampling.ops`: :func:`resolve_torch_npu` (real ``torch_npu``, the stand-in,
  or ``None``).
- :mod:`~syncguard.sampling.sampler`: the Ascend sampling function, the seeded sampler and the
  per-step dispatch :func:`sample` / :class:`Sampler` with the paths in :data:`PATHS`.
"""

from __future__ import annotations

from syncguard.sampling.batch import (
    BUILD_MIXED,
    DEFAULT_SEED,
    SamplingBatchInfo,
    SamplingRequest,
    compute_flags,
)
from syncguard.sampling.ops import RESOLVE, is_standin, resolve_torch_npu
from syncguard.sampling.params import (
    NPU_TOP_K_MAX,
    TOP_K_ALL,
    SamplingParams,
    SamplingParamsError,
)
from syncguard.sampling.sampler import (
    BRANCHES,
    PATHS,
    Sampler,
    SampleResult,
    check_path,
    multinomial_with_seed,
    murmur3_block_hash,
    murmur3_hash_grid,
    sample,
    top_k_top_p_min_p_sampling_from_logits_ascend,
    top_k_top_p_min_p_sampling_from_logits_ascend_with_branch,
)
from syncguard.staging import BUILD_HOST, BUILD_PAGEABLE, BUILD_PINNED, HostStager

__all__ = [
    "BRANCHES",
    "BUILD_HOST",
    "BUILD_MIXED",
    "BUILD_PAGEABLE",
    "BUILD_PINNED",
    "DEFAULT_SEED",
    "NPU_TOP_K_MAX",
    "PATHS",
    "RESOLVE",
    "TOP_K_ALL",
    "HostStager",
    "SampleResult",
    "Sampler",
    "SamplingBatchInfo",
    "SamplingParams",
    "SamplingParamsError",
    "SamplingRequest",
    "check_path",
    "compute_flags",
    "is_standin",
    "multinomial_with_seed",
    "murmur3_block_hash",
    "murmur3_hash_grid",
    "resolve_torch_npu",
    "sample",
    "top_k_top_p_min_p_sampling_from_logits_ascend",
    "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch",
]
