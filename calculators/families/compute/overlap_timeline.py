"""Overlap timeline: stages, items, lanes and buffer slots → serial, overlapped and bound times.

The book's principle: shared resources add up work, serial dependencies add up time, and full
overlap takes the maximum, which is only an ideal lower bound. A request lists stages (load,
compute, store; copy vs compute; rollout, gradient, update ...) with a time per item, which stages
each waits for (`after`, default: the previous stage), how many items a stage can work on at once
(`lanes`) and how many output buffers it has (`slots`). N items flow through in order.

Method. With constant times, no release times and no slot limits the makespan has a closed form
that broadcasts over a sweep of N: max over stages j with one lane of (longest path through j +
(N − 1)·d_j), and at least the longest path. Otherwise the calculator walks the items in order
(item i of stage s starts when its dependencies for item i are done, when item i − lanes has left
the stage, and when item i − slots has left every consumer of the stage's buffer); that walk is
capped in size.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, LIST_SEP, Lookup, NonNegFloat, out, PosFloat,
    PosInt, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.families.compute._overlap_timeline_outputs import OverlapTimelineOutputs


def _out(x):
    """`out`, with a fast path for finite numeric arrays (large sweeps)."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "fiu" and np.isfinite(x).all():
        return x.tolist()
    return out(x)

MAX_STAGES = 32
MAX_WALK = 60_000          # items × stages for one walk
MAX_WALK_POINTS = 32       # sweep points that each need their own walk
Name = str
#: a count of lanes or buffer slots (at most 1e6)
Slots = Annotated[int, Field(ge=1, le=10**6)]
#: the fraction of ideal speed a stage reaches: 0 < efficiency ≤ 1
Efficiency = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
#: release times, one per item (at least one item)
ReleaseTimes = Annotated[list[NonNegFloat], Field(min_length=1, max_length=100_000)]


class StageFields(CalcRequest):
    """Time of a stage for one item = duration_s + bytes/bytes_per_s + flops/flop_per_s + (total_s +
    total_bytes/bytes_per_s + total_flops/flop_per_s) / items, all divided by the request's efficiency."""

    duration_s: NonNegFloat | Annotated[list[NonNegFloat], Field(min_length=1, max_length=100_000)] | None = Field(
        None, description="Fixed time per item, seconds; a list gives one value per item.")
    bytes: NonNegFloat | None = Field(None, description="Bytes the stage moves per item (needs bytes_per_s).")
    bytes_per_s: PosFloat | None = Field(None, description="Bandwidth of the stage, bytes/s.")
    flops: NonNegFloat | None = Field(None, description="FLOPs per item (needs flop_per_s).")
    flop_per_s: PosFloat | None = Field(None, description="Effective compute rate of the stage, FLOP/s.")
    total_s: NonNegFloat | None = Field(None, description="Time of divisible work, split evenly over the items, seconds.")
    total_bytes: NonNegFloat | None = Field(None, description="Bytes of divisible work split evenly over the items (slicing).")
    total_flops: NonNegFloat | None = Field(None, description="FLOPs of divisible work split evenly over the items (slicing).")
    lanes: Slots | None = Field(None, description="Items the stage can work on at once (default 1; see `unlimited_lanes`).")
    unlimited_lanes: bool | None = Field(None, description="True for a pure latency (any number in flight, e.g. prefetches).")
    slots: Slots | None = Field(None, description="Output buffers of the stage: item i waits until item i − slots has left every stage that reads it. Unset = unlimited.")
    slot_bytes: NonNegFloat | None = Field(None, description="Bytes of one output buffer, for staging memory.")


class Stage(StageFields):
    name: Name = Field(min_length=1, max_length=60, description="Unique stage name.", examples=["compute"])
    after: list[Name] | None = Field(None, max_length=MAX_STAGES, description="Stages that must finish this item first; unset = the previous stage, [] = none.")
    resource: str | None = Field(None, max_length=60, description="Shared resource (e.g. `memory`): stages naming the same one add up their work.")


