"""One source of truth: every API of :mod:`syncguard.core.syncapis` is patched by the
interceptors and flagged by the lint, every patched API is in the table, and the lint flags
every catalogued sync case of :mod:`syncguard.core.catalogue` (recall) and stays quiet on the
no-sync cases."""

from __future__ import annotations

import os
import sys

import pytest
from _paths import ROOT

from syncguard.core import syncapis
from syncguard.lint.checker import check_source

ROOT = str(ROOT)


def _patched() -> set:
    from syncguard.core.intercept import _targets

    return {api for _, _, api, _ in _targets()}


def _names(a: syncapis.SyncApi) -> set:
    out = set()
    for owner in a.owners:
        if owner in ("Stream", "Event"):
            out.add(f"torch.cuda.{owner}.{a.name}")
        else:
            out.add(f"{owner}.{a.name}")
    return out


def test_every_table_api_is_intercepted() -> None:
    patched = _patched()
    for a in syncapis.APIS:
        present = {n for n in _names(a) if not n.startswith("torch.npu")
                   and n != "Tensor.npu"}  # torch_npu only
        assert present <= patched, (a.name, present - patched)


def test_every_intercepted_api_is_in_the_table() -> None:
    table = set().union(*(_names(a) for a in syncapis.APIS))
    assert _patched() <= table, _patched() - table


def test_every_rule_is_documented() -> None:
    for a in syncapis.APIS:
        assert a.rule in syncapis.RULES and a.why
    for r in syncapis.RULES.values():
        assert r.help and r.short and r.id.startswith("SG")


def _call_of(a: syncapis.SyncApi, owner: str) -> str:
    """A call of ``a`` that syncs, on a device tensor ``x`` (``m`` a device mask)."""
    args = {"where": "x > 0", "masked_select": "x, m", "equal": "x, x", "allclose": "x, x",
            "repeat_interleave": "x, x", "multinomial": "x, 1", "masked_fill": "x, m, x[0]",
            "normal": "x, x", "tensor": "[1, 2], device='npu'",
            "as_tensor": "[1, 2], device='npu'", "one_hot": "x"}.get(a.name, "x")
    margs = {"masked_select": "m", "equal": "x", "allclose": "x", "repeat_interleave": "x",
             "multinomial": "1", "masked_fill": "m, x[0]", "masked_fill_": "m, x[0]",
             "copy_": "x", "to": "'cpu'", "numpy": "force=True", "__setitem__": "m, x",
             "__getitem__": "m",
             "__contains__": "x[0]", "__format__": "'.3f'"}.get(a.name, "")
    if owner == "Tensor":
        recv = "h" if a.name in ("cuda", "npu", "copy_") else "x"
        return f"{recv}.{a.name}({margs})"
    if owner in ("Stream", "Event"):
        return f"torch.cuda.{owner}().synchronize()"
    return f"{owner}.{a.name}({args})"


@pytest.mark.parametrize("api", syncapis.APIS, ids=lambda a: f"{a.name}")
def test_every_table_api_is_flagged_by_the_lint(api: syncapis.SyncApi) -> None:
    for owner in api.owners:
        call = _call_of(api, owner)
        src = ("import torch\nimport torch.nn.functional\n"
               "x = torch.zeros(4, device='npu')\nm = x > 0\nh = torch.zeros(4)\n"
               f"y = {call}\n")
        found = [f for f in check_source(src, "t.py") if f.line == 6]
        assert found and found[0].reported, call
        assert found[0].rule == api.rule or api.classify == "special", (call, found[0].rule)


def test_lint_recall_on_the_catalogue() -> None:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import lint_recall
    finally:
        sys.path.pop(0)
    r = lint_recall.recall(os.path.join(ROOT, "syncguard", "core", "catalogue.py"))
    missed = [row["case"] for row in r["rows"] if row["group"] == "CATCH" and not row["flagged"]]
    assert missed == [] and r["caught"] == r["catch"] >= 45
    flagged = [row["case"] for row in r["rows"] if row["group"] == "ZERO" and row["flagged"]]
    # the one exception shares its line with the pageable CATCH case (same helper, _d2h_nb):
    # the lint cannot tell a pinned from a pageable buffer chosen at run time
    assert flagged == ["pinned_buf.copy_(t, non_blocking=True)"]
