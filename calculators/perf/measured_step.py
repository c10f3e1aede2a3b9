"""A measured estimate of one decode or prefill step: the step model's operations on one rank
(`calculators.perf.step_model`), each looked up in measured tables by `calculators.perf.step_eval`, summed the way
the step runs them one after another. `decode_step` / `prefill_step` take a `Layout` (any model) or an `Arch`, and
tp (and ep) as scalars or arrays: each degree asked is its own operation list.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from calculators.framework import CalcInputError
from calculators.perf.measured_tables import DEFAULT_FRAMEWORK, MeasuredSystem
from calculators.perf.step_eval import NOT_MODELLED, StepEstimate, measured_of
from calculators.perf.step_model import Split, step_ops

def _merge(parts: list[tuple[np.ndarray, StepEstimate]], shape: tuple[int, ...]) -> StepEstimate:
    """One estimate over the whole query from estimates of disjoint masks (one per tensor-parallel degree)."""
    first = parts[0][1]

    def spread(get, fill=0.0, dtype=float):
        out = np.full(shape, fill, dtype=dtype)
        for mask, est in parts:
            out[mask] = get(est)        # each estimate holds the points of its mask, in order
        return out

    def spread_dict(attr, fill=0.0, dtype=float):
        names = sorted({k for _, e in parts for k in getattr(e, attr)})
        return {k: spread(lambda e, k=k: getattr(e, attr).get(k, fill), fill, dtype) for k in names}

    est = StepEstimate(first.phase, spread(lambda e: e.total_s), spread_dict("parts_s"),
                       spread_dict("flags", "none", object), spread(lambda e: e.bound_s), spread_dict("parts_bound_s"),
                       spread(lambda e: e.extrapolated_fraction), first.framework, first.version,
                       {k: v for _, e in parts for k, v in e.tables.items()})
    est.fallback_s = spread_dict("fallback_s")
    est.fallback_why = {k: v for _, e in parts for k, v in e.fallback_why.items()}
    est.fallback_fraction = spread(lambda e: e.fallback_fraction)
    est.comm_s = spread(lambda e: e.comm_s)
    return est


def _step(model, system: MeasuredSystem, phase: str, batch: Any, new_tokens: Any, context_tokens: Any, tp: Any,
          weight_dtype: Any, kv_dtype: str, ep: Any = 1, dp_attention: bool = False,
          framework: str = DEFAULT_FRAMEWORK) -> StepEstimate:
    """The step model's operations for each tensor-parallel degree asked, evaluated on `framework`'s tables."""
    from calculators.domain import Layout, layout_from_arch

    lay = model if isinstance(model, Layout) else layout_from_arch(model)
    b, p, c, t, e = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in (batch, new_tokens, context_tokens, tp, ep)])
    if np.any(b < 1) or np.any(p < 1) or np.any(c < 0) or np.any(t < 1):
        raise CalcInputError("batch", "batch, tokens and tp must be ≥ 1 and context_tokens ≥ 0")
    shape = b.shape
    parts = []
    for tv, ev in sorted({(float(x), float(y)) for x, y in zip(t.ravel(), e.ravel())}):
        mask = (t == tv) & (e == ev)
        sel = (lambda a: a[mask]) if shape else (lambda a: a)
        split = Split(tp=int(tv), ep=int(ev), dp_attention=dp_attention)
        step = step_ops(lay, phase, sel(b), sel(p), sel(c), split, weight_dtype, kv_dtype)
        parts.append((mask, measured_of(step, system, framework)))
    if not shape:
        return parts[0][1]
    return _merge(parts, shape)


def decode_step(model, system: MeasuredSystem, batch: Any = 1, context_tokens: Any = 0, tp: Any = 1,
                weight_dtype: Any = "bf16", kv_dtype: str = "bf16", ep: Any = 1, dp_attention: bool = False,
                framework: str = DEFAULT_FRAMEWORK) -> StepEstimate:
    """Measured estimate of one decode step of a `Layout` (or `Arch`): `batch` sequences each add one token after
    `context_tokens` cached ones, on one of `tp` ranks with `ep` expert-parallel ranks (all broadcast as arrays),
    with `framework`'s kernels (vllm, sglang or trtllm). `weight_dtype` is a format name or a function component →
    format (a mixed checkpoint)."""
    return _step(model, system, "decode", batch, 1, context_tokens, tp, weight_dtype, kv_dtype, ep, dp_attention,
                 framework)


def prefill_step(model, system: MeasuredSystem, batch: Any = 1, tokens: Any = 1024, tp: Any = 1,
                 weight_dtype: Any = "bf16", kv_dtype: str = "bf16", context_tokens: Any = 0, ep: Any = 1,
                 dp_attention: bool = False, framework: str = DEFAULT_FRAMEWORK) -> StepEstimate:
    """Measured estimate of one prefill step: `batch` prompts of `tokens` tokens each (after `context_tokens`
    cached ones: attention scaled by causal pairs and flagged extrapolated); logits for the last position only."""
    return _step(model, system, "prefill", batch, tokens, context_tokens, tp, weight_dtype, kv_dtype, ep, dp_attention,
                 framework)
