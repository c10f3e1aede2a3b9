"""Measured kernel tables as interpolation grids (the data layer of `calculators.perf.measured`).

A measured table (NVIDIA AIConfigurator's kernel database, Apache-2.0) reaches the calculators through
`lookup("measurement", "<system>/<framework>/<table>")` (vLLM's also as "<system>/<table>") as a record whose
`columns` are NumPy arrays, latencies in milliseconds (`latency_s_per_unit` says otherwise). `load_system` gathers
one system's tables for one serving framework (vllm, sglang, trtllm) into a `MeasuredSystem`. Each table is indexed once per (sha256, table layout): rows are split by their categorical
columns (data type, window, head size …) and every split becomes a `Grid` — sorted axes plus a dense array of
log latencies with NaN where nothing was measured. `locate` then answers a whole sweep in a few array passes:

- every axis is bracketed by `searchsorted` and the weight of the upper neighbour is linear in log(x);
- the 2^D corners of the cell are blended multilinearly in log latency, over the corners that were measured
  (missing corners drop out and the weights of the others are renormalised);
- a query outside an axis' measured range is clamped onto it; a cell with no measured corner is answered by the
  nearest measured point. Both are marked, and the op layer rescales them with a peak-rate bound.
"""
from __future__ import annotations

import hashlib
from collections import ChainMap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from calculators.framework import CalcInputError, Lookup
from calculators.domain import FORMATS, canonical_name

#: latency columns of the measured tables are in milliseconds
LATENCY_UNIT_S = 1e-3

#: per-point status codes (internal); `FLAG_NAMES[code]` is the public flag
MEASURED, INTERPOLATED, OUTSIDE, HOLE = 0, 1, 2, 3
FLAG_NAMES = np.array(["measured", "interpolated", "extrapolated", "extrapolated"])

#: tables a step estimate reads
TABLES = ("gemm_perf", "generation_attention_perf", "context_attention_perf", "moe_perf", "custom_allreduce_perf",
          "generation_mla_perf", "context_mla_perf", "mla_generation_module_perf", "mla_context_module_perf",
          "mla_bmm_perf", "dsa_generation_module_perf", "dsa_context_module_perf", "gdn_perf", "kda_perf",
          "moe_a2a_perf", "wideep_deepep_ll_perf", "wideep_deepep_normal_perf")
#: the serving frameworks whose kernels were measured, and the one a measured estimate assumes by default
FRAMEWORKS = ("vllm", "sglang", "trtllm")
DEFAULT_FRAMEWORK = "vllm"
#: tables measured for vLLM only in the committed subset: every framework's estimate reads vLLM's (and says so)
SHARED_TABLES = ("gemm_perf", "generation_attention_perf", "context_attention_perf", "custom_allreduce_perf")

#: how a canonical format name is spelled in the tables' dtype columns (other names pass through unchanged,
#: so table spellings such as fp8_block or w4a16_mxfp4 can be given directly)
TABLE_SPELLING = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8", "int8": "int8"}
#: the storage format (for bytes) and peak row (for FLOP/s) behind each table dtype spelling
TABLE_FORMAT = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8", "fp8_block": "fp8",
                "fp8_static": "fp8", "int8": "int8", "int8_wo": "int8", "int4_wo": "int4", "w4a16_mxfp4": "mxfp4",
                "w4afp8": "int4", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}
TABLE_PEAK = {"fp8": "FP8", "fp8_block": "FP8", "fp8_static": "FP8", "w4afp8": "FP8", "int8": "INT8",
              "nvfp4": "FP4", "float16": "FP16", "half": "FP16"}


def table_dtype(name: str) -> str:
    """A format name (any alias, case-insensitive) as the tables spell it: bf16 → bfloat16, fp8 → fp8."""
    canon = canonical_name(name)
    return TABLE_SPELLING.get(canon, canon)


def dtype_bytes(table_name: str) -> float:
    """Bytes per stored value of a table dtype (through the shared format table; unknown names count 2 B)."""
    fmt = FORMATS.get(TABLE_FORMAT.get(table_name, canonical_name(table_name)))
    return fmt.effective_bits / 8.0 if fmt is not None else 2.0


def activation_bytes(table_name: str) -> float:
    """Bytes per activation value a kernel of this dtype reads: 1 for FP8 GEMMs, else 2 (weight-only formats)."""
    return 1.0 if TABLE_PEAK.get(table_name) in ("FP8", "INT8") else 2.0