class StageOverride(StageFields):
    scale: Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)] | None = Field(None, description="Multiply this stage's time per item (0.5 = twice as fast).")


class OverlapWhatIf(CalcRequest):
    """A partial request: fields given replace the base request's; `stages` patches named stages."""

    label: str | None = Field(None, max_length=200)
    items: PosInt | None = None
    mode: Literal["pipelined", "serial"] | None = None
    release_times_s: ReleaseTimes | None = None
    first_release_s: NonNegFloat | None = None
    release_interval_s: NonNegFloat | None = None
    efficiency: Efficiency | None = None
    stages: dict[Name, StageOverride] = Field(default_factory=dict, max_length=MAX_STAGES, description="Patches by stage name.")


class OverlapRequest(CalcRequest):
    """Items flowing through stages; see the calculator description."""

    stages: list[Stage] = Field(min_length=1, max_length=MAX_STAGES, description="The stages, in dependency order.")
    items: PosIntSweep | None = Field(None, description="Items (tiles, blocks, slices, requests). Default: the length of per-item lists, else 1. Sweepable.", examples=[8])
    mode: Literal["pipelined", "serial"] = Field("pipelined", description="`pipelined`: stages overlap across items within their dependencies; `serial`: one thing at a time.")
    release_times_s: ReleaseTimes | None = Field(None, description="When each item becomes available, seconds (one per item).")
    first_release_s: NonNegFloat = Field(0.0, description="When the first item is available, seconds.")
    release_interval_s: NonNegFloat = Field(0.0, description="Gap between item arrivals, seconds (0 = all available at once).")
    efficiency: Efficiency = Field(1.0, description="Every stage time is divided by this (0.9 = 90 % of the ideal).")
    scratch_bytes: NonNegFloat = Field(0.0, description="Extra working memory counted with the staging buffers.")
    memory_budget_bytes: PosFloat | None = Field(None, description="Memory for staging buffers + scratch; reports whether they fit.")
    budget_s: PosFloat | None = Field(None, description="Time budget; reports whether the makespan fits and the margin.")
    what_if: list[OverlapWhatIf] = Field(default_factory=list, max_length=20, description="Variants to compare with the base.")

    @model_validator(mode="after")
    def _names(self):
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError("stage names must be unique")
        return self


# --------------------------------------------------------------------------- engine

_FIELDS = ("duration_s", "bytes", "bytes_per_s", "flops", "flop_per_s", "total_s", "total_bytes",
           "total_flops", "lanes", "unlimited_lanes", "slots", "slot_bytes")


def _resolve(req_stages: list, patches: dict | None = None) -> list[dict]:
    """Stage dicts with indices of dependencies; what-if patches applied by name."""
    names = [s.name for s in req_stages]
    idx = {n: i for i, n in enumerate(names)}
    patches = patches or {}
    for n in patches:
        if n not in idx:
            raise CalcInputError(("what_if", "stages", n), f"no stage named {n!r}")
    out_stages = []
    for i, s in enumerate(req_stages):
        d = {f: getattr(s, f) for f in _FIELDS}
        scale = 1.0
        p = patches.get(s.name)
        if p is not None:
            for f in _FIELDS:
                v = getattr(p, f)
                if v is not None:
                    d[f] = v
            scale = p.scale or 1.0
        if s.after is None:
            deps = [i - 1] if i > 0 else []
        else:
            deps = []
            for a in s.after:
                if a not in idx:
                    raise CalcInputError(("stages", i, "after"), f"no stage named {a!r}")
                if idx[a] >= i:
                    raise CalcInputError(("stages", i, "after"), f"{a!r} must be listed before {s.name!r}")
                deps.append(idx[a])
        for rate, work in (("bytes_per_s", "bytes"), ("bytes_per_s", "total_bytes"),
                           ("flop_per_s", "flops"), ("flop_per_s", "total_flops")):
            if d[work] and not d[rate]:
                raise CalcInputError(("stages", i, rate), f"{work} needs {rate}")
        per = d["duration_s"] if d["duration_s"] is not None else 0.0
        extra = (d["bytes"] or 0.0) / (d["bytes_per_s"] or 1.0) + (d["flops"] or 0.0) / (d["flop_per_s"] or 1.0)
        split = (d["total_s"] or 0.0) + (d["total_bytes"] or 0.0) / (d["bytes_per_s"] or 1.0) \
            + (d["total_flops"] or 0.0) / (d["flop_per_s"] or 1.0)
        lanes = None if d["unlimited_lanes"] else (d["lanes"] or 1)
        out_stages.append({"name": s.name, "per": per, "extra": extra, "split": split, "scale": scale,
                           "lanes": lanes, "slots": d["slots"], "slot_bytes": d["slot_bytes"] or 0.0,
                           "resource": s.resource, "deps": deps})
    for i, st in enumerate(out_stages):
        st["consumers"] = [j for j, o in enumerate(out_stages) if i in o["deps"]]
    return out_stages


