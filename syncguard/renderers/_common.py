"""Text pieces shared by the renderers: header line, number formats, paths, verdicts, legend."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from ..core.sites import shown_path, shown_site
from ..results.analysis import is_exec, is_missing, loop_paths
from ..results.format import OUTSIDE_PATH
from ..results.stats import MARGIN, Ratio, ratio_verdict, too_thin

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..results.format import RunResult

#: (label, meaning) pairs printed under every report.
LEGEND: Tuple[Tuple[str, str], ...] = (
    ("syncs/step", "hidden host<->device syncs per decode step (counted pass under the guard, "
                   "warm-up steps excluded); mean and max"),
    ("allowed/step", "allowed syncs per step (e.g. the token readback), counted pass"),
    ("p50/p90/p99/mean", "host time per step up to its token readback, in ms (timed pass "
                         "without interceptors, warm-up steps excluded)"),
    ("ratio", "latency / the baseline path's, one log-ratio of medians per round of the "
              "interleaved timed pass, with its 95% t interval over the rounds (at least 3); "
              "a difference is claimed only when the interval, as printed, lies wholly beyond "
              "5% of 1.00x (below 0.95x or above 1.05x); wholly within 0.95-1.05x it reads "
              "no difference beyond 5%, else a difference not shown beyond 5% (an interval "
              "that excludes 1.00x) or no measurable difference"),
    ("saved", "(baseline p50 - this path's p50) latency in us per token, shown only when a "
              "difference is claimed"),
    ("out", "timed steps beyond Tukey's fences (1.5 IQR): counted, never dropped"),
    ("modeled", "modeled step latency (ms) and device idle (us) on the named device profile "
                "(simulated device only): deterministic, from the recorded op stream, not "
                "measured; a site's wait and idle are per read (the wait is mostly device work "
                "queued before the read, which the step does anyway), the verdict's cost per "
                "step is what the step's hidden syncs add to its modeled latency"),
    ("steps", "step indices as ranges, e.g. 2-4, 7; warm-up steps are marked w"),
)


#: the legend of ``syncguard exec`` results: one pass under the guard, step names that are
#: different functions (no ratio or saving between them)
EXEC_LEGEND: Tuple[Tuple[str, str], ...] = (
    ("syncs/step", "hidden host<->device syncs per step call (under the guard, warm-up steps "
                   "excluded); mean and max"),
    ("allowed/step", "allowed syncs per step call (e.g. the token readback)"),
    ("p50/p90/p99/mean", "host time per step call, measured under the guard (interceptors "
                         "on), in ms, warm-up steps excluded"),
    *[kv for kv in LEGEND if kv[0] in ("out", "modeled", "steps")],
)


def legend(result: RunResult) -> Tuple[Tuple[str, str], ...]:
    """The legend's terms for ``result``: :data:`EXEC_LEGEND` for an exec run; the modeled
    columns' term only when the run has modeled values (the columns are shown)."""
    terms = EXEC_LEGEND if is_exec(result) else LEGEND
    modeled = bool(result.timelines) or any(s.modeled_ms is not None for s in result.steps)
    return terms if modeled else tuple(kv for kv in terms if kv[0] != "modeled")


def header_get(header: Dict[str, Any], key: str) -> Any:
    """A header field, looked up at the top level, then under ``environment``/``env``."""
    if header.get(key) is not None:
        return header[key]
    for nest in ("environment", "env"):
        sub = header.get(nest)
        if isinstance(sub, dict) and sub.get(key) is not None:
            return sub[key]
    return None