# --------------------------------------------------------------------------- device rates


def collected(rec: dict) -> str:
    """The framework version a measured table was collected with (its rows' `version` column), else its directory's."""
    return str(rec.get("collected_with") or rec.get("version"))


def directory_note(rec: dict) -> str:
    """`, wheel directory <v>` when a table's rows name another version than the directory holding them, else ""."""
    return "" if collected(rec) == str(rec.get("version")) else f", wheel directory {rec.get('version')}"


@dataclass(frozen=True)
class Rates:
    """Peak dense FLOP/s per input precision and memory bandwidth of one device (for the bound)."""

    peak_flop_per_s: dict[str, float]
    memory_bandwidth_bytes_per_s: float

    def peak(self, table_name: str) -> float:
        """The peak a kernel of this table dtype runs against (BF16 when the precision has no row)."""
        want = TABLE_PEAK.get(table_name, "BF16")
        return self.peak_flop_per_s.get(want) or self.peak_flop_per_s.get("BF16") or next(iter(self.peak_flop_per_s.values()))


def rates_from_spec(hw: Any) -> Rates:
    """`Rates` of a `specs.HardwareSpec` (dense tensor-unit rows)."""
    peaks: dict[str, float] = {}
    for prec in ("BF16", "FP16", "FP8", "INT8", "FP4"):
        try:
            peaks[prec] = hw.peak(prec).flop_per_s
        except CalcInputError:
            pass
    if not peaks:
        raise CalcInputError("hardware", f"{hw.id} has no dense BF16/FP16/FP8 peak for the bound")
    return Rates(peaks, hw.require("memory_bandwidth_bytes_per_s", "hardware"))


# --------------------------------------------------------------------------- systems

@dataclass
class MeasuredSystem:
    """The measured tables of one system for one serving framework (by table name) plus the device rates used for
    bounds. Tables measured only for vLLM (GEMM, attention, all-reduce) are vLLM's whatever the framework;
    `for_framework` gives the same system's tables of another framework (through the lookup it was loaded from)."""

    name: str
    tables: dict[str, dict]
    rates: Rates
    framework: str = DEFAULT_FRAMEWORK
    source: Callable[[str], "MeasuredSystem"] | None = field(default=None, repr=False, compare=False)
    _others: dict[str, "MeasuredSystem"] = field(default_factory=dict, repr=False, compare=False)

    def table(self, name: str, loc: str = "system") -> dict:
        rec = self.tables.get(name)
        if rec is None:
            raise CalcInputError(loc, f"{self.name} has no measured {self.framework} {name.removesuffix('_perf')} table")
        return rec

    @property
    def provenance(self) -> dict[str, str]:
        """{table: "framework version"} of the kernels that were measured: the version the rows were collected with
        (their `version` column, `collected_with`), which is not always the wheel directory's."""
        return {t: f"{r.get('framework')} {collected(r)}" for t, r in self.tables.items()}

    @property
    def version(self) -> str:
        """The version of this framework's own tables (its MoE table's where it has one), "" when it has none."""
        own = {t: r for t, r in self.tables.items() if str(r.get("framework")) == self.framework}
        pick = own.get("moe_perf") or next(iter(own.values()), None)
        return str(pick.get("version")) if pick is not None else ""

    def with_moe_kernels(self, family: str, dtype: str | None = None) -> tuple["MeasuredSystem", str]:
        """This system with its MoE table taken from the framework whose MoE rows in `dtype` are the kernel `family`
        (its name in their kernel_source: "trtllm" for TensorRT-LLM's generated MoE kernels, which SGLang and vLLM
        run through FlashInfer), for an engine launched with that kernel family when its own table measured another;
        and the framework borrowed from (`dtype` None: in any dtype). A 422 naming `moe_kernel` when no framework
        measured them."""
        dt = table_dtype(dtype) if dtype is not None else None
        for fw in dict.fromkeys((self.framework, "sglang", "vllm", *FRAMEWORKS)):
            try:
                rec = self.for_framework(fw).tables.get("moe_perf")
            except CalcInputError:
                continue
            rows = _rows_of_kernels(rec, family) if rec is not None else None
            if rows is None or (dt is not None and not moe_kernel_sources(rows, dt)):
                continue
            return replace(self, tables={**self.tables, "moe_perf": rows}, _others={}), fw
        raise CalcInputError("moe_kernel", f"no {family} MoE kernels{f' in {dt}' if dt else ''} measured on {self.name} "
                             "for any framework")

    def for_framework(self, framework: str | None) -> "MeasuredSystem":
        """This system's tables as measured for `framework` (this system when it is already that one)."""
        if framework is None or framework == self.framework:
            return self
        if framework not in FRAMEWORKS:
            raise CalcInputError("framework", f"no measured kernels for framework {framework!r}; one of {', '.join(FRAMEWORKS)}")
        if framework not in self._others:
            if self.source is None:
                raise CalcInputError("framework", f"{self.name}: only the {self.framework} tables were loaded")
            self._others[framework] = self.source(framework)
        return self._others[framework]