def _durations(st: dict, n: np.ndarray, eff: float, n_items_walk: int | None = None) -> np.ndarray:
    """Per-item time: shape (points,) for constant stages, (items,) for a walk."""
    if isinstance(st["per"], list):
        per = np.asarray(st["per"], dtype=float)
    else:
        per = float(st["per"])
    return (per + st["extra"] + st["split"] / n) * st["scale"] / eff


def _closed_form(stages: list[dict], n: np.ndarray, eff: float, mode: str) -> dict:
    """Constant per-item times, everything available at t = 0, no slot limits; vectorised over n."""
    S = len(stages)
    d = [_durations(st, n, eff) for st in stages]
    zero = np.zeros_like(n, dtype=float)
    if mode == "serial":
        total = n * sum(d)
        start0 = [zero + sum(d[:s], zero) for s in range(S)]  # the first item runs the stages one after another
    else:
        fwd, start0 = [], []
        for s, st in enumerate(stages):
            base = zero
            for dep in st["deps"]:
                base = np.maximum(base, fwd[dep])
            start0.append(base)
            fwd.append(base + d[s])
        bwd = [None] * S
        for s in range(S - 1, -1, -1):
            tail = zero
            for c in stages[s]["consumers"]:
                tail = np.maximum(tail, bwd[c])
            bwd[s] = tail + d[s]
        total = zero
        for s, st in enumerate(stages):
            through = fwd[s] + bwd[s] - d[s]
            extra = (n - 1) * d[s] if st["lanes"] == 1 else 0.0
            total = np.maximum(total, through + extra)
    return {"total": total, "d": d, "busy": [n * x for x in d], "cp": _longest_path(stages, d, zero), "start0": start0}


def _longest_path(stages: list[dict], d: list[np.ndarray], start) -> np.ndarray:
    fwd = []
    for s, st in enumerate(stages):
        base = start
        for dep in st["deps"]:
            base = np.maximum(base, fwd[dep])
        fwd.append(base + d[s])
    res = fwd[0]
    for f in fwd[1:]:
        res = np.maximum(res, f)
    return res


def _walk(stages: list[dict], n_items: int, releases: np.ndarray, eff: float, mode: str) -> dict:
    """Item-by-item timeline; returns prefix makespans so a sweep over N needs one walk."""
    S = len(stages)
    nn = np.full(n_items, float(n_items))
    d = []
    for s, st in enumerate(stages):
        x = np.broadcast_to(_durations(st, nn, eff), (n_items,)) if not isinstance(st["per"], list) else _durations(st, nn, eff)
        if x.shape != (n_items,):
            raise CalcInputError(("stages", s, "duration_s"), f"has {np.size(st['per'])} values for {n_items} items")
        d.append(np.asarray(x, dtype=float))
    D = np.stack(d, axis=1)  # (items, stages)
    if mode == "serial":
        tot = D.sum(axis=1)
        C = np.cumsum(tot)
        end_item = C + np.maximum.accumulate(releases - (C - tot))
        start = end_item - tot
        offs = np.cumsum(D, axis=1)
        end = start[:, None] + offs
        return {"prefix": end_item, "end": end, "D": D}
    end = np.zeros((n_items, S))
    Dl = D.tolist()
    rel = releases.tolist()
    lanes = [st["lanes"] for st in stages]
    slots = [st["slots"] for st in stages]
    deps = [st["deps"] for st in stages]
    cons = [st["consumers"] for st in stages]
    endl = [[0.0] * S for _ in range(n_items)]
    for i in range(n_items):
        row = endl[i]
        di = Dl[i]
        for s in range(S):
            t = rel[i]
            for dep in deps[s]:
                if row[dep] > t:
                    t = row[dep]
            L = lanes[s]
            if L is not None and i >= L:
                v = endl[i - L][s]
                if v > t:
                    t = v
            k = slots[s]
            if k is not None and i >= k:
                prev = endl[i - k]
                if cons[s]:
                    for c in cons[s]:
                        if prev[c] > t:
                            t = prev[c]
                elif prev[s] > t:
                    t = prev[s]
            row[s] = t + di[s]
    end = np.asarray(endl)
    return {"prefix": np.maximum.accumulate(end.max(axis=1)), "end": end, "D": D}


