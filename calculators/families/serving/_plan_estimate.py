"""The deployment planner's second pass (private to `deployment_plan`): the shortlisted candidates of the vectorised
screen re-estimated by `serving-estimate` at the plan's load, their SLOs checked again on those figures.

The screen times a candidate by its decode step and one prefill, with M/M/1 queueing on the prefill and the decode
step stretched by the prefill load. `serving-estimate` runs the same deployment the way an engine does: continuous
batching with chunked prefill (each step decodes every running request and adds prefill chunks within the token
budget, so TPOT carries the prefill interference at the batch the load reaches), KV slots capped by `batch`
(max_num_seqs) and the KV memory, Poisson arrivals at `arrival_rate_per_s` over the replicas (an M/D/1 queue for the
token budget gives the TTFT tail). The screen's cost order picks which candidates are re-estimated:

- aggregated candidates that meet the SLOs on the screen, or sit on its Pareto front, cheapest first, at most
  `RE_ESTIMATED`; if none of those meets the SLOs on the re-estimate, the walk goes on (at most `RE_ESTIMATED_MAX`)
  until one does;
- not re-estimated (their figures stay the screen's, each row says so in `figures`): disaggregated candidates
  (serving-estimate models aggregated engines), candidates on hardware without measured kernels, a measured proxy or a
  fitted factor (serving-estimate would time them at the peak-rate bound, which the screen corrects by the
  measured/bound ratio of the plan's measured hardware), and plans with skewed routing (serving-estimate does not
  model it).
- with MTP drafting, each re-estimate drafts the same way: serving-estimate's `speculative` with method mtp, the
  model's MTP modules as drafts and the plan's acceptance rate.

Each re-estimate calls the calculator's compute (from the registry) with a validated request, not the runner (no JSON parsing, no cost
check): its figures are exactly the calculator's for the same body, which each row carries as `serving_estimate.request`.
"""
from __future__ import annotations

import math

from calculators.domain import record
from calculators.families.serving._plan_search import DEFAULT_MTP_ACCEPTANCE
from calculators.framework import CalcInputError, Lookup, Result, Work, fmt_s, num

#: shortlisted candidates re-estimated by serving-estimate, in the screen's cost order
RE_ESTIMATED = 48
#: the walk's hard cap when none of the first RE_ESTIMATED meets the SLOs on the re-estimate
RE_ESTIMATED_MAX = 144
#: CPU seconds of one re-estimate (benchmarks/bench_plan_estimate.py: 7–13 ms on the planner's examples)
ESTIMATE_CPU_S = 0.012


def second_pass_work(request) -> list[Work]:
    """The cost model's price of the second pass: RE_ESTIMATED serving-estimate calls, plus the best plan's nearest
    published run (one more estimate), whatever the number of configurations screened."""
    return [Work(RE_ESTIMATED + 2, "serving-estimate re-estimates", "hardware", (RE_ESTIMATED + 2) * ESTIMATE_CPU_S)]


def _body(req, row: dict, link: str | None) -> dict:
    """The serving-estimate request of one aggregated candidate at the plan's load."""
    body = {"hardware": row["hardware"], "tp": row["tp"], "pp": row["pp"], "ep": row["ep"],
            "dp_attention": bool(row["dp_attention"]), "replicas": int(row["replicas"]), "framework": req.framework,
            "input_tokens": req.input_tokens, "output_tokens": req.output_tokens,
            "arrival_rate_per_s": req.arrival_rate_per_s, "prefix_hit_rate": req.prefix_hit_rate,
            "max_num_seqs": int(row["batch"]), "kv_format": req.kv_format or "bf16"}
    if req.model is not None:
        body["model"] = req.model
    else:
        body["model_config"] = req.hf_config
    if req.weight_format is not None:
        body["weight_format"] = req.weight_format
    if req.estimate is not None:
        body["estimate"] = req.estimate
    if link is not None:
        body["link"] = link
    if req.mtp:
        body["speculative"] = {"method": "mtp", "acceptance_rate": req.mtp_acceptance_rate
                               if req.mtp_acceptance_rate is not None else DEFAULT_MTP_ACCEPTANCE}
    if req.memory_utilization is not None:
        body["memory_utilization"] = req.memory_utilization
    if req.runtime_reserve_bytes is not None:
        body["runtime_reserve_bytes"] = req.runtime_reserve_bytes
    return body


def estimate(body: dict, lookup: Lookup, nearest: bool = False) -> dict:
    """serving-estimate's outputs for `body` (a CalcInputError when it refuses the deployment)."""
    from calculators.framework.registry import REGISTRY      # at call time: the registry imports this family

    calc = REGISTRY["serving-estimate"]
    return calc.compute(calc.request_model.model_validate(body), lookup, nearest=nearest).outputs


