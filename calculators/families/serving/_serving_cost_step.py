"""serving-cost's decode step on the step model (`calculators.perf.step_times`), for a model with itemised layers on
a hardware id: devices per replica as the smallest valid tensor-parallel degree that holds one rank's weights and
the batch's KV (the planner's memory rule), the step as the bound of one rank's kernels plus the TP all-reduces over
the hardware's link, and the measured estimate over the same operations with the same link time. The same step
time the deployment planner, tp-overhead and speculative decoding give for that split.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from calculators.domain import FORMATS, Layout, groups_from_model, kv_sizes, layout_of, resolve_format, shipped_weight_formats
from calculators.framework import CalcInputError, Lookup, Result, first, fmt_bytes, fmt_s, num, out
from calculators.perf import (
    Rates, Split, StepTimes, estimate_system, rates_from_spec, split_problems, step_times, tp_link,
    weight_bytes_per_rank,
)

#: the largest tensor-parallel degree searched for a replica
MAX_TP = 1024


@dataclass
class StepPlan:
    batch: np.ndarray
    devices: np.ndarray
    times: StepTimes
    link: str | None
    system: Any = None


def step_layout(rec, res: Result) -> Layout | None:
    """The model's layout, or None (with the reason stated) when its layers are not itemised."""
    try:
        return layout_of(rec)
    except CalcInputError as exc:
        res.assume(f"The step model cannot read {rec.id}'s layers ({exc.message}): the decode step is the first-pass "
                   "bandwidth formula.")
        return None


def _weight_formats(req, rec):
    if req.weight_format is not None:
        return resolve_format(req.weight_format, "weight_format").name
    shipped = shipped_weight_formats(rec.weight_dtype)
    return shipped.for_component if shipped is not None else "bf16"


def _fewest_devices(lay: Layout, ep: int, wf, groups, kf, b: np.ndarray, ctx: np.ndarray, usable: float) -> np.ndarray:
    """Per point, the smallest valid TP degree whose rank holds its weights plus the batch's KV (0 where none up to
    MAX_TP does)."""
    b, ctx = np.broadcast_arrays(np.asarray(b, dtype=float), np.asarray(ctx, dtype=np.int64))
    dev = np.zeros(b.shape)
    left = np.ones(b.shape, dtype=bool)
    for t in range(1, MAX_TP + 1):
        split = Split(tp=t, ep=ep)
        if split_problems(lay, split):
            continue
        w = weight_bytes_per_rank(lay, split, wf)["per_rank"]
        kv = kv_sizes(groups, kf, FORMATS["fp32"], ctx, tp=t).device_bytes_per_request
        ok = left & (w + b * kv <= usable)
        dev[ok] = t
        left &= ~ok
        if not left.any():
            break
    return dev


