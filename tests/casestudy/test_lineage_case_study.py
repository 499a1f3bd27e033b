"""The case study under ``syncguard run --lineage``: the legacy path's read is hoistable,
rooted in the top-k upload at the batch build, the same value every step (the fix SGLang
made); the flag path has no hidden site at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _cli import cli
from _lineage_html import path_to, trees, walk

from syncguard.results import analysis, loader


def _line(path: str, text: str) -> int:
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_legacy_read_is_hoistable_from_the_top_k_upload(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    import sglang_ascend_sampling.batch as batch
    import sglang_ascend_sampling.sampler as sampler

    out = str(tmp_path / "o")
    rc, stdout, _ = cli(capsys, "run", "steady", "--device", "sim", "--no-timed", "--lineage",
                        "--steps", "4", "--out", out, "--width", "400")
    assert rc == 0
    res = loader.load(os.path.join(out, "result.jsonl"))
    st = analysis.sites(res)
    hidden = st[~st["allowed"].astype(bool)]
    assert set(hidden["path"]) == {"legacy"}  # the flag paths have no hidden site
    (site,) = hidden.to_dict("records")
    read = _line(sampler.__file__, "if hasattr(torch_npu, \"npu_top_k_top_p\") and torch.all(")
    upload = _line(batch.__file__, "top_ks = stager.stage(")
    assert site["lineno"] == read and site["hoist"] == "hoistable", site
    text = site["lineage"]
    assert text.startswith(f"hoistable: depends only on host data uploaded at "
                           f"sglang_ascend_sampling/batch.py:{upload} (and constants)"), text
    assert text.endswith("the same value every step"), text
    # where users look: the terminal's verdict, the Markdown report, events.csv
    flat = " ".join(stdout.split())
    assert f"sampler.py:{read}" in flat and f"batch.py:{upload}" in flat
    assert "Why, and how to remove it (lineage)" in flat
    md = Path(out, "report.md").read_text()
    assert "Why, and how to remove it (lineage)" in md and "the same value every step" in md
    csv = Path(out, "events.csv").read_text()
    assert "lineage_verdict" in csv.splitlines()[0] and ",hoistable," in csv
    # report.html draws it as a tree: the read at the root, the ops, the top-k upload a leaf
    (tree,) = trees(Path(out, "report.html").read_text())
    assert tree["text"] == (f"the value read at sglang_ascend_sampling/sampler.py:{read} "
                            f"(Tensor.__bool__)"), tree["text"]
    chain = path_to(tree, f"sglang_ascend_sampling/batch.py:{upload}")
    assert chain is not None, tree
    assert chain[1:3] == ["all", "bitwise_and"] and chain[3] in ("ge", "le"), chain
    assert chain[-1] == (f"upload host data at sglang_ascend_sampling/batch.py:{upload}, "
                         f"the same value every step"), chain
    leaves = [n for _, n in walk(tree) if not n["kids"]]
    assert len(leaves) == 2 and all(n["text"] == chain[-1] for n in leaves), leaves


def test_without_the_flag_results_are_unchanged(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "o")
    rc, stdout, _ = cli(capsys, "run", "steady", "--device", "sim", "--no-timed",
                        "--steps", "3", "--out", out)
    assert rc == 0
    assert '"lineage":{' not in Path(out, "result.jsonl").read_text()  # no event has one
    assert "lineage" not in Path(out, "events.csv").read_text().splitlines()[0]
    assert "(lineage)" not in stdout
