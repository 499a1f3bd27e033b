"""A long run's plot draws its steps in bins (latency: the bin's median; syncs: its most), so
the report of 8,000 steps stays small and a sync in one step is still drawn."""

from __future__ import annotations

import pytest

from syncguard.renderers import html
from syncguard.results.format import RunResult, StepRecord

pytest.importorskip("matplotlib")


def _run(n: int) -> RunResult:
    steps = [StepRecord("prog.py", "step", "exec", i, False, 0, 1 if i == 4321 else 0, 0,
                        1.0 + (i % 7) * 0.01) for i in range(n)]
    return RunResult({"type": "header", "schema": 1}, steps, [], None)


def test_bins_keep_the_median_latency_and_the_most_syncs() -> None:
    assert [html._bin_size(n) for n in (0, 600, 601, 8000)] == [1, 1, 2, 14]
    recs = [StepRecord("p", "s", "exec", i, False, 0, i % 2, 0, ms)
            for i, ms in reversed(list(enumerate([1.0, 3.0, 2.0, 5.0, 4.0])))]
    assert html._binned(recs, "latency_ms", 1, max) == ([0, 1, 2, 3, 4],
                                                        [1.0, 3.0, 2.0, 5.0, 4.0])
    assert html._binned(recs, "latency_ms", 2, max) == ([0, 2, 4], [3.0, 5.0, 4.0])
    assert html._binned(recs, "latency_ms", 3, sorted) == ([0, 3], [[1.0, 2.0, 3.0],
                                                                    [4.0, 5.0]])
    assert html._binned(recs, "syncs", 2, max) == ([0, 2, 4], [1, 1, 0])


def test_a_long_runs_plot_is_binned_and_says_so() -> None:
    short, long = html.plot_svg(_run(500), "prog.py"), html.plot_svg(_run(8000), "prog.py")
    assert not any("each point" in ax.get_title(loc="left")
                   for ax in html.plot_figure(_run(500), "prog.py").axes)
    fig = html.plot_figure(_run(8000), "prog.py")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert "each point 14 steps: their median" in titles[0]
    assert "each point 14 steps: their most" in titles[1]
    # the sync of step 4321 is in its bin's point
    line = fig.axes[1].lines[0]
    assert max(line.get_ydata()) == 1 and len(line.get_xdata()) <= html.MAX_POINTS
    assert len(long) < 3 * len(short)  # 16x the steps, not 16x the drawing
