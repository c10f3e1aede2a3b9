"""Cost per successful task across candidate models (API prices or a self-hosted pool).

The book's routing method (cases `routing-cost-and-completion`, `single-agent-serving-cost`,
`platform-routing`): bill every call from its usage (a cache hit reads the shared prefix at the
cache-read price, a miss pays the input price for it; output tokens include thinking), keep every
failed attempt in the numerator, divide by the tasks that pass, and only then compare candidates.
A cheaper unit price does not make a cheaper task; a deadline can rule out a cheaper candidate.
A cascade tries a cheap candidate first and escalates a failed task to the next one.
"""
from __future__ import annotations


import math

import numpy as np
from pydantic import Field

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Chart, first, fmt_s, Fraction, FractionSweep, LIST_SEP, Lookup, MAX_SWEEP_POINTS,
    NonNegFloat, num, out, OutNum, Outputs, OutSweep, PosFloat, PosInt, Profile, quiet, request_inputs,
    request_value, Result, Series, sweep_length,
)
from calculators.domain import PricePerMtok, record
from calculators.framework import headline as H


MTOK = 1e6
#: tolerance when comparing a fraction with a target (0.98 × 0.918367… must count as 0.9)
TOL = 1e-12


class Usage(CalcRequest):
    """Tokens of one call, as the candidate's own tokenizer counts them (means may be fractional)."""

    prefix_tokens: NonNegFloat = Field(0.0, description="Reusable prefix tokens per call (hit: cache-read price; miss: input price).",
                                       examples=[19000])
    new_input_tokens: NonNegFloat = Field(0.0, description="Input tokens per call that are never cached (always input price).",
                                          examples=[1000])
    output_tokens: NonNegFloat = Field(0.0, description="Billed output tokens per call, thinking included.", examples=[300])
    cache_write_tokens: NonNegFloat = Field(0.0, description="Of the prefix tokens, how many a miss writes to the cache; they are "
                                            "billed at the cache-write price instead of the input price. 0 = no write surcharge.",
                                            examples=[0])


class Latency(CalcRequest):
    """Complete request time (queueing and all generation included) on a hit and on a miss."""

    hit: NonNegFloat = Field(description="Seconds per call when the prefix hits the cache.", examples=[4])
    miss: NonNegFloat = Field(description="Seconds per call when it misses.", examples=[12])


class SelfHosted(CalcRequest):
    """A pool rented by the hour and shared by `workers` co-tenants; its output tokens carry the whole cost."""

    price_per_hour_usd: NonNegFloat = Field(description="Rent of the whole pool per hour (USD or the currency used elsewhere).",
                                      examples=[2.09])
    workers: PosInt = Field(1, description="Co-tenants that share the pool's rent (sustained independent workers, B).",
                            examples=[16])
    hours_per_month: PosFloat = Field(720.0, description="Hours in the month used for the monthly figures (720 = 30 days).")


class Candidate(CalcRequest):
    """One model/service to route to. Give exactly one of `price_per_million_tokens_usd`, `price` (store id) or `self_hosted`."""

    name: str = Field(min_length=1, max_length=100, description="Label used in the outputs and the break-even pairs.",
                      examples=["B"])
    price_per_million_tokens_usd: PricePerMtok | None = Field(None, description="Explicit prices per million tokens.")
    price: str | None = Field(None, min_length=1, max_length=200, description="Id of a price record in the store (the prices list names them).")
    self_hosted: SelfHosted | None = Field(None, description="Rented pool instead of per-token prices; needs `tokens_per_s`.")
    usage: Usage = Field(default_factory=Usage, description="Tokens per call.")
    pass_rate: Fraction = Field(1.0, description="Fraction of tasks that pass the quality check (0–1).", examples=[0.98])
    prefix_hit_rate: FractionSweep = Field(0.0, description="Fraction of calls whose prefix hits the cache (0–1). Sweepable.",
                                          examples=[0.5])
    latency_s: Latency | None = Field(None, description="Complete request time on a hit / a miss, seconds.")
    tokens_per_s: PosFloat | None = Field(None, description="Output tokens per second seen by one request (self-hosted price, "
                                          "speed requirement, and latency estimate when `latency_s` is absent).", examples=[50])
    fixed_latency_s: NonNegFloat = Field(0.0, description="Time before generation (prefill etc.) used with `tokens_per_s` to "
                                         "estimate latency when `latency_s` is absent, seconds.")


