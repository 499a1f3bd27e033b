"""Decode loop written for device="npu" (runs unchanged under `syncguard exec --device sim`)."""

import argparse
import signal
import sys

import torch
import torch_npu  # noqa: F401  (the real one on a 910B, syncguard's stand-in under --device sim)

from loopdemo.engine import Engine


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--fixed", action="store_true")
    p.add_argument("--markers", action="store_true")
    p.add_argument("--fail-at", type=int, default=None)
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--interrupt-at", type=int, default=None)
    p.add_argument("--interrupt-in-step", type=int, default=None)
    p.add_argument("--device", default="npu")
    a = p.parse_args(argv)
    engine = Engine(a.device, fixed=a.fixed)
    engine.interrupt_at = a.interrupt_in_step
    tokens = []
    for i in range(a.steps):
        if a.interrupt_at == i:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C in the middle of the loop
        if a.markers:
            import syncguard

            with syncguard.step("decode"):
                ids = engine.step(i)
        else:
            ids = engine.step(i)
        tokens.append(ids)
        if a.fail_at == i:
            raise RuntimeError(f"engine failed at step {i}")
    out = torch.cat(tokens).cpu()  # final readback, outside every step
    print(f"decoded {len(out)} tokens, argv={sys.argv[1:]}")
    if a.exit is not None:
        sys.exit(a.exit)


if __name__ == "__main__":
    main()
