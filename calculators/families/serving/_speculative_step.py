"""speculative-decoding's target model on hardware: the plain decode step and the verify pass from the step model.

With a model (or model_config) and a hardware id, the target's plain decode step (one new token per sequence) and its
verify pass over k + 1 positions per sequence are each one step of the step model (`calculators.perf.step_times`):
one rank's kernels (bound, and measured where the hardware has tables) plus the tensor-parallel all-reduces over the
hardware's link. The verify pass is a multi-token step after the cached context: every weight is read once for all
k + 1 positions, attention reads the cache once, and logits are computed at every position (each draft is checked
against them). The plain step is the same step the deployment planner, serving-cost and tp-overhead give.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from calculators.domain import hardware_spec, layout_of, model_record, note_scope, resolve_format, shipped_weight_formats
from calculators.framework import CalcInputError, Lookup, Outputs, OutNum, OutSweep, Result, first, fmt_s, num, out
from calculators.perf import estimate_system, rates_from_spec, step_times, tp_link


def expected_tokens(alpha: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(1 − α^(k+1)) / (1 − α), with the limit k + 1 at α = 1."""
    alpha = np.asarray(alpha, dtype=float)
    k = np.asarray(k, dtype=float)
    one = alpha >= 1.0
    safe = np.where(one, 0.5, alpha)
    val = -np.expm1((k + 1) * np.log(np.where(safe > 0, safe, 1.0))) / (1.0 - safe)
    val = np.where(safe > 0, val, 1.0)
    return np.where(one, k + 1.0, val)


#: request fields that only mean something with a model on hardware
STEP_FIELDS = ("tp", "ep", "batch", "context_tokens", "weight_format", "kv_format", "estimate", "link")


class SpeculativeTargetStepOut(Outputs):
    """The target model's steps from the step model (with a model and hardware)."""

    model: str = Field(description="The target model.")
    hardware: str = Field(description="Hardware id.")
    tp: int = Field(description="Tensor-parallel degree.")
    ep: int = Field(description="Expert-parallel degree.")
    batch: int = Field(description="Sequences decoded together.")
    context_tokens: int = Field(description="Tokens cached per sequence before the step.")
    estimate: Literal["bound", "measured"] = Field(description="Which estimate target_step_s and the verify cost use.")
    step_s: OutNum = Field(description="The plain decode step used as target_step_s, s.")
    bound_s: OutNum = Field(description="Plain step: bound of one rank's kernels + TP all-reduces, s.")
    measured_s: OutNum = Field(None, description="Plain step: measured kernels + the same all-reduces, s.")
    comm_s: OutNum = Field(description="Plain step: TP all-reduces over the link (α–β), s.")
    verify_step_s: OutSweep = Field(description="Verify pass over k + 1 positions per sequence, s (per draft length).")
    verify_bound_s: OutSweep = Field(description="Verify pass, bound + all-reduces, s.")
    verify_measured_s: OutSweep = Field(None, description="Verify pass, measured kernels + all-reduces, s.")
    link: str | None = Field(None, description="Link of the TP group (null at TP 1).")
    measured_kernels: dict[str, str] | None = Field(None, description="Measured system, framework and version.")


@dataclass
class TargetSteps:
    step_s: float
    verify_s: np.ndarray          # per point of the request's draft lengths
    verify_search_s: np.ndarray   # per k of the best-k search
    outputs: dict


