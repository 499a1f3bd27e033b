"""The core guard on plain CPU tensors treated as device-resident (``devices=("cpu",)``)."""

from __future__ import annotations

import inspect
import logging
import threading

import pytest
import torch

import syncguard
from syncguard import HostSyncError, SyncGuard, allow
from syncguard.core.catalogue import CATCH, ZERO, Case

CPU_CASES = [c for c in CATCH + ZERO if not c.host_distinct and not c.device_module]


def _count(case: Case, **kw: object) -> SyncGuard:
    kw.setdefault("exhaustive", case.needs_net)
    with SyncGuard(devices=("cpu",), model="cuda", **kw) as g:  # type: ignore[arg-type]
        case.fn("cpu")
    return g


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c.name)
def test_catalogue_on_cpu_as_device(case: Case) -> None:
    g = _count(case)
    assert g.count == case.expected("cuda"), [e.describe() for e in g.events]


@pytest.mark.parametrize("case", [c for c in CATCH if c in CPU_CASES and c.expected("cuda")],
                         ids=lambda c: c.name)
def test_attribution_points_at_catalogue_line(case: Case) -> None:
    g = _count(case)
    ev = g.counted_events[0]
    assert ev.filename.endswith("catalogue.py"), ev.describe()
    assert ev.thread == threading.current_thread().name
    assert ev.stack[0].lineno == ev.lineno


def test_event_fields_name_user_line_api_and_op() -> None:
    x = torch.arange(3)
    with SyncGuard(devices=("cpu",)) as g:
        with g.step():
            if x[0] >= 0:  # the line to blame
                pass
    (ev,) = g.events
    assert ev.kind == syncguard.core.events.SCALAR_READ
    assert ev.api == "Tensor.__bool__"
    assert ev.op == "aten::_local_scalar_dense"
    assert ev.filename == __file__
    assert ev.function == "test_event_fields_name_user_line_api_and_op"
    assert ev.step == 0 and not ev.allowed and ev.reason is None


