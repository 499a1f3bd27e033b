"""``syncguard exec``: run a user's program in-process under the guard, one result record per
step (a ``--step`` function call or a ``syncguard.step()`` block), then reports and the gate.

Modules: :mod:`.engine` runs a whole ``exec`` (checks, the run, reports, the gate),
:mod:`.program` runs the program as ``python`` would, :mod:`.hooks` wraps ``--step``
functions when their module is imported, :mod:`.session` records the steps.
"""