def moe_kernel_sources(rec: dict, dtype: str | None = None) -> list[str]:
    """The kernel_source names of a MoE table's rows in `dtype` (a table dtype name; None: every row), sorted."""
    cols = rec["columns"]
    if "kernel_source" not in cols or "moe_dtype" not in cols:
        return []
    ks = np.asarray(cols["kernel_source"]).astype(str)
    return sorted(set((ks[np.asarray(cols["moe_dtype"]).astype(str) == dtype] if dtype else ks).tolist()))


_FAMILY_ROWS: dict[tuple[str, str], dict | None] = {}


def _rows_of_kernels(rec: dict, family: str) -> dict | None:
    """A measured table keeping only the rows whose kernel_source names `family` (its own cache identity), None when
    it has none; built once per (table, family)."""
    key = (table_key(rec), family)
    if key not in _FAMILY_ROWS:
        cols = rec["columns"]
        keep = (np.char.find(np.asarray(cols["kernel_source"]).astype(str), family) >= 0 if "kernel_source" in cols
                else np.zeros(len(cols["latency"]), dtype=bool))
        _FAMILY_ROWS[key] = ({**rec, "columns": {k: np.asarray(cols[k])[keep] for k in cols},
                              "sha256": f"{key[0]}:{family}"} if keep.any() else None)
    return _FAMILY_ROWS[key]


def load_system(lookup: Lookup, system: str, hw: Any, tables: Sequence[str] = TABLES,
                framework: str = DEFAULT_FRAMEWORK) -> MeasuredSystem:
    """The measured tables `lookup("measurement", f"{system}/{framework}/{table}")` that exist, with `hw`'s rates;
    a table measured only for vLLM (`SHARED_TABLES`) is vLLM's `f"{system}/{table}"`.

    `hw` is a `specs.HardwareSpec` or a `Rates`."""
    if framework not in FRAMEWORKS:
        raise CalcInputError("framework", f"no measured kernels for framework {framework!r}; one of {', '.join(FRAMEWORKS)}")
    found = {}
    for t in tables:
        base = t.removesuffix("_perf")      # the store names tables without the file suffix
        names = [f"{system}/{framework}/{base}"]
        if framework == DEFAULT_FRAMEWORK or t in SHARED_TABLES:
            names += [f"{system}/{t}", f"{system}/{base}"]
        for name in names:
            try:
                found[t] = {**lookup("measurement", name), "table": t}
                break
            except KeyError:
                continue
    if not found:
        raise CalcInputError("system", f"no measured kernel tables for system {system!r}")
    rates = hw if isinstance(hw, Rates) else rates_from_spec(hw)
    return MeasuredSystem(system, found, rates, framework,
                          lambda fw: load_system(lookup, system, rates, tables, fw))


# --------------------------------------------------------------------------- grids