def test_reads_of_cpu_tensors_are_not_counted_by_default(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from syncguard.core.events import NoDeviceTensorsWarning
    from syncguard.core.hub import HUB

    monkeypatch.setattr(HUB, "warned_no_device", False)
    x = torch.arange(3)
    with pytest.warns(NoDeviceTensorsWarning):  # and it says so
        with SyncGuard() as g:
            x.tolist(), x.sum().item(), bool(x[0] == 0), x[x > 0], print(x, end="\r")
    assert g.count == 0 and g.events == []


def test_nested_api_counts_once() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        2 in x  # noqa: B015  (calls .item() internally: one sync)
    assert g.count == 1 and g.events[0].api == "Tensor.__contains__"


def test_allow_context_and_reason() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        with allow("token readback"):
            x.tolist()
        x.tolist()
    assert g.count == 1 and g.allowed_count == 1
    assert g.events[0].allowed and g.events[0].reason == "token readback"
    with pytest.raises(ValueError):
        with allow(""):
            pass


def _helper_that_reads(x: torch.Tensor) -> list:
    return x.tolist()


@pytest.mark.parametrize("site", ["_helper_that_reads", "test_guard.py:{line}",
                                  "tests.core.test_guard:_helper_that_reads"])
def test_allow_by_call_site(site: str) -> None:
    line = _helper_that_reads.__code__.co_firstlineno + 1
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",), allow_sites=[site.format(line=line)]) as g:
        _helper_that_reads(x)
        x.tolist()
    assert g.allowed_count == 1 and g.count == 1


def test_raise_mode_message_names_line_api_and_how_to_allow() -> None:
    x = torch.arange(4)
    g = SyncGuard(devices=("cpu",), on_sync="raise")
    with pytest.raises(HostSyncError) as ei:  # around the guard: a caught one re-raises at exit
        with g:
            x.sum().item()
    with g:
        with allow("fine"):
            x.sum().item()  # allowed: does not raise
    msg = str(ei.value)
    assert f"{__file__}:" in msg and "Tensor.item" in msg and "aten::_local_scalar_dense" in msg
    assert "syncguard.allow" in msg and "allow_sites" in msg


def test_log_mode_logs_each_sync(caplog: pytest.LogCaptureFixture) -> None:
    x = torch.arange(4)
    with caplog.at_level(logging.WARNING, logger="syncguard"):
        with SyncGuard(devices=("cpu",), on_sync="log") as g:
            x.tolist()
            x.sum().item()
    assert g.count == 2
    assert sum("host sync" in r.getMessage() for r in caplog.records) == 2


def test_steps_and_warmup() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",), warmup=1) as g:
        for n in range(3):
            with g.step():
                for _ in range(n + 1):
                    x.tolist()
                with allow("readback"):
                    x.sum().item()
    assert [(r.step, r.warmup, r.syncs, r.allowed) for r in g.per_step()] == [
        (0, True, 1, 1), (1, False, 2, 1), (2, False, 3, 1)]
    assert g.count == 5 and g.allowed_count == 2  # warm-up kept but not counted
    assert len(g.events) == 9
    df = g.step_table()
    assert list(df.columns) == ["step", "warmup", "syncs", "allowed"]
    assert df["syncs"].tolist() == [1, 2, 3]


def test_worker_thread_reads_are_counted() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as g:
        with g.step():
            t = threading.Thread(target=lambda: x.tolist(), name="sampler-worker")
            t.start()
            t.join()
    (ev,) = g.events
    assert ev.thread == "sampler-worker" and ev.step == 0


def test_guards_nest() -> None:
    x = torch.arange(4)
    with SyncGuard(devices=("cpu",)) as outer:
        x.tolist()
        with SyncGuard(devices=("cpu",)) as inner:
            x.tolist()
        x.tolist()
    assert (outer.count, inner.count) == (3, 1)


def test_uninstalls_on_exception_and_keyboardinterrupt() -> None:
    from syncguard.core.intercept import PATCHER

    orig = torch.Tensor.__bool__
    for exc in (ValueError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with SyncGuard(devices=("cpu",)):
                assert torch.Tensor.__bool__ is not orig
                raise exc
        assert torch.Tensor.__bool__ is orig and not PATCHER.installed
    assert "item" not in vars(torch.Tensor)  # inherited attributes are not left behind


def test_counts_are_deterministic() -> None:
    def run() -> list:
        with SyncGuard(devices=("cpu",), model="cuda") as g:
            for c in CPU_CASES:
                c.fn("cpu")
        return [(e.kind, e.api, e.op, e.lineno, e.count) for e in g.events]

    assert run() == run()


def test_in_kernel_syncs_follow_the_backend_model() -> None:
    p = torch.tensor([0.5, 0.5])
    for model, want in (("cuda", 2), ("npu", 0)):
        with SyncGuard(devices=("cpu",), model=model) as g:
            torch.multinomial(p, 1)
        assert g.count == want
    with SyncGuard(devices=("cpu",), model="cuda") as g:
        torch.multinomial(p, 2, replacement=True)
    assert g.count == 0


def test_selftest_passes_and_detects_a_broken_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(line.startswith("ok") for line in syncguard.selftest())
    from syncguard.core import intercept

    monkeypatch.setattr(intercept, "_targets", lambda: [])  # a detector that sees nothing
    with pytest.raises(syncguard.SelfTestError, match="self-test failed"):
        syncguard.selftest()


def test_public_names_survive_importing_every_submodule() -> None:
    # a submodule named like a public function would replace it on the package once imported
    import pkgutil

    for mod in pkgutil.walk_packages(syncguard.__path__, "syncguard."):
        if mod.name.startswith("syncguard.sim") or mod.name.endswith("__main__"):
            continue  # the simulated device registers a backend when imported
        __import__(mod.name)
    for name in syncguard.__all__:
        assert not inspect.ismodule(getattr(syncguard, name)), name
    assert callable(syncguard.selftest)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="on_sync"):
        SyncGuard(on_sync="explode")
    g = SyncGuard()
    with g:
        with pytest.raises(RuntimeError, match="already active"):
            g.__enter__()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", CATCH + ZERO, ids=lambda c: c.name)
def test_catalogue_on_real_cuda_matches_cuda_model(case: Case) -> None:
    with SyncGuard() as g:
        case.fn("cuda")
    assert g.count == case.expected("cuda"), [e.describe() for e in g.events]
    assert all(ev.device == "cuda" for ev in g.counted_events)


NET_CASES = [c for c in CATCH if c.needs_net]


@pytest.mark.parametrize("case", NET_CASES, ids=lambda c: c.name)
def test_dispatch_net_counts_reads_no_python_entry_point_sees(case: Case) -> None:
    assert _count(case, exhaustive=False).count == 0  # the Python layer's blind spot
    g = _count(case, exhaustive=True)
    assert g.count == 1
    (ev,) = g.counted_events
    assert ev.op == "aten::_local_scalar_dense" and ev.filename.endswith("catalogue.py")


def test_dispatch_net_does_not_double_count_and_honours_allow_and_raise() -> None:
    n = torch.tensor(3)
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        n.item()  # Python layer reports; the net sees _local_scalar_dense inside: quiet
        torch.arange(4)[torch.arange(4) > 1]  # one nonzero, reported once
        with allow("known"):
            torch.arange(n)
    assert g.count == 2 and g.allowed_count == 1
    assert [e.api for e in g.events] == ["Tensor.item", "Tensor.__getitem__",
                                         "aten::_local_scalar_dense"]
    with pytest.raises(HostSyncError, match="aten::_local_scalar_dense"):
        with SyncGuard(on_sync="raise", devices=("cpu",), exhaustive=True):
            torch.zeros(n)


def test_dispatch_net_leaves_with_the_guard_on_exceptions() -> None:
    with pytest.raises(KeyboardInterrupt):
        with SyncGuard(devices=("cpu",), exhaustive=True):
            raise KeyboardInterrupt
    with SyncGuard(devices=("cpu",)) as g:  # a later guard without the net
        torch.arange(torch.tensor(2))
    assert g.count == 0


def test_tensor_of_0d_tensors_works_inside_and_after_a_guard() -> None:
    # patching Tensor.__getitem__ fills CPython's sq_item slot as a side effect, which made
    # every tensor a "sequence" and torch.tensor([t0, t0]) raise "len() of a 0-d tensor"
    s = torch.tensor(2.0)
    with SyncGuard():
        assert torch.tensor([s, s]).tolist() == [2.0, 2.0]
        x = torch.arange(4)
        assert x[x > 1].tolist() == [2, 3]  # indexing still goes through the interceptor
    assert torch.tensor([s, s]).tolist() == [2.0, 2.0]
    with SyncGuard(devices=("cpu",)) as g:
        torch.tensor([s, s])  # reads both values: on a device, two scalar reads
        x = torch.arange(4)
        x[x > 1]
        x[x > 2] = torch.tensor(0)
    read = ("torch.tensor", "aten::_local_scalar_dense")
    assert [(e.api, e.op) for e in g.events] == [
        read, read, ("Tensor.__getitem__", "aten::index.Tensor"),
        ("Tensor.__setitem__", "aten::index_put_")]



def test_blame_skips_the_standard_library_and_generated_code() -> None:
    # the read happens inside logging / pprint / a dataclass's generated __repr__; the line
    # to blame is the user's call, not logging/__init__.py or <string>
    import dataclasses
    import io
    import pprint
    import sys

    @dataclasses.dataclass
    class Box:
        t: torch.Tensor

    logger = logging.getLogger("syncguard-test-blame")
    handler = logging.StreamHandler(io.StringIO())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # only our handler formats the record (not pytest's capture)
    x = torch.arange(3.0)
    try:
        with SyncGuard(devices=("cpu",)) as g:
            logger.info("x=%s", x)
            first = sys._getframe().f_lineno - 1
            pprint.pformat(x)
            repr(Box(x))
    finally:
        logger.removeHandler(handler)
    assert [(e.filename, e.lineno) for e in g.events] == [
        (__file__, first), (__file__, first + 2), (__file__, first + 3)]


# -- issue 12: misses and false positives found by the audits -------------------------------
def test_nested_guards_each_apply_their_own_op_model() -> None:
    p = torch.tensor([[0.5, 0.5]])
    with SyncGuard(devices=("cpu",), model="cuda") as outer:
        torch.multinomial(p, 1)  # cuda: 2 in-kernel reads
        with SyncGuard(devices=("cpu",), model="npu") as inner:
            torch.multinomial(p, 1)  # npu: none (outer still counts its 2)
        torch.multinomial(p, 1)  # the inner guard's exit must not reset the outer's model
    assert (outer.count, inner.count) == (6, 0)
    assert all(e.source and "cuda op model" in e.source for e in outer.events)
    with SyncGuard(devices=("cpu",)) as plain:  # no model: no in-kernel reads on CPU
        torch.multinomial(p, 1)
    assert plain.count == 0


def test_cpu_as_device_models_the_device_kernel_not_the_cpu_one() -> None:
    ind = torch.tensor([0, 1, 3])
    a, b = torch.zeros(3), torch.ones(3)
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        torch.nn.functional.one_hot(ind, num_classes=4)  # the CPU kernel's own min/max reads
        a[:] = b  # device to device: no host wait
        a[1:] = b[1:]
    assert g.count == 0, [e.describe() for e in g.events]
    with SyncGuard(devices=("cpu",), exhaustive=True) as g:
        torch.nn.functional.one_hot(ind)  # num_classes inferred: a real read
        a.cpu()
    assert g.count == 2, [e.describe() for e in g.events]


def test_torch_compile_counts_execution_not_compilation() -> None:
    import warnings

    torch._dynamo.reset()

    def index(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return x[i] * 2

    def read(x: torch.Tensor) -> torch.Tensor:
        return x * x.sum().item()  # graph break: the read runs eagerly

    x, i = torch.arange(5.0), torch.tensor([0, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with SyncGuard(devices=("cpu",)) as g:
            torch.compile(index, backend="eager")(x, i)
        assert g.count == 0, [e.describe() for e in g.events]
        with SyncGuard(devices=("cpu",)) as g:
            torch.compile(read, backend="eager")(x)
        assert [e.api for e in g.counted_events] == ["Tensor.item"]
        assert g.counted_events[0].function == "read"
    dynamo = [str(w.message) for w in caught if "Dynamo" in str(w.message)]
    assert not dynamo, dynamo  # no "cannot trace time.perf_counter" (syncguard's own frames)


COMPILE_IN_A_FRESH_PROCESS = """
import sys, warnings
import torch
from syncguard import SyncGuard
assert "torch._dynamo" not in sys.modules

def read(x):
    return x * x.sum().item()

x = torch.arange(5.0)
counts = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with SyncGuard(devices=("cpu",)) as g:  # entered before Dynamo is loaded
        for _ in range(3):
            torch.compile(read, backend="eager")(x)
            counts.append(g.count)
print(counts, [str(w.message)[:60] for w in caught if "Dynamo" in str(w.message)])
"""


def test_torch_compile_first_call_counts_when_dynamo_loads_inside_the_guard() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", COMPILE_IN_A_FRESH_PROCESS], check=True,
                         capture_output=True, text=True, timeout=600).stdout
    assert out.strip().splitlines()[-1] == "[1, 2, 3] []", out


def test_swallowed_host_sync_error_is_raised_again_at_exit() -> None:
    x = torch.arange(3)
    out = None
    g = SyncGuard(devices=("cpu",), on_sync="raise")
    with pytest.raises(HostSyncError, match="caught by the code") as ei:
        with g:
            try:  # SGLang's old sampler: log the RuntimeError, return zeros
                out = x.sum().item()
            except RuntimeError:
                out = 0
    assert out == 0 and len(g.raised) == 1
    assert "test_guard.py" in str(ei.value) and isinstance(ei.value.__cause__, HostSyncError)
    with pytest.raises(HostSyncError) as direct:  # not swallowed: the original propagates
        with g:
            x.sum().item()
    assert "caught by the code" not in str(direct.value)


def test_a_guard_over_cpu_only_code_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from syncguard.core.events import NoDeviceTensorsWarning
    from syncguard.core.hub import HUB

    monkeypatch.setattr(HUB, "warned_no_device", False)
    x = torch.arange(3)
    with SyncGuard(devices=("cpu",)):  # CPU declared as the device: nothing to say
        x.tolist()
    with pytest.warns(NoDeviceTensorsWarning, match=r'saw no device tensors.*devices=\("cpu",\)'):
        with SyncGuard() as g:
            x.tolist()
    assert g.count == 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SyncGuard():  # said once
            x.tolist()


def test_guard_sites_sorted_by_line_number():
    """Sites with equal counts come by file, then line as a number (loop.py:6 before :10)."""
    from syncguard.core.events import SCALAR_READ, SyncEvent

    g = SyncGuard()
    g.events.extend(SyncEvent(SCALAR_READ, "Tensor.item", None, "loop.py", n, "f", (), 1, "t")
                    for n in (10, 6))
    assert [s["site"] for s in g.sites()] == ["loop.py:6", "loop.py:10"]
