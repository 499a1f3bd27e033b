"""On which backends a finding syncs, read from the op sync models the runtime guard counts with
(:mod:`syncguard.core.opmodel`, ``core/opmodels/{cuda,npu}.json``).

Most syncs are Python-visible reads (``.item()``, ``bool(t)``, copies, nonzero) and sync on every
backend. A few happen inside a kernel, or depend on how a backend lowers a Python entry point
(``x[mask] = 0`` is masked_fill on CUDA but index_put_ -> nonzero on the NPU): for those the
lint asks both models, so the lint and the guard never disagree about a backend.
"""

from __future__ import annotations

import functools
from typing import Optional, Set, Tuple

from ..core.opmodel import load_model
from ..devicenames import HARDWARE

#: a finding that syncs on every backend
BOTH = "both"


@functools.cache
def backends_of(key: str, when: str) -> Optional[str]:
    """Where an in-model sync happens: ``key`` an ATen op (``aten::multinomial``) or a Python
    entry point (``Tensor.__setitem__``), ``when`` the condition the lint proved statically
    (``no_replacement_or_one_sample``...). ``"both"``, ``"cuda"``, ``"npu"``, or None when no
    model counts a read (the line does not sync anywhere)."""
    hits = []
    for b in HARDWARE:
        model = load_model(b)
        if model is None:
            continue
        for e in model.entries:
            if (e.api == key or (not e.api and e.op == key)) and e.when in (when, "always"):
                if e.reads > 0:
                    hits.append(b)
                break
    if not hits:
        return None
    return BOTH if len(hits) == len(HARDWARE) else hits[0]


def backends_any(models: Tuple[Tuple[str, str], ...]) -> Optional[str]:
    """Where a sync happens when any one of ``models`` (each a :func:`backends_of` key and
    condition) may be the one that holds (the lint cannot tell which): the union."""
    hits: Set[str] = set()
    for key, when in models:
        got = backends_of(key, when)
        if got is not None:
            hits.update(HARDWARE if got == BOTH else (got,))
    if not hits:
        return None
    return BOTH if len(hits) == len(HARDWARE) else hits.pop()


def fails_on(backend: str, chosen: str) -> bool:
    """A finding that syncs on ``backend`` fails a CI that targets ``chosen`` (any/cuda/npu)."""
    return chosen == "any" or backend in (BOTH, chosen)


def label(backend: str) -> str:
    """How the text outputs name a backend other than both: ``cuda only``."""
    return "" if backend == BOTH else f"{backend} only"


__all__: Tuple[str, ...] = ("BOTH", "backends_any", "backends_of",
                            "fails_on", "label")
