"""Writes OUT_DIR/ckpt.pt as nanoGPT's train.py saves it (model_args, the state dict of a
compiled model, '_orig_mod.' keys, optimizer state, iter_num), from small random weights:
``python train.py OUT_DIR``."""

import os
import sys

import torch
from model import GPT, GPTConfig

out_dir = sys.argv[1]
torch.manual_seed(0)
model_args = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, bias=True, vocab_size=65,
                  dropout=0.0)
model = GPT(GPTConfig(**model_args))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model(torch.zeros(1, 4, dtype=torch.long))[0].sum().backward()
optimizer.step()
checkpoint = {
    "model": {"_orig_mod." + k: v for k, v in model.state_dict().items()},
    "optimizer": optimizer.state_dict(),
    "model_args": model_args,
    "iter_num": 1,
    "best_val_loss": 1e9,
    "config": {"device": "cpu"},
}
os.makedirs(out_dir, exist_ok=True)
torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
print(f"saving checkpoint to {out_dir}")
