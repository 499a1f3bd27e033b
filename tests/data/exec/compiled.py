"""A decode loop whose step calls a compiled function (as engines compile their forward):
`--step compiled:decode_step -- python compiled.py BACKEND [--capture] [--cpu]`. Each step reads
the device twice: once inside the compiled function, once outside it."""

import sys

import torch

if "--capture" in sys.argv:  # the read inside becomes part of the graph
    torch._dynamo.config.capture_scalar_outputs = True


def forward(x):
    y = x * 2
    n = y.sum().int().item()  # sync: inside
    return y / (n + 1)


step_fn = torch.compile(forward, backend=sys.argv[1])


def decode_step(x):
    y = step_fn(x)
    if bool(y.sum() > 1e9):  # sync: outside
        raise SystemExit("never")
    return y


x = torch.arange(4.0, device="cpu" if "--cpu" in sys.argv else "npu")
for _ in range(3):
    x = decode_step(x) + 1
print("decoded", x.tolist())