class Requirement(CalcRequest):
    """What a candidate must meet to be feasible."""

    min_pass_rate: Fraction | None = Field(None, description="Lowest acceptable pass rate (0–1).", examples=[0.75])
    deadline_s: NonNegFloat | None = Field(None, description="A task counts only if it passes and finishes within this time, seconds.",
                                           examples=[6])
    min_fraction_passed_on_time: Fraction | None = Field(None, description="Required fraction of submitted tasks that pass "
                                                         "and meet `deadline_s` (give both together).", examples=[0.9])
    min_tokens_per_s: NonNegFloat | None = Field(None, description="Lowest acceptable output speed per request, tokens/s.")


class CascadeStage(CalcRequest):
    """One stage of a cascade: a candidate and the cost of checking its answer."""

    candidate: str = Field(min_length=1, max_length=100, description="Name of one of `candidates`.", examples=["A"])
    verify_cost: NonNegFloat = Field(0.0, description="Cost of judging/verifying this stage's answer, per task that reaches "
                                     "the stage, in the prices' currency (0 = a free, perfect check).", examples=[0.001])


class RoutingCostRequest(CalcRequest):
    """Candidates for one workload of `tasks` tasks."""

    tasks: PosInt = Field(1, description="Tasks submitted. `cost_total` bills one attempt per task; cost per success "
                          "divides by the pass rate (see the assumptions).", examples=[1000])
    candidates: list[Candidate] = Field(min_length=1, max_length=20, description="Candidates, compared in this order.")
    requirement: Requirement | None = Field(None, description="Optional feasibility requirement.")
    cascade: list[CascadeStage] | None = Field(None, min_length=1, max_length=20, description="Optional cascade: try the "
                                               "first stage's candidate, escalate a task that fails to the next stage, "
                                               "and so on; compared with the single candidates.",
                                               examples=[[{"candidate": "A"}, {"candidate": "B"}]])


# --------------------------------------------------------------------------- outputs

BoolSweep = bool | list[bool]


class PricesOut(Outputs):
    input: OutNum = Field(description="Price per million uncached input tokens.")
    cache_read: OutNum = Field(description="Price per million prefix tokens read on a hit.")
    cache_write: OutNum = Field(description="Price per million tokens written to the cache.")
    output: OutNum = Field(description="Price per million output tokens (self-hosted: the effective price; null if unbounded).")


class CandidateOut(Outputs):
    name: str
    cost_per_call_hit: OutNum = Field(description="Cost of one call whose prefix hits the cache (prices' currency).")
    cost_per_call_miss: OutNum = Field(description="Cost of one call that misses.")
    cost_per_call: OutSweep = Field(description="h·hit + (1−h)·miss per call; a list when prefix_hit_rate is swept.")
    cost_total: OutSweep = Field(description="tasks × cost per call: one attempt per task.")
    cost_per_success: OutSweep = Field(description="cost per call / pass rate (null when the pass rate is 0).")
    feasible: BoolSweep = Field(description="Meets the requirement.")
    min_hit_rate_for_deadline: OutNum = Field(description="Least cache-hit rate that meets the deadline target (null: none or no deadline).")
    price_per_million_tokens_usd: PricesOut
    fraction_passed_on_time: OutSweep = Field(None, description="pass × on-time fraction (only with a deadline).")
    latency_s: dict[str, OutNum] | None = Field(None, description="Complete request time on a hit / a miss, s.")
    tokens_per_s: float | None = Field(None, description="Output tokens per second per request.")
    monthly_cost: OutNum = Field(None, description="Self-hosted: one worker's share of the monthly rent.")
    monthly_output_tokens: OutNum = Field(None, description="Self-hosted: output tokens one worker decodes in the month.")