def summary(o: dict, body: dict) -> dict:
    """What a candidate keeps of a serving-estimate answer."""
    return {"request": body, "stable": o["stable"], "ttft_s": o["ttft_s"], "tpot_s": o["tpot_s"]["mean"],
            "e2e_s": o["e2e_s"]["mean"], "requests_per_s": o["requests_per_s"],
            "output_tokens_per_s_per_device": o["output_tokens_per_s_per_device"],
            "concurrency": o["concurrency"], "decode_batch": o["decode_batch"], "queue_wait_s": o["queue_wait_s"],
            "slots_per_engine": o["slots_per_engine"], "prefill_share": o["step_shares"]["prefill"],
            "bound_tpot_s": o["bound_tpot_s"], "basis": o["basis"]}


def _apply(req, row: dict, est: dict) -> None:
    """The candidate's latencies and SLO check on the serving-estimate figures (the screen's kept under `screen`)."""
    row["screen"] = {"ttft_s": row["ttft_s"], "tpot_s": row["tpot_s"], "tokens_per_s_per_user": row["tokens_per_s_per_user"],
                     "meets_slo": row["meets_slo"], "reason": row["reason"]}
    row["figures"] = "serving-estimate"
    row["serving_estimate"] = est
    if not est["stable"]:
        row.update(ttft_s=None, tpot_s=None, tokens_per_s_per_user=0.0, meets_slo=False,
                   reason="serving-estimate: the load exceeds what these replicas serve (the queue grows without end)")
        return
    ttft, tpot = est["ttft_s"]["p90"], est["tpot_s"]
    row.update(ttft_s=ttft, tpot_s=tpot, tokens_per_s_per_user=1.0 / tpot if tpot else 0.0)
    fails = []
    if not (tpot <= req.tpot_s * (1 + 1e-9)):
        fails.append(f"TPOT {fmt_s(tpot)} > {fmt_s(req.tpot_s)} with prefill interference "
                     f"({num((est['prefill_share'] or 0) * 100, 3)} % of the steps prefill)")
    if not (ttft <= req.ttft_s * (1 + 1e-9)):
        fails.append(f"TTFT p90 {fmt_s(ttft)} > {fmt_s(req.ttft_s)}")
    row["meets_slo"] = not fails
    if fails:
        row["reason"] = "serving-estimate: " + "; ".join(fails)


def _refused(row: dict, message: str) -> None:
    row["screen"] = {"ttft_s": row["ttft_s"], "tpot_s": row["tpot_s"], "tokens_per_s_per_user": row["tokens_per_s_per_user"],
                     "meets_slo": row["meets_slo"], "reason": row["reason"]}
    row["figures"] = "serving-estimate"
    row["serving_estimate"] = None
    row.update(meets_slo=False, reason=f"serving-estimate refuses this deployment: {message}")


def shortlist(plans: list[dict], pareto_ids: set[int]) -> list[dict]:
    """Aggregated candidates that meet the SLOs on the screen or sit on its Pareto front, cheapest first (the
    screen's order: cost per output token, devices, TP; unpriced ones last)."""
    pick = [p for p in plans if p["mode"] == "aggregated" and p["fits"] and p["replicas"]
            and (p["meets_slo"] or id(p) in pareto_ids)]
    inf = math.inf
    pick.sort(key=lambda p: (p["cost_per_mtok_usd"] if p["cost_per_mtok_usd"] is not None else inf,
                             p["total_devices"] or inf, p["tp"], p["batch"]))
    return pick


def re_estimate(req, res: Result, lookup: Lookup, plans: list[dict], pareto_ids: set[int], measured: set[str]) -> dict:
    """Re-estimate the shortlist in place; returns what the answer says about the pass (counts and why rows were
    skipped; no CPU time, so that the same request always gets the same answer — benchmarks/bench_plan_estimate.py
    measures it)."""
    skipped = None
    if req.expert_skew and any(p["ep"] > 1 or p["dp_attention"] for p in plans):
        skipped = "routing is skewed (expert_skew), which serving-estimate does not model"
    for p in plans:
        p.setdefault("figures", "screen")
    done = passed = 0
    if skipped is None:
        links = req.link or {}
        for p in shortlist(plans, pareto_ids):
            if p["hardware"] not in measured:
                continue
            if done >= RE_ESTIMATED_MAX or (done >= RE_ESTIMATED and passed):
                break
            body = _body(req, p, links.get(p["hardware"]))
            try:
                _apply(req, p, summary(estimate(body, lookup), body))
            except CalcInputError as exc:
                _refused(p, exc.message)
            done += 1
            passed += p["meets_slo"]
    return {"re_estimated": done, "meeting_slo": passed, "limit": RE_ESTIMATED, "skipped": skipped}


