"""Shared helpers for the benchmarks: machine/version facts for the JSON reports, interleaved
timing (every variant runs once per round, ABCABC..., so all of them see the same machine
state on a noisy shared host), medians and the report writer.

Nothing here asserts a timing: the benchmarks measure and report.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports" / "bench"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- the workload --------------------------------------------------------------------------
def sampling_step(
    logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """One sampling step with no host read: softmax, descending sort, top-k mask
    (``masked_fill_``), cumulative sum, top-p mask (``masked_fill_``)."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, sorted_idx = torch.sort(probs, dim=-1, descending=True)
    ranks = torch.arange(logits.size(-1), device=logits.device)
    sorted_probs.masked_fill_(ranks[None, :] >= top_ks[:, None], 0.0)
    cum = torch.cumsum(sorted_probs, dim=-1)
    sorted_probs.masked_fill_((cum - sorted_probs) > top_ps[:, None], 0.0)
    return sorted_probs, sorted_idx


def sampling_inputs(
    batch: int, vocab: int, seed: int = 0
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits (float32), per-row top-k in [1, min(vocab, 1024)), top-p in [0.5, 1)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g)
    top_ks = torch.randint(1, max(2, min(vocab, 1024)), (batch,), generator=g)
    top_ps = torch.rand(batch, generator=g) * 0.5 + 0.5
    return logits, top_ks, top_ps


# -- facts -----------------------------------------------------------------------------------
def _git(*args: str) -> Optional[str]:
    """Read-only git query in the repository (``--no-optional-locks``: never takes the index
    lock, so it cannot disturb anyone else's git command)."""
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_facts() -> Dict[str, Any]:
    """The commit, and which files under ``syncguard/`` differ from it (uncommitted edits are
    what was measured)."""
    head = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--", "syncguard")
    return {
        "git_commit": head.strip() if head else None,
        "syncguard_uncommitted": sorted(line[3:] for line in dirty.splitlines()) if dirty else [],
    }


def environment() -> Dict[str, Any]:
    """Machine, Python, torch and syncguard versions, git commit and date."""
    import syncguard

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "syncguard": syncguard.__version__,
        "syncguard_file": str(Path(syncguard.__file__).resolve().parent),
        **git_facts(),
    }


def _cpu_model() -> Optional[str]:
    """``platform.processor()`` is empty on most Linux hosts: the model name from cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def time_block(fn: Callable[[], Any], inner: int = 1) -> float:
    """Seconds per call of ``fn``, over ``inner`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


Runner = Callable[[int], float]  # inner calls -> seconds per call


def interleaved(
    runners: Dict[str, Runner], repeats: int, warmup: int = 1, inner: int = 1
) -> Dict[str, List[float]]:
    """``repeats`` rounds; in each, every runner times ``inner`` calls, in turn (ABCABC...).
    The order rotates each round so no variant always runs right after the same one."""
    names = list(runners)
    for _ in range(warmup):
        for k in names:
            runners[k](inner)
    times: Dict[str, List[float]] = {k: [] for k in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            times[k].append(runners[k](inner))
    return times


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def paired_ratio(num: Sequence[float], den: Sequence[float]) -> float:
    """Median of the per-round ratios (each pair ran back to back): steadier than the ratio
    of medians when the machine's speed drifts during the run."""
    return median([a / b for a, b in zip(num, den)])


def write_report(name: str, result: Dict[str, Any], out: Optional[Path] = None) -> Path:
    path = out or (REPORTS / f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def write_reports(name: str, result: Dict[str, Any], markdown: str,
                  out: Optional[Path] = None) -> Tuple[Path, Path]:
    """:func:`write_report` and its Markdown beside it (``out`` with ``.md``, or
    ``reports/bench/<name>.md``); returns both paths."""
    path = write_report(name, result, out)
    md = out.with_suffix(".md") if out else REPORTS / f"{name}.md"
    md.write_text(markdown)
    return path, md


def rounded(xs: Sequence[float], scale: float, nd: int = 3) -> List[float]:
    return [round(x * scale, nd) for x in xs]
