"""A small decode engine with known hidden syncs (the exec tests' subject).

Step 2 makes two hidden syncs, step 3 one on a worker thread, step 5 one; every step reads its
tokens back once, as engines do (``--readback`` allows it). ``fixed=True`` removes the hidden
ones. Lines the tests look for carry a ``# sync:`` comment.
"""

import signal
import threading

import torch


class Engine:
    def __init__(self, device, fixed=False):
        self.device = torch.device(device)
        self.fixed = fixed
        self.state = torch.zeros(4, device=self.device)
        self.interrupt_at = None  # Ctrl-C in the middle of this step

    def step(self, i, depth=0):
        logits = self.state + i
        ids = torch.argmax(logits.view(1, 4), dim=-1)
        if not self.fixed:
            if i == 2:
                top = logits.max().item()  # sync: two-a
                if bool(logits.sum() > top):  # sync: two-b
                    pass
            if i == 3:
                t = threading.Thread(target=self._worker, args=(logits,), name="sampler-worker")
                t.start()
                t.join()
            if i == 5:
                _ = logits.tolist()  # sync: five
        if i == self.interrupt_at:
            signal.raise_signal(signal.SIGINT)
        if depth == 0:
            self.state = self.state + 1
            if i == 1:
                self.step(i, depth=1)  # a recursive call: part of this step, not a new one
        return ids

    def _worker(self, logits):
        _ = float(logits[0])  # sync: worker

    @staticmethod
    def helper_static(x):
        return x + 1

    @classmethod
    def helper_class(cls, x):
        return x * 2
