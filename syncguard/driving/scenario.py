"""Scripted decode loops: one TOML file per scenario.

Schema (every key is checked; unknown keys are errors)::

    name = "steady"                 # required, unique; letters, digits, _ . + - (<= 64)
    description = "..."
    vocab_size = 32000              # >= 2
    dtype = "float32"               # float32 | float16 | bfloat16
    steps = 20                      # >= 1 (warm-up steps included)
    warmup = 2                      # >= 0, < steps
    seed = 0                        # seeds the logits and the sampler
    deterministic = false           # seeded (MurmurHash3 Gumbel) sampling
    subjects = ["legacy", "flag"]   # optional (or the older name `paths`): registered subject
                                    # names or MODULE:OBJ, run in this order; the first is the
                                    # baseline of latency ratios. Default: see below

    [logits]
    scale = 3.0                     # logits = scale * N(0, 1), fixed per (request, step);
                                    # scale / temperature must stay finite in dtype
    workload = 0                    # N: an N x N matmul per step stands in for the forward
    forward_ms = 0.0                # modeled only: a forward pass of this device time before
                                    # the sampler in the modeled timeline (simulated device)

    [[requests]]                    # the batch at step 0
    id = "r"                        # unique; the same characters as name
    count = 8                       # optional: r-0 .. r-7 with the same parameters
    temperature = 0.7
    top_p = 0.9
    top_k = 20                      # -1 = no top-k, else 1 .. 2**30
    min_p = 0.0
    seed = 123                      # optional (deterministic runs)

    [[events]]
    step = 5                        # applied at the start of this step
    join = [{ id = "late", top_k = 1025 }]   # new requests (a merge)
    finish = ["r-1"]                # requests that leave (a filter)

    [expect]
    max_syncs = { flag = 0 }        # hidden syncs allowed per path (whole counted pass); a
                                    # subject by its display name or its MODULE:OBJ

**Scenario sets.** A package ships scenarios as a folder registered in the entry-point group
``syncguard.scenarios`` (name -> the folder as a dotted package path, found without importing
the package)::

    [project.entry-points."syncguard.scenarios"]
    mine = "mypkg.scenarios"        # mypkg/scenarios/*.toml

Every ``*.toml`` file there whose name does not start with ``_`` is a scenario; ``_set.toml``
may name the set's subjects (``subjects = [...]``, ``description = "..."``). ``syncguard
run`` with no scenario runs every registered set (:func:`builtin_paths`); a scenario name
(``steady``) is looked up in them. The case study shipped with syncguard is such a set.

A scenario without ``subjects``/``paths`` runs the subjects its set declares; a file outside
every set (your own), those every registered set declares (sets by name, each subject once);
where no set declares any, every registered subject by name.

Before a run, :func:`check_resources` estimates the memory (requests x vocabulary) and the work
per step (``logits.workload``) and refuses scenarios beyond the limits
(``SYNCGUARD_MAX_MEMORY_GB``, ``SYNCGUARD_MAX_STEP_GFLOP``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._escape import name_problem, terminal
from ..errors import SyncguardError
from ..gate.verdicts import budget_count
from ..process.untrusted import UntrustedError, parse_toml, read_text
from . import plugins, subjects

DTYPES = ("float32", "float16", "bfloat16")
#: Largest finite value of each dtype: ``scale`` x :data:`LOGIT_SIGMAS` / temperature must
#: stay below it, or the logits are inf and sampling fails.
DTYPE_MAX = {"float32": 3.4028234663852886e38, "float16": 65504.0,
             "bfloat16": 3.3895313892515355e38}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
#: The largest |N(0, 1)| draw a logits bank is assumed to hold (a 1e10-value bank reaches ~6.5).
LOGIT_SIGMAS = 8.0
#: Greedy below this temperature (as the case study's samplers treat it).
_GREEDY_EPS = 1e-6
TOP_K_MAX = 1 << 30
#: Scenario files larger than this are refused before parsing (bytes).
MAX_FILE_BYTES = 1 << 20
#: Seeds are 64-bit (torch.Generator.manual_seed); larger ones are refused, not wrapped.
SEED_MAX = 2 ** 64 - 1


class ScenarioError(SyncguardError, ValueError):
    """A scenario file that cannot be used; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    id: str
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class EventSpec:
    step: int
    join: Tuple[RequestSpec, ...] = ()
    finish: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    vocab_size: int
    dtype: str
    steps: int
    warmup: int
    seed: int
    deterministic: bool
    paths: Tuple[str, ...]
    logits_scale: float
    workload: int
    requests: Tuple[RequestSpec, ...]
    events: Tuple[EventSpec, ...]
    max_syncs: Dict[str, int]
    file: str = "<memory>"
    text: str = ""
    forward_ms: float = 0.0  # modeled forward pass (ms), syncguard.model.timeline; 0 = none

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def peak_batch(self) -> int:
        """The most requests in the batch at any step."""
        live = peak = len(self.requests)
        for step in sorted({e.step for e in self.events}):
            for e in self.events_at(step):
                live += len(e.join) - len(e.finish)
                peak = max(peak, live)
        return peak

    @property
    def memory_bytes(self) -> int:
        """Estimated peak memory of one pass (bytes): the logits bank (every request's row,
        float32 then ``dtype``) plus the sampler's working tensors for the peak batch (about
        a dozen float32/int64 copies of batch x vocabulary) and the workload matrices."""
        rows = len(self.requests) + sum(len(e.join) for e in self.events)
        bank = rows * self.vocab_size * (4 + DTYPE_BYTES[self.dtype])
        work = self.peak_batch * self.vocab_size * 64
        return bank + work + 3 * 4 * self.workload ** 2

    @property
    def flops_per_step(self) -> float:
        """Estimated work per step (floating-point operations): the workload's four N x N
        matmuls (2 N^3 each) plus sorting and scanning the peak batch's logits."""
        n, bv = self.workload, self.peak_batch * self.vocab_size
        return 8.0 * n ** 3 + 40.0 * bv * max(1.0, math.log2(self.vocab_size))

    def events_at(self, step: int) -> List[EventSpec]:
        return [e for e in self.events if e.step == step]

    def with_steps(self, steps: int, warmup: Optional[int] = None) -> Scenario:
        w = self.warmup if warmup is None else warmup
        if steps < 1:
            raise ScenarioError(f"{self.file}: steps: must be >= 1, got {steps}")
        return dataclasses.replace(self, steps=steps, warmup=min(w, steps - 1),
                                   events=tuple(e for e in self.events if e.step < steps))


