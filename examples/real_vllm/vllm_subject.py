"""syncguard subjects wrapping vLLM's top-k/top-p filter, imported unchanged from the released
``vllm`` package (``vllm.v1.sample.ops.topk_topp_sampler``), so syncguard's scripted scenarios
(joins, leaves, mixed sampling parameters) drive it:

    cd examples/real_vllm
    syncguard run min_p --device sim \
        --subject vllm_subject:VllmSubject --subject vllm_subject:VllmCpuPlatformSubject

The glue around vLLM's function plays the part of vLLM's sampler and input batch: per-request
top_k stored as int32, clamped to the vocabulary (vocabulary size = top-k disabled), top_p as
float32, ``k``/``p`` passed as ``None`` when no request in the batch uses them (decided on the
host from the request parameters, as vLLM's sampling metadata does), temperature applied
first, greedy rows (temperature 0) taken by argmax, and one exponential-race draw per row.
min_p is not applied (vLLM does that outside this module).

``VllmSubject`` calls vLLM's dispatcher ``apply_top_k_top_p`` (without Triton and off vLLM's
CPU platform: its sort-based PyTorch path). ``VllmCpuPlatformSubject`` calls
``apply_top_k_top_p_pytorch(..., allow_cpu_sync=True)``, what the dispatcher does on vLLM's
CPU platform: a top-k-only batch then goes through ``apply_top_k_only``.
"""

from __future__ import annotations

import torch
from vllm.v1.sample.ops.topk_topp_sampler import (
    apply_top_k_top_p,
    apply_top_k_top_p_pytorch,
)

import syncguard
from syncguard.driving.subjects import Sampled

SETUP = "batch bookkeeping: request parameters copied to the device when the batch changes"
_EPS = 1e-5  # below this temperature a request is greedy (vLLM's _SAMPLING_EPS)
_NO_TOP_K = 1 << 30  # clamped to the vocabulary at sampling time


class _Batch:
    """Host copies of the requests' parameters and their device tensors."""

    def __init__(self, requests: list, device: torch.device) -> None:
        self.requests = requests
        self.use_k = any(r.top_k > 0 for r in requests)
        self.use_p = any(r.top_p < 1.0 for r in requests)
        self.greedy_rows = [r.temperature < _EPS for r in requests]
        with syncguard.allow(SETUP):
            self.k = torch.tensor([r.top_k if r.top_k > 0 else _NO_TOP_K for r in requests],
                                  dtype=torch.int32, device=device)
            self.p = torch.tensor([r.top_p for r in requests], dtype=torch.float32,
                                  device=device)
            self.temperature = torch.tensor(
                [r.temperature if r.temperature >= _EPS else 1.0 for r in requests],
                dtype=torch.float32, device=device)
            self.greedy = torch.tensor(self.greedy_rows, dtype=torch.bool, device=device)


class VllmSubject:
    """vLLM's ``apply_top_k_top_p`` dispatcher (sort-based path here: no Triton)."""

    name = "vllm"
    allow_cpu_sync = False

    def build(self, requests, ctx):
        self.device = ctx.device
        return _Batch(list(requests), ctx.device)

    def join(self, state, requests):
        return _Batch(state.requests + list(requests), self.device)

    def finish(self, state, keep):
        return _Batch([state.requests[i] for i in keep], self.device)

    def sample(self, state, logits, positions):
        if all(state.greedy_rows):
            return Sampled(logits.argmax(dim=-1), {"branch": "greedy"})
        k = state.k.clamp(max=logits.shape[-1]) if state.use_k else None
        p = state.p if state.use_p else None
        scaled = logits / state.temperature.unsqueeze(1)
        if self.allow_cpu_sync:
            filtered = apply_top_k_top_p_pytorch(scaled, k, p, allow_cpu_sync=True)
        else:
            filtered = apply_top_k_top_p(scaled, k, p)
        probs = filtered.softmax(dim=-1, dtype=torch.float32)
        ids = probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)
        if any(state.greedy_rows):
            ids = torch.where(state.greedy, logits.argmax(dim=-1), ids)
        return Sampled(ids, {"branch": _branch(k is not None, p is not None,
                                               self.allow_cpu_sync)})


class VllmCpuPlatformSubject(VllmSubject):
    """``apply_top_k_top_p_pytorch(..., allow_cpu_sync=True)``: vLLM's CPU-platform route."""

    name = "vllm-cpu-platform"
    allow_cpu_sync = True


def _branch(use_k: bool, use_p: bool, allow_cpu_sync: bool) -> str:
    """Which of vLLM's code paths the filter takes (from host facts only)."""
    if not use_k and not use_p:
        return "no filter"
    if use_k and not use_p and allow_cpu_sync:
        return "top-k only"
    return "sort"
