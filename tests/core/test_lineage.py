"""The lineage of a read value and the verdict on removing the read
(:mod:`syncguard.core.lineage`), on the simulated npu (the backend's op observers) and in cpu
mode (a dispatch mode; cpu tensors stand for device ones)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
import torch

from syncguard.core.guard import SyncGuard
from syncguard.core.lineage import mark_input
from syncguard.core.lineage_words import site_verdict, verdict_text
from syncguard.driving.lineage import start_for
from syncguard.sim import simulated_device

MODES = ("sim", "cpu")


class Run:
    """A device, and a guarded loop with the tracker on: ``run(body, steps)`` calls
    ``body(step)`` in each step and returns the lineage of each hidden read."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dev = simulated_device() if kind == "sim" else torch.device("cpu")
        self.devices = ("cpu",) if kind == "cpu" else ()

    def guard(self) -> SyncGuard:
        return SyncGuard(devices=self.devices)

    def run(self, body: Callable[[int], Any], steps: int = 3,
            setup: Optional[Callable[[], Any]] = None) -> List[Dict[str, Any]]:
        tracker = start_for(self.kind)
        try:
            g = self.guard()
            with g:
                state = setup() if setup is not None else None
                for i in range(steps):
                    with g.step():
                        body(i) if state is None else body(i, state)
        finally:
            tracker.stop()
        return [e.lineage for e in g.events if e.lineage is not None]


@pytest.fixture(params=MODES)
def run(request: pytest.FixtureRequest) -> Iterator[Run]:
    yield Run(request.param)


def _line(fn: Callable[..., Any], text: str) -> str:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    n = next(i for i, line in enumerate(lines) if text in line)
    return f"{__file__.rsplit('/', 1)[-1]}:{start + n}"


def _top_ks(dev: Any) -> torch.Tensor:
    return torch.tensor([1, 20, 1024], dtype=torch.int32, device=dev)  # the upload


def _range_check(step: int, top_ks: torch.Tensor) -> None:
    """SGLang's legacy check: top_k in [1, 1024], read on the host every step."""
    if torch.all((top_ks >= 1) & (top_ks <= 1024)):
        pass


def test_hoistable_from_one_upload(run: Run) -> None:
    """The SGLang pattern: a range check on top_k uploaded once at the batch build."""
    lins = run.run(_range_check, setup=lambda: _top_ks(run.dev))
    assert len(lins) == 3
    v = site_verdict(lins)
    assert v is not None and v["verdict"] == "hoistable" and v["same"] == 1
    assert v["uploads"].endswith(_line(_top_ks, "the upload")), v
    text = verdict_text(v)
    assert text.startswith("hoistable: depends only on host data uploaded at ")
    assert "the same value every step" in text and "SGLang" in text


def test_hoistable_from_two_uploads_combined(run: Run) -> None:
    def body(step: int) -> None:
        a = torch.tensor([1, 2, 3], device=run.dev)  # first upload
        b = torch.tensor([4.0, 5.0, 6.0]).to(run.dev)  # second upload
        bool((a * b).sum() > 3)

    lins = run.run(body)
    v = site_verdict(lins)
    assert v is not None and v["verdict"] == "hoistable", v
    ups = v["uploads"].split(", ")
    assert len(ups) == 2, v
    lines = {int(u.rsplit(":", 1)[1]) for u in ups}
    import inspect

    src, start = inspect.getsourcelines(body)
    want = {start + i for i, s in enumerate(src) if "upload" in s}
    assert lines == want, (lines, want)
    assert v["same"] == 1  # the same bytes every step


def test_changing_uploads_are_not_the_same_value(run: Run) -> None:
    def body(step: int) -> None:
        t = torch.tensor([step, step + 1], device=run.dev)  # new values each step
        bool(t.max() > 0)

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "hoistable" and v["same"] == 0, v
    assert "the same value every step" not in verdict_text(v)


def test_parameter_times_input_is_not_hoistable(run: Run) -> None:
    def setup() -> torch.nn.Module:
        return torch.nn.Linear(4, 1).to(run.dev)

    def body(step: int, layer: torch.nn.Module) -> None:
        x = torch.tensor([[1.0, 2.0, 3.0, float(step)]], device=run.dev)
        bool(layer(x).sum() > 0)

    v = site_verdict(run.run(body, setup=setup))
    assert v is not None and v["verdict"] == "device", v
    assert "parameters of Linear" in v["roots"]
    text = verdict_text(v)
    assert text.startswith("depends on device results (parameters of Linear)"), text
    assert "keep the decision on the device" in text and "one step late" in text
    assert "addmm" in text or "linear" in text or "mm" in text, text


def test_bare_parameter_is_a_device_result(run: Run) -> None:
    """A Parameter seen without its module being called is a model weight too."""
    def setup() -> torch.nn.Parameter:
        return torch.nn.Parameter(torch.ones(3).to(run.dev))

    def body(step: int, w: torch.nn.Parameter) -> None:
        x = torch.tensor([1.0, 2.0, 3.0], device=run.dev)
        bool((w * x).sum() > 0)

    v = site_verdict(run.run(body, setup=setup))
    assert v is not None and v["verdict"] == "device" and "model parameters" in v["roots"], v