class BreakEvenOut(Outputs):
    x: str
    y: str
    hit_rate: OutSweep = Field(description="Hit rate of x at which its cost per success equals y's (null outside [0, 1]).")
    x_cheaper_when: str | None = Field(description="'above' or 'below' that hit rate; null when x's cost does not depend on it.")


class StageOut(Outputs):
    candidate: str
    reach_probability: float | None = Field(description="P(a task reaches this stage) = Π of the earlier stages' failure rates.")
    pass_rate: float | None = Field(description="The candidate's pass rate.")
    cost_per_call: OutSweep = Field(description="The candidate's cost per call at its hit rate.")
    verify_cost: OutNum = Field(description="Verification cost per task reaching the stage.")
    expected_cost: OutSweep = Field(description="reach_probability × (cost_per_call + verify_cost).")


class CascadeOut(Outputs):
    stages: list[StageOut]
    success_rate: float | None = Field(description="1 − Π (1 − pass rate) over the stages.")
    cost_per_task: OutSweep = Field(description="Σ reach_probability × (cost per call + verify cost), per submitted task.")
    cost_per_success: OutSweep = Field(description="cost_per_task / success_rate (null when nothing passes).")
    cost_total: OutSweep = Field(description="tasks × cost_per_task.")
    mean_latency_s: OutNum = Field(description="Σ reach_probability × mean latency of the stage (null when a stage has no latency).")
    worst_latency_s: OutNum = Field(description="Every stage run: Σ of the stages' miss latencies (null when a stage has no latency).")
    feasible: BoolSweep | None = Field(description="Success rate meets min_pass_rate; null when a deadline is required "
                                       "(not evaluated for a cascade).")
    best_single: str | list[str | None] | None = Field(description="The cheapest feasible single candidate.")
    saving_vs_best_single: OutSweep = Field(description="Best single candidate's cost per success minus the cascade's "
                                            "(positive: the cascade is cheaper).")


class RoutingCostOutputs(Outputs):
    """Outputs of routing-cost, in the prices' currency; lists where a cache-hit rate is swept."""

    candidates: list[CandidateOut]
    break_even: list[BreakEvenOut]
    cheapest_feasible: str | list[str | None] | None = Field(description="Feasible candidate with the least cost per success.")
    cascade: CascadeOut | None = Field(None, description="Only with `cascade`.")


def _prices(c: Candidate, i: int, lookup: Lookup, res: Result) -> tuple[dict, dict | None]:
    """Per-Mtok prices of a candidate (effective ones for a self-hosted pool) and its monthly figures."""
    given = [k for k in ("price_per_million_tokens_usd", "price", "self_hosted") if getattr(c, k) is not None]
    if len(given) != 1:
        raise CalcInputError(("candidates", i, "price_per_million_tokens_usd"),
                             "give exactly one of price_per_million_tokens_usd, price (store id) or self_hosted"
                             + (f"; got {', '.join(given)}" if given else ""))
    if c.price_per_million_tokens_usd is not None:
        p = c.price_per_million_tokens_usd
        if p.output is None:
            raise CalcInputError(("candidates", i, "price_per_million_tokens_usd", "output"),
                                 "routing-cost bills output tokens: give the output price per million tokens")
        return {"input": p.input, "cache_read": p.input if p.cache_read is None else p.cache_read,
                "cache_write": p.input if p.cache_write is None else p.cache_write, "output": p.output}, None
    if c.price is not None:
        rec = record(lookup, "price", c.price, f"candidates.{i}.price")
        loc = f"candidates.{i}.price"
        vals = {"input": rec.value("input_usd_per_mtok", loc=loc),
                "output": rec.value("output_usd_per_mtok", loc=loc)}
        for key, field in (("cache_read", "cache_read_usd_per_mtok"), ("cache_write", "cache_write_usd_per_mtok")):
            v = rec.value(field, required=False)
            vals[key] = vals["input"] if v is None else v
        for field in ("input_usd_per_mtok", "output_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok"):
            res.cite(rec.source(field))
        return vals, None
    s = c.self_hosted
    if c.tokens_per_s is None:
        raise CalcInputError(("candidates", i, "tokens_per_s"), "a self-hosted candidate needs its per-worker output speed")
    share_per_hour = s.price_per_hour_usd / s.workers
    tokens_per_hour = c.tokens_per_s * 3600.0
    out_price = share_per_hour / tokens_per_hour * MTOK
    res.step(f"{c.name}: self-hosted price", "p_out = (h / B) / (r × 3600) × 10⁶",
             f"({num(s.price_per_hour_usd)} / {s.workers}) / ({num(c.tokens_per_s)} × 3600) × 10⁶", out_price, "per Mtok")
    monthly = {"monthly_cost": s.hours_per_month * share_per_hour,
               "monthly_output_tokens": c.tokens_per_s * s.hours_per_month * 3600.0}
    return {"input": 0.0, "cache_read": 0.0, "cache_write": 0.0, "output": out_price}, monthly