class _Fields:
    """Typed, named access to one TOML table; records which keys were used."""

    def __init__(self, file: str, where: str, table: Any) -> None:
        self.file, self.where = file, where
        if not isinstance(table, dict):
            self.fail("", f"must be a table, got {type(table).__name__}")
        self.table: Dict[str, Any] = table
        self.used: set = set()

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, what: str) -> None:
        raise ScenarioError(f"{self.file}: {self.name(key) if key else self.where}: {what}")

    def get(self, key: str, types: Tuple[type, ...], default: Any = ..., *,
            lo: Optional[float] = None, hi: Optional[float] = None,
            lo_open: bool = False) -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                self.fail(key, "is required")
            return default
        v = self.table[key]
        if isinstance(v, bool) and bool not in types:
            ok = False
        else:  # an int is a valid float (TOML `temperature = 1`)
            ok = isinstance(v, types) or (float in types and isinstance(v, int))
        if not ok:
            want = " or ".join(t.__name__ for t in types)
            self.fail(key, f"must be {want}, got {type(v).__name__} {v!r}")
        if float in types and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if isinstance(v, float) and not math.isfinite(v):
            self.fail(key, f"must be a finite number, got {v!r}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            self.fail(key, f"must be {'>' if lo_open else '>='} {lo}, got {v!r}")
        if hi is not None and v > hi:
            self.fail(key, f"must be <= {hi}, got {v!r}")
        return v

    def done(self) -> None:
        extra = sorted(set(self.table) - self.used)
        if extra:
            self.fail(extra[0], "unknown key")


def _request(file: str, where: str, table: Any) -> List[RequestSpec]:
    f = _Fields(file, where, table)
    rid = f.get("id", (str,))
    bad = name_problem(rid)
    if bad:
        f.fail("id", bad)
    count = f.get("count", (int,), 1, lo=1, hi=4096)
    temperature = f.get("temperature", (float,), 1.0, lo=0.0)
    top_p = f.get("top_p", (float,), 1.0, lo=0.0, hi=1.0, lo_open=True)
    top_k = f.get("top_k", (int,), -1, hi=TOP_K_MAX)
    if top_k != -1 and top_k < 1:
        f.fail("top_k", f"must be -1 (no top-k) or >= 1, got {top_k}")
    min_p = f.get("min_p", (float,), 0.0, lo=0.0, hi=1.0)
    seed = f.get("seed", (int,), None, lo=0, hi=SEED_MAX)
    f.done()
    ids = [rid] if count == 1 and "count" not in f.table else [f"{rid}-{i}" for i in range(count)]
    return [RequestSpec(i, temperature, top_p, top_k, min_p, seed) for i in ids]


def parse(text: str, file: str = "<memory>") -> Scenario:
    """Parse and validate a scenario. Raises :class:`ScenarioError` naming file and field."""
    try:
        data = parse_toml(text, file)
    except UntrustedError as exc:
        raise ScenarioError(str(exc)) from None
    f = _Fields(file, "", data)
    name = f.get("name", (str,))
    bad = name_problem(name)
    if bad:
        f.fail("name", bad)
    description = f.get("description", (str,), "")
    vocab = f.get("vocab_size", (int,), lo=2, hi=1 << 22)
    dtype = f.get("dtype", (str,), "float32")
    if dtype not in DTYPES:
        f.fail("dtype", f"must be one of {', '.join(DTYPES)}, got {dtype!r}")
    steps = f.get("steps", (int,), lo=1, hi=1_000_000)
    warmup = f.get("warmup", (int,), min(2, steps - 1), lo=0)
    if warmup >= steps:
        f.fail("warmup", f"must be < steps ({steps}), got {warmup}")
    seed = f.get("seed", (int,), 0, lo=0, hi=SEED_MAX)
    deterministic = f.get("deterministic", (bool,), False)
    # ``subjects`` (any registered subject or MODULE:OBJ) or the older ``paths``
    key = "subjects" if "subjects" in data else "paths"
    if "subjects" in data and "paths" in data:
        f.fail("paths", "give either subjects or paths, not both")
    word = key[:-1]
    given = key in data
    paths = f.get(key, (list,), None)
    if paths is None:
        paths = default_subjects(file)
        if not paths:
            f.fail("subjects", "names no subject, and no subject is registered to run by "
                   "default: give subjects = [...] (registered names or MODULE:OBJ)")
    if not paths:
        f.fail(key, f"needs at least one {word}; {_valid_subjects()}")
    for i, p in enumerate(paths):
        if not isinstance(p, str) or not _known_subject(p):
            where = f"{key}[{i}]" if given else f"subjects (the default {p!r})"
            f.fail(where, f"unknown {word} {p!r}; {_valid_subjects()}")
        if p in paths[:i]:
            f.fail(f"{key}[{i}]", f"duplicate {word} {p!r}")
    lg = _Fields(file, "logits", f.get("logits", (dict,), {}))
    scale = lg.get("scale", (float,), 3.0, lo=0.0)
    workload = lg.get("workload", (int,), 0, lo=0, hi=16384)
    forward_ms = lg.get("forward_ms", (float,), 0.0, lo=0.0, hi=60_000.0)
    lg.done()
    raw_reqs = f.get("requests", (list,))
    raw_events = f.get("events", (list,), [])
    _check_declared(file, raw_reqs, raw_events)  # before anything is expanded
    requests: List[RequestSpec] = []
    for i, r in enumerate(raw_reqs):
        requests.extend(_request(file, f"requests[{i}]", r))
    if not requests:
        f.fail("requests", "needs at least one request")
    # the batch as an ordered set: a finish or join is O(1), however many requests are live
    live: Dict[str, None] = {}
    for r in requests:
        if r.id in live:
            f.fail("requests", f"duplicate request id {r.id!r}")
        live[r.id] = None
    seen = set(live)
    events: List[EventSpec] = []
    indexed = []
    for i, e in enumerate(raw_events):
        ef = _Fields(file, f"events[{i}]", e)
        step = ef.get("step", (int,), lo=0)
        if step >= steps:
            ef.fail("step", f"must be < steps ({steps}), got {step}")
        join: List[RequestSpec] = []
        for j, r in enumerate(ef.get("join", (list,), [])):
            join.extend(_request(file, f"events[{i}].join[{j}]", r))
        finish = ef.get("finish", (list,), [])
        for j, x in enumerate(finish):
            if not isinstance(x, str):
                ef.fail(f"finish[{j}]", f"must be a request id string, got {x!r}")
        ef.done()
        indexed.append((step, i, EventSpec(step, tuple(join), tuple(finish))))
    for step, i, ev in sorted(indexed, key=lambda t: (t[0], t[1])):
        for j, rid in enumerate(ev.finish):
            if rid not in live:
                raise ScenarioError(f"{file}: events[{i}].finish[{j}]: request {rid!r} is not "
                                    f"in the batch at step {step}")
            del live[rid]
        for r in ev.join:
            if r.id in seen:
                raise ScenarioError(f"{file}: events[{i}].join: request id {r.id!r} is "
                                    f"already used")
            seen.add(r.id)
            live[r.id] = None
        if not live:
            raise ScenarioError(f"{file}: events[{i}]: leaves the batch empty at step {step}")
        events.append(ev)
    ex = _Fields(file, "expect", f.get("expect", (dict,), {}))
    max_syncs_raw = ex.get("max_syncs", (dict,), {})
    ex.done()
    max_syncs: Dict[str, int] = {}
    names: Optional[List[str]] = None  # the subjects' display names, read only when needed
    registered: Optional[List[str]] = None
    for p, v in max_syncs_raw.items():
        if p not in paths:
            if registered is None:
                registered = list(subjects.registered())
            if names is None and p not in registered:
                names = _subject_names(paths)
            if p not in registered and p not in (names or []):
                valid = ", ".join(dict.fromkeys([*registered, *paths, *(names or [])]))
                raise ScenarioError(f"{file}: expect.max_syncs.{p}: unknown path or subject; "
                                    f"valid: {valid}")
        if not isinstance(v, int):  # a TOML integer, not a string or a float of one
            raise ScenarioError(f"{file}: expect.max_syncs.{p}: must be an int >= 0, got {v!r}")
        max_syncs[p] = budget_count(v, f"{file}: expect.max_syncs.{p}", ScenarioError)
    f.done()
    _check_logit_range(file, dtype, scale, requests + [r for e in events for r in e.join])
    return Scenario(name=name, description=description, vocab_size=vocab, dtype=dtype,
                    steps=steps, warmup=warmup, seed=seed, deterministic=deterministic,
                    paths=tuple(paths), logits_scale=scale, workload=workload,
                    requests=tuple(requests), events=tuple(events), max_syncs=max_syncs,
                    file=file, text=text, forward_ms=forward_ms)


def _declared(tables: Any) -> int:
    """Requests a list of request tables declares, ``count`` included (an unchecked count
    counts as 1: it is refused when the table is read)."""
    if not isinstance(tables, list):
        return 0
    n = 0
    for t in tables:
        c = t.get("count", 1) if isinstance(t, dict) else 1
        n += c if type(c) is int and c > 0 else 1
    return n


def _check_declared(file: str, raw_reqs: Any, raw_events: Any) -> None:
    """Refuse, before any request is expanded, more requests (the batch and every join,
    counts included) than ``SYNCGUARD_MAX_REQUESTS`` (default 65536)."""
    limit = _limit(REQUESTS_ENV, REQUESTS_DEFAULT)
    total = _declared(raw_reqs)
    if isinstance(raw_events, list):
        total += sum(_declared(e.get("join")) for e in raw_events if isinstance(e, dict))
    if total > limit:
        raise ScenarioError(f"{file}: requests: {total} requests declared (the batch and every "
                            f"event's join, counts included), over the {limit:g} limit; set "
                            f"{REQUESTS_ENV} to raise it on purpose")


def _subject_names(paths: Sequence[str]) -> List[str]:
    """The display names (:func:`syncguard.subjects.label`) of the ``MODULE:OBJ`` subjects in
    ``paths``; a subject that cannot be loaded has none (running it reports why)."""
    out = []
    for p in paths:
        if subjects.is_spec(p):
            try:
                out.append(subjects.label(p, subjects.load(p)))
            except Exception:  # the user's module: its error is reported when it runs
                continue
    return out


def _known_subject(name: str) -> bool:
    return subjects.known(name)


def _valid_subjects() -> str:
    names = ", ".join(subjects.registered())
    return f"valid: {names}, or MODULE:OBJ" if names else \
        "valid: MODULE:OBJ (no subject is registered)"


def _check_logit_range(file: str, dtype: str, scale: float, reqs: List[RequestSpec]) -> None:
    """Refuse a scale whose logits / temperature overflow ``dtype`` (inf logits make the
    sampler's probabilities NaN)."""
    hot = [r for r in reqs if r.temperature >= _GREEDY_EPS]
    if not hot:
        return
    coldest = min(hot, key=lambda r: r.temperature)
    top = scale * LOGIT_SIGMAS / coldest.temperature
    if top >= DTYPE_MAX[dtype]:
        raise ScenarioError(
            f"{file}: logits.scale: {scale:g} overflows {dtype}: logits up to "
            f"{LOGIT_SIGMAS:g} x scale / temperature ({coldest.temperature:g} for request "
            f"{coldest.id!r}) must stay below {DTYPE_MAX[dtype]:g}; lower scale, raise the "
            f"temperature or use float32")


def load(path: str) -> Scenario:
    """Load a scenario file (UTF-8 TOML). Raises :class:`ScenarioError` (unreadable, not UTF-8,
    too large, malformed)."""
    try:  # a regular UTF-8 file, size bounded, never blocking on a FIFO
        text = read_text(path, "scenario", MAX_FILE_BYTES)
    except UntrustedError as exc:
        raise ScenarioError(str(exc)) from None
    return parse(text, path)


#: Environment variables that raise (or lower) the resource limits, and their defaults.
MEMORY_ENV, MEMORY_DEFAULT_GB = "SYNCGUARD_MAX_MEMORY_GB", 16.0
REQUESTS_ENV, REQUESTS_DEFAULT = "SYNCGUARD_MAX_REQUESTS", 65536.0
WORK_ENV, WORK_DEFAULT_GFLOP = "SYNCGUARD_MAX_STEP_GFLOP", 200.0


def _limit(env: str, default: float) -> float:
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        v = float("nan")
    if not (math.isfinite(v) and v > 0):
        raise ScenarioError(f"{env}: must be a number > 0, got {terminal(repr(raw))}")
    return v


def check_resources(scenarios: List[Scenario]) -> None:
    """Refuse, before anything is allocated, a scenario whose estimated memory
    (:attr:`Scenario.memory_bytes`) or work per step (:attr:`Scenario.flops_per_step`) is
    beyond the limits: ``SYNCGUARD_MAX_MEMORY_GB`` (default 16 GB) and
    ``SYNCGUARD_MAX_STEP_GFLOP`` (default 200 GFLOP, tens of seconds per step on a CPU).
    Raises :class:`ScenarioError` naming the field, the estimate and how to raise the limit."""
    mem_gb = _limit(MEMORY_ENV, MEMORY_DEFAULT_GB)
    work_gflop = _limit(WORK_ENV, WORK_DEFAULT_GFLOP)
    for sc in scenarios:
        need_gb = sc.memory_bytes / 1e9
        if need_gb > mem_gb:
            raise ScenarioError(
                f"{sc.file}: requests x vocab_size: needs about {need_gb:.1f} GB ("
                f"{sc.peak_batch} requests in the batch, {sc.vocab_size} vocabulary), over the "
                f"{mem_gb:g} GB limit; set {MEMORY_ENV} to raise it on purpose")
        need = sc.flops_per_step / 1e9
        if need > work_gflop:
            raise ScenarioError(
                f"{sc.file}: logits.workload: about {need:.0f} GFLOP per step (workload "
                f"{sc.workload}, batch {sc.peak_batch} x vocabulary {sc.vocab_size}), over the "
                f"{work_gflop:g} GFLOP limit; set {WORK_ENV} to raise it on purpose")


# -- scenario sets: folders of scenarios other packages register ------------------------------
SETS_GROUP = "syncguard.scenarios"
#: The file of a set's folder that names its subjects (never a scenario: it starts with "_").
SET_FILE = "_set.toml"


@dataclasses.dataclass(frozen=True)
class ScenarioSet:
    """A registered folder of scenarios: ``name`` (its entry point), ``value`` (the dotted
    package folder it names), ``folder`` (None when it cannot be found: a broken install)."""

    name: str
    value: str
    folder: Optional[str]

    def files(self) -> List[str]:
        """Its scenario files, sorted (``*.toml`` not starting with ``_``)."""
        if self.folder is None:
            raise ScenarioError(f"scenario set {self.name!r} ({SETS_GROUP} entry point "
                                f"{self.value!r}): folder not found (a broken install: "
                                f"reinstall the package that registers it, or name scenario "
                                f"files)")
        return sorted(os.path.join(self.folder, n) for n in os.listdir(self.folder)
                      if n.endswith(".toml") and not n.startswith("_"))

    def subjects(self) -> List[str]:
        """The subjects its ``_set.toml`` names ([] without one)."""
        if self.folder is None:
            return []
        return list(_set_subjects(os.path.join(self.folder, SET_FILE)))


def _folder(value: str) -> Optional[str]:
    """The folder of a dotted package path (``pkg.scenarios``), found without importing
    anything: the top-level package's location (``importlib.util.find_spec`` of a top-level
    name imports nothing), then the rest as folders below it."""
    import importlib.util

    parts = value.strip().split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for root in list(spec.submodule_search_locations or []):
        d = os.path.join(str(root), *parts[1:])
        if os.path.isdir(d):
            return d
    return None


def sets() -> List[ScenarioSet]:
    """The registered scenario sets (entry points of ``syncguard.scenarios``), by name."""
    return [ScenarioSet(n, v, _folder(v)) for n, v in sorted(plugins.group(SETS_GROUP).items())]


def _set_subjects(path: str) -> Tuple[str, ...]:
    """``subjects`` of a set's ``_set.toml`` (() when there is none). Raises
    :class:`ScenarioError` naming the file and the field."""
    if not os.path.isfile(path):
        return ()
    try:
        data = parse_toml(read_text(path, "scenario set", MAX_FILE_BYTES), path)
    except UntrustedError as exc:
        raise ScenarioError(str(exc)) from None
    f = _Fields(path, "", data)
    f.get("description", (str,), "")
    names = f.get("subjects", (list,), [])
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n:
            f.fail(f"subjects[{i}]", f"must be a subject name, got {n!r}")
        if n in names[:i]:
            f.fail(f"subjects[{i}]", f"duplicate subject {n!r}")
    f.done()
    return tuple(names)


def default_subjects(file: str) -> List[str]:
    """The subjects a scenario without ``subjects``/``paths`` runs: those its set declares
    (``file`` in a registered set's folder); for any other file those every registered set
    declares (sets by name, each once); where none declares any, every registered subject by
    name."""
    all_sets = sets()
    here = os.path.dirname(os.path.realpath(file)) if file != "<memory>" else None
    mine = [s for s in all_sets if s.folder is not None and here is not None
            and os.path.realpath(s.folder) == here]
    declared = [n for s in (mine or all_sets) for n in s.subjects()]
    return list(dict.fromkeys(declared)) or sorted(subjects.registered())


def builtin_paths() -> List[str]:
    """The scenario files of every registered scenario set (:func:`sets`), set by set, each
    set's sorted: what ``syncguard run`` runs with no scenario named."""
    found = sets()
    if not found:
        raise ScenarioError(f"no scenario set is registered (entry points of {SETS_GROUP}): "
                            f"name scenario files, or reinstall syncguard")
    return [p for s in found for p in s.files()]


def _by_name(name: str) -> str:
    """The file of scenario ``name`` in the registered sets. Raises :class:`ScenarioError`
    when no set has it, or when two do."""
    found = [s for s in sets() if s.folder is not None]
    plain = not name.startswith("_") and "/" not in name and os.sep not in name
    hits = [os.path.join(str(s.folder), f"{name}.toml") for s in found
            if plain and os.path.isfile(os.path.join(str(s.folder), f"{name}.toml"))]
    if len(hits) > 1:
        raise ScenarioError(f"{name}: a scenario of more than one registered set ("
                            f"{', '.join(hits)}): name the file")
    if not hits:
        known = ", ".join(os.path.basename(x)[:-5] for s in found for x in s.files())
        raise ScenarioError(f"{name}: no such scenario file or scenario of a registered set "
                            f"(registered: {known or 'none'})")
    return hits[0]


def resolve(names: List[str]) -> List[Scenario]:
    """Scenario files, or names of scenarios of the registered sets (``steady`` for the case
    study's ``scenarios/steady.toml``), checked against the resource limits
    (:func:`check_resources`). No names: every registered set's scenarios (unique names)."""
    if not names:
        return _unique([load(p) for p in builtin_paths()])
    out = []
    for n in names:
        if os.path.exists(n) or n.endswith(".toml"):
            out.append(load(n))
        else:
            out.append(load(_by_name(n)))
    check_resources(_unique(out))  # refuse before anything is allocated or written
    return out


def _unique(out: List[Scenario]) -> List[Scenario]:
    names_seen: Dict[str, str] = {}
    for s in out:
        if s.name in names_seen:
            raise ScenarioError(f"{s.file}: name: {s.name!r} is also the name of "
                                f"{names_seen[s.name]}")
        names_seen[s.name] = s.file
    return out


@dataclasses.dataclass
class ScenarioOptions:
    """The scenario options ``run`` and ``check`` take, as typed (checked by
    :func:`syncguard.driving.runner.run_options`): the scenarios, the device, ``--paths``
    chunks and the spelling used, ``--subject``, ``--steps``, ``--warmup`` and the device
    ``--profile`` of the modeled timeline."""

    scenarios: List[str] = dataclasses.field(default_factory=list)
    device: str = "auto"
    paths: Optional[List[str]] = None
    paths_flag: str = "--paths"
    subjects: List[str] = dataclasses.field(default_factory=list)
    steps: Optional[int] = None
    warmup: Optional[int] = None
    profile: Optional[str] = None
