"""Tests of the case study, sglang_ascend_sampling: SGLang's Ascend sampling before and after
the sync fix (CPU)."""

from __future__ import annotations

import math
import struct
import sys
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest
import torch
from torch.overrides import TorchFunctionMode

from sglang_ascend_sampling import (
    BUILD_HOST,
    BUILD_PAGEABLE,
    BUILD_PINNED,
    DEFAULT_SEED,
    PATHS,
    TOP_K_ALL,
    Sampler,
    SamplingBatchInfo,
    SamplingParams,
    SamplingParamsError,
    SamplingRequest,
    multinomial_with_seed,
    murmur3_block_hash,
    murmur3_hash_grid,
    resolve_torch_npu,
    sample,
    top_k_top_p_min_p_sampling_from_logits_ascend,
    top_k_top_p_min_p_sampling_from_logits_ascend_with_branch,
)
from sglang_ascend_sampling.ops import is_standin
from syncguard.driving.devices import npu_state

ascend = top_k_top_p_min_p_sampling_from_logits_ascend_with_branch


# ---------------------------------------------------------------------- helpers
class FakeNPU:
    """A ``torch_npu`` namespace whose ``npu_top_k_top_p`` records calls.

    It returns the logits unchanged (no filtering), enough to check dispatch; the semantics
    of the real operator live in syncguard's stand-in.
    """

    def __init__(self) -> None:
        self.calls: List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def npu_top_k_top_p(
        self, logits: torch.Tensor, p: torch.Tensor, k: torch.Tensor
    ) -> torch.Tensor:
        self.calls.append((logits.clone(), p.clone(), k.clone()))
        return logits.clone()


def _standin() -> Any:
    """syncguard's simulated ``torch_npu``."""
    from syncguard.sim import torch_npu_standin

    return torch_npu_standin


def _logits(rows: Sequence[Sequence[float]]) -> torch.Tensor:
    """Logits whose softmax is exactly the given (normalised) probability rows."""
    return torch.tensor(rows, dtype=torch.float64).log().to(torch.float32)


def _batch(
    *params: SamplingParams, deterministic: bool = False
) -> SamplingBatchInfo:
    return SamplingBatchInfo.build(list(params), "cpu", deterministic=deterministic)


def _tensors(
    top_ks: Sequence[int],
    top_ps: Optional[Sequence[float]] = None,
    min_ps: Optional[Sequence[float]] = None,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = len(top_ks)
    return (
        torch.tensor(list(top_ks), dtype=torch.int32),
        torch.tensor(list(top_ps) if top_ps is not None else [1.0] * n, dtype=torch.float32),
        torch.tensor(list(min_ps) if min_ps is not None else [0.0] * n, dtype=torch.float32),
    )


class _Capture:
    """Replaces ``torch.multinomial``: records the weights and returns a fixed column."""

    def __init__(self, column: int = 0) -> None:
        self.column = column
        self.weights: List[torch.Tensor] = []

    def __call__(self, probs: torch.Tensor, num_samples: int = 1, **_: Any) -> torch.Tensor:
        self.weights.append(probs.clone())
        return torch.full((probs.shape[0], num_samples), self.column, dtype=torch.int64)


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> _Capture:
    cap = _Capture()
    monkeypatch.setattr(torch, "multinomial", cap)
    return cap


class _HostReads(TorchFunctionMode):
    """Counts Python-level host reads of tensor data (all tensors here are CPU tensors)."""

    READS = ("__bool__", "item", "tolist", "cpu", "numpy", "__index__", "__int__", "__float__")

    def __init__(self) -> None:
        super().__init__()
        self.reads: List[str] = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Tuple[Any, ...] = (),
        kwargs: Optional[Dict[str, Any]] = None,
    ) -> Any:
        name = getattr(func, "__name__", str(func))
        if name in self.READS:
            self.reads.append(name)
        if name == "__getitem__" and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
                self.reads.append("bool-mask-index")
        return func(*args, **(kwargs or {}))


