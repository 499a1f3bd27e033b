"""The HTML report's plots are bounded: one panel per path drew 500 paths in minutes; a plot
draws at most ``MAX_PANELS`` paths (those with hidden syncs first) and the report says how
many the tables list beyond them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import write_result

from syncguard.results import loader


def _many_paths(tmp_path: Path, n: int) -> Path:
    p = write_result(tmp_path / "r.jsonl", steps=0)
    lines = p.read_text().splitlines()
    footer = lines.pop()
    for i in range(n):
        for step in range(2):
            lines.append(json.dumps({
                "type": "step", "scenario": "s", "path": f"p{i:03d}", "pass": "exec",
                "step": step, "warmup": False, "batch_size": 0,
                "syncs": 1 if i == n - 1 else 0, "allowed": 0, "latency_ms": 1.0}))
    lines.append(footer)
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_plot_draws_a_bounded_number_of_panels(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from syncguard.renderers import html

    res = loader.load(str(_many_paths(tmp_path, 60)))
    fig = html.plot_figure(res, "s")
    assert len(fig.axes) == 1 + html.MAX_PANELS
    labels = [ax.get_ylabel() for ax in fig.axes[1:]]
    assert "p059" in labels, "the path with hidden syncs is drawn first"
    page = html.render(res)
    assert f"draws {html.MAX_PANELS} of its 60 paths" in page
