"""Greedy generation with TinyLM on device="npu", unchanged for `syncguard exec --device sim`:

    syncguard exec --device sim --step tinylm:TinyLM.decode_step \
        -- python examples/decode_loop/generate.py --tokens 16
"""

import argparse

import torch
import torch_npu  # noqa: F401  (real on a 910B; syncguard's stand-in under --device sim)
from tinylm import TinyLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--batch", type=int, default=4)
    a = p.parse_args()
    model = TinyLM(device="npu")
    ids = torch.arange(1, a.batch + 1, device="npu")
    finished = torch.zeros(a.batch, dtype=torch.bool, device="npu")
    out = []
    for _ in range(a.tokens):
        ids, finished = model.decode_step(ids, finished)
        out.append(ids)
    tokens = torch.stack(out, dim=1).cpu()  # one readback at the end, outside the steps
    print(f"generated {tokens.shape[1]} tokens for {tokens.shape[0]} sequences")


if __name__ == "__main__":
    main()
