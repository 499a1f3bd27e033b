"""The optional ``lineage`` of an event (``--lineage``) in result files, tables and CSV."""

from __future__ import annotations

from typing import Any

import pytest


def test_old_results_without_lineage_load_and_render(tmp_path: Any) -> None:
    """An event line without ``lineage`` (every result before it) loads; sites say nothing
    of lineage; the loader refuses a lineage that is not an object, in one line."""
    import json

    from syncguard.results import analysis
    from syncguard.results import format as results

    path = tmp_path / "r.jsonl"
    ev = {"type": "event", "scenario": "s", "path": "p", "pass": "counted", "kind": "scalar_read",
          "api": "Tensor.item", "op": None, "filename": "a.py", "lineno": 3, "function": "f",
          "stack": [], "step": 0, "thread": "MainThread"}
    lines = [{"type": "header", "schema": results.SCHEMA}, ev,
             {"type": "event", **{k: v for k, v in ev.items() if k != "type"},
              "lineage": {"verdict": "hoistable", "roots": "host data at a.py:1", "ops": "gt",
                          "uploads": "a.py:1", "digest": "", "once": 1}}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = results.load(str(path))
    assert len(res.events) == 2
    df = res.events_df()
    assert list(df["lineage_verdict"]) == ["", "hoistable"]
    st = analysis.sites(res)
    assert list(st["hoist"]) == ["hoistable"]
    bad = dict(lines[2], lineage="hoistable")
    path.write_text("\n".join(json.dumps(x) for x in [lines[0], bad]) + "\n")
    with pytest.raises(results.ResultError, match="lineage"):
        results.load(str(path))
