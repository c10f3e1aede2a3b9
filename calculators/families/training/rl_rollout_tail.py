"""`rl-rollout-tail`: long-tail rollouts: expected batch wall time with stragglers, racing copies and the bias they
add, and over-sampling counts.
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, FractionSweep, Lookup, NonNegFloat, num,
    Outputs, OutSweep, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.families.training._rl import join as _join, rl_out as _out

OversampleFactor = Annotated[float, Field(ge=1, le=100, allow_inf_nan=False)]


class Oversample(CalcRequest):
    prompts: Annotated[int, Field(ge=1, le=10**9)] = Field(description="Prompts per step wanted (at most 1e9).", examples=[128])
    responses_per_prompt: Annotated[int, Field(ge=1, le=10**4)] = Field(description="Responses per prompt wanted (a group; at most 10,000).", examples=[8])
    prompt_factor: OversampleFactor = Field(1.0, description="Over-sampling factor on prompts, 1 to 100.", examples=[1.25])
    response_factor: OversampleFactor = Field(1.0, description="Over-sampling factor on responses per prompt, 1 to 100.", examples=[1.25])


class RolloutTailRequest(CalcRequest):
    long_fraction: FractionSweep | None = Field(None, description="Probability that a rollout is a long one (straggler). Sweepable.", examples=[0.5])
    short_s: NonNegFloat | None = Field(None, description="Duration of a short rollout, seconds.", examples=[1])
    long_s: NonNegFloat | None = Field(None, description="Duration of a long rollout, seconds.", examples=[10])
    race_copies: Annotated[int, Field(ge=1, le=1024)] = Field(1, description="Copies started per sample (at most 1024); the first to finish is kept and the rest cancelled.", examples=[2])
    batch: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Rollouts a synchronous step waits for (at most 1e9).", examples=[64])
    oversample: Oversample | None = None


#: a number, or one per point when `long_fraction` is swept (null where not finite)


class RlRolloutTailOversampleOut(Outputs):
    submitted_prompts: int = Field(description="⌈prompts × prompt_factor⌉, prompts.")
    submitted_responses_per_prompt: int = Field(description="⌈responses × response_factor⌉ per prompt.")
    submitted: int = Field(description="Rollouts submitted, prompts × responses per prompt.")
    target: int = Field(description="Rollouts wanted, prompts × responses_per_prompt.")
    extra_fraction: float | None = Field(description="submitted / target − 1, a fraction.")


class RlRolloutTailOutputs(Outputs):
    """Outputs of rl-rollout-tail; lists where `long_fraction` is swept. The timing keys need long_fraction with
    short_s and long_s."""

    single_expected_s: OutSweep = Field(None, description="Mean rollout time, p × long + (1 − p) × short, s.")
    race_expected_s: OutSweep = Field(None, description="Mean time of the first of race_copies copies, s.")
    race_slot_s: OutSweep = Field(None, description="Slot time the race holds, copies × winner's time, s.")
    kept_long_fraction: OutSweep = Field(None, description="Share of kept samples that are long, p^copies.")
    long_fraction_shift: OutSweep = Field(None, description="kept long share − p: the bias racing adds.")
    batch_expected_wall_s: OutSweep = Field(None, description="Expected wait of a synchronous batch for its "
                                                  "slowest rollout, s.")
    batch_idle_fraction: OutSweep = Field(None, description="1 − mean rollout / batch wall time, a fraction.")
    probability_batch_has_long: OutSweep = Field(None, description="Probability that the batch holds at least "
                                                       "one slower rollout.")
    oversample: RlRolloutTailOversampleOut | None = Field(None, description="Over-sampling counts (with oversample).")


def compute_tail(req: RolloutTailRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    o: dict = {}
    if req.long_fraction is not None:
        if req.short_s is None or req.long_s is None:
            raise CalcInputError("short_s" if req.short_s is None else "long_s", "give both short_s and long_s")
        p = broadcast({"long_fraction": req.long_fraction})["long_fraction"]
        s, l, r, n = req.short_s, req.long_s, req.race_copies, req.batch
        single = res.step("expected rollout time", "p × long + (1 − p) × short", f"{num(first(p))} × {num(l)} + (1 − {num(first(p))}) × {num(s)}", p * l + (1 - p) * s, "s")
        kept_long = p ** r
        race = res.step("expected time with racing copies", "long × p^r + short × (1 − p^r)", f"{num(l)} × {num(first(p))}^{r} + {num(s)} × (1 − {num(first(p))}^{r})",
                        l * kept_long + s * (1 - kept_long), "s")
        lo, hi = min(s, l), max(s, l)
        p_hi = p if l >= s else 1 - p
        with np.errstate(divide="ignore"):
            any_hi = np.where(p_hi >= 1, 1.0, -np.expm1(n * np.log1p(-np.where(p_hi >= 1, 0.0, p_hi))))
        batch = res.step("synchronous batch waits for its slowest", "long − (long − short) × (1 − p)^n",
                         f"{num(hi)} − ({num(hi)} − {num(lo)}) × (1 − {num(first(p_hi))})^{n}", lo + (hi - lo) * any_hi, "s")
        o.update({"single_expected_s": _out(single), "race_expected_s": _out(race), "race_slot_s": _out(r * race),
                  "kept_long_fraction": _out(kept_long), "long_fraction_shift": _out(kept_long - p),
                  "batch_expected_wall_s": _out(batch), "batch_idle_fraction": _out(np.where(batch > 0, 1 - single / np.where(batch > 0, batch, 1.0), 0.0)),
                  "probability_batch_has_long": _out(any_hi)})
    if req.oversample is not None:
        ov = req.oversample
        pr = math.ceil(ov.prompts * ov.prompt_factor - 1e-9)
        rp = math.ceil(ov.responses_per_prompt * ov.response_factor - 1e-9)
        sub = pr * rp
        target = ov.prompts * ov.responses_per_prompt
        res.step("submitted rollouts", "ceil(prompts × f_p) × ceil(responses × f_r)", f"{pr} × {rp}", sub, "rollouts")
        o["oversample"] = {"submitted_prompts": pr, "submitted_responses_per_prompt": rp, "submitted": sub,
                           "target": target, "extra_fraction": sub / target - 1}
    if not o:
        raise CalcInputError("long_fraction", "give long_fraction with short_s and long_s, or oversample")
    res.outputs = o
    res.assume(
        "Two rollout lengths (short, long), independent draws; a teaching model of a long tail.",
        "Racing: r copies per sample start together, the first finisher is kept and the others are cancelled at once, so "
        "slot-seconds = r × the winner's time. Keeping the first finisher biases the kept samples toward short ones "
        "(long is kept with probability p^r instead of p).",
        "Slots are not GPU-seconds under continuous batching; cancelled work still used KV and compute until cancelled.",
    )
    res.headline = _tail_headline(req, o)
    return res


def _tail_headline(req: RolloutTailRequest, o: dict) -> str:
    """Expected rollout time with and without racing, and the batch wait (a sweep: its first point)."""
    n = hf.n_points(req.long_fraction)
    parts = []
    if o.get("single_expected_s") is not None:
        text = (f"With {hf.fmt_pct(req.long_fraction)} long rollouts a rollout takes {hf.fmt_seconds(o['single_expected_s'])} "
                f"on average")
        if req.race_copies > 1:
            text += (f", {hf.fmt_seconds(o.get('race_expected_s'))} racing {req.race_copies} copies "
                     f"({hf.fmt_seconds(o.get('race_slot_s'))} of slots)")
        text += (f", and a synchronous batch of {req.batch} waits {hf.fmt_seconds(o.get('batch_expected_wall_s'))} "
                 f"({hf.fmt_pct(o.get('batch_idle_fraction'))} idle)")
        if n > 1:
            text += f" (first of {n:,} points)"
        parts.append(text)
    ov = o.get("oversample")
    if isinstance(ov, dict):
        parts.append(f"over-sampling submits {hf.fmt_count(ov.get('submitted'))} rollouts for {hf.fmt_count(ov.get('target'))} "
                     f"wanted ({hf.fmt_pct(ov.get('extra_fraction'))} extra)")
    return _join(parts) or hf.sentence("No section was computed")


CALCULATORS = [


    Calculator(
        name="rl-rollout-tail",
        profile=Profile(8.1e-07, 858, 122),
        family="rl",
        title="RL rollout tail: stragglers, racing copies, over-sampling",
        summary="Expected wall time of a synchronous rollout batch with a long tail, what racing copies save and the "
                "sampling bias they add, and how many rollouts over-sampling submits.",
        description="Two-point model: a rollout is long with probability p. A batch of n waits for its slowest: E = short "
                    "+ (long − short)·(1 − (1 − p)^n). Racing r copies and keeping the first finisher gives E[min] = long·p^r "
                    "+ short·(1 − p^r) and uses r × that in slot-seconds, but keeps long samples with probability p^r instead "
                    "of p. Over-sampling submits ceil(P·f_p) × ceil(R·f_r) rollouts for a target of P·R.",
        request_model=RolloutTailRequest,
        compute=compute_tail,
        outputs_model=RlRolloutTailOutputs,
        example={"long_fraction": [0.01, 0.05, 0.1, 0.25, 0.5], "short_s": 1, "long_s": 10, "race_copies": 2, "batch": 64,
                 "oversample": {"prompts": 128, "responses_per_prompt": 8, "prompt_factor": 1.25, "response_factor": 1.25}},
        cases=("rollout-tail-and-sampling",),
        sweepable=("long_fraction",),
        chart=Chart(x="long_fraction", y=("single_expected_s", "race_expected_s", "batch_expected_wall_s"), x_label="long fraction p", y_label="seconds"),
    ),
]