# ---------------------------------------------------------------------- params
def test_params_normalisation() -> None:
    assert SamplingParams().top_k == TOP_K_ALL
    assert SamplingParams(top_k=None).top_k == TOP_K_ALL
    assert SamplingParams(top_k=-1).top_k == TOP_K_ALL
    assert SamplingParams(top_k=7).top_k == 7
    for t in (0.0, 0, 5e-7):
        greedy = SamplingParams(temperature=t, top_k=50)
        assert (greedy.temperature, greedy.top_k, greedy.is_greedy) == (1.0, 1, True)
    not_greedy = SamplingParams(temperature=1e-6)
    assert not_greedy.temperature == pytest.approx(1e-6)
    assert not_greedy.top_k == TOP_K_ALL and not not_greedy.is_greedy
    assert SamplingParams(top_k=1024).npu_top_k_top_p_eligible
    assert not SamplingParams(top_k=1025).npu_top_k_top_p_eligible
    assert not SamplingParams().npu_top_k_top_p_eligible


@pytest.mark.parametrize(
    ("kwargs", "field", "value"),
    [
        ({"top_k": 0}, "top_k", "0"),
        ({"top_k": -2}, "top_k", "-2"),
        ({"top_p": 0.0}, "top_p", "0.0"),
        ({"top_p": 1.5}, "top_p", "1.5"),
        ({"top_p": float("nan")}, "top_p", "nan"),
        ({"min_p": -0.1}, "min_p", "-0.1"),
        ({"min_p": 1.1}, "min_p", "1.1"),
        ({"temperature": -1.0}, "temperature", "-1.0"),
        ({"top_k": 2.5}, "top_k", "2.5"),
        ({"seed": 1 << 64}, "seed", str(1 << 64)),
    ],
)
def test_params_validation_names_field(kwargs: Dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**kwargs)
    message = str(info.value)
    assert field in message and value in message
    assert isinstance(info.value, ValueError)


def test_params_boundaries_accepted() -> None:
    SamplingParams(top_p=1.0, min_p=0.0)
    SamplingParams(top_p=1e-9, min_p=1.0, top_k=1)


# ---------------------------------------------------------------------- batch metadata
def test_build_tensors_and_flags() -> None:
    batch = SamplingBatchInfo.build(
        [
            SamplingRequest("a", SamplingParams(temperature=0.5, top_k=8, top_p=0.9)),
            SamplingParams(min_p=0.1),
        ],
        "cpu",
    )
    assert batch.rids == ["a", "req-1"]
    assert batch.temperatures.shape == (2, 1) and batch.temperatures.dtype == torch.float32
    assert batch.top_ps.dtype == torch.float32 and batch.top_ps.shape == (2,)
    assert batch.top_ks.dtype == torch.int32 and batch.top_ks.tolist() == [8, TOP_K_ALL]
    assert batch.min_ps.dtype == torch.float32
    assert batch.sampling_seed is None
    assert batch.build_mode == BUILD_HOST and batch.pin_fallback_reason is None
    assert batch.flags() == {
        "is_all_greedy": False,
        "need_top_p_sampling": True,
        "need_top_k_sampling": True,
        "need_min_p_sampling": True,
        "npu_top_k_top_p_eligible": False,
    }
    assert "tensor(" not in repr(batch)


def test_build_seeds_only_when_deterministic() -> None:
    params = [SamplingParams(seed=7), SamplingParams()]
    assert _batch(*params).sampling_seed is None
    seeded = _batch(*params, deterministic=True)
    assert seeded.sampling_seed is not None
    assert seeded.sampling_seed.dtype == torch.int64
    assert seeded.sampling_seed.tolist() == [7, DEFAULT_SEED]


def test_build_flags_greedy_and_simple() -> None:
    greedy = _batch(SamplingParams(temperature=0.0), SamplingParams(top_k=1))
    assert greedy.is_all_greedy and greedy.npu_top_k_top_p_eligible
    simple = _batch(SamplingParams(temperature=0.7))
    assert not (
        simple.need_top_k_sampling or simple.need_top_p_sampling or simple.need_min_p_sampling
    )
    # A single greedy request in a sampling batch makes need_top_k_sampling True.
    mixed = _batch(SamplingParams(temperature=0.7), SamplingParams(temperature=0.0))
    assert mixed.need_top_k_sampling and not mixed.is_all_greedy


