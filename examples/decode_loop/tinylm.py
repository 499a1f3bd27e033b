"""A toy language model with an engine-style decode step, written for an Ascend NPU."""

import torch


class TinyLM:
    def __init__(self, vocab=512, hidden=64, device="npu", eos_id=0, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.device = torch.device(device)
        self.embed = (torch.randn(vocab, hidden, generator=g) / hidden**0.5).to(self.device)
        self.proj = (torch.randn(hidden, vocab, generator=g) / hidden**0.5).to(self.device)
        self.eos_id = eos_id

    def decode_step(self, ids, finished):
        """One decode step for the batch: next token ids, and which rows are finished."""
        h = torch.tanh(self.embed[ids])
        logits = h @ self.proj
        next_ids = torch.argmax(logits, dim=-1)
        if (next_ids < 0).any():  # a sanity check: Python's `if` reads a device bool, each step
            raise RuntimeError("negative token id")
        return next_ids, finished | (next_ids == self.eos_id)
