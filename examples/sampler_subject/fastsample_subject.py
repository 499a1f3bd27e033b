"""A syncguard subject wrapping fastsample.sample (see syncguard.subjects):

    cd examples/sampler_subject
    syncguard run steady --device sim \
        --subject fastsample_subject:FastSampleSubject
    syncguard check steady --device sim \
        --subject fastsample_subject:FastSampleSubject
"""

import torch
from fastsample import sample

import syncguard
from syncguard.driving.subjects import Sampled

SETUP = "batch bookkeeping: request parameters copied to the device when the batch changes"


class FastSampleSubject:
    name = "fastsample"

    def build(self, requests, ctx):
        self.ctx = ctx
        vocab_all = 1 << 30  # top_k <= 0: no top-k
        rows = [(r.temperature or 1.0, r.top_k if r.top_k > 0 else vocab_all, r.top_p)
                for r in requests]
        with syncguard.allow(SETUP):
            return {
                "t": torch.tensor([x[0] for x in rows], device=ctx.device),
                "k": torch.tensor([x[1] for x in rows], device=ctx.device),
                "p": torch.tensor([x[2] for x in rows], device=ctx.device),
                "host_p": [x[2] for x in rows],  # host copies: labels without a sync
            }

    def join(self, state, requests):
        new = self.build(requests, self.ctx)
        return {key: (state[key] + new[key]) if key == "host_p" else torch.cat(
            [state[key], new[key]]) for key in state}

    def finish(self, state, keep):
        with syncguard.allow(SETUP):
            idx = torch.tensor(keep, dtype=torch.long, device=self.ctx.device)
        return {key: [state[key][i] for i in keep] if key == "host_p" else state[key][idx]
                for key in state}

    def sample(self, state, logits, positions):
        ids = sample(logits, state["t"], state["k"], state["p"])
        return Sampled(ids, {"top_p": "on" if min(state["host_p"]) < 1.0 else "off"})