def test_build_on_a_non_cpu_device_stages_non_blocking() -> None:
    # "meta" is not the CPU: the staging path runs. Pinned where an accelerator allows it,
    # else the pageable fallback with its reason recorded.
    batch = SamplingBatchInfo.build([SamplingParams(top_k=3)], "meta")
    assert batch.top_ks.device.type == "meta"
    assert batch.build_mode in (BUILD_PINNED, BUILD_PAGEABLE)
    if batch.build_mode == BUILD_PAGEABLE:
        assert batch.pin_fallback_reason
    batch.filter([0])
    assert batch.filter_mode == batch.build_mode


@pytest.mark.parametrize(
    ("top_ks", "eligible"),
    [
        ([1, 1024], True),
        ([1, 1025], False),
        ([4, TOP_K_ALL], False),
        ([], True),
    ],
)
def test_eligibility_boundaries(top_ks: List[int], eligible: bool) -> None:
    batch = _batch(*[SamplingParams(top_k=k) for k in top_ks])
    assert batch.npu_top_k_top_p_eligible is eligible


def test_merge_ands_and_ors() -> None:
    a = _batch(SamplingParams(top_k=1), SamplingParams(top_k=1))
    b = _batch(SamplingParams(top_k=TOP_K_ALL, top_p=0.8, min_p=0.05))
    assert a.is_all_greedy and a.npu_top_k_top_p_eligible
    a.merge(b)
    assert a.batch_size == 3 and a.top_ks.tolist() == [1, 1, TOP_K_ALL]
    assert a.temperatures.shape == (3, 1)
    assert not a.is_all_greedy
    assert not a.npu_top_k_top_p_eligible
    assert a.need_top_p_sampling and a.need_top_k_sampling and a.need_min_p_sampling

    c = _batch(SamplingParams(top_k=4))
    c.merge(_batch(SamplingParams(top_k=1024)))
    assert c.npu_top_k_top_p_eligible and not c.need_top_p_sampling


def test_merge_seeds() -> None:
    a = _batch(SamplingParams(seed=1), deterministic=True)
    a.merge(_batch(SamplingParams(), deterministic=True))
    assert a.sampling_seed is not None and a.sampling_seed.tolist() == [1, DEFAULT_SEED]
    with pytest.raises(ValueError, match="deterministic"):
        a.merge(_batch(SamplingParams()))
    empty = _batch()
    empty.merge(_batch(SamplingParams(seed=3), deterministic=True))
    assert empty.sampling_seed is not None and empty.sampling_seed.tolist() == [3]


def test_filter_never_promotes() -> None:
    batch = _batch(SamplingParams(top_k=4), SamplingParams(top_k=2000), SamplingParams(top_k=8))
    assert not batch.npu_top_k_top_p_eligible
    batch.filter([0, 2])  # the ineligible request leaves
    assert batch.top_ks.tolist() == [4, 8]
    assert batch.rids == ["req-0", "req-2"]
    assert batch.filter_mode == BUILD_HOST
    assert not batch.npu_top_k_top_p_eligible  # stays False: nothing recomputed


def test_filter_recompute_flags_promotes() -> None:
    batch = _batch(
        SamplingParams(top_k=4, top_p=0.5),
        SamplingParams(top_k=2000, min_p=0.2),
        SamplingParams(top_k=8),
    )
    batch.filter([0, 2], recompute_flags=True)
    assert batch.npu_top_k_top_p_eligible
    assert batch.need_top_p_sampling and not batch.need_min_p_sampling


def test_filter_gathers_rows_and_checks_indices() -> None:
    batch = _batch(
        SamplingParams(temperature=0.5, top_k=3, seed=11),
        SamplingParams(temperature=0.9, top_p=0.4, seed=12),
        deterministic=True,
    )
    batch.filter([1])
    assert batch.temperatures.tolist() == [[pytest.approx(0.9)]]
    assert batch.top_ps.tolist() == [pytest.approx(0.4)]
    assert batch.sampling_seed is not None and batch.sampling_seed.tolist() == [12]
    with pytest.raises(IndexError):
        batch.filter([1])
    batch.filter([])
    assert batch.batch_size == 0 and batch.top_ks.shape == (0,)