def _releases(n_items: int, rel_list, first_rel: float, interval: float, loc="release_times_s") -> np.ndarray:
    if rel_list is not None:
        if len(rel_list) != n_items:
            raise CalcInputError(loc, f"{len(rel_list)} release times for {n_items} items")
        r = np.asarray(rel_list, dtype=float)
        if np.any(np.diff(r) < 0):
            raise CalcInputError(loc, "release times must not decrease (items are served in order)")
        return r
    return first_rel + interval * np.arange(n_items, dtype=float)


def _run(stages: list[dict], n: np.ndarray, mode: str, eff: float, rel_list, first_rel: float, interval: float) -> dict:
    """Makespan and per-stage work for every sweep point of n."""
    has_list = any(isinstance(st["per"], list) for st in stages)
    has_slots = any(st["slots"] is not None for st in stages)
    has_rel = rel_list is not None or first_rel > 0 or interval > 0
    multi = any(st["lanes"] not in (None, 1) for st in stages)
    if not (has_list or has_slots or has_rel or multi):
        r = _closed_form(stages, n, eff, mode)
        return {"total": r["total"], "busy": r["busy"], "cp": r["cp"], "mean_d": r["d"], "start0": r["start0"],
                "method": "closed form"}
    S = len(stages)
    nmax = int(n.max())
    if nmax * S > MAX_WALK:
        raise CalcInputError("items", f"{nmax} items × {S} stages exceeds {MAX_WALK:,} for an item-by-item timeline "
                             "(needed for per-item times, arrivals, slots or multi-lane stages)", status=413)
    split = any(st["split"] for st in stages)
    pts = n.reshape(-1)
    if split and pts.size > 1:
        if pts.size > MAX_WALK_POINTS:
            raise CalcInputError("items", f"a sweep with divisible work and an item-by-item timeline is limited to {MAX_WALK_POINTS} points", status=413)
        walks = [(int(p), _walk(stages, int(p), _releases(int(p), rel_list, first_rel, interval), eff, mode)) for p in pts]
    else:
        w = _walk(stages, nmax, _releases(nmax, rel_list, first_rel, interval), eff, mode)
        walks = [(int(p), w) for p in pts]
    total = np.array([w["prefix"][p - 1] for p, w in walks]).reshape(n.shape)
    busy = [np.array([w["D"][:p, s].sum() for p, w in walks]).reshape(n.shape) for s in range(S)]
    mean_d = [np.array([w["D"][:p, s].mean() for p, w in walks]).reshape(n.shape) for s in range(S)]
    # when the first item starts at each stage (e.g. when the device first receives work)
    start0 = [np.array([w["end"][0, s] - w["D"][0, s] for _, w in walks]).reshape(n.shape) for s in range(S)]
    cps = []
    for p, w in walks:
        rel = _releases(p, rel_list, first_rel, interval) if rel_list is None or p == len(rel_list) else np.zeros(p)
        cols = [w["D"][:p, s] for s in range(S)]
        cps.append(float(_longest_path(stages, cols, rel).max()))
    return {"total": total, "busy": busy, "cp": np.array(cps).reshape(n.shape), "mean_d": mean_d, "start0": start0,
            "method": "item-by-item timeline"}


