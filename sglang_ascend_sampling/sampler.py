"""SGLang's Ascend sampling before and after "[NPU] Avoid device synchronization in Ascend
sampling", re-implemented from a behaviour description.

Three paths pick the branch of :func:`top_k_top_p_min_p_sampling_from_logits_ascend`:

- ``"legacy"``: ``hasattr(torch_npu, "npu_top_k_top_p") and torch.all(...)`` on the device
  ``top_ks``. Python's ``and`` calls ``Tensor.__bool__`` on the 0-d device result: one hidden
  host read per decode step. This is the sync syncguard measures; it is kept literally.
- ``"flag"``: the host bool ``npu_top_k_top_p_eligible`` from the batch metadata (the fix).
- ``"flag-recompute"``: same guard as ``"flag"``; the runner filters batches with
  ``recompute_flags=True`` so the flag can come back after an ineligible request leaves.

Everything else is device work: no ``.item()``, ``bool()``, ``.tolist()`` or ``.cpu()`` on
device data, no boolean-mask indexing. Token ids stay on the device; reading them back is the
caller's job (the one intended sync per step).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Tuple

import torch

from sglang_ascend_sampling.batch import SamplingBatchInfo
from sglang_ascend_sampling.ops import RESOLVE, resolve_torch_npu
from sglang_ascend_sampling.params import NPU_TOP_K_MAX, TOP_K_ALL

#: The dispatch paths, in the order reports list them.
PATHS: Tuple[str, ...] = ("legacy", "flag", "flag-recompute")

BRANCH_GREEDY = "greedy"
BRANCH_SIMPLE = "simple"
BRANCH_FUSED = "fused"
BRANCH_GENERIC = "generic"
#: Every branch a :class:`SampleResult` can report.
BRANCHES: Tuple[str, ...] = (BRANCH_GREEDY, BRANCH_SIMPLE, BRANCH_FUSED, BRANCH_GENERIC)


def check_path(path: str) -> str:
    """Return ``path`` if it is one of :data:`PATHS`, else raise ValueError naming them."""
    if path not in PATHS:
        valid = ", ".join(repr(p) for p in PATHS)
        raise ValueError(f"unknown sampling path {path!r}; valid paths: {valid}")
    return path


# ---------------------------------------------------------------------- seeded sampling
_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_N = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35
#: Byte length of the hashed key (four 32-bit blocks), mixed in before the finaliser.
_KEY_BYTES = 16
_U_DENOMINATOR = float(2**32 - 1)
#: Upper clamp of log(u): keeps -log(-log(u)) finite when u == 1.
_LOG_U_MAX = -(2.0**-32)
#: Lower clamp of u: keeps log(u) finite when the hash is 0.
_U_MIN = torch.finfo(torch.float64).tiny


def _rotl32_py(x: int, r: int) -> int:
    x &= _MASK32
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur3_block_hash(seed: int, position: int, column: int) -> int:
    """Pure-Python reference of the per-(seed, position, column) hash (a 32-bit int).

    MurmurHash3-x86-32 style over the blocks (seed low 32 bits, seed high 32 bits, position,
    column), starting from h = 0, finalised with ``h ^= 16`` and fmix32.
    """
    h = 0
    for block in (seed & _MASK32, (seed >> 32) & _MASK32, position & _MASK32, column & _MASK32):
        k = (block * _C1) & _MASK32
        k = _rotl32_py(k, 15)
        k = (k * _C2) & _MASK32
        h ^= k
        h = _rotl32_py(h, 13)
        h = (h * 5 + _N) & _MASK32
    h ^= _KEY_BYTES
    h ^= h >> 16
    h = (h * _F1) & _MASK32
    h ^= h >> 13
    h = (h * _F2) & _MASK32
    h ^= h >> 16
    return h


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for int64 ``x`` in [0, 2**32) without int64 overflow.

    ``c`` is split into 16-bit halves so every intermediate stays below 2**49.
    """
    lo = c & 0xFFFF
    hi = c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _MASK32


