"""A scheduler thread and the main thread, each running its own steps at the same time (a
barrier makes their reads interleave), each step reading the device once; a third thread reads
with no step of its own, and a worker started inside a main step reads for that step.

    python threads.py [--steps N]
"""

import sys
import threading

import torch
import torch_npu  # noqa: F401  (syncguard's stand-in under --device sim)

import syncguard

STEPS = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 5
both = threading.Barrier(3)


def scheduler(x):
    for _ in range(STEPS):
        with syncguard.step("schedule"):
            both.wait()
            float(x.sum())  # sync: scheduler
            both.wait()


def stray(x):
    for _ in range(STEPS):
        both.wait()
        int(x.argmax())  # sync: stray (no step of its own)
        both.wait()


def main():
    x = torch.ones(4, device="npu")
    threads = [threading.Thread(target=scheduler, args=(x,)),
               threading.Thread(target=stray, args=(x,))]
    for t in threads:
        t.start()
    for i in range(STEPS):
        with syncguard.step("decode"):
            both.wait()
            bool(x.max() > 0)  # sync: main
            both.wait()
            if i == 0:  # a worker started inside the step works for it
                w = threading.Thread(target=lambda: x.tolist())  # sync: worker
                w.start()
                w.join()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
