"""Calibration report: the measured step estimate against its peak-rate bound over a fixed grid of configurations,
and a leave-one-out check of the interpolation on the measured points themselves.

Everything is computed when `calibration_report(lookup)` is called: the measured estimate comes from
`calculators.perf.measured_step` (vLLM's kernels as NVIDIA measured them in AIConfigurator's tables, looked up per op and
summed), the bound from the same module's per-op peak-rate bounds, the cross-check from the `roofline` calculator,
and the error figures from `calculators.perf.measured.leave_one_out`. Nothing here is a stored answer. The result is
cached per process under a key made of the measured tables' sha256s and the model and hardware records used, so a
second call with the same data is a dictionary lookup.

The grid (`GRID`): four models (two dense, two MoE), four systems, decode at batch {1, 8, 64, 256} × context
{1k, 8k, 32k} × TP {1, 2, 4, 8}, plus prefill of one prompt of {1k, 8k, 32k} tokens at TP {1, 8}; all in BF16
(weights and KV cache). A configuration is skipped — and listed with its reason — when one rank cannot hold its
share of the weights plus the KV cache of the step under the memory rule (`calculators.domain.hardware.usable_memory_bytes`).
"""
from __future__ import annotations

import copy
import hashlib
import threading
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import orjson

from calculators.domain import Arch, arch_from_record, model_weight_bytes
from calculators.framework import CalcInputError, Lookup, Result
from calculators.perf.measured import leave_one_out
from calculators.perf.measured_step import NOT_MODELLED, StepEstimate, decode_step, prefill_step
from calculators.perf.measured_tables import MeasuredSystem, load_system
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import compute as run_calculator
from calculators.domain.hardware import MEMORY_RULE, HardwareSpec, hardware_spec, usable_memory_bytes
from knowledge.measurements import LICENSE, PACKAGE, PACKAGE_VERSION


@dataclass(frozen=True)
class CalibrationGrid:
    """The configurations a report evaluates and the settings of its leave-one-out check."""

    models: tuple[tuple[str, str], ...]        # (model id, "dense" | "moe")
    systems: tuple[tuple[str, str], ...]       # (hardware id, measured system)
    batches: tuple[int, ...]                   # decode: sequences in the step
    contexts: tuple[int, ...]                  # decode: tokens already cached per sequence
    tps: tuple[int, ...]                       # decode: tensor-parallel degree
    prefill_batches: tuple[int, ...]
    prefill_tokens: tuple[int, ...]            # prefill: prompt tokens per sequence (nothing cached)
    prefill_tps: tuple[int, ...]
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    loo_tables: tuple[str, ...] = ("gemm_perf", "generation_attention_perf", "context_attention_perf", "moe_perf")
    loo_sample: int = 1000                     # measured points drawn per table (all when fewer)
    loo_seed: int = 0


#: the fixed grid of the report: 4 models × 4 systems × (48 decode + 6 prefill) candidates before the memory check
GRID = CalibrationGrid(
    models=(("qwen3-8b", "dense"), ("llama-3.1-70b", "dense"), ("qwen3-30b-a3b", "moe"), ("qwen3-235b-a22b", "moe")),
    systems=(("h100-sxm", "h100_sxm"), ("h200-sxm", "h200_sxm"), ("b200-sxm", "b200_sxm"), ("a100-80gb-sxm", "a100_sxm")),
    batches=(1, 8, 64, 256), contexts=(1024, 8192, 32768), tps=(1, 2, 4, 8),
    prefill_batches=(1,), prefill_tokens=(1024, 8192, 32768), prefill_tps=(1, 8),
)