def _analyse(req: OverlapRequest, stages: list[dict], n: np.ndarray, mode: str, eff: float, rel_list, first_rel, interval,
             want_exposed: bool = True) -> dict:
    r = _run(stages, n, mode, eff, rel_list, first_rel, interval)
    serial = r["total"] if mode == "serial" else _run(stages, n, "serial", eff, rel_list, first_rel, interval)["total"]
    S = len(stages)
    per_stage_work = [r["busy"][s] / (stages[s]["lanes"] or np.inf) for s in range(S)]
    resources: dict[str, np.ndarray] = {}
    for s, st in enumerate(stages):
        key = st["resource"] or f"stage:{st['name']}"
        if st["lanes"] is None and not st["resource"]:
            continue
        resources[key] = resources.get(key, 0.0) + (r["busy"][s] / (st["lanes"] or 1) if not st["resource"] else r["busy"][s])
    bott = np.zeros_like(n, dtype=float)
    for v in resources.values():
        bott = np.maximum(bott, v)
    lower = np.maximum(r["cp"], bott)
    # slots needed to run at the bottleneck period in steady state
    finite = [r["mean_d"][s] / stages[s]["lanes"] for s in range(S) if stages[s]["lanes"]]
    period = np.max(np.stack([np.broadcast_to(f, n.shape) for f in finite]), axis=0) if finite else np.zeros(n.shape)
    slots_needed, staging_needed, staging = {}, 0.0, req.scratch_bytes
    for s, st in enumerate(stages):
        if st["slots"] is not None:
            staging = staging + st["slots"] * st["slot_bytes"]
        if not st["consumers"] and not st["slot_bytes"]:
            continue
        cons = max((r["mean_d"][c] for c in st["consumers"]), key=lambda x: float(np.max(x)), default=0.0)
        hold = r["mean_d"][s] + cons
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(period > 0, np.maximum(np.ceil(hold / np.where(period > 0, period, 1.0) - 1e-9), 1.0), np.nan)
        slots_needed[st["name"]] = need
        staging_needed = staging_needed + np.nan_to_num(need, nan=1.0) * st["slot_bytes"]
    staging_needed = staging_needed + req.scratch_bytes
    exposed = {}
    if want_exposed:
        for s, st in enumerate(stages):
            z = dict(st, per=0.0 if not isinstance(st["per"], list) else [0.0] * len(st["per"]), extra=0.0, split=0.0)
            alt = _run(stages[:s] + [z] + stages[s + 1:], n, mode, eff, rel_list, first_rel, interval)["total"]
            exposed[st["name"]] = r["total"] - alt
    return {"total": r["total"], "serial": serial, "cp": r["cp"], "bottleneck_work": bott, "lower": lower,
            "busy": r["busy"], "mean_d": r["mean_d"], "per_stage_work": per_stage_work, "resources": resources,
            "period": period, "slots_needed": slots_needed, "staging": staging, "staging_needed": staging_needed,
            "exposed": exposed, "start0": r["start0"], "method": r["method"]}


def _items(req_items, stages: list[dict], rel_list) -> np.ndarray:
    lens = {len(st["per"]) for st in stages if isinstance(st["per"], list)}
    if rel_list is not None:
        lens.add(len(rel_list))
    if len(lens) > 1:
        raise CalcInputError("stages", f"per-item lists disagree in length: {sorted(lens)}")
    if req_items is None:
        return np.asarray(float(lens.pop() if lens else 1))
    n = np.asarray(req_items, dtype=float)
    if lens and (n.ndim or int(n) != next(iter(lens))):
        raise CalcInputError("items", f"per-item lists have {next(iter(lens))} values; items must equal it")
    return n


