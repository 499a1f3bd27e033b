"""A user subject for the tests: a plain top-k sampler that reads its bound back once per step
(``int(top_ks.max())``: one hidden sync), so ``--subject`` has something to find."""

import torch

import syncguard
from syncguard.driving.subjects import Sampled

BOOKKEEPING = "batch bookkeeping: host lists copied to the device as the batch changes"


class TopKSubject:
    name = "topk-sync"

    def build(self, requests, ctx):
        self.device = ctx.device
        with syncguard.allow(BOOKKEEPING):
            return torch.tensor([r.top_k if r.top_k > 0 else 8 for r in requests],
                                device=ctx.device)

    def join(self, state, requests):
        return torch.cat([state, self.build(requests, self)])

    def finish(self, state, keep):
        with syncguard.allow(BOOKKEEPING):
            return state[torch.tensor(keep, dtype=torch.long, device=state.device)]

    def sample(self, state, logits, positions):
        k = int(state.max())  # the hidden sync this subject is known for
        top = torch.topk(logits, k, dim=-1).indices
        return Sampled(top[:, 0], {"k": k})
