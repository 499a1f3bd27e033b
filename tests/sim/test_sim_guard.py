"""The guard on the simulated npu: the catalogue, threads, the sampling paths, cross-checks."""

from __future__ import annotations

import threading
import types
from typing import Any, Dict, List

import pytest
import torch

from sglang_ascend_sampling import TOP_K_ALL, SamplingBatchInfo, SamplingParams, sample
from sglang_ascend_sampling.sampler import top_k_top_p_min_p_sampling_from_logits_ascend_with_branch
from syncguard import SyncGuard, allow, simulated_device
from syncguard.core.catalogue import CATCH, ZERO, Case
from syncguard.driving.scenario import parse

DEV = str(simulated_device("npu", torch_npu=True))


@pytest.mark.parametrize("case", CATCH + ZERO, ids=lambda c: c.name)
def test_catalogue_on_simulated_npu_matches_npu_model(case: Case) -> None:
    with SyncGuard() as g:
        case.fn(DEV)
    assert g.count == case.expected("npu"), [e.describe() for e in g.events]
    for ev in g.counted_events:
        assert ev.filename.endswith("catalogue.py"), ev.describe()
        assert ev.device == "npu"


@pytest.mark.parametrize("case", [c for c in CATCH if c.expected("npu") > 0],
                         ids=lambda c: c.name)
def test_simulated_npu_blames_the_exact_line(case: Case) -> None:
    # the innermost user frame is the event's line, and the case's own line is on the stack
    # (a case calling a helper, e.g. ``_if``, is blamed on the helper's ``if`` line)
    with SyncGuard() as g:
        case.fn(DEV)
    case_line, case_fn = case.fn.__code__.co_firstlineno, case.fn.__name__
    assert g.counted_events
    for ev in g.counted_events:
        assert (ev.filename, ev.lineno) == (ev.stack[0].filename, ev.stack[0].lineno)
        frames = [(f.lineno, f.function) for f in ev.stack if f.filename.endswith("catalogue.py")]
        assert frames and frames[0][0] == ev.lineno, ev.describe()
        assert any(ln == case_line or fn == case_fn != "<lambda>" for ln, fn in frames), (
            case_line, frames)


def test_backend_layer_agrees_with_python_layer_on_the_catalogue() -> None:
    """An independent second layer: the simulated backend counts host-read ATen ops itself.
    Every disagreement with the interceptors must be a documented blind spot."""
    from syncguard.driving.calibration import calibrate

    cal = calibrate("sim")
    unexplained = [(r["case"], d) for r in cal["cases"] for d in r["disagreements"]
                   if not d["known_reason"]]
    assert unexplained == []
    assert sum(1 for r in cal["cases"] if r["disagreements"]) <= 3
    assert not any("error" in r for r in cal["cases"])


def test_worker_thread_read_of_simulated_tensor_is_counted() -> None:
    x = torch.arange(4, device=DEV)
    with SyncGuard() as g:
        th = threading.Thread(target=lambda: x.sum().item(), name="overlap-worker")
        th.start()
        th.join()
    assert g.count == 1 and g.events[0].thread == "overlap-worker"


def _batch(top_ks: List[int], vocab: int = 2048, deterministic: bool = False
           ) -> SamplingBatchInfo:
    reqs = [SamplingParams(temperature=0.8, top_k=k, top_p=0.9, seed=i)
            for i, k in enumerate(top_ks)]
    return SamplingBatchInfo.build(reqs, DEV, deterministic=deterministic)


def _ascend(b: SamplingBatchInfo, path: str, ns: Any, vocab: int = 2048) -> str:
    with allow("test input"):
        logits = torch.randn(b.batch_size, vocab, generator=torch.Generator().manual_seed(0)
                             ).to(DEV)
    _, branch = top_k_top_p_min_p_sampling_from_logits_ascend_with_branch(
        logits, b.top_ks, b.top_ps, b.min_ps, False, None, None,
        npu_top_k_top_p_eligible=b.npu_top_k_top_p_eligible, path=path, torch_npu=ns)
    return branch