def compute_overlap(req: OverlapRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    stages = _resolve(req.stages)
    n = _items(req.items, stages, req.release_times_s)
    a = _analyse(req, stages, n, req.mode, req.efficiency, req.release_times_s, req.first_release_s, req.release_interval_s)
    total = a["total"]
    n0 = int(first(n))
    d0 = [float(first(np.mean(x))) if np.ndim(x) else float(x) for x in a["mean_d"]]
    names = [st["name"] for st in stages]
    res.step("time per item of each stage", "d_s = fixed + bytes/B + FLOPs/F + divisible work / N, ÷ efficiency",
             LIST_SEP.join(f"{nm} {fmt_s(v)}" for nm, v in zip(names, d0)), d0[0] if len(d0) == 1 else max(d0), "s")
    res.step("serial time", "Σ_items Σ_stages d (one thing at a time, waiting for arrivals)",
             f"{n0} items × {fmt_s(sum(d0))}" if not req.release_times_s and not req.release_interval_s else "walk over arrivals",
             a["serial"], "s")
    if req.mode == "pipelined":
        chain = all(st["deps"] == ([i - 1] if i else []) for i, st in enumerate(stages)) and all(st["lanes"] == 1 for st in stages)
        if chain and a["method"] == "closed form":
            res.step("overlapped time (fill + steady state + drain)", "Σ_s d_s + (N − 1) × max_s d_s",
                     f"{fmt_s(sum(d0))} + {n0 - 1} × {fmt_s(max(d0))}", total, "s")
        else:
            res.step("overlapped time", "longest path through the stage graph, plus (N − 1) items at the slowest single-lane stage on it"
                     if a["method"] == "closed form" else "item-by-item: start = max(arrival, dependencies, lane free, buffer free)",
                     f"{n0} items over {len(stages)} stages ({a['method']})", total, "s")
    res.step("critical path", "longest dependency chain of one item (from its arrival)", f"{n0} items", a["cp"], "s")
    res.step("busiest resource", "max over stages/resources of Σ work / lanes (shared resources add up)",
             LIST_SEP.join(f"{k.removeprefix('stage:')} {fmt_s(first(v))}" for k, v in list(a["resources"].items())[:6]),
             a["bottleneck_work"], "s")
    res.step("lower bound", "max(critical path, busiest resource): full overlap is an ideal",
             f"max({fmt_s(first(a['cp']))}, {fmt_s(first(a['bottleneck_work']))})", a["lower"], "s")

    stage_rows = []
    for s, st in enumerate(stages):
        busy = a["busy"][s]
        lanes = st["lanes"]
        idle = total - busy / lanes if lanes else None
        stage_rows.append({
            "name": st["name"], "time_per_item_s": _out(a["mean_d"][s]), "busy_s": _out(busy),
            "lanes": lanes, "idle_s": _out(idle) if idle is not None else None,
            "utilization": _out(busy / (lanes * total)) if lanes and np.all(total > 0) else None,
            "exposed_s": _out(a["exposed"][st["name"]]) if st["name"] in a["exposed"] else None,
            "slots": st["slots"],
            "slots_needed": _out(a["slots_needed"][st["name"]]) if st["name"] in a["slots_needed"] else None,
        })
    bi = int(np.argmax([float(first(x)) for x in a["per_stage_work"]]))
    o = {
        "items": _out(n.astype(int)) if n.ndim else int(n),
        "mode": req.mode,
        "total_s": _out(total),
        "serial_s": _out(a["serial"]),
        "speedup_vs_serial": _out(np.where(total > 0, a["serial"] / np.where(total > 0, total, 1.0), 1.0)),
        "throughput_items_per_s": _out(np.where(total > 0, n / np.where(total > 0, total, 1.0), np.inf)),
        "critical_path_s": _out(a["cp"]),
        "bottleneck_work_s": _out(a["bottleneck_work"]),
        "lower_bound_s": _out(a["lower"]),
        "gap_to_lower_bound_s": _out(total - a["lower"]),
        "bottleneck_stage": stages[bi]["name"],
        "resources": {k.removeprefix("stage:"): _out(v) for k, v in a["resources"].items() if not k.startswith("stage:")},
        "stages": stage_rows,
        "exposed_s": {k: _out(v) for k, v in a["exposed"].items()},
        "first_start_s": {st["name"]: _out(a["start0"][s]) for s, st in enumerate(stages)},
        "staging_bytes": _out(a["staging"]),
        "staging_bytes_needed": _out(a["staging_needed"]),
        "method": a["method"],
    }
    if any(st["slot_bytes"] for st in stages):
        res.step("staging memory (configured slots)", "Σ slots × slot bytes + scratch", fmt_bytes(float(first(a["staging"]))), a["staging"], "B")
    if a["slots_needed"]:
        nm, v = next(iter(a["slots_needed"].items()))
        res.step(f"buffers needed after {nm} to keep the bottleneck busy", "ceil((d_s + d_consumer) / period), period = max_s d_s / lanes_s",
                 f"period {fmt_s(first(a['period']))}", v, "slots")
    if req.memory_budget_bytes is not None:
        o["fits_memory"] = _out(a["staging"] <= req.memory_budget_bytes)
        o["fits_memory_with_needed_slots"] = _out(a["staging_needed"] <= req.memory_budget_bytes)
    if req.budget_s is not None:
        o["fits_budget"] = _out(total <= req.budget_s)
        o["budget_margin_s"] = _out(req.budget_s - total)

    whatifs = []
    base_dump = req.model_dump(exclude={"what_if"})
    for i, w in enumerate(req.what_if):
        try:
            st2 = _resolve(req.stages, w.stages)
            rel = w.release_times_s if w.release_times_s is not None else (None if (w.first_release_s is not None or w.release_interval_s is not None) else req.release_times_s)
            items = w.items if w.items is not None else req.items
            n2 = _items(items, st2, rel)
            a2 = _analyse(req, st2, n2, w.mode or req.mode, w.efficiency or req.efficiency, rel,
                          w.first_release_s if w.first_release_s is not None else base_dump["first_release_s"],
                          w.release_interval_s if w.release_interval_s is not None else base_dump["release_interval_s"])
        except CalcInputError as e:
            loc = e.loc if e.loc and e.loc[0] == "what_if" else ("what_if", i) + e.loc
            raise CalcInputError(loc, e.message, e.status) from None
        t2 = a2["total"]
        label = w.label or f"variant {i + 1}"
        item = {"label": label, "total_s": _out(t2), "saved_s": _out(total - t2),
                "speedup": _out(np.where(t2 > 0, total / np.where(t2 > 0, t2, 1.0), np.inf)),
                "ratio_to_base": _out(np.where(total > 0, t2 / np.where(total > 0, total, 1.0), np.nan)),
                "serial_s": _out(a2["serial"]), "critical_path_s": _out(a2["cp"]),
                "bottleneck_work_s": _out(a2["bottleneck_work"]), "lower_bound_s": _out(a2["lower"]),
                "throughput_items_per_s": _out(np.where(t2 > 0, n2 / np.where(t2 > 0, t2, 1.0), np.inf)),
                "exposed_s": {k: _out(v) for k, v in a2["exposed"].items()},
                "busy_s": {st["name"]: _out(a2["busy"][s]) for s, st in enumerate(st2)},
                "first_start_s": {st["name"]: _out(a2["start0"][s]) for s, st in enumerate(st2)},
                "staging_bytes": _out(a2["staging"]), "staging_bytes_needed": _out(a2["staging_needed"])}
        if req.budget_s is not None:
            item["fits_budget"] = _out(t2 <= req.budget_s)
            item["budget_margin_s"] = _out(req.budget_s - t2)
        whatifs.append(item)
        res.step(f"what-if: {label}", "same timeline with the replaced inputs", f"{fmt_s(first(total))} → {fmt_s(first(t2))}", t2, "s")
    o["what_if"] = whatifs
    res.outputs = o
    res.assume(
        "Each stage is its own resource with `lanes` servers unless stages name a shared `resource`; shared "
        "resources are only reflected in the lower bound (their work adds up), not in the simulated schedule.",
        "Items are served in order at every stage; a multi-lane stage reuses the lane of item i − lanes.",
        "A stage's output buffer is held from the start of the stage until every consumer of that item has finished; "
        "`slots` limits how many such buffers exist. Unset slots mean buffers are never the constraint.",
        "No contention, start-up or hand-off costs beyond the times given; full overlap is an ideal lower bound, and "
        "real co-running stages must be profiled.",
    )
    if is_sweep_n(n):
        res.assume("For a sweep over items, each point is an independent run with that many items.")
    res.headline = _headline(req, o)
    return res


def _headline(req: OverlapRequest, o: dict) -> str:
    """Overlapped time against serial, the bottleneck, and the first what-if (a sweep: its first point)."""
    items = o.get("items")
    n = hf.n_points(items)
    text = (f"Processing {hf.plural(hf.first_value(items), 'item')} through {hf.plural(len(req.stages), 'stage')} takes "
            f"{hf.fmt_seconds(o.get('total_s'))} {o.get('mode', req.mode)} against {hf.fmt_seconds(o.get('serial_s'))} serial "
            f"({hf.fmt_num(o.get('speedup_vs_serial'))}× faster; bottleneck: {o.get('bottleneck_stage')}, "
            f"lower bound {hf.fmt_seconds(o.get('lower_bound_s'))})")
    if "fits_budget" in o:
        text += (f"; {'within' if hf.first_value(o['fits_budget']) else 'over'} the {hf.fmt_seconds(req.budget_s)} budget")
    wi = o.get("what_if") or []
    if wi:
        w = wi[0]
        text += f"; what-if \u201c{w.get('label')}\u201d: {hf.fmt_seconds(w.get('total_s'))}"
        if len(wi) > 1:
            text += f" (and {hf.plural(len(wi) - 1, 'more variant')})"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


def is_sweep_n(n: np.ndarray) -> bool:
    return bool(np.ndim(n))


CALCULATORS = [
    Calculator(
        name="overlap-timeline",
        profile=Profile(1.9e-06, 1452, 426),
        family="overlap_timeline",
        title="Overlap timeline: serial vs pipelined stages, bounds and buffers",
        summary="Time for N items through dependent stages (load → compute → store, copy vs compute, …) when run "
                "serially and when overlapped with limited lanes and buffer slots, with the critical path, the busiest "
                "resource, idle time per stage, exposed time and the buffers needed.",
        description="Serial time is the sum of all work. Overlapped time follows the stage graph: with constant times, "
                    "N items and one lane per stage it is the longest path plus (N − 1) × the slowest stage on it "
                    "(fill + steady state + drain); with arrivals, per-item times, multi-lane stages or limited slots the "
                    "timeline is walked item by item. The lower bound is max(critical path, busiest resource): stages "
                    "sharing a resource add up their work, dependencies add up time, full overlap takes the max and is only "
                    "an ideal. `exposed_s` is how much each stage lengthens the makespan (0 = fully hidden); `first_start_s` is "
                    "when the first item starts at each stage (when a device first receives work). What-ifs patch "
                    "stages by name. Limits: no contention model beyond the shared-resource bound.",
        request_model=OverlapRequest,
        compute=compute_overlap,
        outputs_model=OverlapTimelineOutputs,
        example={"stages": [{"name": "read", "duration_s": 2e-6, "resource": "memory"},
                            {"name": "compute", "duration_s": 1e-6},
                            {"name": "write", "duration_s": 2e-6, "resource": "memory"}],
                 "items": [1, 2, 4, 8, 16, 32],
                 "what_if": [{"label": "compute twice as fast", "stages": {"compute": {"scale": 0.5}}}]},
        cases=("component-utilization-and-overlap", "host-transfer-and-buffer-lifetime", "graph-execution-tradeoffs",
               "mesh-shape-and-slicing", "resource-sharing-and-placement", "memory-criticality-and-tiering"),
        sweepable=("items",),
        chart=Chart(x="items", y=("serial_s", "total_s", "lower_bound_s"), x_label="items", y_label="seconds"),
    ),
]
