"""Two evaluators over one step's operations (`calculators.perf.step_model`): the bound and the measured estimate.

- `bound_of(step, rates)`: the peak-rate lower bound of the step's kernels, max(Σ FLOPs / peak of each op's
  precision, Σ bytes / memory bandwidth) — perfect overlap of everything, so no real run can be faster; the
  per-op bounds (each op's own max) are kept beside it. Collectives are not in it (they depend on a link).
- `measured_of(step, system, framework)`: each op looked up in the measured kernel tables of one framework (vLLM,
  SGLang or TensorRT-LLM) on one GPU — GEMMs, attention with its window, fused MoE at its tp/ep, all-reduces, and
  (`calculators.perf.measured_layers`) the MLA and DSA cores, Gated DeltaNet and KDA state updates and the MoE
  all-to-all — summed op after op. GEMM, attention and all-reduce tables are vLLM's for every framework (the
  committed subset has no other); `tables` names the framework and version of each table read. Ops without a
  table for the framework, GPU and shape (norms; any of the above where its table is absent or its dtype was
  never measured) take their own bound divided by the measured efficiency of this step's GEMMs, and are reported
  with their share of the step and the reason (`fallback_s`, `fallback_fraction`, `fallback_why`). A lookup below
  its op's bound is raised to the bound (no kernel beats the peak rates) and the op is listed in `clamped`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calculators.framework import CalcInputError, checkpoint
from calculators.perf.measured import allreduce_kernel, attention_kernel, flags_of, gemm_kernel, moe_kernel
from calculators.perf.measured_layers import LayerKernels
from calculators.perf.measured_tables import HOLE, OUTSIDE, MeasuredSystem, Rates, table_dtype
from calculators.perf.step_model import StepOps

NOT_MODELLED = (
    "rotary embedding, activation and sampling kernels (norms and residual adds are counted at their bound)",
    "the embedding all-reduce and the logits gather under TP",
    "launch gaps, CPU scheduling and any overlap between kernels (ops are summed back to back)",
    "kernels without a measured table of the framework on this GPU (norms; an MLA, DSA, linear-attention or "
    "all-to-all kernel where its table is absent): their bound ÷ the step's measured GEMM efficiency (an all-to-all: half "
    "an all-reduce of its bytes), flagged extrapolated and listed with the reason",
    "routing skew (experts are loaded uniformly)",
)


@dataclass
class StepEstimate:
    """A measured step estimate; arrays have the broadcast shape of batch × context × tp."""

    phase: str
    total_s: np.ndarray
    parts_s: dict[str, np.ndarray]          # per op, summed over layers (seconds)
    flags: dict[str, np.ndarray]            # per op: measured / interpolated / extrapolated (worst over its lookups)
    bound_s: np.ndarray                     # Σ per-op peak-rate bounds (communication not included)
    parts_bound_s: dict[str, np.ndarray]
    extrapolated_fraction: np.ndarray       # share of this step's op lookups that were extrapolated
    framework: str
    version: str
    tables: dict[str, str] = field(default_factory=dict)   # table -> "framework version"
    not_modelled: tuple[str, ...] = NOT_MODELLED
    fallback_s: dict[str, np.ndarray] = field(default_factory=dict)   # ops with no table: bound ÷ GEMM efficiency
    fallback_why: dict[str, str] = field(default_factory=dict)        # op → why it had no table
    fallback_fraction: Any = 0.0            # their share of the step
    comm_s: Any = 0.0                       # collectives in the step (measured all-reduce tables)
    clamped: dict[str, float] = field(default_factory=dict)   # op → share of points raised to the op's bound

    @property
    def ratio_to_bound(self) -> np.ndarray:
        """Measured estimate (without communication) ÷ the sum of per-op peak-rate bounds."""
        return (self.total_s - self.comm_s) / self.bound_s



COMM_KINDS = ("allreduce", "alltoall", "p2p")
#: the tables an op kind is looked up in (attention: the phase's; the layer kernels report their own)
_TABLES_OF = {"gemm": ("gemm_perf",), "moe": ("moe_perf",), "allreduce": ("custom_allreduce_perf",)}
#: table spellings to try, in order, for a storage format: FP8 checkpoints ship with 128 × 128 block scales
#: (DeepSeek, Qwen3-FP8, MiniMax, MiMo), which the tables hold as fp8_block; MXFP4 and INT4 experts run
#: weight-only kernels
KERNEL_DTYPES = {"fp8": ("fp8_block", "fp8"), "mxfp4": ("w4a16_mxfp4",), "int4": ("int4_wo",)}
#: dense GEMMs: the per-tensor FP8 kernels cover the whole shape range, the block-scaled ones only part of it
GEMM_DTYPES = {**KERNEL_DTYPES, "fp8": ("fp8", "fp8_block")}


def _kernel(fn, dtype: str, spellings: dict = KERNEL_DTYPES):
    """Call `fn(table dtype)` with each spelling of a format until one is measured."""
    names = spellings.get(table_dtype(dtype), (table_dtype(dtype),))
    for i, name in enumerate(names):
        try:
            return fn(name)
        except CalcInputError:
            if i == len(names) - 1:
                raise


@dataclass
class Bound:
    total_s: np.ndarray           # max(compute, memory): the lower bound of the kernels
    compute_s: np.ndarray
    memory_s: np.ndarray
    parts_s: dict[str, np.ndarray]    # per op name: Σ count × max(flops/peak, bytes/bw)
    flops: np.ndarray
    bytes: np.ndarray


def _peak(rates: Rates, dtype: str) -> float:
    return rates.peak(table_dtype(dtype))


def bound_of(step: StepOps, rates: Rates) -> Bound:
    shape = step.shape
    fl = np.zeros(shape)
    by = np.zeros(shape)
    comp = np.zeros(shape)
    parts: dict[str, np.ndarray] = {}
    bw = rates.memory_bandwidth_bytes_per_s
    checkpoint()        # the guard (limits.guard): a planner search past its CPU budget stops here
    for op in step.ops:
        if op.kind in COMM_KINDS:
            continue
        f = np.broadcast_to(np.asarray(op.flops, dtype=float) * op.count, shape)
        b = np.broadcast_to(np.asarray(op.bytes, dtype=float) * op.count, shape)
        c = f / _peak(rates, op.dtype)
        fl, by, comp = fl + f, by + b, comp + c
        parts[op.name] = parts.get(op.name, 0.0) + np.maximum(c, b / bw)
    mem = by / bw
    return Bound(np.maximum(comp, mem), comp, mem, parts, fl, by)


def op_bound_s(op, rates: Rates) -> np.ndarray:
    return np.maximum(np.asarray(op.flops, dtype=float) / _peak(rates, op.dtype),
                      np.asarray(op.bytes, dtype=float) / rates.memory_bandwidth_bytes_per_s)


class _Sum:
    def __init__(self, shape):
        self.shape = shape
        self.parts: dict[str, np.ndarray] = {}
        self.bounds: dict[str, np.ndarray] = {}
        self.status: dict[str, np.ndarray] = {}
        self.lookups = np.zeros(shape)
        self.outside = np.zeros(shape)

    def add(self, name, lat, st, bound, count, lookup: bool = True):
        lat, st, bound = (np.broadcast_to(np.asarray(x, dtype=float), self.shape) for x in (lat, st, bound))
        self.parts[name] = self.parts.get(name, 0.0) + lat * count
        self.bounds[name] = self.bounds.get(name, 0.0) + bound * count
        self.status[name] = np.maximum(self.status.get(name, np.full(self.shape, -1.0)), st)
        if lookup:      # ops with no table are reported as fallbacks, not as lookups outside a table
            self.lookups += 1
            self.outside += st >= OUTSIDE


def measured_of(step: StepOps, system: MeasuredSystem, framework: str | None = None):
    """The measured estimate of a step (a `StepEstimate`) on `framework`'s tables (default: the system's, vLLM's
    unless loaded for another), with the ops that fell back to a scaled bound and why."""
    system = system.for_framework(framework)
    shape = step.shape
    rates = system.rates
    acc = _Sum(shape)
    later = []
    clamped: dict[str, float] = {}
    why: dict[str, str] = {}
    approximated: dict[str, np.ndarray] = {}
    layers = LayerKernels(step, system, lambda o: op_bound_s(o, rates))
    used: set[str] = set()
    gemms = _gemm_lookups(step, system)       # GEMMs and fused MoE layers, one table pass per precision
    for op in step.ops:
        checkpoint()    # the guard (limits.guard): each measured lookup may be costly
        sh = op.shape
        try:
            if op.kind == "gemm":
                got = gemms[id(op)]
                if isinstance(got, CalcInputError):
                    raise got
                lat, st = got
            elif op.kind == "attention":
                lat, st = _attention(step, op, system)
            elif op.kind == "moe":
                got = gemms[id(op)]
                if isinstance(got, CalcInputError):
                    raise got
                lat, st = got
            elif op.kind == "allreduce":
                lat, st = allreduce_kernel(system, np.asarray(sh["bytes"], dtype=float) / 2.0, sh["gpus"], "bf16")
            elif op.kind in ("mla", "indexer", "linear"):
                lat, st = layers(op)
            elif op.kind in ("alltoall", "p2p"):
                try:
                    if op.kind != "alltoall":
                        raise CalcInputError("system", "no measured table of pipeline hand-offs")
                    lat, st = layers(op)
                except CalcInputError as exc:
                    # an all-to-all (or a hand-off) of M bytes per rank moves about half an all-reduce's data
                    lat, st = allreduce_kernel(system, np.asarray(sh["bytes"], dtype=float) / 4.0, max(sh.get("gpus", 2), 2), "bf16")
                    st = np.maximum(st, HOLE)
                    used.add("custom_allreduce_perf")
                    if op.kind == "alltoall":
                        why[op.name] = f"{exc.message}: half an all-reduce of the same bytes"
                        approximated[op.name] = np.broadcast_to(np.asarray(lat, dtype=float) * op.count, shape)
            else:
                later.append(op)
                why[op.name] = "no measured table (norms and residual adds)"
                continue
        except CalcInputError as exc:
            later.append(op)
            why[op.name] = exc.message
            continue
        used.update(_TABLES_OF.get(op.kind, ()) if op.kind != "attention" else
                    ("generation_attention_perf" if step.phase == "decode" else "context_attention_perf",))
        if op.kind in COMM_KINDS:
            acc.add(op.name, lat, st, 0.0, op.count)
            continue
        # no kernel beats the peak rates: a lookup below this op's bound (an extrapolated table cell, or a
        # measured shape that moved fewer bytes than this op must) is raised to the bound and counted
        b = op_bound_s(op, rates)
        low = np.broadcast_to(np.asarray(lat) < b, shape)
        if np.any(low):
            clamped[op.name] = float(np.mean(low))
        acc.add(op.name, np.maximum(lat, b), st, b, op.count)
    gemm_names = {op.name for op in step.ops if op.kind == "gemm"} - {op.name for op in later}
    measured = sum((acc.parts[n] for n in gemm_names), np.zeros(shape))
    bound = sum((acc.bounds[n] for n in gemm_names), np.zeros(shape))
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(measured > 0, bound / np.where(measured > 0, measured, 1.0), 1.0)
    eff = np.clip(eff, 1e-3, 1.0)
    fallback: dict[str, np.ndarray] = dict(approximated)
    for op in later:
        b = op_bound_s(op, rates)
        acc.add(op.name, b / eff, np.full(shape, HOLE), b, op.count, lookup=False)
        fallback[op.name] = acc.parts[op.name]
    parts = {k: np.asarray(v, dtype=float) for k, v in acc.parts.items()}
    total = sum(parts.values(), np.zeros(shape))
    flags = {k: np.where(v < 0, "none", flags_of(np.maximum(v, 0).astype(np.int64))) for k, v in acc.status.items()}
    bounds = {k: np.asarray(v, dtype=float) for k, v in acc.bounds.items() if k not in _comm_names(step)}
    gemm_rec = system.tables.get("gemm_perf") or next(iter(system.tables.values()))
    used |= layers.tables
    prov = system.provenance
    est = StepEstimate(step.phase, total, parts, flags, sum(bounds.values(), np.zeros(shape)), bounds,
                       acc.outside / np.maximum(acc.lookups, 1), system.framework,
                       system.version or str(gemm_rec.get("version")), {t: prov[t] for t in sorted(used) if t in prov})
    est.fallback_s = fallback
    est.fallback_why = {k: v for k, v in why.items() if k in fallback}
    est.clamped = clamped
    with np.errstate(divide="ignore", invalid="ignore"):
        est.fallback_fraction = sum(fallback.values(), np.zeros(shape)) / np.where(total > 0, total, 1.0)
    est.comm_s = sum((parts[n] for n in _comm_names(step) if n in parts), np.zeros(shape))
    return est


MOE_SHAPE = ("tokens", "hidden", "inter", "topk", "experts", "tp", "ep")


def _gemm_lookups(step: StepOps, system: MeasuredSystem) -> dict[int, Any]:
    """Every GEMM (and every fused MoE layer) of a step looked up in one table pass per precision: the points of all
    ops of that kind and precision concatenated. A lookup is point by point (and a MoE configuration is measured
    or not whatever its tokens), so this answers each op as its own lookup would. Per op id: (latency, status)
    over the step's shape, or the CalcInputError its precision raised."""
    shape = step.shape
    size = int(np.prod(shape))
    groups: dict[tuple[str, str], list] = {}
    for op in step.ops:
        if op.kind in ("gemm", "moe"):
            groups.setdefault((op.kind, op.dtype), []).append(op)
    out: dict[int, Any] = {}
    for (kind, dtype), ops in groups.items():
        names = ("m", "n", "k") if kind == "gemm" else MOE_SHAPE
        q = {a: np.concatenate([np.broadcast_to(np.asarray(o.shape[a], dtype=float), shape).ravel() for o in ops])
             for a in names}
        try:
            if kind == "gemm":
                lat, st = _kernel(lambda dt: gemm_kernel(system, q["m"], q["n"], q["k"], dt), dtype, GEMM_DTYPES)
            else:
                lat, st = _kernel(lambda dt: _moe_exact(system, q, dt), dtype)
        except CalcInputError as exc:
            out.update((id(o), exc) for o in ops)
            continue
        lat, st = np.asarray(lat).reshape(len(ops), size), np.asarray(st).reshape(len(ops), size)
        out.update((id(o), (lat[i].reshape(shape), st[i].reshape(shape))) for i, o in enumerate(ops))
    return out


