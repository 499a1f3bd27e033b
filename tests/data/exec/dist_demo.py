"""Two ranks on gloo (CPU collectives), decode on the (simulated) npu; rank 1 syncs once in
step 2. Run with `torchrun --nproc-per-node 2 -m syncguard exec --device sim -- python
dist_demo.py`."""

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401

import syncguard


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(4, device="npu") * (rank + 1)
    for i in range(4):
        with syncguard.step("decode"):
            y = x * i
            if rank == 1 and i == 2:
                _ = y.sum().item()  # sync: rank1
            t = torch.tensor([float(i)])
            dist.all_reduce(t)  # a CPU collective: no device sync
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
