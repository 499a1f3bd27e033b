"""syncguard's own CI guard on its sampling subjects, through its own pytest plugin.

Every test here carries ``@pytest.mark.syncguard``: the plugin fails it when the measured body
makes a hidden host sync, naming the line. The decode loops cover every sampler branch and the
batch changes an engine makes between steps (join = merge, leave = filter). The legacy path is
kept as a strict xfail: if the plugin ever stopped seeing its device check, the XPASS fails the
suite.
"""

from __future__ import annotations

from typing import Any, List, Optional

import pytest
import torch

from sglang_ascend_sampling import SamplingBatchInfo, SamplingParams, sample
from syncguard import allow, simulated_device

DEV = str(simulated_device("npu", torch_npu=True))
VOCAB = 2048

MIXES = {
    "greedy": [SamplingParams(temperature=0.0), SamplingParams(temperature=0.0)],
    "simple": [SamplingParams(temperature=0.7), SamplingParams(temperature=1.0)],
    "fused": [SamplingParams(temperature=0.8, top_k=1), SamplingParams(top_k=1024, top_p=0.9)],
    "generic": [SamplingParams(temperature=0.8, top_k=1025), SamplingParams(top_p=0.9)],
    "min_p": [SamplingParams(temperature=0.8, top_k=40, min_p=0.05),
              SamplingParams(top_p=0.9, min_p=0.1)],
}


def _decode(guard: Any, params: List[SamplingParams], path: str, steps: int = 4,
            deterministic: bool = False, join: Optional[SamplingParams] = None) -> List[str]:
    """A small engine loop: build the batch, then per step logits -> sample -> readback; a
    request joins at step 1 and the first one leaves at step 2 (flag-recompute recomputes)."""
    batch = SamplingBatchInfo.build(params, DEV, deterministic=deterministic)
    branches = []
    for step in range(steps):
        with guard.step():
            if step == 1 and join is not None:
                batch.merge(SamplingBatchInfo.build([join], DEV, deterministic=deterministic))
            if step == 2 and batch.batch_size > 1:
                batch.filter(list(range(1, batch.batch_size)),
                             recompute_flags=path == "flag-recompute")
            with allow("test input: logits from the host"):
                logits = torch.randn(batch.batch_size, VOCAB,
                                     generator=torch.Generator().manual_seed(step)).to(DEV)
            positions = None
            if deterministic:
                with allow("test input: positions from the host"):
                    positions = torch.full((batch.batch_size,), step, dtype=torch.int64).to(DEV)
            res = sample(logits, batch, path, positions)
            with allow("engine token readback"):
                ids = res.ids.tolist()
            assert len(ids) == batch.batch_size
            branches.append(res.branch)
    return branches


@pytest.mark.syncguard(max_syncs=0, device="npu")
@pytest.mark.parametrize("path", ["flag", "flag-recompute"])
@pytest.mark.parametrize("mix", sorted(MIXES))
def test_flag_paths_have_no_hidden_sync_on_any_branch(syncguard: Any, mix: str,
                                                      path: str) -> None:
    branches = _decode(syncguard, MIXES[mix], path)
    want = {"greedy": "greedy", "simple": "simple", "fused": "fused", "generic": "generic",
            "min_p": None}[mix]
    if want is not None:
        assert set(branches) == {want}, branches


@pytest.mark.syncguard(max_syncs=0, device="npu")
@pytest.mark.parametrize("path", ["flag", "flag-recompute"])
def test_flag_paths_have_no_hidden_sync_across_joins_leaves_and_seeds(syncguard: Any,
                                                                      path: str) -> None:
    params = [SamplingParams(temperature=0.8, top_k=1025, seed=3),
              SamplingParams(temperature=0.8, top_k=20, top_p=0.9, seed=4)]
    branches = _decode(syncguard, params, path, steps=5, deterministic=True,
                       join=SamplingParams(temperature=0.9, top_k=8, seed=5))
    # the top_k=1025 request leaves at step 2: only flag-recompute goes back to fused
    assert branches[:2] == ["generic", "generic"]
    assert set(branches[2:]) == ({"fused"} if path == "flag-recompute" else {"generic"})


@pytest.mark.xfail(strict=True, reason="legacy reads torch.all(...) in a Python condition on "
                   "every fused/generic step: the plugin must fail this test")
@pytest.mark.syncguard(max_syncs=0, device="npu")
def test_legacy_path_is_caught_by_the_plugin(syncguard: Any) -> None:
    _decode(syncguard, MIXES["fused"], "legacy")