def _moe_exact(system: MeasuredSystem, sh: dict, dt: str):
    """The fused MoE kernel in `dt`; refused (so the next spelling is tried) when this expert configuration was not
    measured in `dt` but might be in another spelling. Decided per (tp, ep) configuration, so that one op over
    several configurations (the planner's stacked splits) answers each as it would alone."""
    lat, st = moe_kernel(system, sh["tokens"], sh["hidden"], sh["inter"], sh["topk"], sh["experts"], sh["tp"], sh["ep"], dt,
                         "balanced")
    if dt != "fp8_block":
        return lat, st
    st = np.asarray(st)
    tp, ep = (np.broadcast_to(np.asarray(sh[k], dtype=float), st.shape) for k in ("tp", "ep"))
    unmeasured = np.zeros(st.shape, dtype=bool)
    for t, e in {(float(a), float(b)) for a, b in zip(tp.ravel(), ep.ravel())}:
        sel = (tp == t) & (ep == e)
        if np.all(st[sel] >= HOLE):
            unmeasured |= sel
    if np.all(unmeasured):
        raise CalcInputError("weight_format", "this expert configuration is not measured in fp8_block")
    if np.any(unmeasured):
        sub = {k: np.broadcast_to(np.asarray(sh[k], dtype=float), st.shape)[unmeasured] for k in MOE_SHAPE}
        try:
            lat2, st2 = moe_kernel(system, sub["tokens"], sub["hidden"], sub["inter"], sub["topk"], sub["experts"], sub["tp"],
                                   sub["ep"], "fp8", "balanced")
            lat, st = np.array(np.broadcast_to(lat, st.shape)), st.copy()
            lat[unmeasured], st[unmeasured] = lat2, st2
        except CalcInputError:
            pass
    return lat, st


