"""Engine-shaped launchers: the decode loop (tinyloop) runs in child processes only, the way
SGLang's scheduler and vLLM's workers do. ``python launch.py SHAPE [--clean]``."""

import multiprocessing as mp
import os
import subprocess
import sys

import tinyloop

DEV = "npu"
HERE = os.path.dirname(os.path.abspath(__file__))


def worker(read):
    import torch_npu  # noqa: F401  (NPU code has it: the stand-in on --device sim)

    tinyloop.decode(DEV, read)


def spawn_decoder(read):
    worker(read)


def fork_decoder(read):
    worker(read)


def forkserver_decoder(read):
    worker(read)


def rank(i, read):  # torch.multiprocessing.spawn's fn(i, *args)
    worker(read)


def pooled(read):
    worker(read)
    return os.getpid()


def grandchild_decoder(read):
    worker(read)


def parent_of_grandchild(read):
    p = mp.get_context("spawn").Process(target=grandchild_decoder, args=(read,))
    p.start()
    p.join()


def scheduler(read, to_detok):  # SGLang's run_scheduler_process: the decode loop
    import torch_npu  # noqa: F401

    for tok in tinyloop.decode(DEV, read):
        to_detok.send(int(tok[0]))  # the deliberate readback: a sync, once per token
    to_detok.send(None)


def detokenizer(from_sched, to_main):  # a separate process, no device
    got = []
    while True:
        t = from_sched.recv()
        if t is None:
            break
        got.append(t)
    to_main.send(len(got))


#: the shapes, and the process that runs the loop in each (its target, its script)
SHAPES = {"spawn": "spawn_decoder", "fork": "fork_decoder",
          "forkserver": "forkserver_decoder", "torch-spawn": "rank", "subprocess": "child.py",
          "pool": "_process_worker", "grandchild": "grandchild_decoder", "sglang": "scheduler"}


def main(shape, read):
    if shape == "all":  # every shape below, one after the other: a process row each
        for one in SHAPES:
            main(one, read)
    elif shape in ("spawn", "fork", "forkserver"):
        target = {"spawn": spawn_decoder, "fork": fork_decoder,
                  "forkserver": forkserver_decoder}[shape]
        p = mp.get_context(shape).Process(target=target, args=(read,), name="decoder")
        p.start()
        p.join()
        if p.exitcode:
            sys.exit(p.exitcode)
    elif shape == "torch-spawn":
        import torch.multiprocessing as tmp

        tmp.spawn(rank, args=(read,), nprocs=2)
    elif shape == "subprocess":
        subprocess.run([sys.executable, os.path.join(HERE, "child.py")]
                       + ([] if read else ["--clean"]), check=True)
    elif shape == "pool":
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
            ex.submit(pooled, read).result()
    elif shape == "grandchild":
        p = mp.get_context("spawn").Process(target=parent_of_grandchild, args=(read,))
        p.start()
        p.join()
    elif shape == "sglang":
        mp.set_start_method("spawn", force=True)
        s_r, s_w = mp.Pipe(duplex=False)
        m_r, m_w = mp.Pipe(duplex=False)
        procs = [mp.Process(target=scheduler, args=(read, s_w)),
                 mp.Process(target=detokenizer, args=(s_r, m_w))]
        for p in procs:
            p.start()
        print("tokens", m_r.recv())
        for p in procs:
            p.join()
    else:
        raise SystemExit(f"unknown shape {shape}")


if __name__ == "__main__":
    main(sys.argv[1], "--clean" not in sys.argv)
