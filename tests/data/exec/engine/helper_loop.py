"""An engine-shaped loop: ``generate`` drives it, but each token's forward is reached through a
helper (``decode_step``) that returns at once; the stop check in ``generate`` reads the device
once per token. Under ``--loop helper_loop:Model.forward`` every token is one step with that
one read; the prompt's forward (through ``prefill``) is the first step, labelled prefill; the
readback after the loop is outside every step.

    python helper_loop.py [--tokens N] [--no-readback]
"""

import sys

import torch
import torch_npu  # noqa: F401  (syncguard's stand-in under --device sim)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(8, 16)

    def forward(self, ids):
        return self.head(torch.nn.functional.one_hot(ids % 8, 8).float())


def prefill(model, prompt):
    return model(prompt)


def decode_step(model, ids):
    return model(ids)


def generate(model, prompt, tokens):
    out = []
    nxt = None
    for _ in range(tokens):
        logits = prefill(model, prompt) if nxt is None else decode_step(model, nxt[:, None])
        nxt = logits[:, -1].argmax(dim=-1)
        out.append(nxt)
        if bool((nxt == -1).all()):  # the stop check: one read per token
            break
    result = torch.stack(out, dim=1)
    if "--no-readback" not in sys.argv:
        print(result.cpu().tolist()[0][:4])  # the readback after the loop: outside every step
    return result


def main():
    tokens = int(sys.argv[sys.argv.index("--tokens") + 1]) if "--tokens" in sys.argv else 6
    model = Model().to("npu")
    prompt = torch.arange(1, 9).reshape(2, 4).to("npu")
    with torch.no_grad():
        generate(model, prompt, tokens)


if __name__ == "__main__":
    main()
