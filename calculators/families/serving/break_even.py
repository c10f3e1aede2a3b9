"""Break-even arithmetic: when does a one-off cost pay back, and where do two options cross?

Two calculators:
- `break-even`: a change costs `one_off` once and changes the cost of every later use (a search
  or capture that is amortised, a reconfiguration, a codec that trades transfer time for decode
  time). Outputs the uses needed to pay back, the net benefit after N uses, the payback time, and,
  when per-use costs depend on a rate (bytes ÷ bandwidth), the break-even rate.
- `mixture-choice`: options whose cost depends on whether an uncertain event happens (cache still
  valid, request of kind C); expected cost against the event's probability, the probabilities where
  two options cross, and a quantile of the two-point outcome (a mean can hide a missed SLO).
"""
from __future__ import annotations

import math


from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    aligned as _aligned, broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, FractionSweep, Lookup,
    MAX_LIST_LENGTH, MAX_VALUE, NonNegFloat, NonNegFloatSweep, num, out, OutCountSweep, Outputs, OutSweep,
    PosFloatSweep, Profile, quiet, request_inputs, Result, whole_numbers as _ints,
)
from calculators.framework import headline as hf


#: a signed cost: a saving may be negative (the change makes each use slower)
SignedFloat = Annotated[float, Field(ge=-MAX_VALUE, le=MAX_VALUE, allow_inf_nan=False)]
SignedSweep = SignedFloat | Annotated[list[SignedFloat], Field(min_length=1, max_length=MAX_LIST_LENGTH)]


# =========================================================================== break-even

class BreakEvenRequest(CalcRequest):
    """A one-off cost against a per-use change. Costs are in one unit (`unit`: seconds by default, or USD, J …).

    Give the per-use change as `saving_per_use`, or as costs before/after. A per-use cost may have a fixed part
    (`cost_per_use_*`) and a part proportional to an amount moved at `rate` (`amount_per_use_*` / rate), which is
    what makes a break-even rate (e.g. the bandwidth below which compressing pays).
    """

    one_off: NonNegFloatSweep = Field(0.0, description="Cost paid once for the change (search, capture, transition), in "
                                      "`unit`. Sweepable.", examples=[0.012])
    saving_per_use: SignedSweep | None = Field(None, description="Cost saved on each use, in `unit` (negative: "
                                                       "each use costs more). Sweepable.", examples=[0.00018])
    cost_per_use_before: NonNegFloatSweep = Field(0.0, description="Fixed cost of one use without the change. Sweepable.")
    cost_per_use_after: NonNegFloatSweep = Field(0.0, description="Fixed cost of one use with the change (e.g. decode "
                                                 "time). Sweepable.")
    amount_per_use_before: NonNegFloat | None = Field(None, description="Amount moved per use without the change "
                                                      "(bytes), costed at `rate`.", examples=[100663296])
    amount_per_use_after: NonNegFloat | None = Field(None, description="Amount moved per use with the change (bytes).",
                                                     examples=[25165824])
    rate: PosFloatSweep | None = Field(None, description="Amount per unit of cost (bytes/s when costs are seconds). "
                                       "Sweepable.", examples=[[1.25e8, 2.5e10]])
    uses: NonNegFloatSweep | None = Field(None, description="Uses to evaluate (remaining steps, calls). Sweepable.",
                                          examples=[[50, 100]])
    uses_per_s: NonNegFloat | None = Field(None, description="Uses per second, to turn the break-even count into a "
                                           "payback time.")
    unit: str = Field("s", max_length=20, description="Unit of the costs (label only).")