def _comm_names(step: StepOps) -> set[str]:
    return {op.name for op in step.ops if op.kind in COMM_KINDS}


def _attention(step: StepOps, op, system: MeasuredSystem):
    sh = op.shape
    kv = table_dtype(op.dtype)
    kv = kv if kv in ("bfloat16", "fp8") else "bfloat16"
    if step.phase == "decode":
        return attention_kernel(system, "generation_attention_perf", sh["b"], sh["keys"], sh["heads"], sh["kv_heads"],
                                sh["head_dim"], kv, 0)
    p, s = np.asarray(sh["p"], dtype=float), np.asarray(sh["s"], dtype=float)
    lat, st = attention_kernel(system, "context_attention_perf", sh["b"], p, sh["heads"], sh["kv_heads"], sh["head_dim"], kv, 0)
    full = p * (p + 1.0) / 2.0
    ratio = np.asarray(sh["pairs"], dtype=float) / full
    st = np.where((s > 0) | (ratio != 1.0), np.maximum(st, HOLE), st)
    return lat * ratio, st


#: SGLang's decode runs a DeepSeek-style MoE layer's shared experts on a second CUDA stream beside the router and the
#: routed experts when the shared experts are not fused into the routed kernel (fusion is off under expert parallelism)
#: and the step holds at most this many tokens (sglang/srt/models/deepseek_v2.py, DeepseekV2MoE.forward: the
#: dual-stream path and its DUAL_STREAM_TOKEN_THRESHOLD; the model's fusion check disables fusion when ep > 1)
DUAL_STREAM_TOKENS = 1024


