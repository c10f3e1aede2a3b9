"""Measured kernel latencies: GEMM, attention, MoE and all-reduce looked up in measured tables.

The tables are NVIDIA AIConfigurator's kernel database (Apache-2.0): latencies of real kernels of one framework
version on one GPU, in milliseconds. Each function here takes a `MeasuredSystem` (`measured_tables.load_system`)
and query arrays that broadcast against each other, and returns `(latency_s, flags)`: seconds per call, and per
point "measured" (a grid point), "interpolated" (between measured points, log-multilinear) or "extrapolated"
(outside the measured range, or no measured neighbour: the peak-rate bound of the query times the
measured/bound ratio of the nearest measured point).

Units of the tables: `latency` in ms; all-reduce `message_size` counts ELEMENTS, not bytes (AIConfigurator sizes
an all-reduce as tokens × hidden values per token), so bytes = message_size × bytes per element.
`decode_step` / `prefill_step` (in `calculators.perf.measured_step`) sum these ops into one step.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from calculators.framework import CalcInputError
from calculators.perf.measured_tables import (
    FLAG_NAMES,
    HOLE,
    INTERPOLATED,
    MEASURED,
    Grid,
    MeasuredSystem,
    Rates,
    activation_bytes,
    dtype_bytes,
    estimate,
    index_table,
    locate,
    table_dtype,
)

__all__ = ["allreduce_kernel", "allreduce_latency", "attention_kernel", "context_attention_bound_s", "context_attention_latency",
           "flags_of", "gemm_bound_s", "gemm_kernel", "gemm_latency", "generation_attention_bound_s", "moe_bound_s", "moe_kernel",
           "generation_attention_latency", "leave_one_out", "moe_latency"]

GEMM_CATS, GEMM_AXES = ("gemm_dtype",), ("m", "n", "k")
ATTN_CATS = ("kv_cache_dtype", "window_size", "head_dim")
GEN_AXES = ("batch_size", "seq_len", "num_heads", "num_key_value_heads")
CTX_AXES = ("batch_size", "isl", "num_heads", "num_key_value_heads")
MOE_CATS = ("moe_dtype", "distribution", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
MOE_AXES = ("num_tokens",)
AR_AXES = ("num_gpus", "message_size")
#: generation rows are keyed by the sequence length the new token sees: isl (1) + step
_SEQ_LEN = {"seq_len": lambda c: np.asarray(c["isl"]) + np.asarray(c["step"])}


def flags_of(status: np.ndarray) -> np.ndarray:
    """Public flag names of internal status codes."""
    return FLAG_NAMES[np.asarray(status, dtype=np.int64)]


def _grid(grids: dict[tuple, Grid], cat: tuple, loc: str, what: str) -> Grid:
    g = grids.get(cat)
    if g is None:
        have = sorted({c[0] for c in grids})
        raise CalcInputError(loc, f"no measured {what} for {cat}; measured {what} dtypes: {', '.join(map(str, have))}")
    return g


# --------------------------------------------------------------------------- GEMM

def gemm_bound_s(m: Any, n: Any, k: Any, dtype: str, rates: Rates) -> np.ndarray:
    """Peak-rate bound of one GEMM: max(2·m·n·k / peak, (A + B + C bytes) / bandwidth)."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    flops = 2.0 * m * n * k
    byts = m * k * activation_bytes(dtype) + k * n * dtype_bytes(dtype) + m * n * 2.0
    return np.maximum(flops / rates.peak(dtype), byts / rates.memory_bandwidth_bytes_per_s)