@quiet
def break_even_compute(req: BreakEvenRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    has_amounts = req.amount_per_use_before is not None or req.amount_per_use_after is not None
    has_costs = "cost_per_use_before" in req.model_fields_set or "cost_per_use_after" in req.model_fields_set
    if req.saving_per_use is not None and (has_amounts or has_costs):
        raise CalcInputError("saving_per_use", "give saving_per_use, or costs/amounts before and after, not both")
    if req.saving_per_use is None and not (has_amounts or has_costs):
        raise CalcInputError("saving_per_use", "give saving_per_use, or costs/amounts before and after")
    if req.rate is not None and not has_amounts:
        raise CalcInputError("rate", "rate only applies to amount_per_use_before/after")

    named = {"one_off": req.one_off}
    for k in ("saving_per_use", "rate", "uses"):
        if getattr(req, k) is not None:
            named[k] = getattr(req, k)
    if req.saving_per_use is None:
        named["cost_per_use_before"] = req.cost_per_use_before
        named["cost_per_use_after"] = req.cost_per_use_after
    x = _aligned(broadcast(named))
    u = req.unit
    one_off = x["one_off"]
    ab = req.amount_per_use_before or 0.0
    aa = req.amount_per_use_after or 0.0
    outputs: dict = {}
    saving = before = after = None
    if req.saving_per_use is not None:
        saving = x["saving_per_use"]
        res.step("saving per use", "s (given)", num(first(saving)), saving, u)
    elif not has_amounts or "rate" in x:
        before = x["cost_per_use_before"] + (ab / x["rate"] if has_amounts else 0.0)
        after = x["cost_per_use_after"] + (aa / x["rate"] if has_amounts else 0.0)
        if has_amounts:
            res.step("cost per use", "before = c_b + amount_b / rate; after = c_a + amount_a / rate",
                     f"{num(first(x['cost_per_use_before']))} + {num(ab)} / {num(first(x['rate']))} = {num(first(before))}; "
                     f"{num(first(x['cost_per_use_after']))} + {num(aa)} / {num(first(x['rate']))} = {num(first(after))}",
                     after, u)
        saving = before - after
        res.step("saving per use", "s = before − after", f"{num(first(before))} − {num(first(after))}", saving, u)
        outputs["cost_per_use_before"] = out(before)
        outputs["cost_per_use_after"] = out(after)

    if saving is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            be = np.where(saving > 0, one_off / np.where(saving > 0, saving, 1.0),
                          np.where((one_off == 0) & (saving == 0), 0.0, np.inf))
        res.step("break-even uses", "n* = one_off / s", f"{num(first(one_off))} / {num(first(saving))}", be, "uses")
        # first whole use count with a strictly positive net benefit (null when it never pays)
        finite = np.isfinite(be)
        near = np.round(np.where(finite, be, 0.0))
        exact = finite & (np.abs(np.where(finite, be, 0.0) - near) <= 1e-9 * np.maximum(1.0, np.abs(near)))
        first_win = np.where(finite & (saving > 0), np.where(exact, near, np.floor(np.where(finite, be, 0.0))) + 1.0, np.inf)
        res.step("first use that pays", "smallest whole n with n·s > one_off", f"floor({num(first(be))}) + 1",
                 first_win, "uses")
        outputs.update({"saving_per_use": out(saving), "break_even_uses": out(be),
                        "first_beneficial_use": _ints(first_win)})
        if req.uses_per_s is not None and req.uses_per_s > 0:
            payback = be / req.uses_per_s
            res.step("payback time", "n* / uses_per_s", f"{num(first(be))} / {num(req.uses_per_s)}", payback, "s")
            outputs["payback_s"] = out(payback)
        if "uses" in x:
            n = x["uses"]
            net = n * saving - one_off
            res.step("net benefit after N uses", "N·s − one_off",
                     f"{num(first(n))} × {num(first(saving))} − {num(first(one_off))}", net, u)
            outputs["net_benefit"] = out(net)
            outputs["worthwhile"] = out(net > 0) if np.ndim(net) else bool(net > 0)
            if before is not None:
                outputs["total_before"] = out(n * before)
                outputs["total_after"] = out(one_off + n * after)
    if "uses" in x:
        n = x["uses"]
        with np.errstate(divide="ignore", invalid="ignore"):
            outputs["required_saving_per_use"] = out(np.where(n > 0, one_off / np.where(n > 0, n, 1.0), np.inf))
    if has_amounts:
        with np.errstate(divide="ignore", invalid="ignore"):
            if "uses" in x:
                spread = np.where(x["uses"] > 0, one_off / np.where(x["uses"] > 0, x["uses"], 1.0), np.inf)
            else:  # without N the one-off cannot be spread; it only drops out when it is zero
                spread = np.where(one_off == 0, 0.0, np.nan)
            extra = x["cost_per_use_after"] - x["cost_per_use_before"] + spread
            r_star = np.where((extra > 0) & (ab != aa), (ab - aa) / np.where(extra > 0, extra, 1.0), np.nan)
            r_star = np.where(r_star > 0, r_star, np.nan)
        res.step("break-even rate", "rate* = (amount_b − amount_a) / (c_a − c_b + one_off/N)",
                 f"({num(ab)} − {num(aa)}) / {num(first(extra))}", r_star, "amount per unit of cost")
        outputs["break_even_rate"] = out(r_star)
        outputs["change_pays_below_rate"] = ab > aa
    res.outputs = outputs
    res.assume(
        f"Costs are in {u}; the one-off is paid once, before the first use; every use then changes by the same saving.",
        "The change is worth it after n uses when n × saving > one-off (strictly); a saving ≤ 0 never pays back (null).",
    )
    if has_amounts:
        res.assume("Per-use cost = fixed part + amount / rate (e.g. bytes over a link); with less to move, the change "
                   "pays below the break-even rate and loses above it. Null when the change adds no cost per use, or "
                   "when a one-off is given without `uses`. Without `rate`, only the break-even rate is computed.")
    res.headline = _headline(req, outputs)
    return res


def _amount(x, unit: str) -> str:
    """A cost in the request's unit: seconds as durations, dollars with $, anything else with its label."""
    u = (unit or "").strip()
    if u in ("s", "seconds", "second"):
        return hf.fmt_seconds(x)
    if u.lower() in ("usd", "$", "dollars", "dollar"):
        return hf.fmt_usd(x)
    return f"{hf.fmt_num(x)} {u}".strip()


def _headline(req: BreakEvenRequest, o: dict) -> str:
    """Uses to break even and the net benefit at the uses given (a sweep: its first point)."""
    n = hf.n_points(req.one_off, req.saving_per_use, req.cost_per_use_before, req.cost_per_use_after, req.rate, req.uses)
    parts = []
    if "break_even_uses" in o:
        be = hf.scalar(o.get("break_even_uses"))
        head = f"A one-off of {_amount(req.one_off, req.unit)} saving {_amount(o.get('saving_per_use'), req.unit)} per use"
        if be is None or not math.isfinite(be):
            parts.append(f"{head} never pays back")
        else:
            first_use = hf.scalar(o.get("first_beneficial_use"))
            text = f"{head} breaks even after {hf.fmt_num(be)} uses" + (
                f" (use {hf.fmt_count(first_use)} is the first that pays)" if first_use is not None and math.isfinite(first_use)
                else " but no use gains")
            if o.get("payback_s") is not None:
                text += f", {hf.fmt_seconds(o['payback_s'])} at {hf.fmt_num(req.uses_per_s)} uses/s"
            parts.append(text)
        if o.get("net_benefit") is not None:
            parts.append(f"over {hf.fmt_num(req.uses)} uses it {'gains' if hf.first_value(o.get('worthwhile')) else 'loses'} "
                         f"{_amount(abs(hf.scalar(o['net_benefit']) or 0.0), req.unit)}")
    elif o.get("required_saving_per_use") is not None:
        parts.append(f"A one-off of {_amount(req.one_off, req.unit)} pays back over {hf.fmt_num(req.uses)} uses only if each "
                     f"saves more than {_amount(o['required_saving_per_use'], req.unit)}")
    if "break_even_rate" in o:
        r = hf.scalar(o.get("break_even_rate"))
        parts.append(f"the change pays {'below' if o.get('change_pays_below_rate') else 'above'} a rate of {hf.fmt_num(r)} per {req.unit}"
                     if r is not None and math.isfinite(r) else "no break-even rate exists")
    text = "; ".join(parts) or f"A one-off of {_amount(req.one_off, req.unit)}"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== mixture choice

class Option(CalcRequest):
    """An option whose cost is `if_event` when the event happens and `if_not` otherwise (lower is better)."""

    name: str = Field(min_length=1, max_length=100, description="Label.", examples=["A"])
    if_event: NonNegFloat = Field(description="Cost (e.g. seconds) when the event happens.", examples=[0.09])
    if_not: NonNegFloat = Field(description="Cost when it does not.", examples=[0.26])


class MixtureRequest(CalcRequest):
    """Options compared at the event probability p."""

    options: list[Option] = Field(min_length=2, max_length=20, description="Options to compare.")
    probability: FractionSweep = Field(0.5, description="Probability of the event (0–1). Sweepable.", examples=[0.9])
    quantile: float | None = Field(None, gt=0, lt=1, description="Also report this quantile of each option's two-point "
                                   "outcome (0.99 = p99).", examples=[0.99])
    threshold: NonNegFloat | None = Field(None, description="Report whether each option's expected value and quantile "
                                          "stay within this target (e.g. an SLO in seconds).", examples=[0.22])


@quiet
def mixture_compute(req: MixtureRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    names = [o.name for o in req.options]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise CalcInputError(("options", i, "name"), f"duplicate option {n!r}")
    p = np.asarray(req.probability, dtype=float)
    rows, means = [], []
    for o in req.options:
        m = p * o.if_event + (1.0 - p) * o.if_not
        res.step(f"{o.name}: expected", "E = p·a + (1 − p)·b", f"{num(first(p))}×{num(o.if_event)} + "
                 f"{num(1 - first(p))}×{num(o.if_not)}", m, "cost")
        row = {"name": o.name, "expected": out(m)}
        if req.quantile is not None:
            lo, hi = min(o.if_event, o.if_not), max(o.if_event, o.if_not)
            p_lo = p if o.if_event <= o.if_not else 1.0 - p
            q = np.where(p_lo >= req.quantile - 1e-12, lo, hi)
            res.step(f"{o.name}: quantile {num(req.quantile)}", "lower value if its probability ≥ q, else the higher",
                     f"P(lower = {num(lo)}) = {num(first(p_lo))} vs q = {num(req.quantile)}", q, "cost")
            row["quantile"] = out(q)
        if req.threshold is not None:
            ok = m <= req.threshold
            row["expected_within_threshold"] = out(ok) if np.ndim(ok) else bool(ok)
            if req.quantile is not None:
                okq = np.asarray(row["quantile"], dtype=float) <= req.threshold
                row["quantile_within_threshold"] = out(okq) if np.ndim(okq) else bool(okq)
        rows.append(row)
        means.append(m)
    pairs = []
    for i, a in enumerate(req.options):
        for b in req.options[i + 1:]:
            da, db = a.if_event - a.if_not, b.if_event - b.if_not
            if da == db:
                cross, better = None, None
            else:
                cross = (b.if_not - a.if_not) / (da - db)
                # above the crossing, the option whose cost falls faster with p is cheaper
                better = a.name if da < db else b.name
                if not (-1e-12 <= cross <= 1 + 1e-12):
                    cross = None
                else:
                    cross = min(max(cross, 0.0), 1.0)
            res.step(f"crossing: {a.name} vs {b.name}", "p* = (b_B − b_A) / ((a_A − b_A) − (a_B − b_B))",
                     f"({num(b.if_not)} − {num(a.if_not)}) / ({num(da)} − {num(db)})", cross, "probability")
            pairs.append({"a": a.name, "b": b.name, "probability": cross, "better_above": better})
    stack = np.stack([np.broadcast_to(m, np.shape(p)) for m in means])
    best = np.argmin(stack, axis=0)
    res.outputs = {"options": rows, "crossings": pairs,
                   "best": [names[i] for i in np.ravel(best)] if np.ndim(best) else names[int(best)]}
    res.assume(
        "Each option has two fixed outcomes; the event has probability p and is independent of everything else.",
        "Lower is better (time or cost); ties go to the option listed first.",
        "A crossing is reported only inside [0, 1]; the mean can favour an option whose quantile misses a target.",
    )
    res.headline = _mixture_headline(req, res.outputs)
    return res


def _mixture_headline(req: MixtureRequest, o: dict) -> str:
    """The option with the lowest expected outcome, and where the choice flips (a sweep: its first point)."""
    n = hf.n_points(req.probability)
    best = hf.first_value(o.get("best"))
    row = next((r for r in o.get("options") or [] if r.get("name") == best), {})
    text = (f"At an event probability of {hf.fmt_num(req.probability)}, \u201c{best}\u201d is best with an expected "
            f"{hf.fmt_num(hf.first_value(row.get('expected')))}")
    if row.get("quantile") is not None and req.quantile is not None:
        text += f" (p{hf.fmt_num(req.quantile * 100)} {hf.fmt_num(hf.first_value(row.get('quantile')))})"
    crossings = o.get("crossings") or []
    if crossings:
        c = crossings[0]
        text += (f"; the choice between \u201c{c.get('a')}\u201d and \u201c{c.get('b')}\u201d flips at "
                 f"p = {hf.fmt_num(c.get('probability'))}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== outputs

#: a number, or one per point when an input is swept; null where it is not finite (a change that never pays)
#: a whole count, or one per point; null where there is none (past 2^53, where float64 stops holding every whole
#: number, it is written as a float)


class BreakEvenOutputs(Outputs):
    """Outputs of break-even; lists where an input is swept. Costs are in the request's `unit`."""

    cost_per_use_before: OutSweep = Field(None, description="Cost of one use without the change, in `unit`: the "
                                              "fixed part plus amount / rate (when costs or amounts are given).")
    cost_per_use_after: OutSweep = Field(None, description="Cost of one use with the change, in `unit` (when costs "
                                             "or amounts are given).")
    saving_per_use: OutSweep = Field(None, description="Cost saved per use, in `unit` (negative: each use costs "
                                         "more). Absent for amounts without a `rate`.")
    break_even_uses: OutSweep = Field(None, description="Uses that pay back the one-off, one_off / saving (a "
                                          "fraction of a use; null when the change never pays back).")
    first_beneficial_use: OutCountSweep = Field(None, description="The first whole use with a strictly positive net "
                                                 "benefit (null when it never pays back).")
    payback_s: OutSweep = Field(None, description="Time to break even at `uses_per_s`, s (with uses_per_s > 0).")
    net_benefit: OutSweep = Field(None, description="N × saving − one_off after the `uses` given, in `unit` "
                                      "(negative: a loss).")
    worthwhile: bool | list[bool] | None = Field(None, description="The net benefit after `uses` is positive (with `uses`).")
    total_before: OutSweep = Field(None, description="Cost of `uses` uses without the change, in `unit` (with "
                                       "`uses` and per-use costs).")
    total_after: OutSweep = Field(None, description="One-off plus the cost of `uses` uses with the change, in `unit`.")
    required_saving_per_use: OutSweep = Field(None, description="Saving per use needed to pay back over `uses` "
                                                  "uses, one_off / N, in `unit` (null for N = 0).")
    break_even_rate: OutSweep = Field(None, description="Rate at which before and after cost the same, in amount "
                                          "per unit of cost (bytes/s for seconds); null when none exists. With amounts.")
    change_pays_below_rate: bool | None = Field(None, description="True: the change pays below break_even_rate (it "
                                                "moves less); false: above it. With amounts.")


class MixtureOptionOut(Outputs):
    name: str = Field(description="The option's label.")
    expected: float | list[float] = Field(description="Expected cost p·if_event + (1 − p)·if_not, in the options' unit.")
    quantile: float | list[float] | None = Field(None, description="The requested quantile of the two-point outcome, "
                                                 "in the options' unit (with `quantile`).")
    expected_within_threshold: bool | list[bool] | None = Field(None, description="Expected cost ≤ threshold (with "
                                                                "`threshold`).")
    quantile_within_threshold: bool | list[bool] | None = Field(None, description="Quantile ≤ threshold (with "
                                                                "`threshold` and `quantile`).")


class MixtureCrossingOut(Outputs):
    a: str = Field(description="First option of the pair.")
    b: str = Field(description="Second option of the pair.")
    probability: float | None = Field(description="Event probability where the two cost the same (null: they never "
                                      "cross inside [0, 1]).")
    better_above: str | None = Field(description="The option that is cheaper above the crossing (null: parallel "
                                     "costs, no crossing).")


class MixtureChoiceOutputs(Outputs):
    """Outputs of mixture-choice; per-option values are lists where the probability is swept."""

    options: list[MixtureOptionOut] = Field(description="Each option's expected cost (and quantile), in request order.")
    crossings: list[MixtureCrossingOut] = Field(description="Every pair of options and where they cross.")
    best: str | list[str] = Field(description="The option with the lowest expected cost (ties: the first listed).")


CALCULATORS = [
    Calculator(
        name="break-even",
        profile=Profile(1e-06, 609, 154),
        family="break_even",
        title="Break-even of a one-off cost",
        summary="How many uses pay back a one-off cost (tuning search, graph capture, reconfiguration), the net benefit "
                "after N uses, and the rate (bandwidth) below which a byte-saving step such as compression pays.",
        description="Saving per use s = before − after (or given). Break-even uses n* = one_off / s; the first use "
                    "that pays is the smallest whole n with n·s > one_off. Net(N) = N·s − one_off. With amounts moved "
                    "at a rate, before = c_b + A_b/R and after = c_a + A_a/R, so the change pays while R < (A_b − A_a) "
                    "/ (c_a − c_b + one_off/N) — the codec break-even bandwidth (1 − r)·D for an offline decode, or "
                    "(1 − r)/(1/E + 1/D) when encoding is on the critical path too. Limits: constant per-use costs.",
        request_model=BreakEvenRequest,
        compute=break_even_compute,
        outputs_model=BreakEvenOutputs,
        example={"one_off": 0.012, "saving_per_use": 0.00018, "uses": [50, 100]},
        cases=("communication-tuning", "network-planning-and-collectives", "cache-and-reconfiguration",
               "tensor-codec-and-transfer"),
        sweepable=("one_off", "saving_per_use", "cost_per_use_before", "cost_per_use_after", "rate", "uses"),
        chart=Chart(x="uses", y=("net_benefit",), x_label="uses", y_label="net benefit", marker="break_even_uses"),
        families=("scheduling", "edge_transfer"),
        extra_examples=({"amount_per_use_before": 100663296, "amount_per_use_after": 25165824,
                         "cost_per_use_after": 0.100663296, "rate": [1.25e8, 2.5e10]},),
    ),
    Calculator(
        name="mixture-choice",
        profile=Profile(1.4e-06, 611, 141),
        family="routing_cost",
        title="Choice under an uncertain event",
        summary="Expected cost of options whose outcome depends on an event of probability p (a cache still valid, a "
                "request of one kind), the p where two options cross, and a quantile that the mean can hide.",
        description="E_i(p) = p·a_i + (1 − p)·b_i. Two options cross at p* = (b_B − b_A) / ((a_A − b_A) − (a_B − b_B)) "
                    "when that lies in [0, 1]. The q-quantile of a two-point outcome is the lower value when its "
                    "probability is at least q, else the higher one. Limits: two fixed outcomes per option, "
                    "independence; real distributions need per-request records.",
        request_model=MixtureRequest,
        compute=mixture_compute,
        outputs_model=MixtureChoiceOutputs,
        example={"options": [{"name": "A (maybe cached)", "if_event": 0.09, "if_not": 0.26},
                             {"name": "B (recompute)", "if_event": 0.2, "if_not": 0.2}],
                 "probability": 0.9, "quantile": 0.99, "threshold": 0.22},
        cases=("cache-events-and-routing", "optimization-evaluation-and-deployment"),
        sweepable=("probability",),
        chart=Chart(x="probability", y=("options.*.expected",), x_label="event probability p",
                    y_label="expected cost", marker="crossings.*.probability"),
        families=("scheduling",),
    ),
]
