"""Subjects: the sampler a scripted scenario drives (``syncguard run/check --subject``).

A subject turns a scenario's requests into batch state, follows the batch as requests join
and finish, and samples one step's logits into token ids. syncguard owns the decode loop
around it: the logits, the guard, the timing and the engine's token readback::

    class MySubject:
        name = "mine"                                  # optional: the label in reports

        def build(self, requests, ctx):                # -> your batch state
            return MyBatch([r.top_k for r in requests], device=ctx.device)

        def join(self, state, requests):               # new requests at the end of the batch
            return state.merge(MyBatch(...))           # -> the new state

        def finish(self, state, keep):                 # keep: row indices that stay, in order
            return state.filter(keep)

        def sample(self, state, logits, positions):    # logits [bs, vocab] on ctx.device
            ids = my_sampler(logits, state)            # token ids [bs], left on the device
            return Sampled(ids, {"branch": "fused"})   # or just ids; labels are free-form

Requests are :class:`syncguard.driving.scenario.RequestSpec` (``id``, ``temperature``, ``top_p``,
``top_k``, ``min_p``, ``seed``). ``positions`` [bs] int64: each row's position in its
sequence. Labels are per-step facts reported with the step (a branch taken, a host flag);
a label named ``branch`` shows in the per-step tables.

Name a subject on the command line as ``MODULE:OBJ`` (a class or factory called with no
argument, or an instance), or by a registered name: any entry point of the group
``syncguard.subjects`` (:mod:`syncguard.driving.plugins`), the way the case study shipped with
syncguard registers its ``legacy``, ``flag`` and ``flag-recompute``::

    [project.entry-points."syncguard.subjects"]
    mine = "mypkg.syncguard_subject:MySubject"
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence

from .._paths import PKG_DIR
from ..core.sites import display_path
from ..errors import SyncguardError
from . import plugins

GROUP = "syncguard.subjects"


class SubjectError(SyncguardError, ValueError):
    """A subject that cannot be found or used: one line, exit code 2."""


@dataclasses.dataclass(frozen=True)
class SubjectContext:
    """What a subject gets to build its state: ``device`` (torch.device of the logits),
    ``deterministic`` (the scenario asks for seeded sampling), ``seed`` (the scenario's)."""

    device: Any
    deterministic: bool = False
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class Sampled:
    """One step's sampling: ``ids`` [bs] token ids (on the device; syncguard reads them back as
    the step's one allowed sync) and free-form ``labels`` reported with the step."""

    ids: Any
    labels: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class Subject(Protocol):
    """The sampler under test. See the module docstring for an example."""

    def build(self, requests: Sequence[Any], ctx: SubjectContext) -> Any:
        """Batch state for ``requests`` (RequestSpec) on ``ctx.device``."""

    def join(self, state: Any, requests: Sequence[Any]) -> Any:
        """``state`` with ``requests`` appended as new rows; returns the new state."""

    def finish(self, state: Any, keep: Sequence[int]) -> Any:
        """``state`` with only the rows ``keep`` (indices, in order); returns the new state."""

    def sample(self, state: Any, logits: Any, positions: Any) -> Any:
        """Token ids for one step's ``logits`` [bs, vocab]: a :class:`Sampled` or a tensor."""


def _entry_points() -> Dict[str, str]:
    return plugins.group(GROUP)  # by the module: tests register entry points there


def registered() -> Dict[str, str]:
    """Registered subject names -> ``module:object``: the entry points of
    ``syncguard.subjects`` (nothing is imported to list them)."""
    return dict(_entry_points())


def is_spec(name: str) -> bool:
    """``MODULE:OBJ`` rather than a registered name."""
    mod, sep, obj = name.partition(":")
    return bool(sep) and all(p.isidentifier() for p in mod.split(".")) and all(
        p.isidentifier() for p in obj.split("."))


def known(name: str) -> bool:
    """A registered name or a ``MODULE:OBJ`` spec (not imported: checked when loaded)."""
    return name in registered() or is_spec(name)


def _import(spec: str, what: str) -> Any:
    mod_name, _, qual = spec.partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        # as `python -m` would: a module in the working folder (appended: never shadowing)
        if exc.name != mod_name.split(".")[0] or os.getcwd() in sys.path:
            raise SubjectError(f"{what}: cannot import {mod_name}: {exc}") from None
        sys.path.append(os.getcwd())
        return _import(spec, what)
    except ImportError as exc:
        raise SubjectError(f"{what}: cannot import {mod_name}: {exc}") from None
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SubjectError(f"{what}: {mod_name} has no attribute {qual!r}") from None
    return obj


def load(name: str, what: Optional[str] = None) -> Subject:
    """The subject named ``name`` (registered name or ``MODULE:OBJ``), ready to use.
    Raises :class:`SubjectError` naming ``what`` (e.g. ``--subject``)."""
    what = what or f"subject {name!r}"
    reg = registered()
    if name in reg:
        obj = _import(reg[name], what)
    elif is_spec(name):
        obj = _import(name, what)
    else:
        raise SubjectError(f"{what}: unknown subject {name!r}; registered: "
                           f"{', '.join(reg)}; or give MODULE:OBJ")
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "sample")):
        try:
            obj = obj()
        except Exception as exc:
            raise SubjectError(f"{what}: {name} could not be created: {exc}") from None
    missing = [m for m in ("build", "join", "finish", "sample") if not callable(
        getattr(obj, m, None))]
    if missing:
        raise SubjectError(f"{what}: {name} is not a subject: no {', '.join(missing)} method")
    return obj  # type: ignore[no-any-return]