def runs_dual_stream(step: StepOps, framework: str | None) -> bool:
    """Whether SGLang runs this step's shared experts beside its routed ones: a decode step of a model with shared
    experts, expert parallel without DP attention (its steps of at most DUAL_STREAM_TOKENS tokens)."""
    return (framework == "sglang" and step.phase == "decode" and step.split.ep > 1 and not step.split.dp_attention
            and any(op.name.startswith("shared_") for op in step.ops))


def dual_stream_hidden_s(step: StepOps, est: StepEstimate, framework: str | None) -> np.ndarray:
    """Seconds of `est` that SGLang's dual-stream MoE hides in a decode step (`runs_dual_stream`): the shorter of
    the shared experts and the router + routed experts (they run side by side) at most DUAL_STREAM_TOKENS tokens;
    0 elsewhere."""
    total = np.asarray(est.total_s, dtype=float)
    zero = np.zeros(total.shape)
    if not runs_dual_stream(step, framework):
        return zero
    part = lambda name: np.asarray(est.parts_s.get(name, zero), dtype=float)  # noqa: E731
    shared = part("shared_gate_up") + part("shared_down")
    routed = part("router") + part("moe_experts")
    tokens = np.broadcast_to(np.asarray(step.batch, dtype=float) * np.asarray(step.new_tokens, dtype=float), total.shape)
    return np.where(tokens <= DUAL_STREAM_TOKENS, np.minimum(shared, routed), 0.0)


__all__ = ["Bound", "COMM_KINDS", "DUAL_STREAM_TOKENS", "NOT_MODELLED", "StepEstimate", "bound_of",
           "dual_stream_hidden_s", "measured_of", "op_bound_s", "runs_dual_stream"]
