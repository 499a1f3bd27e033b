"""The simulated device's two routes (syncguard.sim.device, syncguard.sim.wrapper_backend) count
alike: the same guard events and the same backend ops for a battery of host reads and ordinary
ops. Each route needs its own process (PrivateUse1 is set up once per process); this file is
also the script each process runs."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from typing import Any, Callable, Dict, List

import pytest
import torch


def _battery() -> Dict[str, Dict[str, Any]]:
    import sglang_ascend_sampling.npu_op  # noqa: F401  (provides npu_top_k_top_p)
    from syncguard import SyncGuard, sim
    from syncguard.core import aten

    sim.simulated_device("npu", torch_npu=True)
    seen: List[str] = []
    orig = aten.backend_op_hook

    def hook(func: Any, args: Any, kwargs: Any, device_type: str) -> None:
        seen.append(func.name())
        orig(func, args, kwargs, device_type)

    aten.backend_op_hook = hook  # type: ignore[assignment]
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    d = x.to("npu")
    m = d > 0
    k = torch.tensor([1, 2, 3, 4], dtype=torch.int32, device="npu")
    cases: Dict[str, Callable[[], Any]] = {
        "to": lambda: x.to("npu"), "to0": lambda: x.to("npu:0"), "npu": lambda: x.npu(),
        "tensor": lambda: torch.tensor([1.0, 2.0], device="npu"),
        "zeros": lambda: torch.zeros(3, device="npu"),
        "full": lambda: torch.full((2,), 3.0, device="npu"),
        "arange": lambda: torch.arange(5, device="npu"),
        "empty_like_host": lambda: torch.empty_like(x, device="npu"),
        "arith": lambda: d * 2 + 1, "item": lambda: d.sum().item(),
        "bool": lambda: bool(d.max() > 0), "tolist": lambda: d.tolist(), "cpu": lambda: d.cpu(),
        "repr": lambda: repr(d), "format": lambda: f"{d[0, 0]:.2f}", "mask": lambda: d[m],
        "nonzero": lambda: m.nonzero(), "getitem": lambda: d[1],
        "setitem": lambda: d.clone().__setitem__(0, 1.0),
        "index": lambda: d[torch.tensor([2, 0], device="npu")],
        "softmax_sort": lambda: torch.softmax(d, -1).sort(-1),
        "multinomial": lambda: torch.multinomial(torch.softmax(d, -1), 1,
                                                 generator=torch.Generator().manual_seed(0)),
        "masked_fill_": lambda: d.clone().masked_fill_(m, 0.0),
        "where": lambda: torch.where(m, d, 0.0),
        "copy_h2d": lambda: torch.empty(4, 8, device="npu").copy_(x),
        "copy_d2h": lambda: torch.empty(4, 8).copy_(d),
        "copy_d2d": lambda: torch.empty(4, 8, device="npu").copy_(d),
        "half": lambda: d.half(), "to_host_nb": lambda: d.to("cpu", non_blocking=True),
        "pinned_h2d": lambda: x.pin_memory().to("npu", non_blocking=True),
        "view_dtype": lambda: d.view(torch.int32), "contiguous": lambda: d.t().contiguous(),
        "out": lambda: torch.cumsum(d, 1, out=torch.empty(0, device="npu")),
        "resize_": lambda: torch.zeros(4, 4, device="npu").resize_(2, 8),
        "numpy": lambda: d.numpy(force=True), "equal": lambda: torch.equal(d, d),
        "contains": lambda: 2.5 in d, "int": lambda: int(d[1, 1]),
        "deepcopy": lambda: copy.deepcopy(d), "pickle": lambda: pickle.loads(pickle.dumps(d)),
        "unique": lambda: torch.unique(d),
        "repeat_interleave": lambda: torch.repeat_interleave(k),
        "standin": lambda: sys.modules["torch_npu"].npu_top_k_top_p(
            d, torch.full((4,), 0.9, device="npu"), k),
        "synchronize": lambda: torch.npu.synchronize(),  # type: ignore[attr-defined]
    }
    out: Dict[str, Dict[str, Any]] = {}
    for name, fn in cases.items():
        seen.clear()
        err = None
        with SyncGuard() as g:
            try:
                fn()
            except Exception as e:  # recorded: both routes must fail alike
                err = f"{type(e).__name__}: {e}"
        # autograd may shallow-copy a Python-dispatch tensor through aten::detach (torch < 2.9)
        ops = [op for i, op in enumerate(seen)
               if not (op == "aten::detach" and i and seen[i - 1] == "aten::detach")]
        out[name] = {"ops": ops, "err": err,
                     "events": [[e.kind, e.api, e.op, e.count, e.device] for e in g.events]}
    return out


def _run_route(wrapper: bool) -> Dict[str, Any]:
    env = dict(os.environ)
    env.pop("SYNCGUARD_SIM_BACKEND", None)
    if wrapper:
        env["SYNCGUARD_SIM_BACKEND"] = "wrapper"
    proc = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    result: Dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.skipif(not hasattr(torch._C, "_acc"),
                    reason="torch < 2.9 has only the wrapper route: nothing to compare with")
def test_wrapper_route_counts_like_the_backend_route() -> None:
    backend = _run_route(wrapper=False)
    wrapper = _run_route(wrapper=True)
    assert backend["_route"] == "backend" and wrapper["_route"] == "wrapper"
    assert backend.keys() == wrapper.keys()
    for name in backend:
        if name != "_route":
            assert wrapper[name] == backend[name], name
    # the battery exercises host reads: the comparison is not vacuous
    assert sum(len(r["events"]) for n, r in backend.items() if n != "_route") >= 20


def test_this_process_route_works() -> None:
    from syncguard.sim import device as simdev

    if simdev._torch_version() < simdev.MIN_TORCH_VERSION:
        pytest.skip("the simulated device needs a newer torch")
    result = _run_route(wrapper=not hasattr(torch._C, "_acc"))
    assert result["_route"] == ("wrapper" if not hasattr(torch._C, "_acc") else "backend")
    assert all(r["err"] is None for n, r in result.items() if n != "_route"), result
    assert result["item"]["events"] == [
        ["scalar_read", "Tensor.item", "aten::_local_scalar_dense", 1, "npu"]]


if __name__ == "__main__":
    from syncguard.sim import device as _simdev

    res: Dict[str, Any] = dict(_battery())
    res["_route"] = "wrapper" if _simdev.WRAPPER_ROUTE else "backend"
    json.dump(res, sys.stdout)
