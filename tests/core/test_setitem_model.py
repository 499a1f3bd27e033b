"""A Python number written through an index (issue 21, item 4): decided per backend from the
source, recorded in the op models with where, and listed for the hardware check."""

from __future__ import annotations

import pytest
import torch

from syncguard import SyncGuard
from syncguard.core.events import DATA_DEPENDENT, H2D_COPY
from syncguard.core.opmodel import OpModelError, load_model, parse_model


def _writes() -> None:
    x = torch.zeros(4)
    x[0] = 0  # one 0-d destination
    x[torch.arange(2)] = 1.0  # an integer index tensor
    x[x > 0] = 2.0  # a boolean mask
    x.view(2, 2)[0] = 3  # a row: fill_
    x[1:2] = 4  # a slice: fill_
    x[...] = 5  # Ellipsis on a 1-d x: fill_


@pytest.mark.parametrize("model,kinds", [
    ("cuda", [H2D_COPY, H2D_COPY]),
    ("npu", [DATA_DEPENDENT]),
])
def test_scalar_writes_count_by_the_models_backend(model: str, kinds: list) -> None:
    with SyncGuard(devices=("cpu",), model=model) as g:
        _writes()
    assert [e.kind for e in g.counted_events] == kinds, [e.describe() for e in g.events]
    for e in g.counted_events:
        assert e.api == "Tensor.__setitem__" and e.filename == __file__
        assert e.source and e.source.startswith(f"{model} op model: x[")


def test_scalar_writes_without_a_model_count_nothing_and_nested_models_each_count() -> None:
    with SyncGuard(devices=("cpu",)) as none:
        _writes()
    assert none.count == 0
    x = torch.zeros(3)
    with SyncGuard(devices=("cpu",), model="cuda") as cuda:
        with SyncGuard(devices=("cpu",), model="npu") as npu:
            x[0] = 1.0
            x[x > 0] = 0.0
    assert (cuda.count, npu.count) == (1, 1)
    assert [e.op for e in cuda.counted_events] == ["aten::copy_"]
    assert [e.op for e in npu.counted_events] == ["aten::nonzero"]


def test_models_record_each_decision_with_its_source() -> None:
    for backend in ("cuda", "npu"):
        m = load_model(backend)
        assert m is not None
        entries = {e.when: e for e in m.entries if e.api == "Tensor.__setitem__"}
        assert set(entries) == {"setitem_scalar_into_0d", "setitem_scalar_int_tensor_index",
                                "setitem_scalar_bool_mask"}, backend
        for e in entries.values():
            assert any(f in e.where for f in ("THPVariable_setitem", "_index_put_impl_",
                                                "at::scalar_tensor")), e.where
            assert "catalogue case" in e.where.lower()
        assert not any(op.startswith("aten::nonzero") or op == "aten::copy_" for op in m.ops)
    reads = {b: {e.when: e.reads for e in load_model(b).entries  # type: ignore[union-attr]
                 if e.api} for b in ("cuda", "npu")}
    assert reads == {
        "cuda": {"setitem_scalar_into_0d": 1, "setitem_scalar_int_tensor_index": 1,
                 "setitem_scalar_bool_mask": 0},
        "npu": {"setitem_scalar_into_0d": 0, "setitem_scalar_int_tensor_index": 0,
                "setitem_scalar_bool_mask": 1}}
    with pytest.raises(OpModelError, match="unknown kind"):
        parse_model({"backend": "x", "entries": [
            {"op": "aten::a", "reads": 1, "evidence": "source", "kind": "teleport"}]}, "t")


def test_every_question_is_a_catalogue_case_and_the_calibration_lists_it() -> None:
    from syncguard.core.catalogue import CATCH, QUESTIONS, ZERO
    from syncguard.driving.calibration import calibrate, question_lines

    names = {c.name for c in CATCH + ZERO}
    assert set(QUESTIONS) <= names
    lines = question_lines(calibrate("sim"))
    assert len(lines) == len(QUESTIONS)
    assert all(line.endswith(": confirmed") for line in lines), lines
