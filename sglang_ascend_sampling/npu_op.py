"""The fused operator the case study samples with, ``torch_npu.npu_top_k_top_p``
(aclnnApplyTopKTopP), for machines without an Ascend NPU: implemented from its documented
semantics with plain torch ops, so it runs on CPU tensors and on syncguard's simulated device
alike without any host read. It checks what the aclnn kernel checks (null, dtype, shape,
format) and nothing more: values the real kernel leaves undefined (k outside [1, 1024] or
above the vocabulary, p outside [0, 1]) get an :class:`UndefinedResultWarning` naming the
value, never an error.

Importing this module provides the operator to syncguard's ``torch_npu`` stand-in
(:func:`syncguard.standin.provide`); the real ``torch_npu`` has its own.
``top_k_top_p_reference`` is the same computation without the contract checks.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional, Tuple

import torch

from syncguard.standin import provide

#: The operator's documented bound on k.
TOP_K_MAX = 1024
_LOGITS_DTYPES: Tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)


class TopKTopPContractError(RuntimeError, ValueError):
    """Inputs aclnnApplyTopKTopP refuses: null, dtype, shape or format (a RuntimeError on the
    device, so both apply)."""


class UndefinedResultWarning(UserWarning):
    """A value the real kernel does not check and whose result it leaves undefined."""


def _threshold(p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``1 - p`` per row, computed in the logits' dtype as op-plugin's CPU reference does
    (fp16, p = 0.3: 0.69995, where float32 gives 0.70000), compared in float32."""
    return (1 - p.to(dtype)).float().unsqueeze(-1)