@dataclass
class Grid:
    """One categorical slice of a table: ascending axes and a dense array of log latency (s), NaN = not measured."""

    names: tuple[str, ...]
    axes: tuple[np.ndarray, ...]
    log_axes: tuple[np.ndarray, ...]
    log_lat: np.ndarray
    measured_flat: np.ndarray = field(init=False)
    _nearest: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.measured_flat = np.flatnonzero(~np.isnan(self.log_lat.ravel()))

    @property
    def points(self) -> int:
        return int(self.measured_flat.size)

    def padded(self, axis: str) -> "Grid":
        """This grid with each measured cell lowered to the least latency measured at the same or a larger value of
        `axis` (the other axes fixed); cells not measured stay unmeasured."""
        i = self.names.index(axis)
        lat = np.moveaxis(self.log_lat, i, 0)
        best = np.minimum.accumulate(np.where(np.isnan(lat), np.inf, lat)[::-1], axis=0)[::-1]
        out = np.moveaxis(np.where(np.isnan(lat), np.nan, best), 0, i)
        return Grid(self.names, self.axes, self.log_axes, np.ascontiguousarray(out))

    def coords(self, flat: np.ndarray) -> tuple[np.ndarray, ...]:
        """Axis values of flat cell indices."""
        idx = np.unravel_index(flat, self.log_lat.shape)
        return tuple(ax[i] for ax, i in zip(self.axes, idx))

    def _norm(self, flat: np.ndarray) -> np.ndarray:
        """Cells as rows of log coordinates scaled to [0, 1] per axis (for nearest-point distances)."""
        idx = np.unravel_index(flat, self.log_lat.shape)
        cols = []
        for lax, i in zip(self.log_axes, idx):
            span = lax[-1] - lax[0]
            cols.append((lax[i] - lax[0]) / span if span > 0 else np.zeros(len(i)))
        return np.stack(cols, axis=1)

    def nearest_measured(self, flat: np.ndarray) -> np.ndarray:
        """For cells without a measurement, the flat index of the nearest measured cell (memoised per cell)."""
        cells, inv = np.unique(np.asarray(flat, dtype=np.int64), return_inverse=True)
        todo = np.asarray([c for c in cells.tolist() if c not in self._nearest], dtype=np.int64)
        if todo.size and self.measured_flat.size:
            have = self._norm(self.measured_flat)
            for start in range(0, todo.size, 256):
                chunk = todo[start:start + 256]
                d2 = ((self._norm(chunk)[:, None, :] - have[None, :, :]) ** 2).sum(axis=2)
                self._nearest.update(zip(chunk.tolist(), self.measured_flat[np.argmin(d2, axis=1)].tolist()))
        return np.asarray([self._nearest[c] for c in cells.tolist()], dtype=np.int64)[inv.reshape(-1)]


def build_grid(names: Sequence[str], cols: Sequence[np.ndarray], latency_ms: np.ndarray, fastest: bool = False) -> Grid:
    """A grid from row arrays (one per axis) and latencies in ms; repeated keys keep their geometric mean (with
    `fastest`, their minimum: the kernel an engine's autotuner would pick at that shape)."""
    axes, inv = [], []
    for c in cols:
        u, i = np.unique(np.asarray(c, dtype=float), return_inverse=True)
        axes.append(u)
        inv.append(i.reshape(-1))
    shape = tuple(len(a) for a in axes)
    flat = np.ravel_multi_index(tuple(inv), shape)
    lat = np.asarray(latency_ms, dtype=float) * LATENCY_UNIT_S
    good = np.isfinite(lat) & (lat > 0)
    size = int(np.prod(shape))
    sums = np.bincount(flat[good], weights=np.log(lat[good]), minlength=size)
    counts = np.bincount(flat[good], minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        log_lat = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).reshape(shape)
    if fastest:
        low = np.full(size, np.inf)
        np.minimum.at(low, flat[good], np.log(lat[good]))
        log_lat = np.where(counts > 0, low, np.nan).reshape(shape)
    return Grid(tuple(names), tuple(axes), tuple(np.log(a) for a in axes), log_lat)


@dataclass
class Located:
    """What `locate` found: latency at the point used, its status, and that point's coordinates."""

    latency_s: np.ndarray
    status: np.ndarray          # MEASURED / INTERPOLATED / OUTSIDE (clamped) / HOLE (nearest measured cell)
    at: tuple[np.ndarray, ...]  # the point whose latency `latency_s` is (the query itself unless OUTSIDE/HOLE)


