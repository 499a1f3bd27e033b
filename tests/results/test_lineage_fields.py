"""The optional ``lineage`` of an event (``--lineage``) in result files, tables and CSV."""

from __future__ import annotations

from typing import Any

import pytest


def test_old_results_without_lineage_load_and_render(tmp_path: Any) -> None:
    """An event line without ``lineage`` (every result before it) loads; sites say nothing
    of lineage; the loader refuses a lineage that is not an object, in one line."""
    import json

    from syncguard.results import analysis, loader
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
    res = loader.load(str(path))
    assert len(res.events) == 2
    df = res.events_df()
    assert list(df["lineage_verdict"]) == ["", "hoistable"]
    st = analysis.sites(res)
    assert list(st["hoist"]) == ["hoistable"]
    bad = dict(lines[2], lineage="hoistable")
    path.write_text("\n".join(json.dumps(x) for x in [lines[0], bad]) + "\n")
    with pytest.raises(results.ResultError, match="lineage"):
        loader.load(str(path))


TREE = [{"op": "all", "in": [{"op": "ge", "in": [
    {"root": "upload", "label": "host data", "site": "batch.py:7"}]}]}]
FLAT = {"verdict": "hoistable", "roots": "host data at batch.py:7", "ops": "ge, all",
        "uploads": "batch.py:7", "digest": "abc", "once": 1}


def test_a_result_writes_each_tree_once_and_reads_it_back_for_every_site(tmp_path: Any) -> None:
    """Three events with one tree: the first line carries it, the next two its id only; the
    sites table hands the tree to every site that read such a value."""
    import json

    from syncguard.core.events import SyncEvent
    from syncguard.results import analysis, loader
    from syncguard.results import format as results
    from syncguard.results.writer import ResultWriter

    lin = {**FLAT, "tree": TREE, "tree_id": "0123456789ab"}
    path = str(tmp_path / "result.jsonl")
    w = ResultWriter(path, {"scenarios": {}})
    for step in range(3):
        ev = SyncEvent("scalar_read", "Tensor.__bool__", None, "model.py", 3 + (step == 2),
                       "f", (), step, "MainThread", lineage=lin)
        w.step(results.StepRecord("s", "p", "counted", step, False, 1, 1, 0, 1.0), [ev])
    w.close(True)
    events = [json.loads(x) for x in open(path) if '"type":"event"' in x]
    assert ["tree" in e["lineage"] for e in events] == [True, False, False]
    assert all(e["lineage"]["tree_id"] == "0123456789ab" for e in events)
    st = analysis.sites(loader.load(path))
    assert len(st) == 2  # model.py:3 (steps 0, 1) and model.py:4 (step 2: its line has no tree)
    for raw in st["lineage_tree"]:
        d = json.loads(raw)
        assert d["same"] == 1 and d["uploads"] == "batch.py:7", d
        (top,) = d["tree"]
        assert top["op"] == "all" and top["in"][0]["op"] == "ge", top
        assert top["in"][0]["in"] == TREE[0]["in"][0]["in"], top


def test_lineage_recorded_before_trees_draws_its_roots(tmp_path: Any) -> None:
    """A result whose lineage has no tree (written before trees were) still draws one: its
    ops, then its roots as leaves; a lineage_tree that is not JSON draws nothing."""
    from _cli import write_result
    from _lineage_html import trees

    from syncguard.renderers import html
    from syncguard.results import loader

    path = write_result(tmp_path / "result.jsonl",
                        events=[{"step": i, "lineage": FLAT} for i in (1, 2)])
    page = html.render(loader.load(str(path)), plots=False)
    (tree,) = trees(page)
    assert tree["text"] == "the value read at model.py:3 (Tensor.__bool__)"
    (ops,) = tree["kids"]
    assert ops["text"].startswith("ge, all (the ops, recorded as a list before lineage trees")
    assert [k["text"] for k in ops["kids"]] == [
        "upload host data at batch.py:7, the same value every step"]
    assert html.lineage_tree({"lineage_tree": "{not json", "site": "a.py:1"}) == ""