#: what the report's numbers mean, in the words the CLI and the page show
METHOD = {
    "measured_estimate": (
        "vLLM's kernels as NVIDIA measured them in AIConfigurator's tables "
        f"({PACKAGE} {PACKAGE_VERSION}, {LICENSE}): per layer, the QKV and output projection GEMMs, attention "
        "(generation or context table), the dense FFN GEMMs or the router, fused MoE kernel and shared experts, and "
        "two all-reduces per layer when TP > 1, each looked up for one tensor-parallel rank (log-multilinear "
        "interpolation between measured points) and summed one after another: no overlap between kernels, no launch "
        "gaps, no norm, activation or sampling kernels (calculators.perf.measured_step)."),
    "bound": (
        "The sum over the same ops of each op's peak-rate bound, max(FLOPs / dense BF16 peak, bytes / memory "
        "bandwidth), with the datasheet figures of the hardware record; communication is not in the bound."),
    "ratio": (
        "Measured kernel time without the all-reduces ÷ the bound: 1 would be every kernel at its peak rate; "
        "above 1 is how far the measured kernels run below it."),
    "roofline": (
        "Cross-check: the roofline calculator's time for the whole step with devices = TP (everything split ideally, "
        "one max over the step's total FLOPs and bytes, perfect overlap). It is ≤ the per-op bound by construction; "
        "compared only where the KV heads split evenly over TP (otherwise vLLM replicates KV heads, which the "
        "roofline does not count)."),
    "leave_one_out": (
        "For a fixed sample of measured points of each table, one measured value of one axis is removed from the grid "
        "and the point is re-derived from its neighbours by the same interpolation a query between measured points "
        "takes; the error is |estimate − measured| ÷ measured, one per (point, axis) with neighbours on both sides. "
        "It checks the interpolation between measurements, not whether summed kernels predict a real serving step."),
    "memory_rule": MEMORY_RULE,
    "fit": ("A configuration runs when one rank holds weights ÷ TP plus the KV cache of the step (batch × tokens × "
            "layers × 2 × ⌈KV heads ÷ TP⌉ × head_dim × 2 B) within the usable memory."),
}

_CACHE: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


# --------------------------------------------------------------------------- entry points

def calibration_report(lookup: Lookup, grid: CalibrationGrid = GRID) -> dict[str, Any]:
    """The calibration report for `grid` over the facts and measured tables `lookup` reaches (computed on the first
    call per data version, then served from the per-process cache; a copy is returned)."""
    systems, archs = _load(lookup, grid)
    key = _cache_key(grid, systems, archs)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is None:
            hit = _compute(lookup, grid, systems, archs)
            hit["cache_key"] = key
            _CACHE[key] = hit
    return copy.deepcopy(hit)


def clear_cache() -> None:
    """Forget every computed report (the next call recomputes)."""
    with _LOCK:
        _CACHE.clear()


# --------------------------------------------------------------------------- inputs

@dataclass
class _Model:
    id: str
    kind: str
    record: dict
    arch: Arch
    weight_bytes: float


def _load(lookup: Lookup, grid: CalibrationGrid) -> tuple[dict[str, tuple[HardwareSpec, MeasuredSystem | None, str]],
                                                          dict[str, _Model]]:
    """Hardware specs with their measured systems (None plus the reason when a system cannot be used), and models."""
    systems: dict[str, tuple[HardwareSpec, MeasuredSystem | None, str]] = {}
    for hw_id, sys_id in grid.systems:
        hw = hardware_spec(lookup, hw_id)
        try:
            systems[sys_id] = (hw, load_system(lookup, sys_id, hw), "")
        except CalcInputError as exc:
            systems[sys_id] = (hw, None, exc.message)
    archs = {}
    for model_id, kind in grid.models:
        rec = lookup("model", model_id)
        arch = arch_from_record(rec, None)
        if arch is None:
            raise CalcInputError("model", f"{model_id} has no shapes the measured step can use")
        weights = model_weight_bytes(rec, grid.weight_dtype, Result(inputs={}, outputs={}))
        archs[model_id] = _Model(model_id, kind, rec, arch, float(weights))
    return systems, archs