def _rotl32(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _scramble(k: torch.Tensor) -> torch.Tensor:
    return _mul32(_rotl32(_mul32(k, _C1), 15), _C2)


def _mix(h: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    h = _rotl32(h ^ _scramble(k), 13)
    return (h * 5 + _N) & _MASK32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, _F1)
    h = h ^ (h >> 13)
    h = _mul32(h, _F2)
    return h ^ (h >> 16)


def murmur3_hash_grid(
    seeds: torch.Tensor, positions: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """The hash for every (row, column): int64 [bs, vocab_size] with values in [0, 2**32)."""
    seeds = seeds.to(torch.int64)
    positions = positions.to(torch.int64)
    h = torch.zeros_like(seeds)
    h = _mix(h, seeds & _MASK32)
    h = _mix(h, (seeds >> 32) & _MASK32)
    h = _mix(h, positions & _MASK32)
    columns = torch.arange(vocab_size, dtype=torch.int64, device=seeds.device)
    h = h.view(-1, 1) ^ _scramble(columns).view(1, -1)
    h = (_rotl32(h, 13) * 5 + _N) & _MASK32
    return _fmix32(h ^ _KEY_BYTES)


def multinomial_with_seed(
    logprobs: torch.Tensor, seeds: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """Gumbel-max sampling with per-(seed, position, column) noise: int64 token ids [bs].

    ``logprobs`` [bs, V] (float64 recommended; -inf for removed tokens), ``seeds`` [bs] int64,
    ``positions`` [bs] int64. The token of a row depends only on that row's logprobs, seed and
    position, not on the rest of the batch. Elementwise device work, no host read.
    """
    vocab_size = logprobs.shape[-1]
    h = murmur3_hash_grid(seeds, positions, vocab_size)
    u = (h.to(torch.float64) / _U_DENOMINATOR).clamp_(min=_U_MIN)
    log_u = torch.log(u).clamp_(max=_LOG_U_MAX)
    gumbel = -torch.log(-log_u)
    return torch.argmax(logprobs.to(torch.float64) + gumbel, dim=-1)


# ---------------------------------------------------------------------- Ascend sampling
def _check_host_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be a host bool, got {type(value).__name__}"
            " (a device tensor here would be read back every step)"
        )
    return value


def _sample_from_probs(
    probs: torch.Tensor,
    sampling_seed: Optional[torch.Tensor],
    positions: Optional[torch.Tensor],
) -> torch.Tensor:
    """Row indices [bs] int64 drawn from unnormalised weights ``probs`` [bs, V]."""
    if sampling_seed is None:
        return torch.multinomial(probs, num_samples=1).view(-1)
    if positions is None:
        raise ValueError("positions are required when sampling_seed is given")
    # float64 on the device, as upstream SGLang writes it (the case study measures that code,
    # so it keeps its dtype). On a 910B float64 may fall to the AI CPU or be refused: not yet
    # verified on hardware; scripts/device_check.sh's 910B section runs the seeded scenario
    # on the NPU to answer it (and whether the counts stay the same).
    logprobs = probs.to(torch.float64).log_()
    return multinomial_with_seed(logprobs, sampling_seed, positions)


def top_k_top_p_min_p_sampling_from_logits_ascend_with_branch(
    logits: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    need_min_p_sampling: bool,
    sampling_seed: Optional[torch.Tensor],
    positions: Optional[torch.Tensor],
    *,
    npu_top_k_top_p_eligible: bool = False,
    path: str = "flag",
    torch_npu: Any = RESOLVE,
    fix_min_p: bool = True,
) -> Tuple[torch.Tensor, str]:
    """Top-k / top-p / min-p sampling as on Ascend; returns ``(ids int32 [bs], branch)``.

    ``branch`` is ``"fused"`` (``torch_npu.npu_top_k_top_p``) or ``"generic"`` (sort-based).
    The guard depends on ``path`` (see the module docstring). ``torch_npu`` is the namespace
    holding the fused operator: by default :func:`resolve_torch_npu`; ``None`` or any object
    without ``npu_top_k_top_p`` forces the generic branch. ``fix_min_p=False`` reproduces the
    upstream defect on the fused branch (``probs.max(dim=-1) * min_ps`` raises TypeError).

    The generic branch rewrites ``TOP_K_ALL`` to the vocabulary size in place in the caller's
    ``top_ks``, as upstream does; the rewrite persists for later steps.
    """
    check_path(path)
    need_min_p = _check_host_bool("need_min_p_sampling", need_min_p_sampling)
    eligible = _check_host_bool("npu_top_k_top_p_eligible", npu_top_k_top_p_eligible)
    if torch_npu is RESOLVE:
        torch_npu = resolve_torch_npu()

    if path == "legacy":
        # The pre-fix guard, kept literally: the ``if`` calls ``Tensor.__bool__`` on the 0-d
        # device result of ``torch.all``, a host read every step (skipped when the operator is
        # missing: ``and`` short-circuits).
        if hasattr(torch_npu, "npu_top_k_top_p") and torch.all(
            (top_ks <= NPU_TOP_K_MAX) & (top_ks >= 1)
        ):
            return _fused_branch(
                logits, top_ks, top_ps, min_ps, need_min_p, sampling_seed, positions,
                torch_npu=torch_npu, fix_min_p=fix_min_p,
            ), BRANCH_FUSED
    elif hasattr(torch_npu, "npu_top_k_top_p") and eligible:
        # The fix: a host bool computed from request parameters when the batch was built.
        return _fused_branch(
            logits, top_ks, top_ps, min_ps, need_min_p, sampling_seed, positions,
            torch_npu=torch_npu, fix_min_p=fix_min_p,
        ), BRANCH_FUSED
    return _generic_branch(
        logits, top_ks, top_ps, min_ps, need_min_p, sampling_seed, positions
    ), BRANCH_GENERIC


def _fused_branch(
    logits: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    need_min_p: bool,
    sampling_seed: Optional[torch.Tensor],
    positions: Optional[torch.Tensor],
    *,
    torch_npu: Any,
    fix_min_p: bool,
) -> torch.Tensor:
    # The operator wants p in the logits dtype (ACL error 161002 otherwise); a device cast.
    p = top_ps if top_ps.dtype == logits.dtype else top_ps.to(logits.dtype)
    filtered = torch_npu.npu_top_k_top_p(logits, p, top_ks)  # positional: (logits, p, k)
    probs = torch.softmax(filtered, dim=-1)
    if need_min_p:
        if fix_min_p:
            min_p_thresholds = probs.max(dim=-1).values * min_ps
        else:
            # Upstream's line: max(dim=) returns (values, indices), so this raises TypeError.
            min_p_thresholds = probs.max(dim=-1) * min_ps  # type: ignore[operator,assignment]
        probs.masked_fill_(probs < min_p_thresholds.view(-1, 1), 0.0)
    return _sample_from_probs(probs, sampling_seed, positions).to(torch.int32)


def _generic_branch(
    logits: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    need_min_p: bool,
    sampling_seed: Optional[torch.Tensor],
    positions: Optional[torch.Tensor],
) -> torch.Tensor:
    probs = torch.softmax(logits, dim=-1)
    probs_sort, probs_idx = probs.sort(dim=-1, descending=True)
    vocab_size = logits.shape[-1]
    # In place on the caller's tensor: the rewrite persists in the batch metadata.
    top_ks.masked_fill_(top_ks == TOP_K_ALL, vocab_size)
    ranks = torch.arange(vocab_size, device=logits.device).view(1, -1)
    probs_sort.masked_fill_(ranks >= top_ks.view(-1, 1), 0.0)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    # Exclusive prefix sum above top_p: removed; the top token's prefix is 0, so it stays.
    probs_sort.masked_fill_((probs_sum - probs_sort) > top_ps.view(-1, 1), 0.0)
    if need_min_p:
        min_p_thresholds = probs_sort[:, 0] * min_ps
        probs_sort.masked_fill_(probs_sort < min_p_thresholds.view(-1, 1), 0.0)
    # No renormalisation: multinomial takes weights and Gumbel-max is shift-invariant.
    sampled = _sample_from_probs(probs_sort, sampling_seed, positions)
    return torch.gather(probs_idx, 1, sampled.view(-1, 1)).view(-1).to(torch.int32)


def top_k_top_p_min_p_sampling_from_logits_ascend(
    logits: torch.Tensor,
    top_ks: torch.Tensor,
    top_ps: torch.Tensor,
    min_ps: torch.Tensor,
    need_min_p_sampling: bool,
    sampling_seed: Optional[torch.Tensor],
    positions: Optional[torch.Tensor],
    *,
    npu_top_k_top_p_eligible: bool = False,
    path: str = "flag",
    torch_npu: Any = RESOLVE,
    fix_min_p: bool = True,
) -> torch.Tensor:
    """The upstream signature: token ids only (see the ``_with_branch`` variant)."""
    ids, _ = top_k_top_p_min_p_sampling_from_logits_ascend_with_branch(
        logits, top_ks, top_ps, min_ps, need_min_p_sampling, sampling_seed, positions,
        npu_top_k_top_p_eligible=npu_top_k_top_p_eligible, path=path,
        torch_npu=torch_npu, fix_min_p=fix_min_p,
    )
    return ids


# ---------------------------------------------------------------------- dispatch
@dataclasses.dataclass(frozen=True, eq=False)
class SampleResult:
    """Token ids of one decode step (int32 [bs], still on the device) and the branch taken."""

    ids: torch.Tensor
    branch: str

    def __repr__(self) -> str:
        # No tensor values: printing a device tensor would read it back.
        shape = tuple(self.ids.shape)
        return f"SampleResult(ids=<{shape} on {self.ids.device}>, branch={self.branch!r})"


def sample(
    logits: torch.Tensor,
    batch_info: SamplingBatchInfo,
    path: str = "flag",
    positions: Optional[torch.Tensor] = None,
    *,
    torch_npu: Any = RESOLVE,
    fix_min_p: bool = True,
) -> SampleResult:
    """One sampling step, dispatched as upstream's sampler does.

    1. ``is_all_greedy``: ``argmax`` (branch ``"greedy"``);
    2. otherwise ``logits`` are divided by the temperatures **in place**;
    3. no top-p/top-k/min-p needed: softmax + multinomial or the seeded sampler (``"simple"``);
    4. else the Ascend function (branch ``"fused"`` or ``"generic"``).

    ``positions`` [bs] int64 is required when the batch has ``sampling_seed``.
    """
    check_path(path)
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D [bs, vocab], got shape {tuple(logits.shape)}")
    if logits.shape[0] != batch_info.batch_size:
        raise ValueError(
            f"logits have {logits.shape[0]} rows but the batch has {batch_info.batch_size}"
        )
    if batch_info.is_all_greedy:
        return SampleResult(torch.argmax(logits, dim=-1).to(torch.int32), BRANCH_GREEDY)

    sampling_seed = batch_info.sampling_seed
    if sampling_seed is not None and positions is None:
        raise ValueError("positions are required for a deterministic batch (sampling_seed set)")
    logits.div_(batch_info.temperatures)
    if not (
        batch_info.need_top_p_sampling
        or batch_info.need_top_k_sampling
        or batch_info.need_min_p_sampling
    ):
        probs = torch.softmax(logits, dim=-1)
        ids = _sample_from_probs(probs, sampling_seed, positions)
        return SampleResult(ids.to(torch.int32), BRANCH_SIMPLE)

    ids, branch = top_k_top_p_min_p_sampling_from_logits_ascend_with_branch(
        logits,
        batch_info.top_ks,
        batch_info.top_ps,
        batch_info.min_ps,
        batch_info.need_min_p_sampling,
        sampling_seed,
        positions,
        npu_top_k_top_p_eligible=batch_info.npu_top_k_top_p_eligible,
        path=path,
        torch_npu=torch_npu,
        fix_min_p=fix_min_p,
    )
    return SampleResult(ids.to(torch.int32), branch)


class Sampler:
    """A sampling step bound to one path and operator namespace; counts branches taken."""

    def __init__(
        self, path: str = "flag", *, torch_npu: Any = RESOLVE, fix_min_p: bool = True
    ) -> None:
        self.path = check_path(path)
        self.torch_npu = torch_npu
        self.fix_min_p = fix_min_p
        self.branch_counts: Dict[str, int] = {b: 0 for b in BRANCHES}

    def __call__(
        self,
        logits: torch.Tensor,
        batch_info: SamplingBatchInfo,
        positions: Optional[torch.Tensor] = None,
    ) -> SampleResult:
        result = sample(
            logits, batch_info, self.path, positions,
            torch_npu=self.torch_npu, fix_min_p=self.fix_min_p,
        )
        self.branch_counts[result.branch] += 1
        return result

    def __repr__(self) -> str:
        return f"Sampler(path={self.path!r}, torch_npu={self.torch_npu!r})"