def test_logits_passed_in_depend_on_device_results(run: Run) -> None:
    def body(step: int) -> None:
        logits = torch.randn(2, 8).to(run.dev)
        mark_input(logits, "logits")  # what the decode loop says of its logits
        probs = torch.softmax(logits, dim=-1)
        bool(probs.max() > 0.5)

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "device", v
    assert "step input logits" in v["roots"] and "_softmax" in v["ops"], v


def test_random_draws_depend_on_device_results(run: Run) -> None:
    def body(step: int) -> None:
        probs = torch.full((2, 4), 0.25, device=run.dev)
        tok = torch.multinomial(probs, 1)
        bool((tok == 3).any())

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "device" and "multinomial" in v["roots"], v


def test_value_made_before_the_tracker_is_unknown(run: Run) -> None:
    before = torch.tensor([1, 2, 3], device=run.dev)  # before tracking: not seen being made

    def body(step: int) -> None:
        bool((before > 0).all())

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "unknown", v
    text = verdict_text(v)
    assert text.startswith("unknown:") and "no verdict" in text and "hoistable" not in text


def test_in_place_update_joins_the_record(run: Run) -> None:
    """A host-only tensor updated in place with a device result is no longer hoistable."""
    def body(step: int) -> None:
        mask = torch.tensor([True, False], device=run.dev)
        logits = torch.randn(2).to(run.dev)
        mark_input(logits, "logits")
        mask &= logits > 0  # in place
        bool(mask.any())

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "device", v


def test_views_follow_their_base(run: Run) -> None:
    def body(step: int) -> None:
        t = torch.tensor([[1, 2], [3, 4]], device=run.dev)
        bool(t[0, 1] > 0)
        bool(t.view(-1)[3] > 0)

    lins = run.run(body)
    assert lins and all(d["verdict"] == "hoistable" for d in lins), lins


def test_off_by_default_events_carry_no_lineage(run: Run) -> None:
    g = run.guard()
    with g:
        t = torch.tensor([1, 2], device=run.dev)
        bool(t.max() > 0)
    assert g.events and all(e.lineage is None for e in g.events)
    assert "lineage" not in g.events[0].to_dict()  # results stay as they were


def test_tracker_keeps_no_tensor_alive(run: Run) -> None:
    import gc
    import weakref

    tracker = start_for(run.kind)
    try:
        t = torch.tensor([1.0, 2.0], device=run.dev) * 2
        ref = weakref.ref(t)
        assert t in tracker.records
        del t
        gc.collect()
        assert ref() is None
    finally:
        tracker.stop()


def test_summary_is_bounded(run: Run) -> None:
    def body(step: int) -> None:
        acc = torch.zeros(1, device=run.dev)
        for i in range(40):  # 40 uploads, each a root
            acc = acc + torch.tensor([float(i * 1000 + step)], device=run.dev)
        bool(acc.sum() > 0)

    lins = run.run(body, steps=1)
    assert lins[0]["verdict"] == "unknown" and lins[0]["roots"].endswith("more"), lins[0]
    assert len(lins[0]["ops"].split(", ")) <= 8