# ---------------------------------------------------------------------- generic branch
PROBS = [0.5, 0.3, 0.15, 0.05]


@pytest.mark.parametrize(
    ("top_k", "top_p", "min_p", "expected"),
    [
        (2, 1.0, 0.0, [0.5, 0.3, 0.0, 0.0]),
        (1, 1.0, 0.0, [0.5, 0.0, 0.0, 0.0]),
        (TOP_K_ALL, 1.0, 0.0, PROBS),
        (TOP_K_ALL, 0.6, 0.0, [0.5, 0.3, 0.0, 0.0]),
        (TOP_K_ALL, 0.4, 0.0, [0.5, 0.0, 0.0, 0.0]),  # the top token stays
        (TOP_K_ALL, 0.01, 0.0, [0.5, 0.0, 0.0, 0.0]),
        (3, 0.9, 0.0, [0.5, 0.3, 0.15, 0.0]),
        (TOP_K_ALL, 1.0, 0.5, [0.5, 0.3, 0.0, 0.0]),  # threshold 0.25
        (TOP_K_ALL, 1.0, 0.7, [0.5, 0.0, 0.0, 0.0]),  # threshold 0.35
    ],
)
def test_generic_branch_weights(
    capture: _Capture, top_k: int, top_p: float, min_p: float, expected: List[float]
) -> None:
    top_ks, top_ps, min_ps = _tensors([top_k], [top_p], [min_p])
    ids, branch = ascend(
        _logits([PROBS]), top_ks, top_ps, min_ps, min_p > 0, None, None, torch_npu=None
    )
    assert branch == "generic"
    assert ids.dtype == torch.int32 and ids.shape == (1,)
    (weights,) = capture.weights
    # Sorted (descending) and not renormalised.
    assert weights[0].tolist() == pytest.approx(expected, abs=1e-6)


def test_generic_branch_maps_sorted_back_to_vocab(capture: _Capture) -> None:
    # Vocabulary order: token 2 has 0.5, token 0 has 0.3, token 3 0.15, token 1 0.05.
    logits = _logits([[0.3, 0.05, 0.5, 0.15]])
    top_ks, top_ps, min_ps = _tensors([TOP_K_ALL])
    for column, token in [(0, 2), (1, 0), (2, 3), (3, 1)]:
        capture.column = column
        ids, _ = ascend(logits, top_ks, top_ps, min_ps, False, None, None, torch_npu=None)
        assert ids.tolist() == [token]


def test_generic_branch_samples_only_kept_tokens() -> None:
    torch.manual_seed(0)
    logits = _logits([PROBS] * 64)
    top_ks, top_ps, min_ps = _tensors([2] * 64)
    ids, branch = ascend(logits, top_ks, top_ps, min_ps, False, None, None, torch_npu=None)
    assert branch == "generic" and set(ids.tolist()) <= {0, 1}


def test_generic_rewrites_top_k_all_in_place() -> None:
    logits = _logits([PROBS, PROBS])
    top_ks, top_ps, min_ps = _tensors([TOP_K_ALL, 2])
    ascend(logits, top_ks, top_ps, min_ps, False, None, None, torch_npu=None)
    assert top_ks.tolist() == [4, 2]  # the caller's tensor

    batch = _batch(SamplingParams(top_p=0.9), SamplingParams(top_k=2))
    sample(_logits([PROBS, PROBS]), batch, "flag", torch_npu=None)
    assert batch.top_ks.tolist() == [4, 2]  # persists in the batch metadata


def test_ascend_wrapper_returns_ids_only() -> None:
    top_ks, top_ps, min_ps = _tensors([1])
    ids = top_k_top_p_min_p_sampling_from_logits_ascend(
        _logits([PROBS]), top_ks, top_ps, min_ps, False, None, None, torch_npu=None
    )
    assert isinstance(ids, torch.Tensor) and ids.tolist() == [0]


# ---------------------------------------------------------------------- dispatch
def test_greedy_batch_uses_argmax() -> None:
    fake = FakeNPU()
    logits = torch.tensor([[0.1, 3.0, -1.0], [5.0, 0.0, 4.9]])
    before = logits.clone()
    batch = _batch(SamplingParams(temperature=0.0), SamplingParams(top_k=1))
    result = sample(logits, batch, "legacy", torch_npu=fake)
    assert result.branch == "greedy"
    assert result.ids.dtype == torch.int32 and result.ids.tolist() == [1, 0]
    assert torch.equal(logits, before) and fake.calls == []