def fmt_time(ts: Any) -> Optional[str]:
    """A UNIX time as ``YYYY-MM-DD HH:MM:SS UTC`` (None if missing or unreadable)."""
    if is_missing(ts):
        return None
    try:
        t = datetime.datetime.fromtimestamp(float(ts), tz=datetime.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def status_text(result: RunResult) -> str:
    """``"complete"`` or ``"INTERRUPTED: N steps kept"`` (plus the footer's reason if any);
    a program that ran to its end but failed (``exec``): ``"complete, but the program exited
    N"`` / ``"... raised X"``."""
    why = None
    if result.footer:
        why = result.footer.get("reason") or result.footer.get("error")
    if result.complete:
        return f"complete, but the {why}" if why else "complete"
    text = f"INTERRUPTED: {len(result.steps)} steps kept"
    return f"{text} ({why})" if why else text


def environment_parts(result: RunResult, show_time: bool = True) -> List[str]:
    """``["syncguard 0.1.0", "torch 2.13.0", "device npu (...)", ...]`` for a header line."""
    h = result.header
    parts = [f"syncguard {header_get(h, 'syncguard') or '?'}",
             f"torch {header_get(h, 'torch') or '?'}"]
    tnpu = header_get(h, "torch_npu")
    if tnpu:
        parts.append(f"torch_npu {tnpu}")
    dev = header_get(h, "device")
    name = header_get(h, "device_name")
    if dev or name:
        parts.append(f"device {dev or '?'}" + (f" ({name})" if name and name != dev else ""))
    py = header_get(h, "python")
    if py:
        parts.append(f"Python {py}")
    commit = header_get(h, "git_commit")
    if commit:
        dirty = "+dirty" if header_get(h, "git_dirty") else ""
        parts.append(f"git {str(commit)[:10]}{dirty}")
    if show_time:
        created = fmt_time(h.get("created"))
        if created:
            parts.append(created)
    return parts


def header_line(result: RunResult, show_time: bool = True, sep: str = " | ") -> str:
    """One line: versions, device, commit, creation time and complete/interrupted."""
    return sep.join([*environment_parts(result, show_time), status_text(result)])


def timed_on_hardware(result: RunResult) -> bool:
    """True when the run's latencies and sync waits are a real device's (not sim or CPU)."""
    return header_get(result.header, "device") not in ("sim", "cpu", None)


def note_texts(result: RunResult) -> List[str]:
    """Notes for the reader: the simulated-device caveat when the run used it, then the
    result's ``note`` lines (their ``message``/``text`` field, else all fields)."""
    out = []
    if header_get(result.header, "device") == "sim":
        out.append("Simulated npu: latencies are CPU time on this host and do not carry over to "
                   "hardware; the sync counts and sites do.")
        tl = result.header.get("timeline")
        if isinstance(tl, dict) and tl.get("profile"):
            out.append(f"Modeled columns (modeled ms, bubble us, modeled cost in the verdict) "
                       f"come from the device timeline model on profile {tl['profile']} "
                       f"({tl.get('device') or 'see the profile file'}): derived from the "
                       f"recorded ops, not measured; each parameter's source is in the "
                       f"profile file.")
    for n in result.notes:
        msg = n.get("message") or n.get("text")
        if not msg:
            msg = ", ".join(f"{k}={v}" for k, v in n.items() if k != "type")
        out.append(str(msg))
    return out


def short_path(filename: Any, base: Optional[str] = None) -> str:
    """``filename`` as every report shows it (:func:`syncguard.core.sites.shown_path`)."""
    return shown_path(None if is_missing(filename) else filename, base)


def short_site(site: str, base: Optional[str] = None) -> str:
    """``file:line`` with the file shortened (:func:`syncguard.core.sites.shown_site`)."""
    return shown_site(site, base)


def fmt_int(x: Any) -> str:
    if is_missing(x):
        return "-"
    return str(int(round(float(x))))


def fmt_ms(x: Any) -> str:
    """Milliseconds in at most 4 significant digits and 5 characters below 100 s: ``1.450``,
    ``24.53``, ``111.2``, ``2632``; ``-`` for missing."""
    if is_missing(x):
        return "-"
    v = float(x)
    a = abs(v)
    digits = 3 if a < 9.9995 else 2 if a < 99.995 else 1 if a < 999.95 else 0
    return f"{v:.{digits}f}"


def fmt_ratio(x: Any) -> str:
    return "-" if is_missing(x) else f"{float(x):.2f}x"


def fmt_ratio_ci(x: Any, lo: Any, hi: Any) -> str:
    """``"1.12x (1.05-1.20)"``; the ratio alone without an interval; ``-`` for missing."""
    if is_missing(x):
        return "-"
    if is_missing(lo) or is_missing(hi):
        return fmt_ratio(x)
    return f"{float(x):.2f}x ({float(lo):.2f}-{float(hi):.2f})"


def fmt_us(x: Any) -> str:
    """Signed microseconds: one decimal below 1000 (``+200.0``), none above (``+24467``)."""
    if is_missing(x):
        return "-"
    v = float(x)
    return f"{v:+.1f}" if abs(v) < 999.95 else f"{v:+.0f}"


def fmt_syncs(x: Any) -> str:
    """Syncs per step: ``0`` for an exact zero, else two decimals."""
    if is_missing(x):
        return "-"
    return "0" if float(x) == 0.0 else f"{float(x):.2f}"


def verdicts(summary_df: pd.DataFrame, sites_df: pd.DataFrame, max_sites: int = 2,
             code: str = "`", base: Optional[str] = None, show_wait: bool = False,
             loops: Sequence[str] = (), exact: bool = False) -> List[Tuple[str, str]]:
    """One sentence per scenario, as ``(scenario, sentence)``; sites wrapped in ``code``.
    ``sites_df`` is :func:`analysis.sites` output, optionally through
    :func:`analysis.merge_paths`; up to ``max_sites`` sites per path, most syncs first.

    e.g. ``legacy: 1.00 hidden syncs per step at `sampler.py:123` (Tensor.__bool__); flag: 0.
    Modeled on 910b: legacy's hidden syncs cost 180 us per step (device idle 150 us), 0.9% of
    a 20.2 ms modeled step. Measured on this machine (host time per step, p50): flag vs
    legacy no measurable difference (95% CI 0.97-1.04x, 8 rounds).`` Counts, the modeled
    device time and the measured host time are separate sentences, each saying where it holds.
    A latency difference is stated only when the interval over rounds, as printed, excludes
    1.0 (:mod:`syncguard.results.stats`).

    Per-step sites (``per_step``) lead; the others read ``(API, once)``. A site in a helper
    names its caller (``at `stopping.py:14` in __call__, called from `generate.py:25` in
    decode_loop``). Paths in ``loops`` (``exec --loop``) count "per token"; ``exact`` (exec)
    writes a whole mean as an integer ("1 hidden sync per token"). Per-step syncs outside
    every step (``exec``) get their own clause.
    """
    out: List[Tuple[str, str]] = []
    hidden = sites_df[~sites_df["allowed"].astype(bool)] if len(sites_df) else sites_df
    for scenario in dict.fromkeys(summary_df["scenario"]):
        rows = summary_df[summary_df["scenario"] == scenario]
        parts = []
        modeled: List[str] = []
        measured: List[str] = []
        for r in rows.to_dict("records"):
            m = r["syncs_mean"]
            if is_missing(m):
                text = f"{r['path']}: not counted"
            elif float(m) == 0.0:
                text = f"{r['path']}: 0"
            else:
                unit = "token" if r["path"] in loops else "step"
                text = f"{r['path']}: {rate_phrase(float(m), unit, exact)}"
                mine = [s for s in hidden.to_dict("records") if s["scenario"] == scenario
                        and r["path"] in str(s["path"]).split(", ")]
                if mine and not any(bool(s.get("per_step", True)) for s in mine):
                    text = f"{r['path']}: {_not_per_step(mine, unit)}"
                text += _where(mine, max_sites, code, base)
                wait = r.get("sync_wait_us_mean")
                if show_wait and not is_missing(wait):
                    text += f", the host waiting {float(wait):.1f} us per step in them"
            m_text = _modeled_text(r)
            if m_text:
                modeled.append(m_text)
            ratio = r["ratio_vs_baseline"]
            base_path = r.get("baseline") or ""
            if base_path and r["path"] != base_path and not is_missing(ratio):
                measured.append(f"{r['path']} vs {base_path} " + _ratio_text(r))
            parts.append(text)

        outside = [s for s in hidden.to_dict("records") if s["scenario"] == scenario
                   and s["path"] == OUTSIDE_PATH and s.get("per_step")]
        if outside:
            rate = sum(float(s["rate"]) for s in outside)
            parts.append(f"outside every step: {rate_phrase(rate, 'step', exact)}"
                         + _where(outside, max_sites, code, base))
        sentence = "; ".join(parts) + "."
        profiles = {str(r.get("profile") or "") for r in rows.to_dict("records")}
        if modeled:
            prof = next(iter(profiles)) if len(profiles) == 1 else ""
            sentence += f" Modeled on {prof or 'the device profile'}: " + "; ".join(modeled) + "."
        if measured:
            sentence += (" Measured on this machine (host time per step, p50): "
                         + "; ".join(measured) + ".")
        out.append((str(scenario), sentence))
    return out


def lineage_lines(sites_df: pd.DataFrame, code: str = "`",
                  base: Optional[str] = None) -> List[str]:
    """One line per hidden per-step site whose lineage was tracked (``--lineage``): why the
    value read is on the device and how to remove the read, e.g. ``legacy: `sampler.py:219`
    (Tensor.__bool__): hoistable: depends only on host data uploaded at ...``. Empty when
    lineage was not tracked."""
    return [f"{s['path']}: {site_phrase(s, code, base)} ({s['api']}): {s['lineage']}"
            for s in lineage_sites(sites_df)]


def lineage_sites(sites_df: pd.DataFrame) -> List[Dict[str, Any]]:
    """The rows :func:`lineage_lines` speaks of, in its order: hidden per-step sites whose
    lineage was tracked."""
    if not len(sites_df) or "lineage" not in sites_df.columns:
        return []
    out = []
    for s in sites_df.to_dict("records"):
        text = s.get("lineage")
        if (not isinstance(text, str) or not text or bool(s.get("allowed"))
                or not bool(s.get("per_step", True))):
            continue
        out.append(s)
    return out


def verdict_options(result: RunResult) -> Dict[str, Any]:
    """:func:`verdicts` keywords for ``result``: sync waits on hardware, loops per token, and
    whole numbers for an exec run."""
    return {"show_wait": timed_on_hardware(result), "loops": loop_paths(result),
            "exact": is_exec(result)}


def headline(result: RunResult, summary_df: pd.DataFrame, sites_df: pd.DataFrame,
             base: Optional[str] = None) -> Optional[str]:
    """An exec report's first line: the step name with the most hidden syncs per step, and
    its per-step sites: ``1 hidden sync per token at stopping.py:14 in __call__, called from
    generate.py:25 in decode_loop (Tensor.__bool__) [generate.py: TinyDecoder.forward]``.
    None for other results."""
    if not is_exec(result):
        return None
    unmatched = next((n for n in result.notes if n.get("no_step")), None)
    if unmatched is not None:  # a count here would read like a result
        return str(unmatched.get("message") or "no step matched")
    if not len(summary_df):
        return None
    rows = [r for r in summary_df.to_dict("records") if not is_missing(r["syncs_mean"])]
    if not rows:
        return None
    r = max(rows, key=lambda r: float(r["syncs_mean"]))
    unit = "token" if r["path"] in loop_paths(result) else "step"
    where = f"[{r['scenario']}: {r['path']}]"
    hidden = sites_df[~sites_df["allowed"].astype(bool)] if len(sites_df) else sites_df
    if float(r["syncs_mean"]) == 0.0:
        # a per-step site outside every step is a per-step sync all the same (no false "0")
        outside = [s for s in hidden.to_dict("records") if s["scenario"] == r["scenario"]
                   and s["path"] == OUTSIDE_PATH and s.get("per_step")]
        if outside:
            rate = sum(float(s["rate"]) for s in outside)
            return (f"{rate_phrase(rate, unit, True)} outside every step"
                    f"{_where(outside, 2, '', base, True)} [{r['scenario']}: none inside "
                    f"{r['path']}]")
        return f"0 hidden syncs per {unit} {where}"
    mine = [s for s in hidden.to_dict("records") if s["scenario"] == r["scenario"]
            and r["path"] in str(s["path"]).split(", ")]
    every = [s for s in mine if bool(s.get("per_step", True))]
    hint = _step_hint(result, r["path"], mine)
    if mine and hint:  # no step named: the count is the program's, not a step's
        n = sum(int(s["count"]) for s in mine)
        return (f"{n} hidden sync{'' if n == 1 else 's'} in the whole program, run as one "
                f"step{_where(mine, 2, '', base, True)} {where}; {hint}")
    if mine and not every:  # syncs, but none per step: never "per step ... once"
        return f"{_not_per_step(mine, unit)}{_where(mine, 2, '', base, True)} {where}"
    return (f"{rate_phrase(float(r['syncs_mean']), unit, True)}"
            f"{_where(every, 2, '', base, True)} {where}")


def _step_hint(result: RunResult, path: str, sites: List[Dict[str, Any]]) -> str:
    """For an exec run with no --step, --loop or marker (the whole program one step): that
    per-token counts need one, naming the function of the site that synced most, e.g.
    ``per-token counts need --loop or --step, e.g. --step stopping:StopOnToken.__call__
    (where the most syncs are)``. ``""`` otherwise."""
    import os

    options = result.header.get("options") or {}
    if path != "program" or options.get("steps") or options.get("loops") or not sites:
        return ""
    text = "per-token counts need --loop or --step"
    top = max(sites, key=lambda s: int(s["count"]))
    for file, func in ((top.get("filename"), top.get("function")),
                       (top.get("caller_filename"), top.get("caller_function"))):
        name = os.path.splitext(os.path.basename(str(file or "")))[0]
        if func and name.isidentifier() and all(
                p.isidentifier() for p in str(func).split(".")):
            return f"{text}, e.g. --step {name}:{func} (where the most syncs are)"
    return text


def _not_per_step(sites: List[Dict[str, Any]], unit: str) -> str:
    """``2 hidden syncs, none of them per token``: the phrase for a path whose syncs all come
    from sites that sync once (set-up, prefill), not at a rate."""
    n = sum(int(s["count"]) for s in sites)
    return f"{n} hidden sync{'' if n == 1 else 's'}, none of them per {unit}"


def rate_phrase(rate: float, unit: str = "step", exact: bool = False) -> str:
    """``1.00 hidden syncs per step``; with ``exact``, a whole number as one: ``1 hidden sync
    per token``."""
    if exact and rate == int(rate):
        n = int(rate)
        return f"{n} hidden sync{'' if n == 1 else 's'} per {unit}"
    return f"{rate:.2f} hidden syncs per {unit}"


def site_phrase(s: Dict[str, Any], code: str = "`", base: Optional[str] = None,
                function: bool = False) -> str:
    """A :func:`analysis.sites` row's site for a sentence: ```sampler.py:123``` or, in a
    helper, ```stopping.py:14` in __call__, called from `generate.py:25` in decode_loop``;
    with ``function``, a site called from its own file names its function too
    (```gen.py:5` in decode_one``)."""
    text = f"{code}{short_site(s['site'], base)}{code}"
    if s.get("caller_filename"):
        caller = f"{short_path(s['caller_filename'], base)}:{s['caller_lineno']}"
        text += (f" in {s['function']}, called from {code}{caller}{code} in "
                 f"{s['caller_function']}")
    elif function and _named_function(s.get("function")):  # a helper in its caller's file
        text += f" in {s['function']}"
    return text


def _named_function(function: Any) -> bool:
    """Whether ``function`` names a function (not a module's or a class's body, ``?``)."""
    return isinstance(function, str) and bool(function) and not function.startswith("<") \
        and function != "?"


def _where(mine: List[Dict[str, Any]], max_sites: int, code: str, base: Optional[str],
           function: bool = False) -> str:
    """`` at `a.py:3` (Tensor.item), `b.py:9` (Tensor.cpu, once) and 2 more``: per-step
    sites first, most syncs first (stable: file order among ties)."""
    mine = sorted(mine, key=lambda s: (not bool(s.get("per_step", True)), -int(s["count"])))
    where = []
    for s in mine[:max_sites]:  # not every step: "once", or how many times
        n = int(s["count"])
        once = "" if bool(s.get("per_step", True)) else ", once" if n == 1 else f", {n} times"
        where.append(f"{site_phrase(s, code, base, function)} ({s['api']}{once})")
    if not where:
        return ""
    more = len(mine) - len(where)
    return " at " + ", ".join(where) + (f" and {more} more" if more > 0 else "")


def _ratio_text(r: Dict[str, Any]) -> str:
    """The paired ratio's sentence (:func:`syncguard.results.stats.ratio_verdict`): a
    difference only when its interval lies wholly beyond the margin, then with the median
    saving per token."""
    rounds = r.get("rounds")
    need: Any = r.get("rounds_needed")
    k = 0 if is_missing(rounds) else int(rounds or 0)
    pairs = int(r.get("pairs") or 0)
    rt = Ratio(float(r["ratio_vs_baseline"]), float(r.get("ratio_lo", float("nan"))),
               float(r.get("ratio_hi", float("nan"))), pairs, rounds=k,
               need=None if is_missing(need) else int(need), thin=too_thin(pairs, k))
    text = ratio_verdict(rt)
    saved: Any = r.get("saved_per_token_us")
    if rt.differs and not is_missing(saved):
        verb = "saves" if float(saved) >= 0 else "costs"
        text += f", {verb} {abs(float(saved)):.1f} us of host time per step"
    return text


def _modeled_text(r: Dict[str, Any]) -> str:
    """``"legacy's hidden syncs cost 180 us per step (device idle 150 us), 0.9% of a 20.2 ms
    modeled step"`` for a path whose hidden syncs have a modeled cost; ``""`` otherwise (the
    caller says which profile)."""
    cost: Any = r.get("modeled_sync_us")
    idle: Any = r.get("modeled_idle_sync_us")
    step: Any = r.get("modeled_ms")
    if is_missing(cost) or is_missing(step) or float(cost) <= 0.0:
        return ""
    pct = 100.0 * float(cost) / (1000.0 * float(step)) if float(step) > 0 else float("nan")
    text = f"{r['path']}'s hidden syncs cost {float(cost):.0f} us per step"
    if not is_missing(idle):
        text += f" (device idle {float(idle):.0f} us)"
    text += f", {pct:.1f}% of a {float(step):.1f} ms modeled step"
    if pct < 1.0:
        text += ", which is why throughput barely moves"
    return text


def step_label(step: Any, warmup: Any) -> str:
    return f"{int(step)}w" if bool(warmup) else str(int(step))


def path_headlines(summary_df: pd.DataFrame, sites_df: pd.DataFrame, code: str = "",
                   base: Optional[str] = None) -> List[Tuple[str, str]]:
    """One ``(path, sentence)`` per path of a run over its scenarios: the count per step, its
    sites (once, not once per scenario), the host-time verdict against the baseline path
    counted over the scenarios, and the modeled cost, e.g. ``legacy: 1.00 hidden syncs per
    step in 6 of 7 scenarios (greedy_mix 0.71) at sampler.py:219 (Tensor.__bool__); modeled on
    910b: 25 to 78 us per step, 0.4% to 6.8% of a modeled step`` and ``flag: 0 hidden syncs
    per step in all 7 scenarios; host time vs legacy: 0.90x, faster in tiny_vocab; no
    difference beyond 5% in 1, not shown either way in 5``. ``sites_df`` as for
    :func:`verdicts` (through :func:`analysis.merge_paths` or not)."""
    from collections import Counter

    out: List[Tuple[str, str]] = []
    if not len(summary_df):
        return out
    hidden = sites_df[~sites_df["allowed"].astype(bool)] if len(sites_df) else sites_df
    site_rows = hidden.to_dict("records") if len(hidden) else []
    for path in dict.fromkeys(summary_df["path"]):
        rows = summary_df[summary_df["path"] == path].to_dict("records")
        counted = [(str(r["scenario"]), float(r["syncs_mean"])) for r in rows
                   if not is_missing(r["syncs_mean"])]
        n = len(rows)
        if not counted:
            text = "not counted"
        else:
            common, k = Counter(m for _, m in counted).most_common(1)[0]
            rate = "0" if common == 0.0 else f"{common:.2f}"
            noun = "sync" if rate == "1" else "syncs"
            if k == n:
                text = f"{rate} hidden {noun} per step in {_all(n)}"
            else:
                others = [f"{s} {'0' if m == 0.0 else f'{m:.2f}'}" for s, m in counted
                          if m != common]
                shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                 if len(others) > 3 else "")
                text = f"{rate} hidden {noun} per step in {k} of {n} scenarios ({shown})"
        mine: Dict[Any, Dict[str, Any]] = {}
        for s in site_rows:  # each site once over the scenarios, its counts summed
            if path not in str(s["path"]).split(", "):
                continue
            key = (s["site"], s["api"], s.get("function"))
            if key in mine:
                mine[key] = {**mine[key], "count": int(mine[key]["count"]) + int(s["count"]),
                             "per_step": bool(mine[key].get("per_step", True)
                                              or s.get("per_step", True))}
            else:
                mine[key] = dict(s)
        if counted and any(m > 0 for _, m in counted):
            text += _where(list(mine.values()), 2, code, base)
        ratios = [(str(r["scenario"]), row_ratio(r)) for r in rows
                  if r.get("baseline") and r["path"] != r.get("baseline")
                  and not is_missing(r.get("ratio_vs_baseline"))]
        if ratios:
            faster = [(s, rt) for s, rt in ratios if rt.differs and rt.shown[1] < 1.0]
            slower = [(s, rt) for s, rt in ratios if rt.differs and rt.shown[0] > 1.0]
            within = [s for s, rt in ratios if rt.known and not rt.thin and rt.within]
            told = {s for s, _ in faster + slower} | set(within)
            rest = [s for s, _ in ratios if s not in told]
            parts = [f"{', '.join(f'{rt.ratio:.2f}x' for _, rt in found)}, {word} in "
                     f"{', '.join(s for s, _ in found)}"
                     for found, word in ((faster, "faster"), (slower, "slower")) if found]
            if within:
                parts.append(f"no difference beyond {MARGIN:.0%} in {_count(within, n)}")
            if rest:
                parts.append(f"no measurable difference in {_count(rest, n)}")
            text += f"; host time vs {rows[0]['baseline']}: " + "; ".join(parts)
        costs = [(float(r["modeled_sync_us"]), 100.0 * float(r["modeled_sync_us"])
                  / (1000.0 * float(r["modeled_ms"]))) for r in rows
                 if not is_missing(r.get("modeled_sync_us")) and float(r["modeled_sync_us"]) > 0
                 and not is_missing(r.get("modeled_ms")) and float(r["modeled_ms"]) > 0]
        if costs:
            profiles = {str(r.get("profile") or "") for r in rows} - {""}
            prof = next(iter(profiles)) if len(profiles) == 1 else "the device profile"
            us = _span([c for c, _ in costs], "{:.0f}") + " us"
            pct = _span([p for _, p in costs], "{:.1f}") + "%"
            text += f"; modeled on {prof}: {us} per step, {pct} of a modeled step"
        out.append((str(path), text))
    return out


def _all(n: int) -> str:
    return "the scenario" if n == 1 else f"all {n} scenarios"


def _count(names: List[str], n: int) -> str:
    if len(names) == n:
        return _all(n)
    return names[0] if len(names) == 1 else f"{len(names)} of {n} scenarios"


def _span(values: List[float], fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def row_ratio(r: Dict[str, Any]) -> Any:
    """The :class:`syncguard.results.stats.Ratio` of an :func:`analysis.summary` row."""
    def num(x: Any) -> float:
        return float("nan") if is_missing(x) else float(x)

    k, n = (0 if is_missing(r.get(c)) else int(r[c]) for c in ("rounds", "pairs"))
    return Ratio(num(r.get("ratio_vs_baseline")), num(r.get("ratio_lo")),
                 num(r.get("ratio_hi")), n, rounds=k, thin=too_thin(n, k))