def test_a_failing_record_never_breaks_the_op(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.core import lineage

    tracker = start_for(run.kind)
    try:
        def boom(*a: Any, **k: Any) -> None:
            raise RuntimeError("bug in the tracker")

        monkeypatch.setattr(tracker, "_observe", boom)
        t = torch.tensor([1.0, 2.0], device=run.dev) * 2
        assert t.shape == (2,) and tracker.failures > 0
        assert isinstance(lineage.active(), lineage.LineageTracker)
    finally:
        tracker.stop()


def _depth(nodes: List[Dict[str, Any]]) -> int:
    return max((1 + _depth(n.get("in", [])) for n in nodes if "op" in n), default=0)


def test_the_tree_keeps_the_ops_between_the_read_and_its_roots(run: Run) -> None:
    """Each read carries the ops that made its value, down to the roots: the range check's
    all <- bitwise_and <- ge / le <- the upload, the same tree (and id) every step."""
    lins = run.run(_range_check, setup=lambda: _top_ks(run.dev))
    site = _line(_top_ks, "the upload")
    leaf = {"root": "upload", "label": "host data", "site": lins[0]["uploads"]}
    assert lins[0]["uploads"].endswith(site)
    (top,) = lins[0]["tree"]
    assert top["op"] == "all" and len(top["in"]) == 1, top
    band = top["in"][0]
    assert band["op"] == "bitwise_and", band
    assert sorted(n["op"] for n in band["in"]) == ["ge", "le"], band
    assert all(n["in"] == [leaf] for n in band["in"]), band
    assert len({d["tree_id"] for d in lins}) == 1


def test_the_tree_is_bounded_in_depth_width_and_memory(run: Run) -> None:
    """A value updated 300 times, or made of 50 uploads: the tensor's record keeps a bounded
    history (the rest cut, its roots kept), the event's tree a bounded number of levels and
    children, and says how many it left out."""
    from syncguard.core import lineage

    tracker = start_for(run.kind)
    try:
        g = run.guard()
        with g:
            acc = torch.zeros(1, device=run.dev)
            for i in range(300):
                acc = acc * 2 + torch.tensor([float(i)], device=run.dev)
            node = tracker.records[acc]
            bool(acc.sum() > 0)
            parts = [torch.tensor([float(i)], device=run.dev) for i in range(50)]
            bool(torch.cat(parts).sum() > 0)
    finally:
        tracker.stop()
    assert node.height <= lineage.MAX_HEIGHT and node.size <= lineage.MAX_SIZE, node.height
    deep, wide = (e.lineage["tree"] for e in g.events if e.lineage is not None)
    assert _depth(deep) == lineage.TREE_DEPTH, deep

    def cut(n: Dict[str, Any]) -> bool:
        return bool(n.get("cut")) or any(cut(k) for k in n.get("in", []))

    assert cut(deep[0]) and len(str(deep)) < 8000, deep
    (gt,) = wide
    cat = gt["in"][0]["in"][0]
    assert cat["op"] == "cat" and len(cat["in"]) == lineage.TREE_WIDTH, cat
    assert cat["more"] == 50 - lineage.TREE_WIDTH, cat


def test_state_carried_between_steps_depends_on_device_results(run: Run) -> None:
    """A state fed back from step to step on the device (a hidden state, a position) is
    rooted in its first upload, yet no host holds its value: a stop check on a token made
    from it, or on the position, is not hoistable."""
    def setup() -> Dict[str, torch.Tensor]:
        return {"h": torch.zeros(4, device=run.dev),
                "pos": torch.tensor([3], device=run.dev)}

    def body(step: int, st: Dict[str, torch.Tensor]) -> None:
        st["h"] = torch.tanh(st["h"] * 1.5 + 0.25)  # fed back
        st["pos"] += 1
        tok = st["h"].argmax()
        bool(tok == 3)  # stop check on the token
        bool((st["pos"] >= 100).any())  # and on the position

    lins = run.run(body, setup=setup)
    assert len(lins) == 6
    for site in (lins[0::2], lins[1::2]):
        v = site_verdict(site)
        assert v is not None and v["verdict"] == "device", v
        assert v["roots"].startswith("state carried on the device from an earlier step"), v
        assert v["same"] == 0, v
        text = verdict_text(v)
        assert text.startswith("depends on device results (state carried"), text


def test_state_made_once_from_host_data_stays_hoistable(run: Run) -> None:
    """A value computed once from host data and read in later steps is not fed back."""
    def setup() -> torch.Tensor:
        return torch.tensor([1, 20, 1024], device=run.dev) * 2

    def body(step: int, lim: torch.Tensor) -> None:
        bool((lim > 1).all())

    v = site_verdict(run.run(body, setup=setup))
    assert v is not None and v["verdict"] == "hoistable", v


def test_writes_through_views_carry_lineage_to_the_base(run: Run) -> None:
    def body(step: int) -> None:
        logits = torch.randn(2, 8).to(run.dev)
        mark_input(logits, "logits")
        tok = logits.argmax(-1)
        buf = torch.zeros(4, dtype=torch.long, device=run.dev)
        buf[0:2] = tok  # a slice write
        bool((buf == 5).any())
        e = torch.zeros(3, dtype=torch.long, device=run.dev)
        e[1] = tok[0]  # an element write
        bool((e > 0).any())
        b = torch.zeros(4, device=run.dev)
        v = b[1:3]  # a view taken before the base is written
        b.add_(logits[0, :4])
        bool((v > 0).any())

    lins = run.run(body)
    assert len(lins) == 9
    for i in range(3):
        v = site_verdict(lins[i::3])
        assert v is not None and v["verdict"] == "device", (i, v)
        assert "step input logits" in v["roots"], (i, v)


@pytest.mark.parametrize("name,make", [
    ("rand", lambda d: torch.rand(4, device=d)),
    ("randn", lambda d: torch.randn(4, device=d)),
    ("randint", lambda d: torch.randint(0, 9, (4,), device=d)),
    ("randperm", lambda d: torch.randperm(4, device=d)),
    ("normal", lambda d: torch.normal(0.0, 1.0, (4,), device=d)),
    ("uniform", lambda d: torch.empty(4, device=d).uniform_()),
    ("rand_like", lambda d: torch.rand_like(torch.zeros(4, device=d))),
])
def test_random_factories_are_random_draws(run: Run, name: str, make: Any) -> None:
    """A random draw is never a constant, with or without a tensor argument."""
    def body(step: int) -> None:
        bool((make(run.dev) > 100).any())

    v = site_verdict(run.run(body))
    assert v is not None and v["verdict"] == "device", v
    assert f"random draws ({name}" in v["roots"], v
