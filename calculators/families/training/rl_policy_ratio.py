"""`rl-policy-ratio`: importance ratios between the current, old (proximal) and behaviour policies from
log-probabilities, and what clipping sees.
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    CalcRequest, Calculator, Chart, first, Fraction, Lookup, num, Outputs, OutSweep, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.families.training._rl import rl_out as _out

LogP = Annotated[float, Field(ge=-1e4, le=0, allow_inf_nan=False)]


class PolicyRatioRequest(CalcRequest):
    logp_current: LogP | Annotated[list[LogP], Field(min_length=1, max_length=100_000)] = Field(
        description="Log-probability of the sampled token under the policy being trained (π_θ), in [-10000, 0]. Sweepable.", examples=[-3.0])
    logp_behavior: float = Field(ge=-1e4, le=0, description="Log-probability under the policy that generated the sample (μ, recorded at rollout).", examples=[-3.0])
    logp_old: float | None = Field(None, ge=-1e4, le=0, description="Log-probability under the proximal/old policy π_old (recomputed by the trainer), if different from μ.", examples=[-3.25])
    clip_epsilon: Fraction | None = Field(None, description="PPO clip range ε: ratios outside [1 − ε, 1 + ε] are clipped.", examples=[0.2])


#: a ratio, or one per token when `logp_current` is a list (null above the float64 range)


class RlPolicyRatioOutputs(Outputs):
    """Outputs of rl-policy-ratio (dimensionless ratios); lists where `logp_current` is a list."""

    behavior_ratio: OutSweep = Field(description="exp(log π_θ − log μ): current over behaviour policy.")
    update_ratio: OutSweep = Field(None, description="exp(log π_θ − log π_old): current over the old policy "
                                         "(with logp_old).")
    behavior_weight: float | None = Field(None, description="exp(log π_old − log μ): old over behaviour policy (with "
                                          "logp_old).")
    product: OutSweep = Field(None, description="update ratio × behaviour weight (= the behaviour ratio "
                                    "unclipped; with logp_old).")
    misattributed_ratio: OutSweep = Field(None, description="The ratio obtained when π_old's log-probability is "
                                                "taken for μ's, i.e. the update ratio (with logp_old).")
    clip_range: list[float] | None = Field(None, description="[1 − ε, 1 + ε] (with clip_epsilon).")
    behavior_ratio_clipped: OutSweep = Field(None, description="Behaviour ratio clipped to the range.")
    behavior_ratio_outside: bool | list[bool] | None = Field(None, description="The behaviour ratio lies outside the "
                                                             "range.")
    update_ratio_clipped: OutSweep = Field(None, description="Update ratio clipped to the range (with logp_old).")
    update_ratio_outside: bool | list[bool] | None = Field(None, description="The update ratio lies outside the range "
                                                           "(with logp_old).")


def compute_ratio(req: PolicyRatioRequest, lookup: Lookup) -> Result:
    with np.errstate(over="ignore", invalid="ignore"):
        return _ratio(req)


def _ratio(req: PolicyRatioRequest) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    cur = np.asarray(req.logp_current, dtype=float)
    beh = req.logp_behavior
    r_beh = res.step("behaviour ratio", "r = exp(log π_θ − log μ)", f"exp({num(first(cur))} − ({num(beh)}))", np.exp(cur - beh), "")
    o = {"behavior_ratio": _out(r_beh)}
    if req.logp_old is not None:
        old = req.logp_old
        r_up = res.step("update ratio", "r_upd = exp(log π_θ − log π_old)", f"exp({num(first(cur))} − ({num(old)}))", np.exp(cur - old), "")
        # np.exp, not math.exp: a log-probability gap above ~709 overflows float64 to inf (reported as null)
        w = res.step("behaviour correction weight", "w = exp(log π_old − log μ)", f"exp({num(old)} − ({num(beh)}))", np.exp(old - beh), "")
        o.update({"update_ratio": _out(r_up), "behavior_weight": _out(w), "product": _out(r_up * w),
                  "misattributed_ratio": _out(r_up)})
    if req.clip_epsilon is not None:
        eps = req.clip_epsilon
        lo, hi = 1 - eps, 1 + eps
        o["clip_range"] = [lo, hi]
        o["behavior_ratio_clipped"] = _out(np.clip(r_beh, lo, hi))
        o["behavior_ratio_outside"] = _out((r_beh < lo) | (r_beh > hi))
        if req.logp_old is not None:
            r_up = np.exp(cur - req.logp_old)
            o["update_ratio_clipped"] = _out(np.clip(r_up, lo, hi))
            o["update_ratio_outside"] = _out((r_up < lo) | (r_up > hi))
    res.outputs = o
    res.assume(
        "Ratios use per-token log-probabilities; which policy each log-probability belongs to matters: a recomputed "
        "log-probability is π_old, not the behaviour policy μ that sampled the token.",
        "Without clipping r_upd × w equals the behaviour ratio; with clipping the two placements are not equivalent.",
        "A ratio above the float64 range (a log-probability gap over about 709) is reported as null.",
    )
    res.headline = _ratio_headline(req, o)
    return res


def _ratio_headline(req: PolicyRatioRequest, o: dict) -> str:
    """The importance ratio against the behaviour policy, and the update ratio and clipping (a sweep: its first point)."""
    n = hf.n_points(req.logp_current)
    text = (f"The importance ratio against the behaviour policy is {hf.fmt_num(o.get('behavior_ratio'), 4)}"
            f" for log π_θ = {hf.fmt_num(req.logp_current, 4)}")
    if o.get("update_ratio") is not None or req.logp_old is not None:
        text += (f"; against π_old it is {hf.fmt_num(o.get('update_ratio'), 4)}, times a behaviour weight of "
                 f"{hf.fmt_num(o.get('behavior_weight'), 4)}")
    if "behavior_ratio_outside" in o:
        outside = hf.first_value(o["behavior_ratio_outside"])
        text += (f"; with ε = {hf.fmt_num(req.clip_epsilon)} the behaviour ratio is "
                 f"{'clipped to ' + hf.fmt_num(o.get('behavior_ratio_clipped'), 4) if outside else 'inside the clip range'}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [


    Calculator(
        name="rl-policy-ratio",
        profile=Profile(7.2e-07, 781, 120),
        family="rl",
        title="RL policy ratios: behaviour, proximal and update",
        summary="Importance ratios from log-probabilities of the current, old (proximal) and behaviour policies, their "
                "product, and what PPO clipping sees; shows the error of using a recomputed log-probability as μ.",
        description="r = exp(log π_θ − log μ); decoupled: r_upd = exp(log π_θ − log π_old), w = exp(log π_old − log μ), "
                    "r_upd·w = r unclipped. Clipping applies to one of them and the placements are not equivalent.",
        request_model=PolicyRatioRequest,
        compute=compute_ratio,
        outputs_model=RlPolicyRatioOutputs,
        example={"logp_current": [-3.5, -3.25, -3.0, -2.75], "logp_behavior": -3.0, "logp_old": -3.25, "clip_epsilon": 0.2},
        cases=("rl-state-and-reproducibility",),
        sweepable=("logp_current",),
        chart=Chart(x="logp_current", y=("behavior_ratio", "update_ratio"), x_label="log π_θ", y_label="ratio"),
    ),
]