def _cache_key(grid: CalibrationGrid, systems: dict, archs: dict[str, _Model]) -> str:
    """sha256 over the grid, the measured tables' sha256s and the model and hardware records used."""
    h = hashlib.sha256(orjson.dumps(asdict(grid)))
    for sys_id, (hw, system, why) in sorted(systems.items()):
        h.update(f"{sys_id}|{hw.id}|{hw.memory_bytes}|{hw.memory_bandwidth_bytes_per_s}|{why}".encode())
        h.update(orjson.dumps(sorted((p.input_precision, p.sparsity, p.flop_per_s) for p in hw.peaks)))
        for name, rec in sorted((system.tables if system else {}).items()):
            h.update(f"{name}:{rec.get('sha256')}".encode())
    for m in archs.values():
        h.update(orjson.dumps(m.record, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()


# --------------------------------------------------------------------------- computing

def _kv_bytes_per_rank(arch: Arch, tp: np.ndarray, tokens: np.ndarray, kv_bytes: float = 2.0) -> np.ndarray:
    """KV cache one rank holds for `tokens` tokens (KV heads split over TP, replicated when fewer than TP)."""
    return arch.layers * 2.0 * np.ceil(arch.kv_heads / tp) * arch.head_dim * kv_bytes * tokens


def _candidates(grid: CalibrationGrid, phase: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (batch, tokens, tp) arrays of every candidate of a phase, in grid order."""
    if phase == "decode":
        axes = (grid.batches, grid.contexts, grid.tps)
    else:
        axes = (grid.prefill_batches, grid.prefill_tokens, grid.prefill_tps)
    b, c, t = np.meshgrid(*[np.asarray(a, dtype=float) for a in axes], indexing="ij")
    return b.ravel(), c.ravel(), t.ravel()


def _roofline_s(lookup: Lookup, model: str, hw_id: str, phase: str, batch: np.ndarray, tokens: np.ndarray,
                tp: float, grid: CalibrationGrid) -> np.ndarray:
    """The roofline calculator's step time (devices = tp) for each (batch, tokens) pair."""
    body = {"model": model, "phase": phase, "batch": [int(x) for x in batch], "hardware": hw_id, "precision": "BF16",
            "weight_format": grid.weight_dtype, "kv_format": grid.kv_dtype, "devices": int(tp)}
    if "estimate" in REGISTRY["roofline"].request_model.model_fields:
        body["estimate"] = "bound"              # the measured side is computed here already
    if phase == "decode":
        body.update(tokens=1, context_tokens=[int(x) for x in tokens])
    else:
        body.update(tokens=[int(x) for x in tokens], context_tokens=0)
    _, _, res = run_calculator("roofline", body, lookup)
    return np.broadcast_to(np.asarray(res.outputs["time_s"], dtype=float), batch.shape)


def _evaluate(lookup: Lookup, grid: CalibrationGrid, hw: HardwareSpec, sys_id: str, system: MeasuredSystem,
              m: _Model, phase: str) -> tuple[list[dict], list[dict]]:
    """Rows of one (system, model, phase): evaluated configurations and skipped ones."""
    b, c, t = _candidates(grid, phase)
    new = np.ones_like(b) if phase == "decode" else c
    cached = c if phase == "decode" else np.zeros_like(c)
    usable = float(usable_memory_bytes(hw.require("memory_bytes", "hardware")))
    weights = m.weight_bytes / t
    kv = _kv_bytes_per_rank(m.arch, t, b * (cached + new))
    need = weights + kv
    fits = (need <= usable) & (m.arch.heads % t == 0)
    base = [{"id": f"{sys_id}/{m.id}/{phase}/b{int(bi)}/c{int(ci)}/tp{int(ti)}", "system": sys_id, "hardware": hw.id,
             "model": m.id, "kind": m.kind, "phase": phase, "batch": int(bi), "context_tokens": int(ci), "tp": int(ti),
             "weights_per_rank_bytes": float(w), "kv_per_rank_bytes": float(k), "usable_bytes": usable}
            for bi, ci, ti, w, k in zip(b, c, t, weights, kv)]
    skipped = []
    for i in np.flatnonzero(~fits):
        row = base[i]
        why = (f"{m.arch.heads} heads do not split over TP {row['tp']}" if m.arch.heads % row["tp"] else
               f"needs {need[i] / 2**30:.1f} GiB per rank (weights {weights[i] / 2**30:.1f} GiB + KV "
               f"{kv[i] / 2**30:.1f} GiB) > usable {usable / 2**30:.1f} GiB")
        skipped.append({**row, "need_bytes": float(need[i]), "reason": why})
    sel = np.flatnonzero(fits)
    if not sel.size:
        return [], skipped
    bs, cs, ts = b[sel], c[sel], t[sel]
    if phase == "decode":
        est: StepEstimate = decode_step(m.arch, system, bs, cs, ts, grid.weight_dtype, grid.kv_dtype)
    else:
        est = prefill_step(m.arch, system, bs, cs, ts, grid.weight_dtype, grid.kv_dtype)
    comm = np.broadcast_to(np.asarray(est.parts_s.get("allreduce", 0.0), dtype=float), bs.shape)
    roof = np.full(bs.shape, np.nan)
    for tp in np.unique(ts):
        on = ts == tp
        roof[on] = _roofline_s(lookup, m.id, hw.id, phase, bs[on], cs[on], float(tp), grid)
    comparable = (m.arch.kv_heads % ts == 0) | (ts == 1)
    rows = []
    for j, i in enumerate(sel):
        kernels = float(est.total_s[j] - comm[j])
        roof_ok = bool(np.isfinite(roof[j]) and roof[j] > 0)
        rows.append({**base[i], "need_bytes": float(need[i]), "bound_s": float(est.bound_s[j]),
                     "measured_s": kernels, "allreduce_s": float(comm[j]), "total_s": float(est.total_s[j]),
                     "ratio": float(est.ratio_to_bound[j]), "extrapolated_fraction": float(est.extrapolated_fraction[j]),
                     "framework": est.framework, "version": est.version,
                     "roofline_s": float(roof[j]) if roof_ok else None, "roofline_comparable": bool(comparable[j]),
                     "bound_over_roofline": float(est.bound_s[j] / roof[j]) if roof_ok else None})
    return rows, skipped


def _stats(values: Any) -> dict[str, Any]:
    """n, median, 90th percentile, min and max of finite values (None when there are none)."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return {"n": 0, "median": None, "p90": None, "min": None, "max": None}
    return {"n": int(v.size), "median": float(np.median(v)), "p90": float(np.percentile(v, 90)),
            "min": float(v.min()), "max": float(v.max())}


def _grouped(rows: list[dict], key: str, value: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(str(r[key]), []).append(r[value])
    return {k: _stats(v) for k, v in groups.items()}


def _loo(systems: dict, grid: CalibrationGrid) -> dict[str, Any]:
    """Leave-one-out errors per system and table, and pooled per table over the systems."""
    per_system: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[np.ndarray]] = {}
    points: dict[str, int] = {}
    for sys_id, (_, system, _) in systems.items():
        if system is None:
            continue
        per_system[sys_id] = {}
        for table in grid.loo_tables:
            rec = system.tables.get(table)
            if rec is None:
                continue
            got = leave_one_out(rec, grid.loo_sample, grid.loo_seed)
            errs = np.asarray(got["errors"], dtype=float)
            per_system[sys_id][table] = {**_stats(errs), "points": int(got["points"]), "errors": int(errs.size),
                                         "version": f"{rec.get('framework')} {rec.get('version')}"}
            pooled.setdefault(table, []).append(errs)
            points[table] = points.get(table, 0) + int(got["points"])
    by_table = {t: {**_stats(np.concatenate(e)), "points": points[t], "errors": int(sum(x.size for x in e))}
                for t, e in pooled.items()}
    every = np.concatenate([x for e in pooled.values() for x in e]) if pooled else np.zeros(0)
    overall = {**_stats(every), "points": sum(points.values()), "errors": int(every.size)}
    return {"sample": grid.loo_sample, "seed": grid.loo_seed, "per_system": per_system, "by_table": by_table,
            "overall": overall}


def _sources(systems: dict) -> list[str]:
    """Source ids of the hardware figures the bounds use (memory, bandwidth, BF16 peak)."""
    out: list[str] = []
    for hw, _, _ in systems.values():
        provs = [hw.provenance.get("memory_bytes"), hw.provenance.get("memory_bandwidth_bytes_per_s")]
        try:
            provs.append(hw.peak("BF16").provenance)
        except CalcInputError:
            pass
        for p in provs:
            sid = (p or {}).get("source")
            if sid and sid not in out:
                out.append(sid)
    return out


def _compute(lookup: Lookup, grid: CalibrationGrid, systems: dict, archs: dict[str, _Model]) -> dict[str, Any]:
    rows: list[dict] = []
    skipped: list[dict] = []
    unusable = []
    provenance: dict[str, dict[str, str]] = {}
    for sys_id, (hw, system, why) in systems.items():
        if system is None:
            unusable.append({"system": sys_id, "hardware": hw.id, "reason": why})
            continue
        provenance[sys_id] = system.provenance
        for m in archs.values():
            for phase in ("decode", "prefill"):
                got, left = _evaluate(lookup, grid, hw, sys_id, system, m, phase)
                rows.extend(got)
                skipped.extend(left)
    comparable = [r for r in rows if r["roofline_comparable"]]
    summary = {
        "ratio": {"overall": _stats(r["ratio"] for r in rows), "by_system": _grouped(rows, "system", "ratio"),
                  "by_kind": _grouped(rows, "kind", "ratio"), "by_phase": _grouped(rows, "phase", "ratio"),
                  "by_model": _grouped(rows, "model", "ratio")},
        "extrapolated_fraction": _stats(r["extrapolated_fraction"] for r in rows),
        "roofline_cross_check": {"bound_over_roofline": _stats(r["bound_over_roofline"] for r in comparable),
                                 "compared": len(comparable), "not_compared": len(rows) - len(comparable)},
    }
    return {
        "method": METHOD,
        "not_modelled": list(NOT_MODELLED),
        "grid": {**asdict(grid), "models": [{"id": i, "kind": k} for i, k in grid.models],
                 "systems": [{"hardware": h, "system": s} for h, s in grid.systems]},
        "counts": {"evaluated": len(rows), "skipped": len(skipped), "systems": sorted({r["system"] for r in rows}),
                   "models": sorted({r["model"] for r in rows}), "kinds": sorted({r["kind"] for r in rows})},
        "summary": summary,
        "leave_one_out": _loo(systems, grid),
        "configurations": rows,
        "skipped": skipped,
        "unusable_systems": unusable,
        "provenance": provenance,
        "measured_source": {"package": PACKAGE, "version": PACKAGE_VERSION, "license": LICENSE},
        "sources": _sources(systems),
    }


# --------------------------------------------------------------------------- text

def _fmt(v: Any, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}g}"


def format_text(report: dict[str, Any]) -> str:
    """The report's summary as plain-text tables (ratios and leave-one-out errors with median and p90)."""
    s = report["summary"]
    c = report["counts"]
    lines = [(f"Calibration: {c['evaluated']} configurations evaluated ({c['skipped']} skipped: do not fit), "
              f"systems {', '.join(c['systems'])}, models {', '.join(c['models'])}."),
             "", "Measured estimate ÷ peak-rate bound (kernels only, no all-reduce)",
             f"{'group':28} {'n':>5} {'median':>8} {'p90':>8} {'min':>8} {'max':>8}"]

    def row(name: str, st: dict) -> None:
        lines.append(f"{name:28} {st['n']:>5} {_fmt(st['median']):>8} {_fmt(st['p90']):>8} "
                     f"{_fmt(st['min']):>8} {_fmt(st['max']):>8}")

    row("all", s["ratio"]["overall"])
    for group in ("by_system", "by_kind", "by_phase", "by_model"):
        for k, st in s["ratio"][group].items():
            row(f"{group[3:]} {k}", st)
    rc = s["roofline_cross_check"]
    lines += ["", (f"Cross-check, per-op bound ÷ roofline calculator time ({rc['compared']} comparable, "
                   f"{rc['not_compared']} not):")]
    row("bound / roofline", rc["bound_over_roofline"])
    ex = s["extrapolated_fraction"]
    lines.append(f"share of extrapolated lookups per configuration: median {_fmt(ex['median'])}, "
                 f"p90 {_fmt(ex['p90'])}, max {_fmt(ex['max'])}")
    loo = report["leave_one_out"]
    lines += ["", f"Leave-one-out relative error of the interpolation (sample {loo['sample']}, seed {loo['seed']})",
              f"{'system / table':44} {'points':>6} {'errors':>6} {'median':>8} {'p90':>8} {'max':>8}"]

    def loo_row(name: str, st: dict) -> None:
        lines.append(f"{name:44} {st['points']:>6} {st['errors']:>6} {_fmt(st['median']):>8} {_fmt(st['p90']):>8} "
                     f"{_fmt(st['max']):>8}")

    for sys_id, tables in loo["per_system"].items():
        for table, st in tables.items():
            loo_row(f"{sys_id} {table}", st)
    for table, st in loo["by_table"].items():
        loo_row(f"all systems {table}", st)
    loo_row("all tables", loo["overall"])
    return "\n".join(lines)