def test_building_the_batch_costs_no_hidden_sync() -> None:
    with SyncGuard() as g:
        b = _batch([1, 1024, 20], deterministic=True)
        b.merge(_batch([5], deterministic=True))
        b.filter([0, 2])
    assert b.build_mode == "pinned-nonblocking"
    assert g.count == 0, [e.describe() for e in g.events]


@pytest.mark.parametrize("path,with_op,want", [
    ("legacy", True, 1), ("legacy", False, 0), ("flag", True, 0), ("flag", False, 0),
    ("flag-recompute", True, 0)])
def test_legacy_reads_once_per_call_only_when_the_operator_exists(
        path: str, with_op: bool, want: int) -> None:
    from syncguard.sim import torch_npu_standin

    ns = torch_npu_standin if with_op else types.SimpleNamespace()
    b = _batch([1, 1024, 20])
    with SyncGuard() as g:
        for _ in range(3):
            _ascend(b, path, ns)
    assert g.count == 3 * want
    if want:
        hidden = g.counted_events
        assert {e.api for e in hidden} == {"Tensor.__bool__"}
        assert all(e.filename.endswith("sglang_ascend_sampling/sampler.py") for e in hidden)


def _item_variant(top_ks: torch.Tensor, eligible: bool) -> bool:
    # A future regression: the same check written with .item() instead of torch.all.
    return bool(top_ks.max().item() <= 1024 and top_ks.min().item() >= 1)