def plan(req, lookup: Lookup, res: Result, rec, lay: Layout, hw, b, ctx, usable: float, target_s: float,
         ladder: np.ndarray) -> StepPlan:
    """Devices, batch (the largest power of two meeting `target_s` when none is given) and the step's times."""
    wf = _weight_formats(req, rec)
    kf = resolve_format(req.kv_format, "kv_format")
    groups = groups_from_model(rec, res, "model")
    ep = req.ep
    rates = rates_from_spec(hw)
    rates = Rates(rates.peak_flop_per_s, rates.memory_bandwidth_bytes_per_s * req.bandwidth_efficiency)
    ctx = np.asarray(ctx, dtype=np.int64)
    if req.tp is not None:
        why = split_problems(lay, Split(tp=req.tp, ep=ep))
        if why:
            raise CalcInputError("ep" if why[0].startswith(("ep ", "expert")) else "tp", "; ".join(why))
        one = np.full(ctx.shape, float(req.tp))
    else:
        one = _fewest_devices(lay, ep, wf, groups, kf, 1.0, ctx, usable)
        if np.any(one == 0):
            raise CalcInputError("hardware", f"no tensor-parallel degree up to {MAX_TP} holds {rec.id}'s weights on {hw.id}")
    chosen = req.batch is None
    if chosen:
        link, lid = tp_link(lookup, res, req.link, hw, one)
        grid = ladder[:, None].astype(float) * np.ones((1, ctx.size))
        c, t = np.broadcast_to(ctx.reshape(1, -1), grid.shape), np.broadcast_to(one.reshape(1, -1), grid.shape)
        st = step_times(lay, rates, "decode", grid, 1, c, t, ep, wf, kf, None, link)
        fits = np.zeros(grid.shape, dtype=bool)
        for tv in np.unique(t):
            sel = t == tv
            split = Split(tp=int(tv), ep=ep)
            w = weight_bytes_per_rank(lay, split, wf)["per_rank"]
            kv = kv_sizes(groups, kf, FORMATS["fp32"], c[sel], tp=int(tv)).device_bytes_per_request
            fits[sel] = w + grid[sel] * kv <= usable
        ok = fits & (st.bound_s <= target_s)
        idx = np.where(ok.any(axis=0), ok.shape[0] - 1 - np.argmax(ok[::-1], axis=0), 0)
        b = ladder[idx].astype(float).reshape(ctx.shape)
        res.step("batch (chosen)", "largest 2^k whose KV fits beside one rank's weights on the fewest devices that hold "
                 "them, with the step-model decode step ≤ tpot target",
                 f"{num(b.reshape(-1)[0])} on TP {num(one.reshape(-1)[0])}, target {fmt_s(target_s)}", b, "sequences")
        res.assume(f"No batch given: the largest power-of-two batch that fits the {num(one.reshape(-1)[0])} device(s) the "
                   f"weights need and keeps the step model's decode step (bound) within {fmt_s(target_s)} is used"
                   + ("; even batch 1 misses that target." if not ok.any() else "."))
        dev = one
    else:
        b = np.asarray(b, dtype=float)
        if req.tp is not None:
            dev = np.broadcast_to(one, np.broadcast_shapes(b.shape, ctx.shape)).copy()
        else:
            dev = _fewest_devices(lay, ep, wf, groups, kf, b, ctx, usable)
            if np.any(dev == 0):
                raise CalcInputError("batch", f"no tensor-parallel degree up to {MAX_TP} holds this batch's KV beside the "
                                     f"weights on {hw.id}")
        link, lid = tp_link(lookup, res, req.link, hw, dev)
    dev, b, ctx_b = np.broadcast_arrays(dev, b, ctx)
    if req.tp is not None:
        split = Split(tp=req.tp, ep=ep)
        w = weight_bytes_per_rank(lay, split, wf)["per_rank"]
        kv = kv_sizes(groups, kf, FORMATS["fp32"], ctx_b, tp=req.tp).device_bytes_per_request
        if np.any(w + b * kv > usable):
            i = int(np.argmax((w + b * kv > usable).ravel()))
            raise CalcInputError("tp", f"TP {req.tp} holds {fmt_bytes(usable)} usable per device, but one rank needs "
                                 f"{fmt_bytes(float((w + b * kv).ravel()[i]))} (batch {num(b.ravel()[i])}): give a larger tp "
                                 "or a smaller batch")
    system = estimate_system(lookup, hw, req.estimate)
    times = step_times(lay, rates, "decode", b, 1, ctx_b, dev, ep, wf, kf, system, link)
    res.step("devices per replica", "smallest valid TP degree with one rank's weights + batch × KV per rank ≤ usable"
             if req.tp is None else "tp (given)", f"TP {num(first(dev))}" + (f", EP {ep}" if ep > 1 else ""), dev, "devices")
    res.step("decode kernels (bound)", "Σ ops of one rank max(FLOPs / peak, bytes / (bandwidth × efficiency)) (step model)",
             f"batch {num(first(b))}, context {num(first(ctx_b))}, TP {num(first(dev))}", times.kernels_bound_s, "s")
    res.step("decode step", "t = kernels + TP all-reduces over the link (α–β)",
             f"{fmt_s(first(times.kernels_bound_s))} + {fmt_s(first(times.comm_s))}", times.bound_s, "s")
    for note in lay.notes:
        res.assume(note)
    res.assume("Decode step from the step model: one rank's operations (projections, attention over each sequence's "
               "context, FFN or the experts the batch touches, norms, LM head) at the peak rates, plus two all-reduces "
               "per layer over the tensor-parallel link; devices per replica are the tensor-parallel degree.")
    return StepPlan(b, dev, times, lid, system)


def measured(res: Result, sp: StepPlan, b, reps, total, price: float) -> dict:
    """The measured estimate of the same operations (kernels from the tables, the same link time), and its cost."""
    st, system = sp.times, sp.system
    if system is None or st.kernels_measured_s is None:
        return {}
    shape = st.kernels_bound_s.shape
    parts: dict[str, np.ndarray] = {}
    for est, mask in zip(st.estimates, st.masks):
        for k, v in est.parts_s.items():
            if k in ("allreduce", "moe_dispatch_combine", "dense_gather_scatter", "pp_handoff"):
                continue
            parts.setdefault(k, np.zeros(shape))[mask] = np.asarray(v, dtype=float)
    if np.any(st.comm_s > 0):
        parts["allreduce"] = st.comm_s
    t = st.measured_s
    for table, rec in system.tables.items():
        res.cite({"record": system.name, "field": f"measured {table}", "value": None, "source": "aiconfigurator-core-0.12.0",
                  "locator": f"{rec.get('file')} (sha256 {str(rec.get('sha256'))[:12]}…)"})
    res.step("measured decode step", "Σ ops measured kernel time (interpolated) + the same TP all-reduces",
             f"{fmt_s(first(st.kernels_measured_s))} + {fmt_s(first(st.comm_s))}", t, "s")
    res.assume(f"Measured estimate: {st.framework} {st.version} kernels measured on {system.name} by NVIDIA AIConfigurator "
               "(Apache-2.0), interpolated to each operation of the step and summed with no overlap; the all-reduces keep "
               "the link's α–β time, as in the bound.")
    tps = b / t
    cost_h = total * price
    cost_m = cost_h / (reps * tps * 3600.0) * 1e6
    res.step("measured cost per 1M tokens", "cost/h ÷ (replicas × batch / t_measured × 3600) × 1e6",
             f"${num(first(cost_h))}/h ÷ ({num(first(reps))} × {num(first(tps))} × 3600) × 1e6", cost_m, "USD")
    tables = dict(st.estimates[0].tables) if st.estimates else {}
    return {
        "measured_time_s": out(t),
        "measured_parts_s": {k: out(v) for k, v in parts.items()},
        "measured_to_bound_ratio": out(t / st.bound_s),
        "measured_extrapolated_fraction": out(np.asarray(st.extrapolated_fraction, dtype=float)),
        "measured_fallback_fraction": out(np.asarray(st.fallback_fraction, dtype=float)),
        "measured_kernels": {"system": system.name, "framework": str(st.framework), "version": str(st.version),
                             "tables": {str(k): str(v) for k, v in tables.items()}},
        "measured_tokens_per_s_per_replica": out(tps),
        "measured_cost_per_mtok_usd": out(cost_m),
    }
