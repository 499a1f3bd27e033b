"""A decode loop with branches the run does not take (for `syncguard lint --with-run`).

    syncguard exec --device sim --record-lines branchy.py -- python branchy.py
"""

import torch
import torch_npu  # noqa: F401  (syncguard's stand-in under --device sim)

import syncguard


def sample(logits: torch.Tensor, temps_cpu, speculative: bool, lora: bool):
    probs = torch.softmax(logits, dim=-1)
    if temps_cpu[0] > 0:  # host-only: cleared
        pass
    ids = probs.argmax(dim=-1)
    if ids.max() > 100:  # taken branch's sync: confirmed
        pass
    if speculative:
        accepted = ids.nonzero()  # untaken branch: unexercised
        return accepted
    if lora:
        n = int(ids.sum())  # untaken branch: unexercised
        return ids[:n]
    return ids


def main():
    temps_cpu = torch.ones(4)
    logits = torch.randn(4, 16, device="npu")
    for _ in range(3):
        with syncguard.step():
            sample(logits, temps_cpu, speculative=False, lora=False)


if __name__ == "__main__":
    main()
