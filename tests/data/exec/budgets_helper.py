"""The helper of ``budgets.py``: a sync in another file, so the gate names its caller."""


def check(t):
    return bool(t.sum() > 0)  # sync: check
