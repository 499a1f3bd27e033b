"""A decode loop written for an Ascend NPU that samples with vLLM's own top-k/top-p code,
imported unchanged from the released ``vllm`` package (``vllm.v1.sample.ops.topk_topp_sampler``).

    pip install --no-deps vllm==0.34.0   # plus its imports: see reports/real-vllm.md
    syncguard exec --device sim --step vllm_decode:decode_step \
        -- python examples/real_vllm/vllm_decode.py [--allow-cpu-sync]

Four requests with vLLM-style per-request metadata: top_k stored as int32 with the vocabulary
size meaning "disabled", top_p as float32, ``p = None`` when no request in the batch uses top-p
(as vLLM's sampling metadata does). The two top-p requests finish after step 2, so from step 3
the batch is top-k only. By default the filter goes through vLLM's dispatcher
``apply_top_k_top_p`` (no Triton here, not vLLM's CPU platform: its sort-based PyTorch path);
``--allow-cpu-sync`` calls ``apply_top_k_top_p_pytorch(..., allow_cpu_sync=True)``, the route
vLLM takes on its CPU platform, whose top-k-only branch reads ``k.max()`` on the host.
"""

from __future__ import annotations

import argparse

import torch
from vllm.v1.sample.ops.topk_topp_sampler import (
    apply_top_k_top_p,
    apply_top_k_top_p_pytorch,
)

VOCAB = 4096
HIDDEN = 64
# (top_k, top_p, temperature) per request; top_k 0 = disabled. The first two finish after
# step FINISH_AFTER: they are the only ones using top-p.
REQUESTS = [(50, 0.9, 0.8), (0, 0.95, 1.0), (20, 1.0, 0.7), (0, 1.0, 1.0)]
FINISH_AFTER = 2


class TinyLM(torch.nn.Module):
    """Stands in for the forward pass: last token -> logits [bs, VOCAB]."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(tokens)))


class SamplingBatch:
    """Per-request sampling metadata on the device, built on the host when the batch changes."""

    def __init__(self, requests: list[tuple[int, float, float]], device: str) -> None:
        self.requests = requests
        self.k = torch.tensor([k if k > 0 else VOCAB for k, _, _ in requests],
                              dtype=torch.int32, device=device)
        use_p = any(p < 1.0 for _, p, _ in requests)
        self.p = (torch.tensor([p for _, p, _ in requests], dtype=torch.float32, device=device)
                  if use_p else None)
        self.temperature = torch.tensor([t for _, _, t in requests], dtype=torch.float32,
                                        device=device)


def decode_step(model: TinyLM, batch: SamplingBatch, tokens: torch.Tensor,
                allow_cpu_sync: bool) -> tuple[torch.Tensor, list[int]]:
    """One decode step: forward, vLLM's top-k/top-p, a draw, the engine's token readback."""
    logits = model(tokens) / batch.temperature.unsqueeze(1)
    if allow_cpu_sync:
        logits = apply_top_k_top_p_pytorch(logits, batch.k, batch.p, allow_cpu_sync=True)
    else:
        logits = apply_top_k_top_p(logits, batch.k, batch.p)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    next_ids = probs.div_(torch.empty_like(probs).exponential_()).argmax(dim=-1)
    return next_ids, next_ids.tolist()  # the engine's token readback: one sync per step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--allow-cpu-sync", action="store_true",
                    help="vLLM's CPU-platform route (top-k only batches read k.max())")
    args = ap.parse_args()
    torch.manual_seed(0)
    device = "npu"
    model = TinyLM().to(device)
    requests = list(REQUESTS)
    batch = SamplingBatch(requests, device)
    tokens = torch.zeros(len(requests), dtype=torch.long, device=device)
    out: list[list[int]] = [[] for _ in requests]
    with torch.no_grad():
        for step in range(args.steps):
            tokens, host_ids = decode_step(model, batch, tokens, args.allow_cpu_sync)
            for seq, tok in zip(out[-len(host_ids):], host_ids):
                seq.append(tok)
            if step == FINISH_AFTER:  # the top-p requests finish: rows 0 and 1 leave
                requests = requests[2:]
                batch = SamplingBatch(requests, device)
                tokens = tokens[2:]
    print(f"decoded {args.steps} steps; tokens per request: {[len(s) for s in out]}")


if __name__ == "__main__":
    main()