def gemm_kernel(system: MeasuredSystem, m: Any, n: Any, k: Any, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    dt = table_dtype(dtype)
    grid = _grid(index_table(system.table("gemm_perf"), GEMM_CATS, GEMM_AXES, padded="m"), (dt,), "weight_dtype", "GEMM")
    q = (m, n, k)
    return estimate(grid, q, lambda a, b, c: gemm_bound_s(a, b, c, dt, system.rates))


def gemm_latency(system: MeasuredSystem, m: Any, n: Any, k: Any, dtype: str = "bf16") -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one (m × k) · (k × n) GEMM with weights in `dtype`, and the per-point flags."""
    lat, st = gemm_kernel(system, m, n, k, dtype)
    return lat, flags_of(st)


# --------------------------------------------------------------------------- attention

def _attn_grid(grids: dict[tuple, Grid], kv_dtype: str, window: int, head_dim: int, loc: str) -> tuple[Grid, int, bool]:
    """The grid of (kv dtype, window, head_dim), else the nearest measured head_dim (flagged by the caller)."""
    dt = table_dtype(kv_dtype)
    cat = (dt, int(window), int(head_dim))
    if cat in grids:
        return grids[cat], int(head_dim), True
    same = [c for c in grids if c[0] == dt and c[1] == int(window)] or [c for c in grids if c[0] == dt]
    if not same:
        raise CalcInputError(loc, f"no measured attention with KV cache {dt}; measured: {sorted({c[0] for c in grids})}")
    best = min(same, key=lambda c: (abs(np.log(c[2] / head_dim)), c[1] != int(window)))
    return grids[best], int(best[2]), False


def generation_attention_bound_s(b, s, h, kvh, hd: float, kv_bytes: float, rates: Rates) -> np.ndarray:
    flops = 4.0 * b * h * hd * s
    byts = b * s * 2.0 * kvh * hd * kv_bytes + 4.0 * b * h * hd
    return np.maximum(flops / rates.peak("bfloat16"), byts / rates.memory_bandwidth_bytes_per_s)


def context_attention_bound_s(b, s, h, kvh, hd: float, rates: Rates) -> np.ndarray:
    flops = 4.0 * b * h * hd * s * (s + 1.0) / 2.0
    byts = b * s * (2.0 * h + 2.0 * kvh) * hd * 2.0
    return np.maximum(flops / rates.peak("bfloat16"), byts / rates.memory_bandwidth_bytes_per_s)


def attention_kernel(system: MeasuredSystem, table: str, b, s, h, kvh, head_dim: int, kv_dtype: str, window: int):
    gen = table == "generation_attention_perf"
    grids = index_table(system.table(table), ATTN_CATS, GEN_AXES if gen else CTX_AXES, _SEQ_LEN if gen else None,
                        {"window_size": 0})
    grid, hd_used, exact = _attn_grid(grids, kv_dtype, window, head_dim, "kv_dtype")
    kvb = dtype_bytes(table_dtype(kv_dtype))
    q = (b, s, h, kvh)
    if gen:
        bound = lambda *a, hd=hd_used: generation_attention_bound_s(*a, hd, kvb, system.rates)
    else:
        bound = lambda *a, hd=hd_used: context_attention_bound_s(*a, hd, system.rates)
    lat, st = estimate(grid, q, bound)
    if not exact:   # another head size was measured: move it by the bound ratio at the same point
        qq = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in q])
        want = (generation_attention_bound_s(*qq, head_dim, kvb, system.rates) if gen else context_attention_bound_s(*qq, head_dim, system.rates))
        lat = lat * want / bound(*qq)
        st = np.full(np.shape(lat), HOLE, dtype=np.int8)
    return lat, st


def generation_attention_latency(system: MeasuredSystem, batch: Any, kv_len: Any, heads: Any, kv_heads: Any,
                                 head_dim: int, kv_dtype: str = "bf16", window: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one decode attention call: `batch` sequences, one new token each, attending to `kv_len` keys
    (the table's isl + step), with `heads` / `kv_heads` heads on this rank."""
    lat, st = attention_kernel(system, "generation_attention_perf", batch, kv_len, heads, kv_heads, head_dim, kv_dtype, window)
    return lat, flags_of(st)


def context_attention_latency(system: MeasuredSystem, batch: Any, isl: Any, heads: Any, kv_heads: Any,
                              head_dim: int, kv_dtype: str = "bf16", window: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one causal prefill attention call over `isl` new tokens per sequence (no cached prefix)."""
    lat, st = attention_kernel(system, "context_attention_perf", batch, isl, heads, kv_heads, head_dim, kv_dtype, window)
    return lat, flags_of(st)


# --------------------------------------------------------------------------- MoE

def moe_bound_s(tokens, hidden, inter, topk, experts, tp, ep, dtype: str, rates: Rates) -> np.ndarray:
    """Bound of one rank's fused MoE: routed FLOPs split over tp·ep, weights of the experts the tokens touch."""
    flops = 6.0 * tokens * topk * hidden * inter / (tp * ep)
    touched = experts * (1.0 - (1.0 - np.minimum(topk / experts, 1.0)) ** tokens)
    byts = touched / ep * 3.0 * hidden * inter / tp * dtype_bytes(dtype) + 4.0 * tokens * hidden
    return np.maximum(flops / rates.peak(dtype), byts / rates.memory_bandwidth_bytes_per_s)


def moe_kernel(system: MeasuredSystem, tokens, hidden, inter, topk, experts, tp, ep, dtype: str, distribution: str | None):
    rec = system.table("moe_perf")
    grids = index_table(rec, MOE_CATS, MOE_AXES, fastest_kernel=True, padded="num_tokens")
    dt = table_dtype(dtype)
    dists = sorted({c[1] for c in grids if c[0] == dt})
    if not dists:
        raise CalcInputError("weight_dtype", f"no measured MoE kernels in {dt}; measured: {sorted({c[0] for c in grids})}")
    dist = distribution if distribution in dists else ("balanced" if "balanced" in dists else dists[0])
    arrs = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in (tokens, hidden, inter, topk, experts, tp, ep)])
    shape = arrs[0].shape
    flat = [a.reshape(-1) for a in arrs]
    keys, inv = _unique_rows(flat[1:])
    lat = np.empty(flat[0].size)
    st = np.empty(flat[0].size, dtype=np.int8)
    bound = lambda *a: moe_bound_s(*a, dt, system.rates)
    for j, key in enumerate(keys):
        sel = inv == j
        tok = flat[0][sel]
        cat = (dt, dist, *(int(v) for v in key))
        grid = grids.get(cat)
        if grid is not None:
            got = estimate(grid, (tok,), lambda t, key=key: bound(t, *key))
            lat[sel], st[sel] = got
            continue
        # nearest measured configuration of this dtype and distribution (Σ |log ratio| of its shape), moved by the
        # bound ratio
        cands, shapes = _moe_candidates(grids, dt, dist)
        near = cands[int(np.argmin(np.sum(np.abs(np.log(shapes / key)), axis=1)))]
        near_key = np.asarray(near[2:], dtype=float)
        found = locate(grids[near], (tok,), lambda t, nk=near_key: bound(t, *nk))
        lat[sel] = found.latency_s * bound(tok, *key) / bound(found.at[0], *near_key)
        st[sel] = HOLE
    return lat.reshape(shape), st.reshape(shape)


