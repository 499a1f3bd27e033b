"""User subjects with bugs, for the tests: syncguard must blame them, in one line, exit 2."""

import torch


class _Base:
    def build(self, requests, ctx):
        return len(requests)

    def join(self, state, requests):
        return state + len(requests)

    def finish(self, state, keep):
        return len(keep)


class RaisesKeyError(_Base):
    name = "raises"

    def sample(self, state, logits, positions):
        table = {}
        return table["oops"]  # the user's bug: line 22


class WrongShape(_Base):
    name = "wrong-shape"

    def sample(self, state, logits, positions):
        return logits.argmax(dim=-1)[:1]  # one id for the whole batch


class FloatIds(_Base):
    name = "float-ids"

    def sample(self, state, logits, positions):
        return logits.max(dim=-1).values  # values, not indices


class Fine(_Base):
    name = "fine"

    def sample(self, state, logits, positions):
        return torch.argmax(logits, dim=-1)