def locate(grid: Grid, query: Sequence[Any], bound: Callable[..., np.ndarray] | None = None) -> Located:
    """Multilinear interpolation in log(axis) and log(latency) at every query point (arrays broadcast).

    A cell whose corners were all measured blends their log latencies. A cell with some corners missing blends
    the log efficiency (latency ÷ `bound`) of the corners that exist and applies it to the bound at the point
    (status HOLE: not bracketed by measurements); without a `bound` it renormalises over the measured corners.
    A cell with no measured corner takes the nearest measured cell (HOLE)."""
    q = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in query])
    shape = q[0].shape
    q = [x.reshape(-1) for x in q]
    n = q[0].size
    outside = np.zeros(n, dtype=bool)
    exact = np.ones(n, dtype=bool)
    lo, hi, wt, clamped = [], [], [], []
    for ax, lax, x in zip(grid.axes, grid.log_axes, q):
        xc = np.clip(x, ax[0], ax[-1])
        outside |= xc != x
        clamped.append(xc)
        if ax.size == 1:
            i = np.zeros(n, dtype=np.int64)
            lo.append(i)
            hi.append(i)
            wt.append(np.zeros(n))
            continue
        i = np.clip(np.searchsorted(ax, xc, side="right") - 1, 0, ax.size - 2)
        t = np.clip((np.log(xc) - lax[i]) / (lax[i + 1] - lax[i]), 0.0, 1.0)
        exact &= (t == 0.0) | (t == 1.0)
        lo.append(i)
        hi.append(i + 1)
        wt.append(t)
    strides = np.array(grid.log_lat.strides, dtype=np.int64) // grid.log_lat.itemsize
    flat_vals = grid.log_lat.ravel()
    # Weights and flat indices of all corners of the enclosing cell as (corners, points) arrays, built one axis at
    # a time: each axis with two values doubles the rows (lower corners first, then upper), so corner c takes the
    # upper index on the k-th such axis when bit k of c is set; shared partial products are computed once.
    w_all = np.ones((1, n))
    idx_all = np.zeros((1, n), dtype=np.int64)
    for ax, i_lo, i_hi, t, stride in zip(grid.axes, lo, hi, wt, strides):
        if ax.size == 1:
            continue
        w_all = np.concatenate([w_all * (1.0 - t), w_all * t])
        idx_all = np.concatenate([idx_all + i_lo * stride, idx_all + i_hi * stride])
    v_all = flat_vals[idx_all]
    nan_all = np.isnan(v_all)
    ok_all = (w_all > 0) & ~nan_all
    acc = np.where(ok_all, w_all * np.where(ok_all, v_all, 0.0), 0.0).sum(axis=0)
    wsum = np.where(ok_all, w_all, 0.0).sum(axis=0)
    missing = np.where((w_all > 0) & nan_all, w_all, 0.0).sum(axis=0)
    # the corner with the largest weight (the first of equals), the cell a hole falls back to
    nearest_cell = idx_all[np.argmax(w_all, axis=0), np.arange(n)]
    corners = list(zip(w_all, idx_all))
    hole = wsum <= 0
    partial = ~hole & (missing > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        lat = np.exp(acc / np.where(hole, 1.0, wsum))
    if bound is not None and partial.any():
        sel = np.flatnonzero(partial)
        eff = np.zeros(sel.size)
        for w, idx in corners:
            v = flat_vals[idx[sel]]
            ok = (w[sel] > 0) & ~np.isnan(v)
            if ok.any():
                at_corner = grid.coords(idx[sel][ok])
                eff[ok] += w[sel][ok] * (v[ok] - np.log(bound(*at_corner)))
        lat[sel] = np.exp(eff / wsum[sel]) * bound(*(c[sel] for c in clamped))
    at = [c.copy() for c in clamped]
    if hole.any():
        near = grid.nearest_measured(nearest_cell[hole])
        lat[hole] = np.exp(flat_vals[near])
        for d, c in enumerate(grid.coords(near)):
            at[d][hole] = c
    status = np.where(hole | partial, HOLE, np.where(outside, OUTSIDE, np.where(exact, MEASURED, INTERPOLATED)))
    return Located(lat.reshape(shape), status.astype(np.int8).reshape(shape), tuple(a.reshape(shape) for a in at))


def estimate(grid: Grid, query: Sequence[Any], bound: Callable[..., np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`locate` with every point that is not bracketed by measurements moved to the query by the peak-rate bound:
    t(q) = bound(q) × t(p) / bound(p), keeping the efficiency (bound/measured) of the nearest measured point p.
    Returns (seconds, status)."""
    return rescaled(locate(grid, query, bound), query, bound)


def rescaled(loc: Located, query: Sequence[Any], bound: Callable[..., np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`loc`'s latency moved from the point it was found at to the query by the bound ratio (where they differ)."""
    lat = loc.latency_s
    far = loc.status >= OUTSIDE
    if far.any():
        q = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in query])
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = bound(*q) / bound(*loc.at)
        lat = np.where(far, lat * np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0), lat)
    return lat, loc.status


# --------------------------------------------------------------------------- table indexes

_INDEX: dict[tuple, dict] = {}