def _unique_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of equal-length columns (ascending, as np.unique(axis=0)) and each point's row index, by
    combining the per-column codes into one integer (cheaper than a row sort when most columns are constant)."""
    codes, uniques = [], []
    for c in cols:
        if c.size and np.all(c == c[0]):
            uniques.append(c[:1])
            codes.append(np.zeros(c.size, dtype=np.int64))
        else:
            u, i = np.unique(c, return_inverse=True)
            uniques.append(u)
            codes.append(i.reshape(-1))
    dims = tuple(len(u) for u in uniques)
    combo, inv = np.unique(np.ravel_multi_index(tuple(codes), dims), return_inverse=True)
    idx = np.unravel_index(combo, dims)
    return np.stack([u[i] for u, i in zip(uniques, idx)], axis=1), inv.reshape(-1)


_MOE_CANDIDATES: dict[tuple, tuple] = {}


def _moe_candidates(grids: dict[tuple, Grid], dt: str, dist: str) -> tuple[list, np.ndarray]:
    """The measured MoE configurations of one dtype and distribution, in table order, with their shapes as rows
    (kept per index: `index_table` returns the same dict for a table)."""
    key = (id(grids), dt, dist)
    hit = _MOE_CANDIDATES.get(key)
    if hit is None or hit[2] is not grids:
        cands = [c for c in grids if c[0] == dt and c[1] == dist]
        hit = (cands, np.asarray([c[2:] for c in cands], dtype=float), grids)
        if len(_MOE_CANDIDATES) > 64:       # indexes rebuilt after clear_index leave stale entries behind
            _MOE_CANDIDATES.clear()
        _MOE_CANDIDATES[key] = hit
    return hit[0], hit[1]


def moe_latency(system: MeasuredSystem, tokens: Any, hidden: Any, inter: Any, topk: Any, experts: Any,
                tp: Any = 1, ep: Any = 1, dtype: str = "bf16", distribution: str | None = "balanced"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one fused MoE layer on one rank (`tokens` tokens in the step, `inter` the full expert FFN width,
    experts split over `tp` × `ep`). A configuration that was not measured takes the nearest measured one's
    efficiency (flagged extrapolated)."""
    lat, st = moe_kernel(system, tokens, hidden, inter, topk, experts, tp, ep, dtype, distribution)
    return lat, flags_of(st)


# --------------------------------------------------------------------------- all-reduce

