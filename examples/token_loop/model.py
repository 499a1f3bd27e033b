"""A tiny decoder-only model: its forward makes no hidden sync (every op stays on device)."""

import torch
from torch import nn


class TinyDecoder(nn.Module):
    def __init__(self, vocab=256, hidden=32, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, hidden)
        self.mix = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        """Logits for each position of ``ids`` (batch, length): the prompt at prefill, one
        token per call after it."""
        h = torch.tanh(self.mix(self.embed(ids)))
        return self.head(h)