def test_simple_path_divides_logits_in_place() -> None:
    torch.manual_seed(0)
    fake = FakeNPU()
    logits = torch.randn(3, 10)
    expected = logits / torch.tensor([[0.5], [1.0], [2.0]])
    batch = _batch(*[SamplingParams(temperature=t) for t in (0.5, 1.0, 2.0)])
    result = sample(logits, batch, "flag", torch_npu=fake)
    assert result.branch == "simple"
    assert result.ids.dtype == torch.int32 and result.ids.shape == (3,)
    assert torch.allclose(logits, expected)
    assert fake.calls == []


def test_simple_path_seeded_is_deterministic() -> None:
    torch.manual_seed(0)
    base = torch.randn(2, 50)
    positions = torch.tensor([5, 9])
    runs = []
    for _ in range(2):
        batch = _batch(SamplingParams(seed=3), SamplingParams(), deterministic=True)
        runs.append(sample(base.clone(), batch, "flag", positions, torch_npu=None).ids.tolist())
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="positions"):
        sample(base.clone(), _batch(SamplingParams(), SamplingParams(), deterministic=True))


def test_unknown_path_names_valid_ones() -> None:
    batch = _batch(SamplingParams(top_k=2))
    for call in (
        lambda: sample(_logits([PROBS]), batch, "fast"),
        lambda: Sampler("fast"),
        lambda: ascend(_logits([PROBS]), *_tensors([2]), False, None, None, path="fast"),
    ):
        with pytest.raises(ValueError) as info:
            call()
        for path in PATHS:
            assert path in str(info.value)


def test_flags_must_be_host_bools() -> None:
    top_ks, top_ps, min_ps = _tensors([2])
    with pytest.raises(TypeError, match="host bool"):
        ascend(
            _logits([PROBS]), top_ks, top_ps, min_ps, False, None, None,
            npu_top_k_top_p_eligible=torch.tensor(True),  # type: ignore[arg-type]
            torch_npu=None,
        )


def test_sample_checks_shapes() -> None:
    batch = _batch(SamplingParams(top_k=2))
    with pytest.raises(ValueError, match="rows"):
        sample(_logits([PROBS, PROBS]), batch)
    with pytest.raises(ValueError, match="2-D"):
        sample(torch.zeros(4), batch)