def top_k_top_p_reference(logits: torch.Tensor, p: Optional[torch.Tensor] = None,
                          k: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The semantics of ``torch_npu.npu_top_k_top_p(logits, p, k)``, without contract checks.

    Per row: stable ascending sort; keep the values >= the k-th largest (ties with it are
    kept), the others become -inf; softmax of the kept values (in float32); cumulative sum
    from the smallest; remove the positions whose cumulative sum is <= 1 - p (``1 - p`` in the
    logits' dtype), always keeping the largest; scatter back to vocabulary order. Same shape
    and dtype as ``logits``, removed entries -inf. ``p`` None: no top-p; ``k`` None: no top-k;
    ``k`` is clamped into [1, vocab]. Only device-side ops: no host read.
    """
    vocab = logits.size(-1)
    if k is None:
        k = torch.full((logits.size(0),), vocab, dtype=torch.int32, device=logits.device)
    if p is None:
        p = torch.ones(logits.size(0), dtype=logits.dtype, device=logits.device)
    if vocab > _FAST_VOCAB:
        fast = _top_k_top_p_topk(logits, p, k)
        if fast is not None:
            return fast
    sorted_vals, sorted_idx = torch.sort(logits, dim=-1, descending=False, stable=True)
    kk = k.to(torch.long).clamp(1, vocab)
    kth = sorted_vals.gather(-1, (vocab - kk).unsqueeze(-1))
    sorted_vals = _filter_sorted(sorted_vals, kth, p, logits.dtype)
    return torch.empty_like(logits).scatter_(-1, sorted_idx, sorted_vals)


def _filter_sorted(sorted_vals: torch.Tensor, kth: torch.Tensor, p: torch.Tensor,
                   dtype: torch.dtype) -> torch.Tensor:
    """Top-k then top-p on rows sorted ascending: below the k-th largest value ``kth`` is
    -inf; of the kept values' softmax (float32), the positions whose cumulative sum from the
    smallest is <= ``1 - p`` become -inf too, the largest always kept."""
    width = sorted_vals.size(-1)
    sorted_vals = sorted_vals.masked_fill(sorted_vals < kth, float("-inf"))
    probs = torch.softmax(sorted_vals.float(), dim=-1)
    cum = torch.cumsum(probs, dim=-1)
    remove = cum <= _threshold(p, dtype)
    not_last = torch.arange(width, device=sorted_vals.device) < width - 1
    return sorted_vals.masked_fill(remove & not_last, float("-inf"))


#: Above this vocabulary the stand-in works on the top TOP_K_MAX values only (k <= 1024 by
#: contract): a full sort of 151936 logits per row costs more than the whole sampling step
#: of a real NPU. Exact: when a row's k-th largest value ties with the smallest candidate
#: (equal values may lie beyond the candidates, e.g. a flat bf16 row), the full sort is used.
_FAST_VOCAB = 4096


def _top_k_top_p_topk(logits: torch.Tensor, p: torch.Tensor, k: torch.Tensor
                      ) -> Optional[torch.Tensor]:
    """The operator on the top ``TOP_K_MAX`` candidates; None when that cannot be exact
    (also when some k is above ``TOP_K_MAX``: undefined on the device, full sort here)."""
    vocab = logits.size(-1)
    width = min(TOP_K_MAX, vocab)
    if width < vocab and bool(_host(k).gt(width).any()):  # syncguard: allow[simulator]
        return None
    _, top_idx = torch.topk(logits, width, dim=-1, sorted=False)
    # Stable ascending order among the candidates, as the operator's stable sort gives.
    top_idx, _ = torch.sort(top_idx, dim=-1)
    cand = logits.gather(-1, top_idx)
    sorted_vals, order = torch.sort(cand, dim=-1, descending=False, stable=True)
    sorted_idx = top_idx.gather(-1, order)
    kk = k.to(torch.long).clamp(1, width)
    kth = sorted_vals.gather(-1, (width - kk).unsqueeze(-1))
    # The simulator's own decision, on the values in host memory (not a device read).
    top = _host(sorted_vals[..., :1])
    if width < vocab and bool(_host(kth).eq(top).any()):  # syncguard: allow[simulator]
        return None
    sorted_vals = _filter_sorted(sorted_vals, kth, p, logits.dtype)
    out = torch.full_like(logits, float("-inf"))
    return out.scatter_(-1, sorted_idx, sorted_vals)


def _host(t: torch.Tensor) -> torch.Tensor:
    """Values of ``t`` on the host for validation, without counting a device read."""
    from syncguard.sim.kernel import SimTensor

    if isinstance(t, SimTensor):
        return t._v
    if t.device.type == "cpu":
        return t
    from syncguard.sim import kernel_reads

    with kernel_reads():
        return t.detach().cpu()  # syncguard: allow[simulator]


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def _check_contract(logits: Any, p: Any, k: Any) -> None:
    """What aclnnApplyTopKTopP checks (null, dtype, shape, format): a
    :class:`TopKTopPContractError`. Values it does not check: an :class:`UndefinedResultWarning`
    naming the first such value."""
    name = "npu_top_k_top_p"
    for arg, val in (("logits", logits), ("p", p), ("k", k)):
        if not isinstance(val, torch.Tensor) and not (arg != "logits" and val is None):
            raise TopKTopPContractError(f"{name}: {arg} must be a tensor, got {type(val).__name__}")
    if logits.dim() != 2:
        raise TopKTopPContractError(
            f"{name}: logits must be 2-D [batch, vocab], got shape {_shape(logits)} "
            f"({logits.dim()}-D)"
        )
    if logits.dtype not in _LOGITS_DTYPES:
        raise TopKTopPContractError(
            f"{name}: logits dtype {logits.dtype} is not supported "
            f"(bfloat16, float16 or float32)"
        )
    bs, vocab = logits.shape
    if p is not None:
        if p.dim() != 1 or p.size(0) != bs:
            raise TopKTopPContractError(
                f"{name}: p must be 1-D of size batch={bs}, got shape {_shape(p)}")
        if p.dtype != logits.dtype:
            raise TopKTopPContractError(
                f"{name}: p dtype {p.dtype} must equal the logits dtype {logits.dtype} "
                f"(aclnnApplyTopKTopP fails with ACL error 161002)")
    if k is not None:
        if k.dim() != 1 or k.size(0) != bs:
            raise TopKTopPContractError(
                f"{name}: k must be 1-D of size batch={bs}, got shape {_shape(k)}")
        if k.dtype != torch.int32:
            raise TopKTopPContractError(f"{name}: k must be int32, got {k.dtype}")
    for arg, val in (("p", p), ("k", k)):
        if val is not None and val.device != logits.device:
            raise TopKTopPContractError(
                f"{name}: logits and {arg} must be on one device, got logits on "
                f"{logits.device}, {arg} on {val.device}")
    # Value checks read the data: on the host values, never counted as a device read.
    undefined = "the real kernel does not check values; its result is undefined"
    from syncguard.sim import kernel_reads

    with kernel_reads():
        kv = _host(k).tolist() if k is not None else []  # syncguard: allow[simulator]
        pv = _host(p).float().tolist() if p is not None else []  # syncguard: allow[simulator]
    for i, kval in enumerate(kv):
        if not 1 <= kval <= min(TOP_K_MAX, vocab):
            warnings.warn(f"{name}: k[{i}]={kval} is outside [1, min({TOP_K_MAX}, vocab="
                          f"{vocab})]: {undefined} (the stand-in clamps k into [1, vocab])",
                          UndefinedResultWarning, stacklevel=3)
            break
    for i, pval in enumerate(pv):
        if not 0.0 <= pval <= 1.0:  # also catches NaN
            warnings.warn(f"{name}: p[{i}]={pval} is outside [0, 1]: {undefined}",
                          UndefinedResultWarning, stacklevel=3)
            break


def npu_top_k_top_p(logits: torch.Tensor, p: Optional[torch.Tensor] = None,
                    k: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Stand-in for ``torch_npu.npu_top_k_top_p(logits, p=None, k=None)``
    (aclnnApplyTopKTopP; schema ``(Tensor logits, Tensor? p=None, Tensor? k=None)``).

    Refused with :class:`TopKTopPContractError`, as the kernel refuses it: logits not 2-D
    bfloat16/float16/float32; p not 1-D of size batch with the logits dtype; k not 1-D int32
    of size batch; tensors on different devices. ``p``/``k`` None: that filter is off. Values
    the kernel does not check (k outside [1, min(1024, vocab)], p outside [0, 1]) give an
    :class:`UndefinedResultWarning`; the host copies read for it are never reported as syncs.
    Returns logits in vocabulary order with the removed tokens set to -inf.
    """
    _check_contract(logits, p, k)
    return top_k_top_p_reference(logits, p, k)


provide("npu_top_k_top_p", npu_top_k_top_p)
