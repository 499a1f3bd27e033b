"""A decode loop at a script's top level (the module drives it): under ``--loop
toploop:Model.forward`` the last step ends with the loop. The stop check syncs once per token;
``--readback`` adds one more sync after the loop, outside every step."""

import sys

import torch
import torch_npu  # noqa: F401


class Model:
    def forward(self, ids):
        return ids * 2 + 1


model = Model()
ids = torch.ones(2, 3, dtype=torch.long, device="npu")
for _ in range(4):
    out = model.forward(ids)
    if bool((out < 0).any()):  # sync: stop
        break
    ids = out[:, -1:]
if "--readback" in sys.argv:
    print(ids.cpu().tolist())  # sync: readback
