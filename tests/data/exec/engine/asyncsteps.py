"""asyncio: ``decode`` is an ``async def`` step (``--step asyncsteps:decode``) that reads the
device once before and once after an ``await``; two of them run at once as tasks, so their
reads interleave across the awaits. A third coroutine reads with no step of its own.

    python asyncsteps.py [--steps N]
"""

import asyncio
import sys

import torch
import torch_npu  # noqa: F401  (syncguard's stand-in under --device sim)

STEPS = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3


async def decode(x, turn):
    bool(x.max() > 0)  # sync: before
    await turn.wait()
    await asyncio.sleep(0)
    float(x.sum())  # sync: after


async def stray(x, turn):
    await asyncio.sleep(0)
    int(x.argmax())  # sync: stray (no step of its own)
    turn.set()


async def main():
    x = torch.ones(4, device="npu")
    for _ in range(STEPS):
        turn = asyncio.Event()
        await asyncio.gather(decode(x, turn), decode(x, turn), stray(x, turn))


if __name__ == "__main__":
    asyncio.run(main())