# ---------------------------------------------------------------------- fused branch
@pytest.mark.parametrize("eligible", [True, False])
def test_flag_dispatch_calls_fused_exactly_when_eligible(
    monkeypatch: pytest.MonkeyPatch, eligible: bool
) -> None:
    # The upstream dispatch test: torch.all must not be used on the flag path.
    def no_torch_all(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("torch.all called on the flag path")

    monkeypatch.setattr(torch, "all", no_torch_all)
    fake = FakeNPU()
    top_ks, top_ps, min_ps = _tensors([2], [0.9])
    ids, branch = ascend(
        _logits([PROBS]), top_ks, top_ps, min_ps, False, None, None,
        npu_top_k_top_p_eligible=eligible, path="flag", torch_npu=fake,
    )
    assert ids.shape == (1,)
    assert len(fake.calls) == (1 if eligible else 0)
    assert branch == ("fused" if eligible else "generic")
    if eligible:
        logits, p, k = fake.calls[0]  # positional order (logits, p, k)
        assert logits.shape == (1, 4) and p.dtype == logits.dtype and k.dtype == torch.int32


def test_flag_dispatch_without_operator_is_generic() -> None:
    top_ks, top_ps, min_ps = _tensors([2])
    for namespace in (None, types.SimpleNamespace()):
        _, branch = ascend(
            _logits([PROBS]), top_ks, top_ps, min_ps, False, None, None,
            npu_top_k_top_p_eligible=True, torch_npu=namespace,
        )
        assert branch == "generic"


def test_legacy_follows_the_device_predicate(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNPU()
    for top_k, expected in [(2, "fused"), (1024, "fused"), (1025, "generic")]:
        top_ks, top_ps, min_ps = _tensors([1, top_k])
        _, branch = ascend(
            _logits([PROBS, PROBS]), top_ks, top_ps, min_ps, False, None, None,
            npu_top_k_top_p_eligible=False,  # ignored by the legacy path
            path="legacy", torch_npu=fake,
        )
        assert branch == expected
    assert len(fake.calls) == 2

    # Without the operator, ``and`` short-circuits: the device predicate is never evaluated.
    def no_torch_all(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("torch.all evaluated without the operator")

    monkeypatch.setattr(torch, "all", no_torch_all)
    _, branch = ascend(
        _logits([PROBS]), *_tensors([2]), False, None, None, path="legacy", torch_npu=None
    )
    assert branch == "generic"


def test_host_reads_legacy_one_flag_none() -> None:
    fake = FakeNPU()
    reads: Dict[str, List[str]] = {}
    for path in PATHS:
        batch = _batch(SamplingParams(top_k=3, top_p=0.9), SamplingParams(top_k=5, min_p=0.1))
        logits = torch.randn(2, 32)
        with _HostReads() as mode:
            result = sample(logits, batch, path, torch_npu=fake)
        assert result.branch == "fused"
        reads[path] = mode.reads
    assert reads == {"legacy": ["__bool__"], "flag": [], "flag-recompute": []}


def test_host_reads_generic_and_seeded_none() -> None:
    batch = _batch(
        SamplingParams(top_p=0.9, seed=5), SamplingParams(top_k=5, min_p=0.1),
        deterministic=True,
    )
    with _HostReads() as mode:
        result = sample(torch.randn(2, 32), batch, "flag", torch.tensor([0, 1]), torch_npu=None)
    assert result.branch == "generic" and mode.reads == []


def test_sampler_counts_branches() -> None:
    sampler = Sampler("legacy", torch_npu=FakeNPU())
    sampler(_logits([PROBS]), _batch(SamplingParams(top_k=2)))
    sampler(_logits([PROBS]), _batch(SamplingParams(temperature=0.0)))
    sampler(_logits([PROBS]), _batch(SamplingParams(top_p=0.5)))
    assert sampler.branch_counts == {"greedy": 1, "simple": 0, "fused": 1, "generic": 1}


# ---------------------------------------------------------------------- min_p on the fused branch
def test_fused_min_p_upstream_defect() -> None:
    # Upstream: probs.max(dim=-1) * min_ps -- max(dim=) returns (values, indices).
    top_ks, top_ps, min_ps = _tensors([4], [1.0], [0.5])
    with pytest.raises(TypeError):
        ascend(
            _logits([PROBS]), top_ks, top_ps, min_ps, True, None, None,
            npu_top_k_top_p_eligible=True, torch_npu=FakeNPU(), fix_min_p=False,
        )


def test_fused_min_p_fixed(capture: _Capture) -> None:
    top_ks, top_ps, min_ps = _tensors([4], [1.0], [0.5])
    logits = _logits([[0.15, 0.5, 0.05, 0.3]])
    ids, branch = ascend(
        logits, top_ks, top_ps, min_ps, True, None, None,
        npu_top_k_top_p_eligible=True, torch_npu=FakeNPU(), fix_min_p=True,
    )
    assert branch == "fused" and ids.dtype == torch.int32
    (weights,) = capture.weights
    # Vocabulary order, threshold 0.5 * 0.5 = 0.25.
    assert weights[0].tolist() == pytest.approx([0.0, 0.5, 0.0, 0.3], abs=1e-6)


# ---------------------------------------------------------------------- seeded sampler
_M32 = 0xFFFFFFFF


def _murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """A textbook byte-wise MurmurHash3_x86_32, independent of the code under test."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & _M32

    def scramble(k: int) -> int:
        return (rotl((k * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32

    h = seed & _M32
    body = len(data) // 4 * 4
    for i in range(0, body, 4):
        h ^= scramble(int.from_bytes(data[i : i + 4], "little"))
        h = (rotl(h, 13) * 5 + 0xE6546B64) & _M32
    if data[body:]:
        h ^= scramble(int.from_bytes(data[body:], "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"\0\0\0\0", 0, 0x2362F9DE),
        (b"aaaa", 0x9747B28C, 0x5A97808A),
        (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    ],
)
def test_textbook_murmur3_vectors(data: bytes, seed: int, expected: int) -> None:
    assert _murmur3_x86_32(data, seed) == expected


HASH_CASES = [
    (0, 0, 0),
    (42, 0, 0),
    (42, 17, 3),
    (1, 2**31 + 5, 999),
    (2**40 + 12345, 77, 1),
    (-1, 3, 8),
    (-(2**63), 0, 511),
    (2**63 - 1, 2**32 - 1, 1023),
]


@pytest.mark.parametrize(("seed", "position", "column"), HASH_CASES)
def test_hash_matches_murmur3_over_four_blocks(seed: int, position: int, column: int) -> None:
    key = struct.pack(
        "<IIII", seed & _M32, (seed >> 32) & _M32, position & _M32, column & _M32
    )
    expected = _murmur3_x86_32(key, 0)
    assert murmur3_block_hash(seed, position, column) == expected
    grid = murmur3_hash_grid(torch.tensor([seed]), torch.tensor([position]), column + 1)
    assert grid.dtype == torch.int64 and grid[0, column].item() == expected


def test_seeded_sampler_matches_python_gumbel_max() -> None:
    torch.manual_seed(1)
    logprobs = torch.log_softmax(torch.randn(3, 20, dtype=torch.float64), dim=-1)
    seeds = [5, 2**33 + 1, DEFAULT_SEED]
    positions = [0, 7, 123]
    ids = multinomial_with_seed(logprobs, torch.tensor(seeds), torch.tensor(positions))
    assert ids.dtype == torch.int64 and ids.shape == (3,)
    for row, (seed, position) in enumerate(zip(seeds, positions)):
        scores = []
        for column in range(20):
            u = murmur3_block_hash(seed, position, column) / (2**32 - 1)
            log_u = min(math.log(max(u, sys.float_info.min)), -(2.0**-32))
            scores.append(logprobs[row, column].item() - math.log(-log_u))
        assert ids[row].item() == max(range(20), key=scores.__getitem__)


def test_seeded_sampler_independent_of_batch() -> None:
    torch.manual_seed(2)
    logits = torch.randn(4, 64)
    params = [
        SamplingParams(temperature=0.8, top_k=20, seed=9),
        SamplingParams(temperature=1.3, top_p=0.7),
        SamplingParams(top_k=5, min_p=0.05, seed=1234),
        SamplingParams(temperature=0.6, top_p=0.95, top_k=40, seed=-3),
    ]
    positions = torch.tensor([10, 11, 12, 13])
    whole = _batch(*params, deterministic=True)
    together = sample(logits.clone(), whole, "flag", positions, torch_npu=None).ids.tolist()
    again = _batch(*params, deterministic=True)
    assert sample(logits.clone(), again, "flag", positions, torch_npu=None).ids.tolist() == together
    for row in range(4):
        alone = _batch(params[row], deterministic=True)
        ids = sample(
            logits[row : row + 1].clone(), alone, "flag", positions[row : row + 1], torch_npu=None
        ).ids.tolist()
        assert ids == [together[row]]


@pytest.mark.parametrize("use_standin", [False, True])
def test_legacy_and_flag_agree_on_the_same_branch(use_standin: bool) -> None:
    namespace = _standin() if use_standin else FakeNPU()
    torch.manual_seed(3)
    logits = torch.randn(3, 40)
    positions = torch.tensor([4, 5, 6])
    params = [SamplingParams(top_k=k, top_p=0.8, seed=s) for k, s in [(5, 1), (10, 2), (40, 3)]]
    for namespace_or_none, branch in [(namespace, "fused"), (None, "generic")]:
        results = {}
        for path in PATHS:
            batch = _batch(*params, deterministic=True)
            result = sample(logits.clone(), batch, path, positions, torch_npu=namespace_or_none)
            assert result.branch == branch
            results[path] = result.ids.tolist()
        assert results["legacy"] == results["flag"] == results["flag-recompute"]


def test_fused_and_generic_differ_in_general() -> None:
    # Top-p after top-k: the fused operator renormalises the kept top-k before applying top_p,
    # the generic branch does not. probs [0.4, 0.3, 0.2, 0.1], top_k=2, top_p=0.5:
    # generic keeps both (exclusive prefix 0.4 <= 0.5); fused keeps only the top token
    # (renormalised 0.43 / 0.57; the smaller's cumulative 0.43 <= 1 - 0.5 is removed).
    standin = _standin()
    probs = [0.4, 0.3, 0.2, 0.1]
    fused_ids, generic_ids = set(), set()
    for position in range(64):
        for namespace, seen in [(standin, fused_ids), (None, generic_ids)]:
            top_ks, top_ps, min_ps = _tensors([2], [0.5])
            ids, _ = ascend(
                _logits([probs]), top_ks, top_ps, min_ps, False,
                torch.tensor([7]), torch.tensor([position]),
                npu_top_k_top_p_eligible=True, torch_npu=namespace,
            )
            seen.add(ids.item())
    assert fused_ids == {0}
    assert generic_ids == {0, 1}


def test_fused_branch_with_standin_respects_top_k() -> None:
    standin = _standin()
    torch.manual_seed(4)
    logits = torch.randn(8, 50)
    top_ids = logits.topk(3, dim=-1).indices
    batch = _batch(*[SamplingParams(top_k=3, top_p=0.99)] * 8)
    result = sample(logits.clone(), batch, "flag", torch_npu=standin)
    assert result.branch == "fused"
    for row, token in enumerate(result.ids.tolist()):
        assert token in top_ids[row].tolist()


# ---------------------------------------------------------------------- tiny vocabulary
def _divergence(namespace: Any, vocab: int) -> Dict[str, List[str]]:
    torch.manual_seed(5)
    steps = [torch.randn(2, vocab) for _ in range(3)]
    branches: Dict[str, List[str]] = {}
    for path in ("legacy", "flag"):
        batch = _batch(SamplingParams(top_k=4), SamplingParams(top_k=None, top_p=0.9))
        assert not batch.npu_top_k_top_p_eligible  # TOP_K_ALL is outside [1, 1024]
        sampler = Sampler(path, torch_npu=namespace)
        branches[path] = []
        for step, logits in enumerate(steps):
            branches[path].append(sampler(logits.clone(), batch).branch)
            if step == 0:
                # The generic branch rewrote TOP_K_ALL to the vocabulary size, in place.
                assert batch.top_ks.tolist() == [4, vocab]
        assert not batch.npu_top_k_top_p_eligible
    return branches


@pytest.mark.parametrize("use_standin", [False, True])
def test_tiny_vocabulary_divergence(use_standin: bool) -> None:
    namespace = _standin() if use_standin else FakeNPU()
    branches = _divergence(namespace, vocab=16)
    assert branches["legacy"] == ["generic", "fused", "fused"]
    assert branches["flag"] == ["generic", "generic", "generic"]


def test_no_divergence_with_a_large_vocabulary() -> None:
    branches = _divergence(FakeNPU(), vocab=2048)  # 2048 > 1024: legacy stays generic
    assert branches["legacy"] == branches["flag"] == ["generic"] * 3


# ---------------------------------------------------------------------- resolver
def test_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    if npu_state().module is None:
        assert resolve_torch_npu() is None

    standin = types.ModuleType("syncguard.sim.torch_npu_standin")
    standin.npu_top_k_top_p = FakeNPU().npu_top_k_top_p  # type: ignore[attr-defined]
    assert is_standin(standin)
    monkeypatch.setitem(sys.modules, "torch_npu", standin)
    assert resolve_torch_npu() is standin

    real_like = types.ModuleType("torch_npu")
    assert not is_standin(real_like)
    monkeypatch.setitem(sys.modules, "torch_npu", real_like)
    assert resolve_torch_npu() is real_like


def test_default_namespace_is_resolved_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNPU()
    namespace = types.ModuleType("syncguard.sim.torch_npu_standin")
    namespace.npu_top_k_top_p = fake.npu_top_k_top_p  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_npu", namespace)
    sampler = Sampler("flag")
    result = sampler(_logits([PROBS]), _batch(SamplingParams(top_k=2)))
    assert result.branch == "fused" and len(fake.calls) == 1