@quiet
def compute(req: RoutingCostRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    names = [c.name for c in req.candidates]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise CalcInputError(("candidates", i, "name"), f"duplicate candidate name {n!r}")
    # one sweep length shared by every candidate whose hit rate is a list
    length = None
    for i, c in enumerate(req.candidates):
        if isinstance(c.prefix_hit_rate, list):
            if length is None:
                length = len(c.prefix_hit_rate)
            elif len(c.prefix_hit_rate) != length:
                raise CalcInputError(("candidates", i, "prefix_hit_rate"),
                                     f"sweep of {len(c.prefix_hit_rate)} points does not match another candidate's {length}")
    n_pairs = len(names) * (len(names) - 1)
    if length and length * max(n_pairs, len(names)) > MAX_SWEEP_POINTS:
        raise CalcInputError(("candidates", 0, "prefix_hit_rate"),
                             f"{length} points × {max(n_pairs, len(names))} series exceeds {MAX_SWEEP_POINTS}", status=413)
    rq = req.requirement or Requirement()
    if (rq.deadline_s is None) != (rq.min_fraction_passed_on_time is None):
        raise CalcInputError(("requirement", "min_fraction_passed_on_time" if rq.deadline_s is not None else "deadline_s"),
                             "deadline_s and min_fraction_passed_on_time go together")

    rows, per_success, feasible, hit_costs, miss_costs, passes, calls, lats = [], [], [], [], [], [], [], []
    for i, c in enumerate(req.candidates):
        p, monthly = _prices(c, i, lookup, res)
        u = c.usage
        if u.cache_write_tokens > u.prefix_tokens:
            raise CalcInputError(("candidates", i, "usage", "cache_write_tokens"),
                                 "cache-write tokens are part of the prefix written on a miss; they cannot exceed prefix_tokens")
        hit = (u.prefix_tokens * p["cache_read"] + u.new_input_tokens * p["input"] + u.output_tokens * p["output"]) / MTOK
        miss = ((u.prefix_tokens - u.cache_write_tokens) * p["input"] + u.cache_write_tokens * p["cache_write"]
                + u.new_input_tokens * p["input"] + u.output_tokens * p["output"]) / MTOK
        res.step(f"{c.name}: cost per call, hit / miss",
                 "hit = (prefix·p_read + new·p_in + out·p_out)/10⁶; miss = ((prefix−w)·p_in + w·p_write + new·p_in + out·p_out)/10⁶",
                 f"hit = ({num(u.prefix_tokens)}×{num(p['cache_read'])} + {num(u.new_input_tokens)}×{num(p['input'])} + "
                 f"{num(u.output_tokens)}×{num(p['output'])})/10⁶ = {num(hit)}; miss = "
                 f"({num(u.prefix_tokens - u.cache_write_tokens)}×{num(p['input'])} + {num(u.cache_write_tokens)}×"
                 f"{num(p['cache_write'])} + {num(u.new_input_tokens)}×{num(p['input'])} + {num(u.output_tokens)}×"
                 f"{num(p['output'])})/10⁶ = {num(miss)}", [hit, miss], "per call")
        h = np.asarray(c.prefix_hit_rate, dtype=float)
        call = h * hit + (1.0 - h) * miss
        total = req.tasks * call
        succ = call / c.pass_rate if c.pass_rate > 0 else np.full_like(call, np.inf)
        res.step(f"{c.name}: cost per success", "C = (h·hit + (1−h)·miss) × tasks / (tasks × pass_rate)",
                 f"({num(first(h))}×{num(hit)} + {num(1 - first(h))}×{num(miss)}) × {req.tasks} / "
                 f"({req.tasks} × {num(c.pass_rate)})", succ, "per success")

        # latency: given, or estimated from the output speed
        lat = None
        if c.latency_s is not None:
            lat = (c.latency_s.hit, c.latency_s.miss)
        elif c.tokens_per_s is not None:
            t = c.fixed_latency_s + u.output_tokens / c.tokens_per_s
            lat = (t, t)
            res.step(f"{c.name}: estimated latency", "t = fixed + output_tokens / r",
                     f"{num(c.fixed_latency_s)} + {num(u.output_tokens)} / {num(c.tokens_per_s)}", t, "s")

        ok = np.ones_like(h, dtype=bool)
        if rq.min_pass_rate is not None:
            ok &= c.pass_rate >= rq.min_pass_rate - TOL
        if rq.min_tokens_per_s is not None:
            if c.tokens_per_s is None:
                raise CalcInputError(("candidates", i, "tokens_per_s"), "requirement.min_tokens_per_s needs each candidate's speed")
            ok &= c.tokens_per_s >= rq.min_tokens_per_s - TOL
        min_h = None
        on_time = None
        if rq.deadline_s is not None:
            if lat is None:
                raise CalcInputError(("candidates", i, "latency_s"), "requirement.deadline_s needs latency_s (or tokens_per_s)")
            a = 1.0 if lat[0] <= rq.deadline_s else 0.0
            b = 1.0 if lat[1] <= rq.deadline_s else 0.0
            target = rq.min_fraction_passed_on_time
            on_time = c.pass_rate * (h * a + (1.0 - h) * b)
            ok &= on_time >= target - TOL
            if c.pass_rate * b >= target - TOL:
                min_h = 0.0
            elif c.pass_rate * a >= target - TOL:  # a = 1, b = 0: h·pass ≥ target
                min_h = target / c.pass_rate
            res.step(f"{c.name}: hit rate needed for the deadline",
                     "pass_rate × (h·[t_hit ≤ D] + (1−h)·[t_miss ≤ D]) ≥ target",
                     f"{num(c.pass_rate)} × (h·{int(a)} + (1−h)·{int(b)}) ≥ {num(target)} (t_hit {fmt_s(lat[0])}, "
                     f"t_miss {fmt_s(lat[1])}, D {fmt_s(rq.deadline_s)})", min_h, "fraction")

        row = {"name": c.name, "cost_per_call_hit": hit, "cost_per_call_miss": miss, "cost_per_call": out(call),
               "cost_total": out(total), "cost_per_success": out(succ), "feasible": out(ok) if ok.ndim else bool(ok),
               "min_hit_rate_for_deadline": min_h,
               "price_per_million_tokens_usd": p}
        if on_time is not None:
            row["fraction_passed_on_time"] = out(on_time)
        if lat is not None:
            row["latency_s"] = {"hit": lat[0], "miss": lat[1]}
        if c.tokens_per_s is not None:
            row["tokens_per_s"] = c.tokens_per_s
        if monthly is not None:
            row.update(monthly)
        rows.append(row)
        per_success.append(succ)
        feasible.append(ok)
        hit_costs.append(hit)
        miss_costs.append(miss)
        passes.append(c.pass_rate)
        calls.append(call)
        lats.append(lat)

    # break-even: hit rate of x at which x's cost per success equals y's at y's own hit rate
    pairs = []
    for xi, x in enumerate(names):
        for yi, y in enumerate(names):
            if xi == yi:
                continue
            hx, mx, px = hit_costs[xi], miss_costs[xi], passes[xi]
            if mx == hx or px == 0:
                be = np.full(np.shape(per_success[yi]), np.nan)
            else:
                with np.errstate(invalid="ignore", over="ignore"):
                    be = (mx - px * per_success[yi]) / (mx - hx)
                be = np.where((be >= -TOL) & (be <= 1 + TOL), np.clip(be, 0.0, 1.0), np.nan)
            pairs.append({"x": x, "y": y, "hit_rate": out(be),
                          "x_cheaper_when": None if mx == hx else ("above" if mx > hx else "below")})
    for pr in pairs[:6]:
        xi, yi = names.index(pr["x"]), names.index(pr["y"])
        if miss_costs[xi] != hit_costs[xi] and passes[xi] > 0:
            res.step(f"break-even: {pr['x']} vs {pr['y']}", "h* = (miss_x − pass_x·C_y) / (miss_x − hit_x)",
                     f"({num(miss_costs[xi])} − {num(passes[xi])}×{num(first(per_success[yi]))}) / "
                     f"({num(miss_costs[xi])} − {num(hit_costs[xi])})",
                     (miss_costs[xi] - passes[xi] * first(per_success[yi])) / (miss_costs[xi] - hit_costs[xi]), "fraction")

    shape = np.broadcast_shapes(*[np.shape(s) for s in per_success])
    feas = np.stack([np.broadcast_to(f, shape) for f in feasible])
    # among feasible candidates the lowest cost per success (an infinite cost still beats "none")
    costs = np.where(feas, np.stack([np.minimum(np.broadcast_to(s, shape), 1e308) for s in per_success]), np.inf)
    best = np.argmin(costs, axis=0)
    cheapest = np.where(np.any(feas, axis=0), np.asarray(names, dtype=object)[best], None)
    res.outputs = {
        "candidates": rows,
        "break_even": pairs,
        "cheapest_feasible": cheapest.tolist() if np.ndim(cheapest) else cheapest.item(),
    }
    if req.cascade is not None:
        res.outputs["cascade"] = _cascade(req, rq, res, names, calls, passes, lats, per_success, costs, cheapest)
    res.assume(
        "Cost per success = cost per call / pass rate: the expected cost when a task that fails is retried on the same "
        "candidate until it passes (independent attempts, a geometric number of them with mean 1 / pass rate). "
        "`cost_total` bills one attempt per task.",
        "A hit bills the whole prefix at the cache-read price, a miss at the input price; new input always at the input price.",
        "Output tokens are billed output including thinking; storage, tool and environment fees are not included.",
        "Cache-write tokens are paid on misses only (the miss writes the prefix), at the cache-write price instead of the input price.",
        "Hits are independent of quality: a retry or a hit does not change the pass rate.",
    )
    if rq.deadline_s is not None:
        res.assume("Deadline check: a task counts when it passes and its complete request time (hit or miss) is within the "
                   "deadline; hit and pass are independent. This is a mean fraction, not a percentile guarantee.")
    res.headline = _headline(req, res.outputs)
    if any(c.self_hosted for c in req.candidates):
        res.assume("Self-hosted: the pool rent is shared equally by `workers` co-tenants and carried entirely by output tokens "
                   "at the stated per-worker speed, decoding continuously (no idle or tool wait; prefill not charged separately).")
    return res


def _cascade(req, rq, res: Result, names, calls, passes, lats, per_success, costs, cheapest) -> dict:
    """Cheap candidate first; a failed task escalates to the next stage. Stage failures are independent."""
    idx = []
    for i, st in enumerate(req.cascade):
        if st.candidate not in names:
            raise CalcInputError(("cascade", i, "candidate"), f"unknown candidate {st.candidate!r}; known: {', '.join(names)}")
        idx.append(names.index(st.candidate))
    reach, stages, cost_task = 1.0, [], 0.0
    mean_lat, worst_lat = 0.0, 0.0
    for st, k in zip(req.cascade, idx):
        stage_cost = calls[k] + st.verify_cost
        exp = reach * stage_cost
        stages.append({"candidate": st.candidate, "reach_probability": reach, "pass_rate": passes[k],
                       "cost_per_call": out(calls[k]), "verify_cost": st.verify_cost, "expected_cost": out(exp)})
        cost_task = cost_task + exp
        lat = lats[k]
        if lat is None or mean_lat is None:
            mean_lat = worst_lat = None
        else:
            h = float(first(req.candidates[k].prefix_hit_rate))
            mean_lat += reach * (h * lat[0] + (1.0 - h) * lat[1])
            worst_lat += max(lat)
        reach = reach * (1.0 - passes[k])
    success = 1.0 - reach
    chain = " → ".join(st.candidate for st in req.cascade)
    res.step("cascade: reach probabilities", "P(reach stage i) = Π_{j<i} (1 − pass_j)",
             LIST_SEP.join(f"{s['candidate']}: {num(s['reach_probability'])}" for s in stages), [s["reach_probability"] for s in stages],
             "probability")
    res.step("cascade: cost per task", "Σ_i P(reach i) × (cost per call_i + verify_i)",
             " + ".join(f"{num(s['reach_probability'])} × ({num(first(calls[k]))} + {num(s['verify_cost'])})"
                        for s, k in zip(stages, idx)), cost_task, "per task")
    res.step("cascade: success rate", "1 − Π_i (1 − pass_i)", "1 − " + " × ".join(f"{num(1 - passes[k])}" for k in idx),
             success, "fraction")
    per_succ = np.asarray(cost_task, dtype=float) / success if success > 0 else np.full(np.shape(cost_task), np.inf)
    res.step("cascade: cost per success", "cost per task / success rate", f"{num(first(cost_task))} / {num(success)}",
             per_succ, "per success")
    if rq.deadline_s is not None:
        feasible = None
    else:
        ok = success >= rq.min_pass_rate - TOL if rq.min_pass_rate is not None else True
        feasible = bool(ok)
    best_cost = np.min(costs, axis=0)
    saving = np.where(np.isfinite(best_cost), best_cost - per_succ, np.nan)
    res.assume(f"Cascade {chain}: every stage judges its answer (perfectly, at verify_cost) and a failed task moves to the "
               "next stage; stage failures are independent, so success = 1 − Π (1 − pass rate). Real failures are "
               "correlated (a task too hard for one model is often hard for the next): the true success rate is lower "
               "and the cost per success higher. A task that fails every stage is not retried.")
    if rq.deadline_s is not None:
        res.assume("The deadline is not evaluated for the cascade (escalation adds the stages' latencies); its `feasible` is null.")
    return {"stages": stages, "success_rate": success, "cost_per_task": out(cost_task), "cost_per_success": out(per_succ),
            "cost_total": out(req.tasks * np.asarray(cost_task)), "mean_latency_s": mean_lat,
            "worst_latency_s": worst_lat, "feasible": feasible,
            "best_single": cheapest.tolist() if np.ndim(cheapest) else cheapest.item(), "saving_vs_best_single": out(saving)}


def _headline(req: RoutingCostRequest, o: dict) -> str:
    best = o["cheapest_feasible"]
    best0 = best[0] if isinstance(best, list) else best
    note = H.sweep_note(*[c.prefix_hit_rate for c in req.candidates])
    if best0 is None:
        vals = [(H.scalar(r["cost_per_success"]), r["name"]) for r in o["candidates"]]
        vals = [v for v in vals if v[0] is not None and v[0] == v[0]]
        s = "No candidate meets the requirement"
        if vals:
            v, n = min(vals)
            s += f"; the lowest cost per successful task regardless is {n}'s {H.fmt_usd(v)}"
    else:
        row = next(r for r in o["candidates"] if r["name"] == best0)
        cand = next(c for c in req.candidates if c.name == best0)
        s = (f"{best0} is the cheapest feasible candidate at {H.fmt_usd(row['cost_per_success'])} per successful task "
             f"({H.fmt_usd(row['cost_per_call'])} per call, pass rate {H.fmt_pct(cand.pass_rate)})")
    c = o.get("cascade")
    if c is not None:
        chain = " → ".join(st["candidate"] for st in c["stages"])
        s += (f"; the cascade {chain} costs {H.fmt_usd(c['cost_per_success'])} per success at a "
              f"{H.fmt_pct(c['success_rate'])} success rate")
        saving = H.scalar(c["saving_vs_best_single"])
        if saving is not None and math.isfinite(saving) and best0 is not None:
            s += f", {H.fmt_usd(abs(saving))} {'less' if saving > 0 else 'more'} than {best0}" if saving != 0 else f", the same as {best0}"
    return H.sentence(s + note)


EXAMPLE = {
    "tasks": 1000,
    "candidates": [
        {"name": "A", "price_per_million_tokens_usd": {"input": 1, "cache_read": 0.1, "output": 4},
         "usage": {"prefix_tokens": 19000, "new_input_tokens": 1000, "output_tokens": 2000},
         "pass_rate": 0.8, "prefix_hit_rate": 1.0, "latency_s": {"hit": 10, "miss": 10}},
        {"name": "B", "price_per_million_tokens_usd": {"input": 2, "cache_read": 0.2, "output": 8},
         "usage": {"prefix_tokens": 19000, "new_input_tokens": 1000, "output_tokens": 300},
         "pass_rate": 0.98, "prefix_hit_rate": 0.5, "latency_s": {"hit": 4, "miss": 12}},
    ],
    "requirement": {"min_pass_rate": 0.75, "deadline_s": 6, "min_fraction_passed_on_time": 0.9},
}

def routing_series(request) -> Series:
    """The cost model's count: the candidates' hit-rate sweeps × the series computed (each candidate and each pair)."""
    candidates = request_value(request, "candidates") or []
    points = max([sweep_length(request_value(c, "prefix_hit_rate")) for c in candidates] or [1])
    n = len(candidates) + len(request_value(request, "cascade") or [])
    return Series(points, max(n * (n - 1), n, 1), "series (candidates and their pairs)", "candidates")


CALCULATORS = [
    Calculator(
        name="routing-cost",
        profile=Profile(2.7e-07, 92, 41),
        mcp_tool=True,
        series=routing_series,
        family="routing_cost",
        title="Routing: cost per successful task",
        summary="Bills each candidate's calls from its usage (cache hit vs miss, thinking as output), divides by the tasks "
                "that pass, finds the cache-hit rates where the choice flips, and checks quality, deadline and speed.",
        description="Per call: hit = (prefix·p_read + new·p_in + out·p_out)/10⁶, miss = ((prefix−w)·p_in + w·p_write + "
                    "new·p_in + out·p_out)/10⁶; cost per call = h·hit + (1−h)·miss; cost per success = cost per call / "
                    "pass rate (the expected cost of retrying the same candidate until it passes). Cascade: cost per task = Σ P(reach i)·(call_i + "
                    "verify_i), P(reach i) = Π_{j<i}(1 − pass_j), success = 1 − Π(1 − pass_i), cost per success = cost per "
                    "task / success (independent stage failures). Break-even: for every ordered pair (x, y) the hit rate of x at which x's cost per success "
                    "equals y's at y's own hit rate, null outside [0, 1]. Deadline: pass·(h·[t_hit≤D] + (1−h)·[t_miss≤D]) "
                    "≥ target gives the least hit rate. A self-hosted candidate turns a pool rent h $/hour shared by B "
                    "workers at r tokens/s into an output price (h/B)/(3600·r)·10⁶ and monthly figures (720 h). Limits: "
                    "independent attempts (retries and cascade stages), independence of hit and quality, mean (not tail) "
                    "deadline fraction.",
        request_model=RoutingCostRequest,
        outputs_model=RoutingCostOutputs,
        compute=compute,
        example=EXAMPLE,
        extra_examples=({**EXAMPLE, "requirement": {"min_pass_rate": 0.75},
                         "cascade": [{"candidate": "A", "verify_cost": 0.001}, {"candidate": "B", "verify_cost": 0.001}]},),
        cases=("routing-cost-and-completion", "single-agent-serving-cost", "platform-routing", "cache-events-and-routing"),
        sweepable=("prefix_hit_rate",),
        chart=Chart(x="prefix_hit_rate", y=("candidates.*.cost_per_success",), kind="line",
                    x_label="cache hit rate (fraction of calls)", y_label="USD per successful task", y_unit="USD",
                    marker="break_even.*.hit_rate"),
    ),
]
