"""Greedy generation around a model whose forward is sync-free; the per-token sync sits in the
loop around it, in the stop-condition helper:

    syncguard exec --device sim --loop model:TinyDecoder.forward \
        -- python examples/token_loop/generate.py --tokens 16

Each call of ``forward`` begins a step that lasts until its next call, so the stop check
after each forward lands in that forward's step: 16 steps (the first, with the whole prompt,
labelled prefill), one hidden sync each.
"""

import argparse

import torch
import torch_npu  # noqa: F401  (real on a 910B; syncguard's stand-in under --device sim)
from model import TinyDecoder
from stopping import StopOnToken


def decode_loop(model, prompt, max_new_tokens, stop):
    ids = prompt
    out = []
    for _ in range(max_new_tokens):
        logits = model(ids)  # prefill: the whole prompt; then the last token only
        next_ids = logits[:, -1].argmax(dim=-1)
        out.append(next_ids)
        if stop(next_ids):
            break
        ids = next_ids[:, None]
    return torch.stack(out, dim=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prompt", type=int, default=8)
    a = p.parse_args()
    model = TinyDecoder().to("npu")
    prompt = torch.arange(1, a.batch * a.prompt + 1).reshape(a.batch, a.prompt).to("npu")
    with torch.no_grad():
        tokens = decode_loop(model, prompt, a.tokens, StopOnToken(stop_id=-1))
    print(f"generated {tokens.shape[1]} tokens for {tokens.shape[0]} sequences")
    print(tokens.cpu().tolist()[0][:4])  # the readback after the loop, outside every step


if __name__ == "__main__":
    main()
