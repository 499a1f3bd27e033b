"""Checkpoints onto the simulated npu: every form of ``torch.load(..., map_location=)`` a
script uses, storages moved to the device, ``load_state_dict`` from a host checkpoint and
safetensors. Run in a child process: before the device served storages, the first of them
ended the process with a segmentation fault."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import io, sys
    import torch
    import syncguard.sim as sim
    sim.simulated_device()
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "iter": 3}, buf)

    def load(map_location):
        return torch.load(io.BytesIO(buf.getvalue()), map_location=map_location)

    def check(form, sd):
        w, b = sd["weight"], sd["bias"]
        assert sim.is_simulated(w) and str(w.device) == "npu:0", (form, w.device)
        assert torch.equal(w.cpu(), m.weight.detach()) and torch.equal(b.cpu(), m.bias.detach())
        w.add_(1)  # the loaded values are the device's own, the checkpoint's untouched
        assert torch.equal(w.cpu(), m.weight.detach() + 1), form
        print("ok", form)

    check("str", load("npu")["model"])
    check("device", load(torch.device("npu:0"))["model"])
    check("function", load(lambda storage, loc: storage.npu())["model"])
    check("function-to", load(lambda storage, loc: storage.to(device="npu"))["model"])
    check("dict", load({"cpu": "npu:0"})["model"])
    s = torch.UntypedStorage(8).to(device="npu")
    assert s.device.type == "npu" and s.nbytes() == 8
    s2 = torch.tensor([1, 2], dtype=torch.int32).untyped_storage().npu()
    t = torch.empty(0, dtype=torch.int32, device="npu").set_(s2)
    assert t.tolist() == [1, 2] and torch.UntypedStorage(4, device="npu").device.type == "npu"
    print("ok storage")
    m2 = torch.nn.Linear(4, 3).to("npu")
    m2.load_state_dict(torch.load(io.BytesIO(buf.getvalue()))["model"])
    check("load_state_dict", m2.state_dict())
    m3 = torch.nn.Linear(4, 3)
    m3.load_state_dict(load("npu")["model"])
    m3.to("npu")
    check("module.to", m3.state_dict())
    try:
        import safetensors.torch as st
    except ImportError:
        sys.exit(0)
    path = sys.argv[1] + "/m.safetensors"
    st.save_file(m.state_dict(), path)
    check("safetensors", st.load_file(path, device="npu"))
''')

FORMS = ["str", "device", "function", "function-to", "dict", "storage", "load_state_dict",
         "module.to"]


def test_checkpoints_load_onto_the_simulated_npu(tmp_path):
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    done = [ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith("ok ")]
    assert done[:len(FORMS)] == FORMS
    try:
        import safetensors  # noqa: F401
    except ImportError:
        pytest.skip("safetensors not installed")
    assert done[len(FORMS):] == ["safetensors"]