def verified(p: dict, measured: set[str], second: dict) -> bool:
    """A candidate `best` may be: re-estimated, or one the pass does not re-estimate by rule (disaggregated, on
    hardware without measured kernels or a fitted factor, or every candidate when the pass is skipped), not one left beyond the cap."""
    return (p["figures"] == "serving-estimate" or p["mode"] == "disaggregated" or p["hardware"] not in measured
            or second["skipped"] is not None)


def say_second_pass(res: Result, second: dict) -> None:
    if second["skipped"]:
        res.assume(f"No candidate is re-estimated by serving-estimate: {second['skipped']}; every figure is the screen's.")
        return
    res.assume(f"Second pass: the {second['re_estimated']} cheapest aggregated candidates on hardware with measured kernels, "
               "a measured proxy device or a fitted calibration factor (serving-estimate scales its step times by it) "
               "that meet the "
               f"SLOs on the screen or sit on its Pareto front (at most {second['limit']}, more only until "
               "one meets them) are re-estimated by serving-estimate at the plan's load (Poisson arrivals at "
               "arrival_rate_per_s over the replicas, max_num_seqs = batch): continuous batching with chunked prefill, "
               "so TPOT carries the prefill interference and TTFT the queueing for the token budget. Their ttft_s "
               "(p90), tpot_s and meets_slo are serving-estimate's (`figures`: serving-estimate; the screen's under "
               f"`screen`); {second['meeting_slo']} of them meet the SLOs. Every other row keeps the screen's figures "
               "(`figures`: screen): disaggregated pools (serving-estimate models aggregated engines), hardware without "
               "measured kernels or a fitted factor (serving-estimate would time it at the peak-rate bound), and rows beyond the cap, "
               "which are not chosen as best.")


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{num(x * 100, 3)} %"


def class_errors(lookup: Lookup, hardware: str, framework: str) -> dict | None:
    """The validation errors of serving-estimate on the stored published runs of one hardware × framework (lookup
    kind "validation_class"), None where the store serves no such kind."""
    try:
        return dict(record(lookup, "validation_class", f"{hardware}/{framework}", "hardware").items())
    except CalcInputError:
        return None


def describe_best(req, res: Result, lookup: Lookup, best: dict) -> None:
    """`best` gets the nearest stored published run (serving-estimate's own comparison: that run estimated the same
    way, with the error there) and the validation error of its class; both said in the assumptions."""
    body = best.get("serving_estimate", {}) or {}
    body = body.get("request") or _body(req, {**best, "replicas": best["replicas"] or 1, "pp": best.get("pp") or 1},
                                        (req.link or {}).get(best["hardware"]))
    try:
        found = estimate(body, lookup, nearest=True)["nearest_measurements"]
    except (CalcInputError, ValueError):
        found = []
    best["nearest_measurement"] = found[0] if found else None
    if found:
        n = found[0]
        err = "; ".join(f"{k} {v * 100:+.3g} %" for k, v in n["error"].items() if v is not None)
        res.assume(f"Nearest stored published run to the best plan: {n['id']} ({n['source']}, distance "
                   f"{num(n['distance'], 3)}); serving-estimate's error there: {err or 'no comparable figure'}.")
    else:
        res.assume("No stored published run of this model or accelerator to compare the best plan with: its estimate "
                   "is not validated.")
    cls = class_errors(lookup, best["hardware"], req.framework)
    best["validation_class"] = cls and {k: cls[k] for k in ("id", "points", "tpot_s", "output_tokens_per_s_per_device",
                                                             "ttft_s")}
    if cls and cls["tpot_s"]["n"]:
        t = cls["tpot_s"]
        res.assume(f"Estimates of this kind (serving-estimate on {best['hardware']} with {req.framework}) are within "
                   f"±{_pct(t['p90_abs_error'])} TPOT on 90 % of {t['n']} published points (median ±"
                   f"{_pct(t['median_abs_error'])}, largest ±{_pct(t['max_abs_error'])}; the validation report lists "
                   "them)." + ("" if best.get("figures") == "serving-estimate" else
                               " The best plan's own figures are the screen's, not serving-estimate's."))
    else:
        res.assume(f"No published point of {best['hardware']} with {req.framework} is compared by the validation: "
                   "the error of estimates of this kind is not measured.")


__all__ = ["second_pass_work", "class_errors", "describe_best", "say_second_pass", "verified", "RE_ESTIMATED", "RE_ESTIMATED_MAX", "estimate", "re_estimate", "shortlist", "summary"]
