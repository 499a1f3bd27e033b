"""SGLang's Ascend sampling before and after the sync fix, re-implemented for syncguard: the
case study, a plug-in of syncguard (it imports syncguard; syncguard never imports it).

- :mod:`~sglang_ascend_sampling.params`: :class:`SamplingParams` (normalised, validated).
- :mod:`~sglang_ascend_sampling.batch`: :class:`SamplingBatchInfo` (device tensors + host
  flags).
- :mod:`~sglang_ascend_sampling.ops`: :func:`resolve_torch_npu` (real ``torch_npu``, the
  stand-in, or ``None``) and :func:`fused_ops_for` (the namespace for logits on a device).
- :mod:`~sglang_ascend_sampling.sampler`: the Ascend sampling function, the seeded sampler and
  the per-step dispatch :func:`sample` / :class:`Sampler` with the paths in :data:`PATHS`.
- :mod:`~sglang_ascend_sampling.subject`: the paths as syncguard subjects (``legacy``,
  ``flag``, ``flag-recompute``), registered through the ``syncguard.subjects`` entry points.
- ``scenarios/``: the case study's scenario set (``*.toml``; ``_set.toml`` names its
  subjects), registered through the ``syncguard.scenarios`` entry points.
"""

from __future__ import annotations

from sglang_ascend_sampling.batch import (
    BUILD_MIXED,
    DEFAULT_SEED,
    SamplingBatchInfo,
    SamplingRequest,
    compute_flags,
)
from sglang_ascend_sampling.ops import RESOLVE, fused_ops_for, is_standin, resolve_torch_npu
from sglang_ascend_sampling.params import (
    NPU_TOP_K_MAX,
    TOP_K_ALL,
    SamplingParams,
    SamplingParamsError,
)
from sglang_ascend_sampling.sampler import (
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
from syncguard.driving.staging import BUILD_HOST, BUILD_PAGEABLE, BUILD_PINNED, HostStager

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
    "fused_ops_for",
    "is_standin",
    "multinomial_with_seed",
    "murmur3_block_hash",
    "murmur3_hash_grid",
    "resolve_torch_npu",
    "sample",
    "top_k_top_p_min_p_sampling_from_logits_ascend",
    "top_k_top_p_min_p_sampling_from_logits_ascend_with_branch",
]