def target_steps(req, lookup: Lookup, res: Result, k: np.ndarray, k_search: np.ndarray) -> TargetSteps | None:
    """The plain and verify steps of the target (None when the request names no model and no hardware)."""
    has_model = req.model is not None or req.hf_config is not None
    if not has_model and req.hardware is None:
        stray = [f for f in STEP_FIELDS if f in req.model_fields_set]
        if stray:
            raise CalcInputError(stray[0], "describes the target model's step: give a model (or model_config) and hardware")
        return None
    if not has_model:
        raise CalcInputError("model", "the target step needs a model (or model_config) beside the hardware")
    if req.hardware is None:
        raise CalcInputError("hardware", "the target step of a model needs a hardware id")
    if req.target_step_s is not None:
        raise CalcInputError("target_step_s", "give target_step_s or a model with hardware (which computes it), not both")
    rec = model_record(req, lookup, res)
    lay = layout_of(rec, "model" if req.model is not None else "model_config")
    hw = hardware_spec(lookup, req.hardware, "hardware")
    note_scope(res, hw)
    for note in lay.notes:
        res.assume(note)
    if req.weight_format is not None:
        wf = resolve_format(req.weight_format, "weight_format").name
        res.assume(f"Target weights: {wf} (given).")
    else:
        shipped = shipped_weight_formats(rec.weight_dtype)
        wf = shipped.for_component if shipped is not None else "bf16"
        res.assume(f"Target weights: as published, {shipped.label} ({shipped.note})." if shipped is not None else
                   "Target weights: bf16 (the model states no published format; give weight_format).")
    kf = resolve_format(req.kv_format, "kv_format", "bf16")
    system = estimate_system(lookup, hw, req.estimate)
    link, lid = tp_link(lookup, res, req.link, hw, req.tp)
    kk = np.asarray(k, dtype=float)
    new = np.concatenate([[1.0], kk.ravel() + 1.0, np.asarray(k_search, dtype=float) + 1.0])
    st = step_times(lay, rates_from_spec(hw), "decode", req.batch, new, req.context_tokens, req.tp, req.ep, wf, kf,
                    system, link)
    use_measured = st.measured_s is not None
    t = st.measured_s if use_measured else st.bound_s
    n = kk.size
    plain = float(t[0])
    # a verify pass does the plain step's work and more: a measured one below it is interpolation between
    # measured shapes, and is taken as the plain step
    if use_measured and np.any(t[1:] < plain):
        res.assume("Where the measured tables put a verify pass below the plain step (interpolation between measured "
                   "GEMM shapes), it is taken as the plain step (v = 1).")
    t = np.concatenate([[plain], np.maximum(t[1:], plain)]) if use_measured else t
    verify, search = t[1:1 + n].reshape(kk.shape), t[1 + n:]
    kind = "measured" if use_measured else "bound"
    res.step("target decode step", "t_step = one rank's kernels (" + ("measured" if use_measured else "peak-rate bound")
             + ") + TP all-reduces, 1 new token per sequence (step model)",
             f"{rec.label} on {req.tp} × {hw.id}, batch {req.batch}, context {req.context_tokens}: "
             f"{fmt_s(float(st.kernels_measured_s[0] if use_measured else st.kernels_bound_s[0]))} + {fmt_s(float(st.comm_s[0]))}",
             plain, "s")
    res.step("verify pass", "t_verify = the same step over k + 1 new tokens per sequence", f"k = {num(first(kk))}: "
             f"{fmt_s(first(verify))}", verify, "s")
    res.assume(f"Target step from the step model ({kind}): {rec.label} on {req.tp} × {hw.id}"
               + (f" (EP {req.ep})" if req.ep > 1 else "") + f", batch {req.batch}, {req.context_tokens} tokens of "
               "context. The verify pass is the same step over k + 1 new tokens per sequence: weights read once, the "
               "cache read once, logits at every position; its ratio to the plain step is the verify cost v unless "
               "verify_cost_ratio is given.")
    o = {"model": rec.id, "hardware": hw.id, "tp": req.tp, "ep": req.ep, "batch": req.batch,
         "context_tokens": req.context_tokens, "estimate": kind, "step_s": plain, "bound_s": float(st.bound_s[0]),
         "comm_s": float(st.comm_s[0]), "verify_step_s": out(verify), "verify_bound_s": out(st.bound_s[1:1 + n].reshape(kk.shape)),
         "link": lid}
    if use_measured:
        o.update(measured_s=float(st.measured_s[0]), verify_measured_s=out(verify),
                 measured_kernels={"system": system.name, "framework": str(st.framework), "version": str(st.version)})
        res.cite({"record": system.name, "field": "measured kernel tables", "value": None,
                  "source": "aiconfigurator-core-0.12.0", "locator": ", ".join(sorted(system.tables))})
    return TargetSteps(plain, verify, search, o)


__all__ = ["STEP_FIELDS", "SpeculativeTargetStepOut", "TargetSteps", "target_steps"]
