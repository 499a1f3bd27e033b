"""A decode loop whose stop checks read state carried on the device from step to step (a
position advanced in place, a state fed back) and a limit uploaded once (hoistable):
`--step carried:step` with `--lineage`."""

import sys

import torch

dev = "cpu" if "--cpu" in sys.argv else "npu"


def step(st):
    st["h"] = torch.tanh(st["h"] * 1.5 + 0.25)  # fed back
    st["pos"] += 1
    if bool((st["pos"] >= st["limit"]).any()):  # sync: position
        return True
    return bool(st["h"].argmax() == 3)  # sync: state


def main():
    st = {"h": torch.zeros(4, device=dev), "pos": torch.tensor([3], device=dev),
          "limit": torch.tensor([100], device=dev)}
    for _ in range(4):
        if step(st):
            break
        if bool((st["limit"] < 0).any()):  # sync: limit
            break
    print("done")


if __name__ == "__main__":
    main()
