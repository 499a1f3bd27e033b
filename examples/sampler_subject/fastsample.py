"""A third-party-style sampler (stands in for an engine's sampling module): temperature,
top-k and top-p over a batch, with a "skip the filters" fast path. The fast path's test is a
hidden sync: ``if not torch.any(...)`` reads a device bool on every call."""

import torch


def apply_top_k_top_p(logits, k, p):
    """Mask logits outside each row's top-k and top-p (k: [bs] int64, p: [bs] float)."""
    if not torch.any((k < logits.shape[-1]) | (p < 1.0)):  # fast path: the hidden sync
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    ranks = torch.arange(logits.shape[-1], device=logits.device).unsqueeze(0)
    drop = ranks >= k.unsqueeze(1)
    cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    drop |= (cum - torch.softmax(sorted_logits, dim=-1)) > p.unsqueeze(1)
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def sample(logits, temperature, k, p):
    """Token ids [bs]: temperature, top-k/top-p, then one draw per row (stays on device)."""
    logits = apply_top_k_top_p(logits / temperature.unsqueeze(1), k, p)
    probs = torch.softmax(logits, dim=-1)
    u = torch.rand_like(probs).clamp_min(1e-10)
    return torch.argmax(probs / -torch.log(u), dim=-1)  # exponential-race draw, no sync