def allreduce_kernel(system: MeasuredSystem, elements, gpus, dtype: str = "bf16", backend: str | None = None,
               table: str = "custom_allreduce_perf"):
    rec = system.table(table)
    cols = rec["columns"]
    cats = tuple(c for c in ("allreduce_dtype", "nccl_dtype", "op_name", "backend") if c in cols)
    grids = index_table(rec, cats, AR_AXES)
    dt = table_dtype(dtype)
    alias = {"bfloat16": ("bfloat16", "half", "float16"), "float16": ("float16", "half", "bfloat16")}.get(dt, (dt,))
    cands = [c for c in grids if any(a in c for a in alias) and ("op_name" not in cats or "all_reduce" in c)]
    if backend is not None:
        cands = [c for c in cands if backend in c] or cands
    if not cands:
        raise CalcInputError("system", f"no measured all-reduce in {dt} in {table}")
    cat = next((c for c in cands if "vllm_graph" in c), cands[0])
    eb = dtype_bytes(dt)
    bound = lambda g, e: 2.0 * (g - 1.0) / g * e * eb
    q = (np.maximum(np.asarray(gpus, dtype=float), 2.0), elements)
    return estimate(grids[cat], q, bound)


def allreduce_latency(system: MeasuredSystem, message_bytes: Any, gpus: Any, dtype: str = "bf16",
                      backend: str | None = None, table: str = "custom_allreduce_perf") -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one all-reduce of `message_bytes` bytes over `gpus` GPUs (the table is keyed by elements:
    bytes ÷ bytes per element). `backend` picks e.g. vllm_graph (default when present) or vllm_eager."""
    elements = np.asarray(message_bytes, dtype=float) / dtype_bytes(table_dtype(dtype))
    lat, st = allreduce_kernel(system, elements, gpus, dtype, backend, table)
    return lat, flags_of(st)


# --------------------------------------------------------------------------- leave-one-out

_LAYOUTS = {
    "gemm_perf": (GEMM_CATS, GEMM_AXES, None),
    "generation_attention_perf": (ATTN_CATS, GEN_AXES, _SEQ_LEN),
    "context_attention_perf": (ATTN_CATS, CTX_AXES, None),
    "moe_perf": (MOE_CATS, MOE_AXES, None),
}


def leave_one_out(rec: dict, sample: int = 1000, seed: int = 0, category: tuple | None = None) -> dict:
    """Relative errors of re-deriving measured points from the rest of the table.

    A deterministic sample of measured points (all of them when there are fewer than `sample`) is taken; for each
    point and each axis on which it has measured neighbours on both sides, that axis value is removed from the grid
    and the point is interpolated from the rest — exactly the path an off-grid query along that axis takes.
    Returns {"errors": |est − measured| / measured (one per point and axis), "axis": the axis of each error,
    "median", "p90", "points"}."""
    table = rec.get("table") or ""
    if table not in _LAYOUTS:
        raise CalcInputError("table", f"no leave-one-out layout for table {table!r}; known: {', '.join(_LAYOUTS)}")
    cats, axes, derive = _LAYOUTS[table]
    grids = index_table(rec, cats, axes, derive, {"window_size": 0})
    if category is not None:
        grids = {k: g for k, g in grids.items() if k[:len(category)] == tuple(category)}
    pool = [(k, f) for k, g in grids.items() for f in g.measured_flat.tolist()]
    rng = np.random.default_rng(seed)
    picks = sorted(rng.choice(len(pool), size=min(sample, len(pool)), replace=False).tolist()) if pool else []
    errors: list[float] = []
    which: list[str] = []
    by_cell: dict[tuple, list[int]] = {}
    for p in picks:
        by_cell.setdefault(pool[p][0], []).append(pool[p][1])
    for cat, flats in by_cell.items():
        g = grids[cat]
        flats_a = np.asarray(flats, dtype=np.int64)
        idx = np.unravel_index(flats_a, g.log_lat.shape)
        truth = np.exp(g.log_lat.ravel()[flats_a])
        for d, name in enumerate(g.names):
            n_ax = g.axes[d].size
            for i in np.unique(idx[d]):
                if i == 0 or i == n_ax - 1:
                    continue
                sel = idx[d] == i
                reduced = Grid(g.names, tuple(np.delete(a, i) if e == d else a for e, a in enumerate(g.axes)),
                               tuple(np.delete(a, i) if e == d else a for e, a in enumerate(g.log_axes)),
                               np.delete(g.log_lat, i, axis=d))
                q = tuple(g.axes[e][idx[e][sel]] for e in range(len(g.names)))
                found = locate(reduced, q)
                ok = (found.status == INTERPOLATED) | (found.status == MEASURED)
                err = np.abs(found.latency_s[ok] - truth[sel][ok]) / truth[sel][ok]
                errors.extend(err.tolist())
                which.extend([name] * int(ok.sum()))
    e = np.asarray(errors)
    return {"errors": e, "axis": np.asarray(which), "points": len(picks),
            "median": float(np.median(e)) if e.size else float("nan"),
            "p90": float(np.percentile(e, 90)) if e.size else float("nan")}