def label(name: str, subject: Any) -> str:
    """The subject's name in reports: its ``name`` attribute for a ``MODULE:OBJ`` spec."""
    if is_spec(name):
        n = getattr(subject, "name", None)
        if isinstance(n, str) and n:
            return n
    return name


def user_error(name: str, method: str, exc: BaseException) -> Optional[SubjectError]:
    """A :class:`SubjectError` for an exception raised by subject ``name``'s ``method``, one
    line naming the subject, the exception and where in the user's code it was raised (the
    innermost frame outside syncguard and torch); None when no frame is the user's (the
    failure is syncguard's own error)."""
    import traceback

    skip = [PKG_DIR + os.sep]
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if isinstance(torch_file, str):
        skip.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    where = None
    for fr in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(fr.filename)
        if not any(path.startswith(d) for d in skip):
            where = fr
    if where is None:
        return None

    return SubjectError(f"subject {name}: {method}() raised {type(exc).__name__}: {exc} at "
                        f"{display_path(where.filename)}:{where.lineno}")


def check_ids(name: str, ids: Any, batch: int) -> None:
    """Raise :class:`SubjectError` unless ``ids`` (what subject ``name``'s ``sample``
    returned) is an integer tensor of shape ``[batch]``; reads only metadata (no sync)."""
    shape = getattr(ids, "shape", None)
    dtype = getattr(ids, "dtype", None)
    if shape is None or dtype is None:
        raise SubjectError(f"subject {name}: sample() returned {type(ids).__name__}, not a "
                           f"tensor of token ids of shape [{batch}]")
    if tuple(shape) != (batch,):
        raise SubjectError(f"subject {name}: sample() returned ids of shape "
                           f"{list(shape)} for a batch of {batch}; expected shape [{batch}]")
    if getattr(dtype, "is_floating_point", False) or getattr(dtype, "is_complex", False) or \
            str(dtype) == "torch.bool":
        raise SubjectError(f"subject {name}: sample() returned ids of dtype "
                           f"{str(dtype).replace('torch.', '')}; expected an integer dtype")


def as_sampled(out: Any) -> Sampled:
    """A subject's ``sample`` result as :class:`Sampled`."""
    if isinstance(out, Sampled):
        return out
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
        return Sampled(out[0], out[1])
    return Sampled(out)


__all__: List[str] = ["GROUP", "Sampled", "Subject", "SubjectContext",
                      "SubjectError", "as_sampled", "check_ids", "is_spec", "known", "label",
                      "load", "registered", "user_error"]