def table_key(rec: dict) -> str:
    """The identity a table's index is cached under: its sha256 (a content hash of the columns when absent)."""
    if rec.get("sha256"):
        return str(rec["sha256"])
    h = hashlib.sha256()
    for name in sorted(rec["columns"]):
        h.update(name.encode())
        h.update(np.asarray(rec["columns"][name]).astype(str).tobytes())
    rec["sha256"] = h.hexdigest()
    return rec["sha256"]


def _as_key(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def index_table(rec: dict, categories: Sequence[str], axes: Sequence[str],
                derive: dict[str, Callable[[dict], np.ndarray]] | None = None,
                defaults: dict[str, Any] | None = None, fastest_kernel: bool = False,
                padded: str | None = None) -> dict[tuple, Grid]:
    """{category values: Grid} of a measured table, built once per (sha256, layout) and cached.

    `derive` adds computed columns (e.g. sequence length = isl + step); `defaults` fills columns that older tables
    lack (e.g. window_size 0 before windows were measured). Where one category holds rows of several
    `kernel_source`s, only the kernel with the most rows is kept (one kernel per grid, never a blend) — or, with
    `fastest_kernel`, the fastest kernel measured at each shape (for kernels an engine picks per shape at run time,
    as TensorRT-LLM's MoE switches to its min-latency kernel at small token counts).

    `padded` names an axis an engine may round up: a batch of m rows can run as any larger batch it has a kernel
    (or a captured CUDA graph) for, so a cell keeps the least latency measured at its m or any larger one (`Grid.
    padded`). Tables that hold a slower kernel choice at one size than at the next (the GEMM tables' spikes at
    m = 1, 8, 12 on B200) then answer what an engine that pads would run."""
    key = (table_key(rec), tuple(categories), tuple(axes), tuple(sorted(derive or ())), fastest_kernel, padded)
    hit = _INDEX.get(key)
    if hit is not None:
        return hit
    cols = ChainMap({}, rec["columns"])        # defaults and derived columns over the table's, nothing copied
    for name, value in (defaults or {}).items():
        if name not in cols:
            cols[name] = np.full(len(cols["latency"]), value)
    for name, fn in (derive or {}).items():
        cols[name] = fn(cols)
    missing = [c for c in (*categories, *axes, "latency") if c not in cols]
    if missing:
        raise CalcInputError("system", f"measured table {rec.get('table')} lacks columns {', '.join(missing)}")
    n_rows = len(cols["latency"])
    coded = getattr(rec["columns"], "coded", None)      # text columns as (codes, sorted values): no strings made
    codes, uniques = [], []
    for c in categories:
        pair = coded(c) if coded is not None and c not in (derive or ()) else None
        if pair is not None:        # codes follow the sorted values, so these are np.unique's uniques and inverse
            u, inv = np.unique(pair[0], return_inverse=True)
            u = pair[1][u]
        else:
            col = np.asarray(cols[c])
            u, inv = np.unique(col.astype(str) if col.dtype.kind == "O" else col, return_inverse=True)
        uniques.append(u)
        codes.append(inv.reshape(-1))
    combo = np.ravel_multi_index(tuple(codes), tuple(len(u) for u in uniques)) if categories else np.zeros(n_rows, dtype=np.int64)
    order = np.argsort(combo, kind="stable")
    kernels = None
    if "kernel_source" in cols:
        pair = coded("kernel_source") if coded is not None and "kernel_source" not in (derive or ()) else None
        kernels = pair[0] if pair is not None else np.asarray(cols["kernel_source"])
    grids: dict[tuple, Grid] = {}
    for sel in np.split(order, np.flatnonzero(np.diff(combo[order])) + 1):
        if not sel.size:
            continue
        if kernels is not None and not fastest_kernel:
            names, counts = np.unique(kernels[sel], return_counts=True)
            if names.size > 1:
                sel = sel[kernels[sel] == names[np.argmax(counts)]]
        cat = tuple(_as_key(u[c[sel[0]]]) for u, c in zip(uniques, codes))
        grid = build_grid(axes, [np.asarray(cols[a])[sel] for a in axes], np.asarray(cols["latency"])[sel],
                          fastest=fastest_kernel)
        grids[cat] = grid if padded is None else grid.padded(padded)
    _INDEX[key] = grids
    release = getattr(rec["columns"], "release", None)
    if release is not None:         # the rows are in the grids now: a memory-mapped table's pages may go
        release()
    return grids


def clear_index() -> None:
    """Forget every built index (tests and benchmarks that time a cold start)."""
    _INDEX.clear()
    _FAMILY_ROWS.clear()
