"""``syncguard exec --lineage`` on Hugging Face ``generate()`` (a tiny random Llama from a
config): the per-token stop check depends on device results (the model's output through the
sampled token), so the verdict is to keep the decision on the device or read it late."""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from _cli import forget, program_env
from _paths import DATA

from syncguard.cli import main
from syncguard.results import analysis, loader

HF_EOS = str(DATA / "exec" / "lineage" / "hf_eos.py")
LLAMA = "transformers.models.llama.modeling_llama:LlamaForCausalLM.forward"


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    program_env(monkeypatch)
    yield
    forget('hf_eos')


def test_hf_generate_stop_check_depends_on_device_results(tmp_path, clean, capsys) -> None:
    pytest.importorskip("transformers")
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--force", "--width", "300",
               "--lineage", "--loop", LLAMA, "--", "python", HF_EOS])
    assert rc == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    st = analysis.sites(res)
    per_step = st[(st["path"] == "LlamaForCausalLM.forward") & ~st["allowed"].astype(bool)]
    (site,) = per_step.to_dict("records")
    assert os.path.basename(site["filename"]) == "utils.py"  # generate()'s stopping check
    assert site["hoist"] == "device", site
    text = site["lineage"]
    assert text.startswith("depends on device results (parameters of LlamaForCausalLM"), text
    assert "keep the decision on the device" in text
    err = " ".join(capsys.readouterr().err.split())  # exec reports on stderr
    assert "Why, and how to remove it (lineage)" in err and "depends on device results" in err


CARRIED = str(DATA / "exec" / "lineage" / "carried.py")


def _tagged(tag: str) -> int:
    with open(CARRIED) as f:
        return next(i for i, t in enumerate(f, 1) if f"# sync: {tag}" in t)


def test_state_carried_between_steps_is_not_hoistable_under_exec(tmp_path, clean) -> None:
    """exec's steps reach lineage: a position advanced in place and a state fed back depend
    on device results; a limit uploaded once before the loop stays hoistable."""
    out = str(tmp_path / "o")
    rc = main(["exec", "--device", "sim", "--out", out, "--force", "--lineage", "--step",
               "__main__:step", "--", "python", CARRIED])
    assert rc == 0
    st = analysis.sites(loader.load(os.path.join(out, "result.jsonl")))
    hoist = {int(r["lineno"]): (r["hoist"], r["lineage"]) for r in st.to_dict("records")}
    for tag in ("position", "state"):
        verdict, text = hoist[_tagged(tag)]
        assert verdict == "device", text
        assert text.startswith("depends on device results (state carried on the device"), text
    verdict, text = hoist[_tagged("limit")]
    assert verdict == "hoistable" and "the same value every step" in text, text
