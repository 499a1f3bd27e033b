"""The public way to read a recorded run: :func:`load` returns a :class:`Run`.

A notebook, a script or a dashboard reads a run the way ``syncguard show``, ``compare`` and
``check RESULT`` do (they call :func:`load` too)::

    import syncguard

    run = syncguard.load("reports/latest")      # a file, a folder, or a folder of rank files
    run.header["device"]                        # what ran, where, with which versions
    run.steps                                   # pandas: one row per step record
    run.sites                                   # pandas: one row per sync site (file:line, op)
    run.steps.groupby("path").syncs.sum()

The tables are built on first use and kept. Their columns are the ones the reports show:
:data:`~syncguard.results.format.STEP_COLUMNS` and
:data:`~syncguard.results.analysis.SITES_COLUMNS`. Reading never imports torch.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Dict, List

from ..core.sites import shown_site
from .analysis import sites, summary
from .loader import load as load_result

if TYPE_CHECKING:
    import pandas as pd

    from .format import RunResult


class Run:
    """One recorded run: its header, its steps, sites and events as pandas DataFrames, its
    notes, and whether it finished (an interrupted run keeps every finished step).

    ``result`` is the loaded record the renderers take (:mod:`syncguard.renderers`)."""

    def __init__(self, result: RunResult) -> None:
        self.result = result

    @property
    def header(self) -> Dict[str, Any]:
        """What ran: command, device, scenarios, versions, machine, options."""
        return self.result.header

    @property
    def source(self) -> str:
        """The file or folder it was read from."""
        return self.result.source

    @property
    def complete(self) -> bool:
        """False for a run that was interrupted (its finished steps are all here)."""
        return self.result.complete

    @property
    def notes(self) -> List[Dict[str, Any]]:
        """What the run said beside its counts (a step that never matched, reads outside every
        step...), each a dict with at least ``kind`` and ``message``."""
        return self.result.notes

    @property
    def scenarios(self) -> List[str]:
        return self.result.scenarios

    @property
    def paths(self) -> List[str]:
        return self.result.paths

    @functools.cached_property
    def steps(self) -> pd.DataFrame:
        """One row per step record (scenario, path, pass, step, syncs, latency_ms...).

        Syncs are counted in the counted pass only (and in ``exec``'s one pass); a timed
        step ran without interceptors, so its ``syncs``, ``allowed`` and ``sync_wait_us``
        are missing (``<NA>``), not 0: a plain mean over a path's rows is its count per
        step (``run.steps.groupby(["scenario", "path"]).syncs.mean()``; the reports' syncs
        per step leave out the warm-up steps as well: ``run.steps[~run.steps.warmup]``), and
        ``latency_ms`` over the timed rows (``pass == "timed"``) is the measured latency.
        ``syncs`` and ``allowed`` are whole numbers with gaps (pandas ``Int64``)."""
        df = self.result.steps_df()
        timed = df["pass"] == "timed"
        for col in ("syncs", "allowed"):
            df[col] = df[col].astype("Int64")
            df.loc[timed, col] = None
        df["sync_wait_us"] = df["sync_wait_us"].astype(float)
        df.loc[timed, "sync_wait_us"] = float("nan")
        return df

    @functools.cached_property
    def sites(self) -> pd.DataFrame:
        """One row per sync site: where (``site``, ``function``), what (``api``, ``op``,
        ``kind``), how often (``count``, ``steps``, ``per_step``), hidden or ``allowed``.
        ``site`` is ``file:line`` as the reports and ``syncguard show`` print it (relative
        to the current directory when inside it); ``filename`` keeps the file as recorded
        (absolute)."""
        return _shown_sites(sites(self.result))

    @functools.cached_property
    def events(self) -> pd.DataFrame:
        """One row per sync event written whole (with its step and stack). An ``exec`` run
        writes the first 16 of each site unless ``--all-events`` (:attr:`sampled`); the
        counts of :attr:`sites`, :attr:`steps` and :attr:`summary` include every sync.
        ``site`` as in :attr:`sites`; ``filename`` as recorded."""
        return _shown_sites(self.result.events_df())

    @property
    def sampled(self) -> bool:
        """Whether :attr:`events` is a sample: some syncs were written as counts only."""
        return self.result.sampled

    @functools.cached_property
    def summary(self) -> pd.DataFrame:
        """One row per scenario and path: syncs per step and latency, as the reports' first
        table."""
        return summary(self.result)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "interrupted"
        return (f"<syncguard.Run {self.source!r}: {len(self.result.steps)} step records, "
                f"{len(self.result.events)} events"
                f"{' (a sample per site)' if self.result.sampled else ''}, {state}>")


def _shown_sites(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its ``site`` column as the reports show it (:func:`shown_site`)."""
    if len(df) and "site" in df.columns:
        df["site"] = [shown_site(x) for x in df["site"]]
    return df


def load(path: str) -> Run:
    """Read a recorded run: ``result.jsonl`` (complete or interrupted), ``result.json``, a
    folder holding either, or a folder of per-rank ``result.rank<N>.jsonl`` files (merged).

    Raises :class:`syncguard.ResultError` (a :class:`syncguard.SyncguardError` whose message
    names the file and the field) for anything that is not a syncguard result."""
    return Run(load_result(os.fspath(path)))
