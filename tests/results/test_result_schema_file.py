"""The result schema the loader enforces, published as a JSON Schema
(``syncguard/results/schemas/result-line-1.json``): built from the loader's own field tables,
committed as built, and in agreement with the loader on well-formed and crafted lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from _cli import write_result
from _paths import DATA, ROOT

from syncguard.results import format as results
from syncguard.results import loader
from syncguard.results.schema import json_schema

SCHEMA_FILE = ROOT / "syncguard" / "results" / "schemas" / "result-line-1.json"


def test_the_committed_schema_is_the_loaders() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == json_schema(), (
        "regenerate: python -c 'import json; from syncguard.results.schema import "
        "json_schema; print(json.dumps(json_schema(), indent=1))' > " + str(SCHEMA_FILE))


def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft7Validator(json.loads(SCHEMA_FILE.read_text()))


@pytest.mark.parametrize("source", ["crafted", "old"])
def test_well_formed_results_validate(source: str, tmp_path: Path) -> None:
    v = _validator()
    path = (write_result(tmp_path / "r.jsonl", events=[{}, {"op": "aten::x"}])
            if source == "crafted" else DATA / "old" / "result-branch-fields.jsonl")
    loader.load(str(path))
    for line in path.read_text().splitlines():
        errors = list(v.iter_errors(json.loads(line)))
        assert not errors, (line, errors[0].message if errors else "")


@pytest.mark.parametrize("event", [{"lineno": None}, {"filename": "a\x00b"}, {"count": None},
                                   {"kind": 3}, {"stack": None}])
def test_the_schema_and_the_loader_refuse_the_same_events(event: Dict[str, Any],
                                                           tmp_path: Path) -> None:
    v = _validator()
    path = write_result(tmp_path / "r.jsonl", events=[event])
    with pytest.raises(results.ResultError):
        loader.load(str(path))
    bad = [json.loads(ln) for ln in path.read_text().splitlines()
           if json.loads(ln)["type"] == "event"]
    assert list(v.iter_errors(bad[0]))
