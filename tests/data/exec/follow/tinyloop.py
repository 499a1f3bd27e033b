"""A tiny decoder whose stop check reads the device once per token (``read``), as a decode
loop's eos check does; the loop for ``--loop tinyloop:Dec.forward``."""

import torch

TOKENS = 12


class Dec:
    def __init__(self, dev):
        g = torch.Generator().manual_seed(0)
        self.w = torch.randn(8, 8, generator=g).to(dev)

    def forward(self, x):
        return (x @ self.w).argmax(-1)


def decode(dev, read=True, tokens=TOKENS):
    """Decode ``tokens`` tokens on ``dev``; the token ids, left on the device."""
    d = Dec(dev)
    x = torch.ones(1, 8, device=dev)
    out = []
    for _ in range(tokens):
        tok = d.forward(x)
        if read and bool(tok[0] == 99):  # the per-token stop check: a read
            break
        out.append(tok)
    return out