def test_item_variant_slips_past_the_upstream_mock_but_not_the_guard(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's test made torch.all raise; a .item() read passes it. The guard catches it."""
    top_ks = _batch([1, 1024]).top_ks

    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("torch.all must not be called")

    with monkeypatch.context() as m:
        m.setattr(torch, "all", boom)
        assert _item_variant(top_ks, True) is True  # the mock-based test is blind to it
    with SyncGuard() as g:
        _item_variant(top_ks, True)
    assert g.count == 2 and {e.api for e in g.events} == {"Tensor.item"}


def test_fused_operator_never_receives_an_ineligible_top_k() -> None:
    """k outside [1, 1024] is undefined on the device (the kernel does not check it): no path
    may send one, and the stand-in warns when one arrives."""
    from sglang_ascend_sampling import npu_op

    calls: List[List[int]] = []

    def spy(logits: torch.Tensor, p: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        from syncguard.sim.kernel import host_value

        calls.append(host_value(k).tolist())
        return npu_op.npu_top_k_top_p(logits, p, k)

    ns = types.SimpleNamespace(npu_top_k_top_p=spy)
    for path in ("legacy", "flag", "flag-recompute"):
        for ks in ([1, 1024], [1, 1025], [4, TOP_K_ALL], [2048]):
            _ascend(_batch(ks), path, ns)
    assert calls and all(1 <= k <= 1024 for c in calls for k in c)
    with pytest.warns(npu_op.UndefinedResultWarning, match="1025"):
        b = _batch([1, 1025])
        npu_op.npu_top_k_top_p(torch.zeros(2, 2048, device=DEV), b.top_ps, b.top_ks)


SEEDED = """
name = "t"
vocab_size = {vocab}
steps = {steps}
warmup = 0
seed = 3
deterministic = true
[[requests]]
id = "a"
top_k = {k}
temperature = 0.9
top_p = 0.9
seed = 11
[[requests]]
id = "b"
top_k = 8
temperature = 0.9
seed = 12
"""


def _tokens(text: str, path: str, device: str) -> Dict[int, Any]:
    from syncguard.driving.devices import resolve_target
    from syncguard.driving.runner import run_pass

    recs = run_pass(parse(text), path, resolve_target(device), counted=False)
    return {r.step: (r.labels["branch"], r.tokens) for r in recs}


def test_same_code_on_simulated_npu_and_cpu_gives_identical_tokens() -> None:
    text = SEEDED.format(vocab=2048, steps=4, k=20)
    assert _tokens(text, "flag", "sim") == _tokens(text, "flag", "cpu")
    unseeded = text.replace("deterministic = true", "deterministic = false")
    assert _tokens(unseeded, "legacy", "sim") == _tokens(unseeded, "legacy", "cpu")


def test_seeded_legacy_and_flag_agree_when_they_take_the_same_branch() -> None:
    text = SEEDED.format(vocab=2048, steps=5, k=20)
    assert _tokens(text, "legacy", "sim") == _tokens(text, "flag", "sim")


def test_tiny_vocabulary_divergence() -> None:
    """vocab <= 1024 with TOP_K_ALL: the generic branch rewrites TOP_K_ALL to the vocabulary
    size in place, so from step 1 legacy's device check passes (fused) while the host flag
    stays False (generic)."""
    text = SEEDED.format(vocab=512, steps=4, k=-1)
    legacy, flag = _tokens(text, "legacy", "sim"), _tokens(text, "flag", "sim")
    assert [legacy[s][0] for s in range(4)] == ["generic", "fused", "fused", "fused"]
    assert [flag[s][0] for s in range(4)] == ["generic"] * 4
    assert legacy[0] == flag[0]  # same branch, same seeded tokens


@pytest.mark.syncguard(max_syncs=0, device="npu")
def test_flag_path_decode_steps_have_no_hidden_sync() -> None:
    """syncguard's own CI guard on its sampling subject, through its pytest plugin: the
    plugin fails this test if any hidden host sync appears in the flag path."""
    b = _batch([1, 1024, 20])
    for step in range(3):
        with allow("test input"):
            logits = torch.randn(3, 2048, generator=torch.Generator().manual_seed(step)).to(DEV)
        res = sample(logits, b, "flag")
        with allow("engine token readback"):
            res.ids.tolist()
        assert res.branch == "fused"


def test_host_index_tensor_on_a_device_tensor_is_a_host_to_device_copy() -> None:
    """PyTorch's own sync-warning test expects a sync for x[ind_cpu] and x[ind_cpu] = y: the
    index is copied to the device and the host waits for it."""
    x = torch.arange(6.0, device=DEV)
    ind_cpu = torch.tensor([0, 2])
    ind_dev, zeros = ind_cpu.to(DEV), torch.zeros(2, device=DEV)
    with SyncGuard() as g:
        x[ind_cpu]
        x[ind_cpu] = zeros
        x[torch.tensor(1)]  # a 0-d host index is read on the host as an int: no copy
        x[ind_dev]  # a device index: nothing
        x.index_put_((ind_cpu,), zeros)
    assert [(e.kind, e.api) for e in g.counted_events] == [
        ("h2d_copy", "Tensor.__getitem__"), ("h2d_copy", "Tensor.__setitem__"),
        ("h2d_copy", "Tensor.index_put_")]
    assert x.cpu().tolist() == [0.0, 1.0, 0.0, 3.0, 4.0, 5.0]


def test_backend_layer_counts_a_host_index_tensor_too() -> None:
    x = torch.arange(6.0, device=DEV)
    ind_cpu = torch.tensor([0, 2])
    with SyncGuard() as g:
        torch.ops.aten.index.Tensor(x, [ind_cpu])  # no Python entry point
    assert [(e.kind, e.op) for e in g.counted_events] == [("h2d_copy", "aten::index.Tensor")]


def test_the_simulated_backend_is_registered_with_the_interception_layer() -> None:
    from syncguard.core.hub import HUB
    from syncguard.sim.kernel import SimTensor

    b = HUB.backends["npu"]
    assert (b.tensor_type, b.model) == (SimTensor, "npu")


def test_a_list_index_in_an_assignment_is_still_a_host_to_device_copy() -> None:
    x = torch.zeros(2, 3, device=DEV)
    v = torch.ones(2, device=DEV)
    with SyncGuard() as g:
        x[0, [0, 2]] = v  # the list becomes a host tensor, copied to the device
        x[:, 1] = v  # device to device: nothing
    assert [e.kind for e in g.counted_events] == ["h2d_copy"], [e.describe() for e in g.events]
