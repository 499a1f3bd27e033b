"""nanoGPT's sample.py (karpathy/nanoGPT), its resume path: load ckpt.pt from out_dir with
map_location=device, strip the '_orig_mod.' prefix a compiled model saved, load_state_dict,
model.to(device), sample. Options as nanoGPT's configurator takes them: --key=value."""

import os
import sys
from ast import literal_eval

import torch
from model import GPT, GPTConfig

init_from = "resume"
out_dir = "out"
start = "\n"
num_samples = 2
max_new_tokens = 6
temperature = 0.8
top_k = 10
seed = 1337
device = "cuda"
compile = False
for arg in sys.argv[1:]:  # configurator.py, in short
    key, val = arg[2:].split("=", 1)
    try:
        val = literal_eval(val)
    except (SyntaxError, ValueError):
        pass
    globals()[key] = val

torch.manual_seed(seed)

if init_from == "resume":
    ckpt_path = os.path.join(out_dir, "ckpt.pt")
    checkpoint = torch.load(ckpt_path, map_location=device)
    gptconf = GPTConfig(**checkpoint["model_args"])
    model = GPT(gptconf)
    state_dict = checkpoint["model"]
    unwanted_prefix = "_orig_mod."
    for k, _v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)

model.eval()
model.to(device)
if compile:
    model = torch.compile(model)

stoi = {chr(ord("a") + i): i for i in range(26)}
itos = {i: ch for ch, i in stoi.items()}


def encode(s):
    return [stoi.get(c, 0) for c in s]


def decode(ids):
    return "".join(itos.get(i % 26, "?") for i in ids)


start_ids = encode(start)
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]

with torch.no_grad():
    for _k in range(num_samples):
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
        print(decode(y[0].tolist()))
        print("---------------")
