"""Bounded work per request: what a calculation will cost, known before any of it is done, and the limits
it must fit.

Every calculation passes `check(calc, request)` (the runner calls it between validation and compute), so
the REST routes, the batch endpoint, the site's forms, MCP and the CLI refuse the same requests. The cost
of a request is counted in *point-evaluations*:

    points (the broadcast length of the swept fields; a grid request: the product of its axes' lengths)
      × variants (the base request plus each `what_if` entry, each at its own sweep length)
      × series (what a calculator multiplies every point by: the candidates of routing-cost, the
                configurations of the deployment planner, the formats compared by weight-memory …)

From that count and the calibrated profile of the calculator (its entry's `profile`: CPU seconds, peak memory and answer bytes per
point-evaluation, measured by `benchmarks/bench_limits.py`), the estimated CPU time, peak memory and answer
size follow. A calculator that multiplies points by a list of its own declares a `series` hook (`Series`). A request over any limit is refused with a 413 that names the limit, the request's cost and
how to split it. A batch is one request: its items' costs are summed against the same limits (`check_total`).

Work that does not scale with the points is priced too (`Work`): the Monte Carlo draws of a calculator's `work`
hook, and the layers of a `model_config` (read per request; its counts are bounded by the reader, see
`calculators.domain.hf_reader.BOUNDS`); and every calculation costs a fixed CPU time (`fixed_cpu_s`: the calculation
itself, and a model's step per hardware id). They add to the estimate, summed across a batch.

The estimate can be wrong, so a calculation also runs under a guard (`guard`, `checkpoint`): the CPU time of its
thread is checked at every step of a calculation and in the long loops (Monte Carlo rounds, planner searches), and
past GUARD_CPU_S the calculation stops with `Overrun` (a 503 problem; the worker goes on). A server worker also caps
its data segment (`cap_memory`: RLIMIT_DATA at its size at start + GUARD_MEMORY_BYTES), so that an allocation
beyond it fails with MemoryError (a 503 problem) instead of the kernel killing the worker.

Every limit is a constant below, overridable by an environment variable `CASEBOOK_LIMIT_<NAME>`.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field as dc_field
from typing import Any

from calculators.framework.errors import CalcInputError

# --------------------------------------------------------------------------- limits (env-overridable)

#: point-evaluations one request (a batch: all its items together) may ask for
EVALUATIONS = 1_000_000
#: estimated CPU seconds of one request (this machine's calibration; see `benchmarks/bench_limits.py`)
CPU_S = 2.0
#: estimated peak memory of one calculation, bytes
MEMORY_BYTES = 256 * 2**20
#: estimated size of one answer (JSON), bytes
ANSWER_BYTES = 64 * 2**20
#: threads that run costly calculations (the rest of the server keeps answering meanwhile)
POOL_WORKERS = 2
#: calculations that may wait for a free thread; beyond that the answer is 503 with Retry-After
POOL_QUEUE = 16
#: a calculation of at most this many point-evaluations runs inline (a thread hop costs more than it)
INLINE_EVALUATIONS = 2_000
#: seconds a client is asked to wait (Retry-After) when the pool is full
RETRY_AFTER_S = 2
#: the guard: CPU seconds (of the calculating thread) one request may really spend, whatever its estimate said
GUARD_CPU_S = 10.0
#: the guard: bytes a server worker's data segment may grow past its size at start (RLIMIT_DATA)
GUARD_MEMORY_BYTES = 2 * 2**30

ENV_PREFIX = "CASEBOOK_LIMIT_"
#: each limit: (constant's name, its default) — the env var is ENV_PREFIX + name
DEFAULTS: dict[str, int | float] = {
    "EVALUATIONS": EVALUATIONS, "CPU_S": CPU_S, "MEMORY_BYTES": MEMORY_BYTES, "ANSWER_BYTES": ANSWER_BYTES,
    "POOL_WORKERS": POOL_WORKERS, "POOL_QUEUE": POOL_QUEUE, "INLINE_EVALUATIONS": INLINE_EVALUATIONS,
    "RETRY_AFTER_S": RETRY_AFTER_S, "GUARD_CPU_S": GUARD_CPU_S, "GUARD_MEMORY_BYTES": GUARD_MEMORY_BYTES,
}


def limit(name: str) -> int | float:
    """The limit `name` (a key of DEFAULTS): `CASEBOOK_LIMIT_<name>` when set to a positive number, else the default."""
    default = DEFAULTS[name]
    raw = os.environ.get(ENV_PREFIX + name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{ENV_PREFIX}{name}={raw!r} must be a finite number ≥ 0")
    return int(value) if isinstance(default, int) else value


def describe_limits() -> str:
    """The limits as Markdown, for the OpenAPI description of the calculator routes."""
    return (
        "**Limits (bounded work per request).** Before any work, a request's cost is counted in point-evaluations "
        "(sweep points, or a grid's every combination, × `what_if` variants × the series a calculator multiplies by, such as candidates or "
        "configurations; a batch sums its items) and turned into an estimated CPU time, peak memory and answer "
        f"size. Over a limit the answer is 413 `application/problem+json` naming the limit, the request's cost "
        f"and how to split it. Limits: {limit('EVALUATIONS'):,} point-evaluations "
        f"(`{ENV_PREFIX}EVALUATIONS`), ~{limit('CPU_S'):g} s of CPU (`{ENV_PREFIX}CPU_S`), "
        f"{limit('MEMORY_BYTES') / 2**20:,.0f} MiB of memory (`{ENV_PREFIX}MEMORY_BYTES`) and a "
        f"{limit('ANSWER_BYTES') / 2**20:,.0f} MiB answer (`{ENV_PREFIX}ANSWER_BYTES`). Costly calculations run "
        f"in a pool of {limit('POOL_WORKERS')} threads (`{ENV_PREFIX}POOL_WORKERS`) with "
        f"{limit('POOL_QUEUE')} waiting places (`{ENV_PREFIX}POOL_QUEUE`); when it is full the answer is 503 with "
        "`Retry-After`. Monte Carlo draws and the layers of a `model_config` are priced too. A calculation that "
        f"runs past {limit('GUARD_CPU_S'):g} s of CPU all the same (`{ENV_PREFIX}GUARD_CPU_S`), or past the worker's "
        "memory cap, stops with a 503 problem.")


# --------------------------------------------------------------------------- calibrated profiles

@dataclass(frozen=True)
class Profile:
    """What one point-evaluation of a calculator costs (measured; see `benchmarks/bench_limits.py`)."""

    cpu_s: float            # CPU seconds per point-evaluation, validation to encoded answer
    memory_bytes: float     # peak memory per point-evaluation, bytes
    answer_bytes: float     # answer (JSON) bytes per point-evaluation


#: calculators without a profile (no sweep, or new): the largest measured figure of each kind
DEFAULT_PROFILE = Profile(cpu_s=4e-6, memory_bytes=2200.0, answer_bytes=640.0)


def profile_of(calc: Any) -> Profile:
    """The calibrated profile of a calculator (its entry's `profile`; DEFAULT_PROFILE when it has none)."""
    return getattr(calc, "profile", None) or DEFAULT_PROFILE


# --------------------------------------------------------------------------- work beyond the points

@dataclass(frozen=True)
class Work:
    """Work a calculation does that its point-evaluations do not count, priced from the request before any of it
    is done (Monte Carlo draws, the layers of a `model_config` …): how much, and its estimated CPU and memory."""

    units: float             # how many (draws, layers …)
    label: str               # what they are, e.g. "random draws"
    field: str               # the field that sets them (named in a refusal)
    cpu_s: float             # estimated CPU seconds of all of them
    memory_bytes: float = 0.0    # estimated peak memory they hold at once, bytes


#: a calculator's hook: (validated request or raw body) -> the work its points do not count
WorkHook = Callable[[Any], Iterable[Work]]

#: CPU seconds to read one layer of a `model_config` and build its records (measured: benchmarks/bench_model_bounds.py,
#: ~4 µs a layer at 10^5–10^6 layers; rounded up)
CONFIG_LAYER_CPU_S = 1e-5
#: peak bytes one layer of a `model_config` holds while it is read (~0.5 KB measured at 10^6 layers; rounded up)
CONFIG_LAYER_BYTES = 1024.0
#: a `model_config` costs at least this many layers' work (its other keys, the parameter ledger)
CONFIG_MIN_LAYERS = 100
#: the most layers the reader accepts (calculators.domain.hf_reader.BOUNDS); more is refused there, before work
CONFIG_MAX_LAYERS = 1_000


#: CPU seconds of one calculation whatever its size (validation, lookups, the envelope): 0.2–1.6 ms measured for the
#: calculators' examples, about 0.6 ms the median; without it 1,000 small items of a batch were priced at a few ms
CALCULATION_CPU_S = 1e-3
#: CPU seconds of building a model's step on one hardware (the step model's operations and the hardware's rates):
#: ~4 ms for roofline's example with a model and hardware
STEP_CPU_S = 4e-3


def fixed_cpu_s(request: Any) -> float:
    """The CPU seconds a calculation costs whatever its points: CALCULATION_CPU_S, and STEP_CPU_S per hardware id of a
    request that also names a model (`model` or `model_config`)."""
    config = request.get("model_config") if isinstance(request, dict) else getattr(request, "hf_config", None)
    hardware = request_value(request, "hardware")
    if request_value(request, "model") is None and config is None or not hardware:
        return CALCULATION_CPU_S
    return CALCULATION_CPU_S + STEP_CPU_S * (len(hardware) if isinstance(hardware, (list, tuple)) else 1)


def config_work(request: Any) -> list[Work]:
    """The work of reading the `model_config` of a request (a validated model or a raw body), if it gives one."""
    config = request.get("model_config") if isinstance(request, dict) else getattr(request, "hf_config", None)
    if not isinstance(config, dict):
        return []
    text = config.get("text_config")
    layers = (text if isinstance(text, dict) else config).get("num_hidden_layers")
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else 1
    n = max(min(layers, CONFIG_MAX_LAYERS), CONFIG_MIN_LAYERS)     # beyond the bound: a 422 at once, no work
    return [Work(n, "model_config layers", "model_config", n * CONFIG_LAYER_CPU_S, n * CONFIG_LAYER_BYTES)]


# --------------------------------------------------------------------------- cost

@dataclass
class Cost:
    """The cost of one calculation, counted before any work."""

    calculator: str
    profile: Profile = DEFAULT_PROFILE
    points: int = 1                  # the longest sweep (base or variant)
    variants: int = 1                # the base request plus its what_if entries
    series: int = 1                  # what every point is multiplied by (candidates, configurations …)
    series_label: str = ""           # what `series` counts, e.g. "configurations"
    evaluations: int = 1             # Σ over variants of points × series
    field: str = "body"              # the field to change to make it smaller (named in a refusal)
    sweep_field: str = ""            # the longest swept field
    grid: str = ""                   # a grid request: its axes' lengths, e.g. "batch 25 × context_tokens 100"
    narrow: str = ""                 # what to narrow when the series is too long (e.g. "tp, pp, ep, batch or hardware")
    work: list[Work] = dc_field(default_factory=list)    # priced beyond the point-evaluations (draws, config layers)
    fixed_cpu_s: float = 0.0         # whatever the points: the calculation itself, a model's step per hardware

    @property
    def cpu_s(self) -> float:
        return self.evaluations * self.profile.cpu_s + sum(w.cpu_s for w in self.work) + self.fixed_cpu_s

    @property
    def memory_bytes(self) -> float:
        return self.evaluations * self.profile.memory_bytes + sum(w.memory_bytes for w in self.work)

    @property
    def answer_bytes(self) -> float:
        return self.evaluations * self.profile.answer_bytes

    def describe(self) -> str:
        """The count in words: 'sweep of 100,000 points × 21 variants = 2.1 M point-evaluations'."""
        parts = [(f"grid of {self.points:,} points" if self.grid else f"sweep of {self.points:,} points")
                 if self.points > 1 else "1 point"]
        if self.variants > 1:
            parts.append(f"{self.variants} variants")
        if self.series > 1:
            parts.append(f"{self.series:,} {self.series_label or 'series'}")
        product = self.points * self.variants * self.series
        exact = " (variants at their own sweep lengths)" if product != self.evaluations else ""
        extra = "".join(f", and {_count(w.units)} {w.label}" for w in self.work)
        return " × ".join(parts) + f" = {_count(self.evaluations)} point-evaluations{exact}{extra}"

    def as_dict(self) -> dict[str, Any]:
        """The cost as a problem extension (`cost`)."""
        d = {"calculator": self.calculator, "points": self.points, "variants": self.variants,
             "series": self.series, "evaluations": self.evaluations,
             "estimated_cpu_s": round(self.cpu_s, 3), "estimated_memory_bytes": int(self.memory_bytes),
             "estimated_answer_bytes": int(self.answer_bytes)}
        if self.work:
            d["work"] = {w.label: w.units for w in self.work}
        return d


def _count(n: float) -> str:
    """A count for humans: 2,100,000 -> '2.1 M', 950 -> '950'."""
    if n >= 1e6:
        return f"{n / 1e6:.3g} M"
    if n >= 1e4:
        return f"{n / 1e3:.3g} k"
    return f"{int(n):,}"


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB" if b >= 2**20 else f"{b / 2**10:,.0f} KiB"


def request_value(obj: Any, name: str) -> Any:
    """`obj.name` for a request model, `obj[name]` for a raw body (dotted names walk nested objects)."""
    for part in name.split("."):
        if obj is None:
            return None
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
    return obj


def sweep_length(v: Any) -> int:
    """The number of points a request value sweeps (1 for a scalar or absent value)."""
    return len(v) if isinstance(v, (list, tuple)) and v else 1


def _grid(obj: Any, names: Sequence[str]) -> tuple[int, str, str]:
    """(the points of a grid request: the product of its axes' lengths, the longest axis, the axes described)."""
    lengths = {name: sweep_length(request_value(obj, name)) for name in names}
    longest = max(lengths, key=lengths.get, default="")
    axes = " × ".join(f"{name} {n:,}" for name, n in lengths.items() if n > 1)
    return math.prod(lengths.values()), longest if lengths.get(longest, 1) > 1 else "", axes


def _sweep(obj: Any, names: Sequence[str]) -> tuple[int, str]:
    """(the longest sweep among the fields `names` of `obj`, the field)."""
    best, where = 1, ""
    for name in names:
        n = sweep_length(request_value(obj, name))
        if n > best:
            best, where = n, name
    return best, where


@dataclass(frozen=True)
class Series:
    """What a calculator multiplies every point by, counted from a request before any work (its `series` hook)."""

    points: int              # the request's own sweep length, where the calculator sweeps inside a list
    count: int               # the series: candidates, configurations, compared formats …
    label: str               # what `count` counts
    field: str               # the field to shorten when the series is too long
    narrow: str = ""         # what to narrow, in words (default: "compare fewer <label>")


#: a calculator's hook: (validated request or raw body) -> Series
SeriesHook = Callable[[Any], Series]


def list_series(name: str, label: str) -> SeriesHook:
    """A hook for a calculator that repeats every point once per entry of its list field `name` (plus the base)."""
    def series(request: Any) -> Series:
        return Series(1, 1 + len(request_value(request, name) or []), label, name)
    series.__doc__ = f"1 + len({name}): {label}"
    return series


def cost_of(calc: Any, request: Any) -> Cost:
    """The cost of `request` (a validated request model or a raw body) for calculator `calc`, before any work."""
    cost = Cost(calc.name, profile_of(calc))
    points, cost.sweep_field = _sweep(request, calc.sweepable)
    if calc.grid and request_value(request, "grid") is True:        # every combination of the axes, not their pairs
        grid_points, longest, cost.grid = _grid(request, calc.grid)
        if grid_points > points:
            points, cost.sweep_field = grid_points, longest
    series_of = getattr(calc, "series", None)
    if series_of is not None:
        s = series_of(request)
        own_points, cost.series, cost.series_label, series_field, cost.narrow = s.points, s.count, s.label, s.field, s.narrow
        if own_points > points:
            points, cost.sweep_field = own_points, series_field
        if cost.series > 1:
            cost.field = series_field
    variants = request_value(request, "what_if")
    variants = list(variants) if isinstance(variants, (list, tuple)) else []
    per_variant = [points]
    for v in variants:   # a variant sweeps its own lists where it gives them, else the base's
        own, _ = _sweep(v, calc.sweepable)
        per_variant.append(max(points, own))
    cost.points = max(per_variant)
    cost.variants = len(per_variant)
    cost.evaluations = sum(per_variant) * cost.series
    if cost.variants > 1:
        cost.field = "what_if"
    elif cost.series == 1 and cost.sweep_field:
        cost.field = cost.sweep_field
    work_of = getattr(calc, "work", None)
    cost.work = [*config_work(request), *(work_of(request) if work_of is not None else ())]
    cost.fixed_cpu_s = fixed_cpu_s(request)
    return cost


# --------------------------------------------------------------------------- refusals

class LimitExceeded(CalcInputError):
    """A request whose cost is over a limit: a 413 naming the limit, the cost and how to split it."""

    def __init__(self, field: str, message: str, *, limit_name: str, limit_value: float, cost: dict[str, Any],
                 advice: str):
        super().__init__(field, message, status=413)
        self.extensions = {"limit": {"name": limit_name.lower(), "env": ENV_PREFIX + limit_name, "value": limit_value},
                           "cost": cost, "advice": advice}


def _advice(cost: Cost, allowed: float) -> str:
    """How to split `cost` into requests of at most `allowed` point-evaluations."""
    if cost.variants > 1 and cost.points * cost.series <= allowed:
        return "send the variants (what_if) in separate requests"
    if cost.series > 1 and cost.points * cost.variants <= allowed and cost.narrow:
        chunk = max(int(allowed // max(cost.points * cost.variants, 1)), 1)
        return f"narrow {cost.narrow} to at most {chunk:,} {cost.series_label} per request"
    if cost.series > 1 and cost.points * cost.variants <= allowed:
        return f"compare fewer {cost.series_label} per request"
    per = max(int(allowed // max(cost.variants * cost.series, 1)), 1)
    if cost.grid:
        return (f"shrink the grid ({cost.grid}) to at most {per:,} points, or split its longest axis "
                f"`{cost.sweep_field}` across requests")
    where = f" of `{cost.sweep_field}`" if cost.sweep_field else ""
    extra = " and send the variants (what_if) separately" if cost.variants > 1 and per < 1 else ""
    return f"split the sweep{where} into requests of at most {per:,} points{extra}"


def _over(cost: Cost, evaluations: float, cpu_s: float, memory: float, answer: float) -> tuple[str, float, str, float] | None:
    """The first limit a cost of these totals is over: (name, limit, what was estimated, the point-evaluations
    every limit together allows this calculator beside its other work)."""
    p = cost.profile
    work_cpu = sum(w.cpu_s for w in cost.work) + cost.fixed_cpu_s
    work_mem = sum(w.memory_bytes for w in cost.work)
    checks = (
        ("EVALUATIONS", evaluations, lambda lim: f"limit {_count(lim)} point-evaluations", 1.0, 0.0),
        ("CPU_S", cpu_s, lambda lim: f"~{cpu_s:.3g} s of CPU estimated, limit {lim:g} s", p.cpu_s, work_cpu),
        ("MEMORY_BYTES", memory, lambda lim: f"~{_mib(memory)} of memory estimated, limit {_mib(lim)}", p.memory_bytes,
         work_mem),
        ("ANSWER_BYTES", answer, lambda lim: f"an answer of ~{_mib(answer)} estimated, limit {_mib(lim)}", p.answer_bytes,
         0.0),
    )
    allowed = min(max(limit(name) - other, 0.0) / per_eval for name, _, _, per_eval, other in checks if per_eval > 0)
    for name, value, words, _, _ in checks:
        lim = limit(name)
        if value > lim:
            return name, lim, words(lim), allowed
    return None


def check(calc: Any, request: Any) -> Cost:
    """The cost of `request`, or LimitExceeded when it is over a limit (called before any work)."""
    cost = cost_of(calc, request)
    over = _over(cost, cost.evaluations, cost.cpu_s, cost.memory_bytes, cost.answer_bytes)
    if over is None:
        return cost
    name, lim, words, allowed = over
    field, advice = cost.field, _advice(cost, allowed)
    heavy = _heaviest_work(cost, name, lim)
    if heavy is not None:
        field, advice = heavy.field, f"lower `{heavy.field}` ({_count(heavy.units)} {heavy.label} estimated at " + (
            f"~{heavy.cpu_s:.3g} s of CPU)" if name == "CPU_S" else f"~{_mib(heavy.memory_bytes)})")
    raise LimitExceeded(field, f"{calc.name}: {cost.describe()}: {words}: {advice}",
                        limit_name=name, limit_value=lim, cost=cost.as_dict(), advice=advice)


def _heaviest_work(cost: Cost, name: str, lim: float) -> Work | None:
    """The priced work that takes the larger part of a CPU or memory limit `name` the cost is over, if any does."""
    if name not in ("CPU_S", "MEMORY_BYTES") or not cost.work:
        return None
    size = (lambda w: w.cpu_s) if name == "CPU_S" else (lambda w: w.memory_bytes)
    heavy = max(cost.work, key=size)
    points = cost.evaluations * (cost.profile.cpu_s if name == "CPU_S" else cost.profile.memory_bytes)
    return heavy if size(heavy) >= points else None


def check_total(costs: Iterable[Cost], where: str = "requests") -> None:
    """A batch is one request: the sum of its items' costs must fit the same limits (LimitExceeded if not)."""
    costs = list(costs)
    if not costs:
        return
    evaluations = sum(c.evaluations for c in costs)
    cpu_s = sum(c.cpu_s for c in costs)
    answer = sum(c.answer_bytes for c in costs)
    memory = answer + max(c.memory_bytes for c in costs)     # answers are kept; one calculation runs at a time
    total = Cost("batch", evaluations=evaluations)
    fields = (("EVALUATIONS", evaluations), ("CPU_S", cpu_s), ("MEMORY_BYTES", memory), ("ANSWER_BYTES", answer))
    for name, value in fields:
        lim = limit(name)
        if value > lim:
            parts = max(math.ceil(value / lim), 2)
            unit = {"EVALUATIONS": f"{_count(value)} point-evaluations, limit {_count(lim)}",
                    "CPU_S": f"~{value:.3g} s of CPU estimated, limit {lim:g} s",
                    "MEMORY_BYTES": f"~{_mib(value)} of memory estimated, limit {_mib(lim)}",
                    "ANSWER_BYTES": f"an answer of ~{_mib(value)} estimated, limit {_mib(lim)}"}[name]
            advice = f"split the batch into at least {parts} batches"
            cost = total.as_dict() | {"items": len(costs), "estimated_cpu_s": round(cpu_s, 3),
                                      "estimated_memory_bytes": int(memory), "estimated_answer_bytes": int(answer)}
            raise LimitExceeded(where, f"batch of {len(costs):,} items: {unit}: {advice}",
                                limit_name=name, limit_value=lim, cost=cost, advice=advice)



# --------------------------------------------------------------------------- the guard (the last line)

class Overrun(Exception):
    """A calculation stopped by the guard: its thread ran past GUARD_CPU_S seconds of CPU (a 503 problem).

    Not a CalcInputError, so that no calculator's handling of bad input can swallow it."""

    def __init__(self, spent_s: float, limit_s: float):
        self.spent_s, self.limit_s = spent_s, limit_s
        self.extensions = {"limit": {"name": "guard_cpu_s", "env": ENV_PREFIX + "GUARD_CPU_S", "value": limit_s},
                           "spent_cpu_s": round(spent_s, 3)}
        super().__init__(f"the calculation was stopped after {spent_s:.3g} s of CPU (the guard's limit is {limit_s:g} s, "
                         "although its estimate was within the limits): send a smaller request")


_guarded = threading.local()


@contextmanager
def guard(cpu_s: float | None = None) -> Iterator[None]:
    """Run the block under the CPU guard: `checkpoint()` inside it raises Overrun once this thread has spent more than
    `cpu_s` (default GUARD_CPU_S) seconds of CPU since the block began. A guard inside a guard keeps the outer one's
    budget: a batch is one request, its items share one."""
    if getattr(_guarded, "deadline", None) is not None:
        yield
        return
    budget = float(limit("GUARD_CPU_S") if cpu_s is None else cpu_s)
    start = time.thread_time()
    _guarded.start, _guarded.deadline, _guarded.budget = start, start + budget, budget
    try:
        yield
    finally:
        _guarded.deadline = None


def checkpoint() -> None:
    """Overrun when the calculation running on this thread is past its guard's CPU budget (a no-op outside a guard;
    ~0.3 µs, so that it can sit in every step and long loop)."""
    deadline = getattr(_guarded, "deadline", None)
    if deadline is not None:
        now = time.thread_time()
        if now > deadline:
            raise Overrun(now - _guarded.start, _guarded.budget)


def _data_bytes() -> int | None:
    """This process's data segment (VmData), bytes; None where /proc is not there."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cap_memory(headroom: float | None = None) -> int | None:
    """Cap this process's data segment (RLIMIT_DATA: heap and private writable mappings, where NumPy's buffers live)
    at its present size + `headroom` (default GUARD_MEMORY_BYTES; 0 leaves it uncapped), so that a calculation that
    allocates past it gets MemoryError (answered as a 503) instead of the kernel killing the worker. Returns the cap,
    or None when none was set (no /proc, no `resource`, or headroom 0). A server worker calls it once at start."""
    headroom = float(limit("GUARD_MEMORY_BYTES") if headroom is None else headroom)
    now = _data_bytes()
    if headroom <= 0 or now is None:
        return None
    try:
        import resource
    except ImportError:                 # pragma: no cover - not a POSIX system
        return None
    cap = int(now + headroom)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        return soft
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return cap
