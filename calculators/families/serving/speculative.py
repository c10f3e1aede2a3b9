"""Speculative decoding: tokens per round, speedup, best draft length, and verification budgets.

Two calculators of the `speculative` family:

* `speculative-decoding`: one request with per-position acceptance α and k draft tokens. A round
  drafts k tokens and verifies them in one target forward; drafts are accepted in order until the
  first rejection, then the target adds one token of its own (the resampled correction, or a bonus
  token when all k were accepted). Expected tokens per round = 1 + α + … + α^k = (1 − α^(k+1))/(1 − α).
  Speedup = that / (k·c + v), with c the cost of a draft token and v the cost of the verify pass,
  both relative to one plain target decode step. Also the best k, the compendium page's rule of
  thumb for comparison, and a seeded Monte Carlo check. With a target `model` on `hardware`, the plain
  step (target_step_s) and the verify pass over k + 1 positions (hence v per k) come from the step model
  (`_speculative_step`), the same step the planner, serving-cost and tp-overhead give.
* `speculative-verify-budget`: a batch of requests with their own acceptance and draft limits
  (DSpark-style per-request budgets): rows verified, the graph tier that actually runs, round time
  and expected throughput.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, checkpoint, first, fmt_bytes, fmt_s, Fraction,
    FractionSweep, Lookup, MAX_LIST_LENGTH, NonNegFloat, NonNegInt, num, out, Outputs, OutSweep, PosFloat, PosInt,
    request_inputs, request_value, Result, sweep_length, Work,
)
from calculators.framework import headline as hf
from calculators.domain import FormatField, MODEL_CONFIG_FIELD
from calculators.perf import ESTIMATE_FIELD, Estimate
from calculators.families.serving._speculative_step import SpeculativeTargetStepOut, expected_tokens, target_steps


def _out(x):
    """`out`, with a fast path for finite numeric arrays (large sweeps)."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "fiu" and np.isfinite(x).all():
        return x.tolist()
    return out(x)

#: draft lengths searched for the best k
K_SEARCH = np.arange(1, 33)
#: largest number of Bernoulli draws one simulation may make (points × rounds × k)
MAX_DRAWS = 20_000_000
#: largest draft length k (draft tokens verified per round)
MAX_DRAFT_TOKENS = 4096
#: the simulation's cost for the cost model, before it runs: CPU seconds per Bernoulli draw (13–20 ns measured by
#: benchmarks/bench_model_bounds.py; rounded up), and the bytes per draw of one block of about BLOCK_DRAWS draws
#: (uniforms, acceptance flags, prefix products) held at once
DRAW_CPU_S = 25e-9
DRAW_BYTES = 32.0
BLOCK_DRAWS = 1_000_000


def simulation_work(request) -> list[Work]:
    """The Monte Carlo draws a request asks for (points × rounds × the longest draft), priced before any is drawn,
    so that a batch of simulations is summed against the limits like its points (the cost model's `work` hook)."""
    rounds = request_value(request, "simulate.rounds")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds <= 0:
        return []
    alpha, k = request_value(request, "acceptance_rate"), request_value(request, "draft_tokens")
    points = max(sweep_length(alpha), sweep_length(k))
    ks = k if isinstance(k, (list, tuple)) else [4 if k is None else k]
    longest = max((x for x in ks if isinstance(x, int) and not isinstance(x, bool) and x > 0), default=1)
    draws = points * rounds * longest
    return [Work(draws, "random draws", "simulate.rounds", draws * DRAW_CPU_S, min(draws, BLOCK_DRAWS) * DRAW_BYTES)]

#: k: draft tokens per round, 1..4096 (a scalar or a sweep)
DraftTokens = Annotated[int, Field(ge=1, le=MAX_DRAFT_TOKENS)]
DraftTokensSweep = DraftTokens | Annotated[list[DraftTokens], Field(min_length=1, max_length=MAX_LIST_LENGTH)]
#: a draft limit that may be 0 (a request that drafts nothing this round)
DraftLimit = Annotated[int, Field(ge=0, le=MAX_DRAFT_TOKENS)]
#: draft and verify costs relative to one plain decode step
CostRatio = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
PosCostRatio = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class Simulate(CalcRequest):
    """Seeded Monte Carlo of speculative rounds (checks the closed form)."""

    rounds: Annotated[int, Field(ge=1, le=5_000_000)] = Field(description="Rounds to simulate per sweep point (at most 5,000,000; points × rounds × k at most 20,000,000).", examples=[100000])
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = Field(0, description="Seed for numpy.random.default_rng; the same seed gives the same answer.")


class SpeculativeRequest(CalcRequest):
    """One request decoded speculatively."""

    acceptance_rate: FractionSweep = Field(description="α: probability that a draft token is accepted given that all earlier drafts of the round were. Sweepable.", examples=[0.75])
    draft_tokens: DraftTokensSweep = Field(4, description="k: draft tokens proposed per round (≤ 4096). Sweepable.", examples=[4])
    draft_cost_ratio: CostRatio = Field(0.0, description="c: time to produce one draft token relative to one plain target decode step (0 = free, e.g. a lookup).", examples=[0.05])
    verify_cost_ratio: PosCostRatio = Field(1.0, description="v: time of one verify forward over k + 1 positions relative to one plain decode step (1 = memory-bound decode, unchanged by a few extra rows).", examples=[1.0])
    target_step_s: PosFloat | None = Field(None, description="Plain target decode time per token, seconds; turns ratios into seconds.", examples=[0.001])
    setup_s: NonNegFloat | None = Field(None, description="One-off exposed setup (draft index build, transfer), seconds; needs target_step_s.", examples=[2.0])
    decode_fraction: Fraction | None = Field(None, description="Share of end-to-end task time spent decoding; gives the Amdahl end-to-end speedup.", examples=[0.5])
    simulate: Simulate | None = Field(None, description="Also simulate rounds with a seeded generator and report the sample mean and its standard error.")
    model: str | None = Field(None, min_length=1, max_length=100, description="Target model id: with `hardware`, the step "
                              "model gives target_step_s and the verify cost v per draft length.", examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id the target runs on (with a model).",
                                 examples=["h100-sxm"])
    tp: int = Field(1, ge=1, le=1024, description="Target's tensor-parallel degree (with a model).")
    ep: int = Field(1, ge=1, le=1024, description="Target's expert-parallel degree inside the TP group (MoE, with a model).")
    batch: int = Field(1, ge=1, le=65536, description="Sequences the target decodes together (with a model).")
    context_tokens: int = Field(0, ge=0, le=10_000_000, description="Tokens cached per sequence before the step (with a model).")
    weight_format: FormatField | None = Field(None, description="Target weight format (default: the model's published one).")
    kv_format: FormatField | None = Field(None, description="Target KV cache format (default bf16).")
    estimate: Estimate | None = ESTIMATE_FIELD
    link: str | None = Field(None, min_length=1, max_length=100, description="Link of the target's TP group (default: the "
                             "hardware's first listed link).", examples=["nvlink4"])


def compute_speculative(req: SpeculativeRequest, lookup: Lookup) -> Result:
    x = broadcast({"acceptance_rate": req.acceptance_rate, "draft_tokens": req.draft_tokens})
    a, k = x["acceptance_rate"], x["draft_tokens"]
    res = Result(inputs=request_inputs(req), outputs={})
    target = target_steps(req, lookup, res, k, K_SEARCH)
    c, v, v_search, t_step = req.draft_cost_ratio, req.verify_cost_ratio, req.verify_cost_ratio, req.target_step_s
    if target is not None:
        t_step = target.step_s
        if "verify_cost_ratio" in req.model_fields_set:
            res.assume(f"Verify cost: v = {num(v)} as given, not the step model's verify pass.")
        else:
            v = res.step("verify cost", "v = t_verify(k + 1 tokens) / t_step", f"{fmt_s(first(target.verify_s))} / "
                         f"{fmt_s(target.step_s)}", target.verify_s / target.step_s, "steps")
            v_search = target.verify_search_s / target.step_s
    a0, k0 = first(a), int(first(k))
    e = res.step("expected tokens per round", "E = 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)",
                 f"(1 − {num(a0)}^{k0 + 1}) / (1 − {num(a0)})" if a0 < 1 else f"α = 1: k + 1 = {k0 + 1}",
                 expected_tokens(a, k), "tokens")
    cost = res.step("round cost in plain decode steps", "k·c + v", f"{k0} × {num(c)} + {num(first(v))}", k * c + v, "steps")
    speedup = res.step("speedup over plain decoding", "S = E / (k·c + v)", f"{num(first(e))} / {num(first(cost))}", e / cost, "×")
    no_bonus = e - np.power(a, k)

    # best k for each point: vectorised over k = 1..32
    grid = expected_tokens(np.asarray(a)[..., None], K_SEARCH) / (K_SEARCH * c + v_search)
    best_idx = np.argmax(grid, axis=-1)
    best_k = K_SEARCH[best_idx]
    best_speedup = np.take_along_axis(grid, best_idx[..., None], axis=-1)[..., 0]
    res.step("best draft length (k = 1..32)", "argmax_k E(α, k) / (k·c + v)", f"α = {num(a0)}, c = {num(c)}, v = "
             + (num(v) if np.ndim(v_search) == 0 else "v(k) of the step model"), best_k, "tokens")

    # the compendium page's rule of thumb, reading "cost ratio" as the round's cost in target steps
    rule = k * a / cost
    rule_err = rule / speedup - 1.0
    res.step("page rule for comparison", "S_rule = k × α / cost_ratio (cost_ratio = k·c + v)",
             f"{k0} × {num(a0)} / {num(first(cost))}", rule, "×")

    o = {
        "expected_tokens_per_round": _out(e),
        "expected_accepted_drafts": _out(e - 1.0),
        "round_cost_steps": _out(cost),
        "speedup": _out(speedup),
        "best_k": _out(best_k),
        "best_speedup": _out(best_speedup),
        "max_draft_cost_per_round_steps": _out(e - v),
        "tokens_per_round_without_bonus": _out(no_bonus),
        "page_rule_speedup": _out(rule),
        "page_rule_relative_error": _out(rule_err),
    }
    if target is not None:
        o["target_step"] = target.outputs
        if "verify_cost_ratio" not in req.model_fields_set:
            o["verify_cost_ratio"] = _out(v)
    if c == 0 and np.ndim(v_search) == 0:
        below = np.asarray(a) < 1
        lim = np.where(below, 1.0 / ((1.0 - np.where(below, a, 0.0)) * v), np.inf)
        o["speedup_limit_infinite_k"] = _out(lim)
    if t_step is not None:
        t = t_step
        tpt = res.step("time per output token", "t = t_step × (k·c + v) / E", f"{fmt_s(t)} × {num(first(cost))} / {num(first(e))}",
                       t * cost / e, "s")
        o["time_per_token_s"] = _out(tpt)
        o["round_time_s"] = _out(t * cost)
        o["tokens_per_s"] = _out(e / (t * cost))
        o["max_draft_time_per_round_s"] = _out(t * (e - v))
        res.step("largest draft time per round that still gains", "t_draft < E × t_step − v × t_step",
                 f"{num(first(e))} × {fmt_s(t)} − {num(first(v))} × {fmt_s(t)}", t * (e - v), "s")
        if req.setup_s is not None:
            gain = t - tpt
            with np.errstate(divide="ignore", invalid="ignore"):
                amort = np.where(gain > 0, req.setup_s / np.where(gain > 0, gain, 1.0), np.inf)
            res.step("tokens to amortise the setup", "setup / (t_step − t)", f"{fmt_s(req.setup_s)} / ({fmt_s(t)} − {fmt_s(first(tpt))})", amort, "tokens")
            o["setup_amortization_tokens"] = _out(amort)
    elif req.setup_s is not None:
        raise CalcInputError("setup_s", "amortising a setup time needs target_step_s (or a model with hardware)")
    if req.decode_fraction is not None:
        f = req.decode_fraction
        e2e = 1.0 / ((1.0 - f) + f / speedup)
        res.step("end-to-end speedup (Amdahl)", "1 / ((1 − f) + f / S)", f"1 / ((1 − {num(f)}) + {num(f)} / {num(first(speedup))})", e2e, "×")
        o["end_to_end_speedup"] = _out(e2e)

    if req.simulate is not None:
        sim = req.simulate
        npts = int(np.size(e))  # points of the sweep: acceptance_rate, draft_tokens or both
        kmax = int(np.max(k))
        if npts * sim.rounds * kmax > MAX_DRAWS:
            raise CalcInputError(("simulate", "rounds"), f"{npts} points × {sim.rounds} rounds × {kmax} drafts exceeds "
                                 f"{MAX_DRAWS:,} random draws; lower rounds or the sweep", status=413)
        rng = np.random.default_rng(sim.seed)
        av = np.broadcast_to(a, np.shape(e)).reshape(-1)
        kv = np.broadcast_to(k, np.shape(e)).reshape(-1).astype(int)
        s1 = np.zeros(npts)
        s2 = np.zeros(npts)
        block = max(1, BLOCK_DRAWS // max(npts * kmax, 1))
        done = 0
        while done < sim.rounds:
            checkpoint()        # the guard: stop past the request's CPU budget (limits.guard)
            n = min(block, sim.rounds - done)
            # u[p, r, j] < α  ⇔  draft j of round r at point p is accepted (if all before it were)
            u = rng.random((npts, n, kmax))
            ok = (u < av[:, None, None]) & (np.arange(kmax)[None, None, :] < kv[:, None, None])
            tokens = np.cumprod(ok, axis=2).sum(axis=2) + 1.0  # accepted drafts + correction or bonus token
            s1 += tokens.sum(axis=1)
            s2 += (tokens * tokens).sum(axis=1)
            done += n
        mean = s1 / sim.rounds
        if sim.rounds > 1:
            var = np.maximum(s2 - sim.rounds * mean * mean, 0.0) / (sim.rounds - 1)
            se = np.sqrt(var / sim.rounds)
        else:
            se = np.full(npts, np.nan)
        shape = np.shape(e)
        mean, se = mean.reshape(shape), se.reshape(shape)
        res.step("simulated tokens per round", "mean over rounds of (accepted drafts + 1)",
                 f"{sim.rounds:,} rounds, seed {sim.seed}", mean, "tokens")
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, (mean - e) / np.where(se > 0, se, 1.0), 0.0)
        o["simulation"] = {"rounds": sim.rounds, "seed": sim.seed, "mean_tokens_per_round": _out(mean),
                           "standard_error": _out(se), "z_score_vs_closed_form": _out(z),
                           "simulated_speedup": _out(mean / cost)}
    res.outputs = o
    res.assume(
        "Each draft token is accepted with the same conditional probability α, independently, until the first "
        "rejection; the verify pass then contributes one more token (the resampled correction, or a bonus token "
        "when all k drafts were accepted). Rejection sampling keeps the target's output distribution.",
        "Costs are relative to one plain target decode step: a draft token costs c, the verify pass over k + 1 "
        "positions costs v (about 1 while decode is memory-bound; larger when the extra rows cost compute).",
        "End of sequence, output limits, batching effects and KV/draft-state rollback are not counted.",
        "The page's rule 'speedup ≈ k × acceptance / cost ratio' (cost ratio read as k·c + v) counts k·α accepted "
        "tokens: it misses the token the target always adds per round and ignores that a draft only counts if every "
        "earlier draft was accepted, so it grows linearly in k while the true tokens per round saturate at 1/(1 − α). "
        "It is too low when α is near 1 and too high for long drafts with modest α.",
    )
    if req.simulate is not None:
        res.assume("The simulation draws each draft's acceptance from numpy.random.default_rng(seed) and stops at the "
                   "first rejection, adding one target token per round (the page's exercise forgets the bonus token "
                   "after a fully accepted round and accepts by token parity, which makes its α = 0.5).")
    res.headline = _headline(req, res.outputs)
    return res


def _headline(req: SpeculativeRequest, o: dict) -> str:
    """Tokens per round, speedup and the best draft length (a sweep: its first point)."""
    n = hf.n_points(req.acceptance_rate, req.draft_tokens)
    text = (f"Drafting {hf.plural(req.draft_tokens, 'token')} at {hf.fmt_pct(req.acceptance_rate)} acceptance yields "
            f"{hf.fmt_num(o.get('expected_tokens_per_round'))} tokens per verify round, a "
            f"{hf.fmt_num(o.get('speedup'))}× speedup over plain decoding")
    if o.get("tokens_per_s") is not None:
        text += f" ({hf.fmt_num(o['tokens_per_s'])} tokens/s)"
    if o.get("best_k") is not None:
        text += f"; the best draft length is {hf.fmt_count(o['best_k'])} ({hf.fmt_num(o.get('best_speedup'))}×)"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# --------------------------------------------------------------------------- verification budget

class SpecGroup(CalcRequest):
    """Requests with the same acceptance and draft limit."""

    draft_tokens: DraftLimit = Field(description="Draft tokens verified per request per round (the verify limit, 0..4096).", examples=[6])
    acceptance_rate: Fraction | None = Field(None, description="Conditional per-position acceptance α (same at every position).", examples=[0.9])
    position_acceptance: list[Fraction] | None = Field(None, min_length=1, max_length=4096, description="Per-position acceptance instead of α; see `position_acceptance_kind`. Its length may exceed draft_tokens (only the first draft_tokens are used).", examples=[[0.5, 0.25]])
    position_acceptance_kind: Literal["conditional", "cumulative"] = Field("conditional", description="`conditional`: p_j given all earlier accepted; `cumulative`: q_j = share of rounds that accepted at least j drafts (what vLLM's per-position rate logs).")
    count: Annotated[int, Field(ge=1, le=10**6)] = Field(1, description="Requests in this group (at most 1,000,000).")
    label: str | None = Field(None, max_length=100)


class BudgetVariant(CalcRequest):
    """The same batch with other verify limits (e.g. compact budgets) or forced rows."""

    label: str | None = Field(None, max_length=100)
    draft_tokens: Annotated[list[DraftLimit], Field(max_length=1000)] | None = Field(None, description="New draft limit per group (0..4096), in group order.")
    min_executed_rows: NonNegInt | None = Field(None, description="Rows the pass must run anyway in this variant.")


class VerifyBudgetRequest(CalcRequest):
    """One verification round over a batch of speculative requests."""

    groups: list[SpecGroup] = Field(min_length=1, max_length=1000, description="Request groups in the batch.")
    graph_row_tiers: list[PosInt] | None = Field(None, max_length=100, description="Row counts of the captured graphs; a round runs the smallest tier ≥ its rows.", examples=[[8, 16, 32]])
    min_executed_rows: NonNegInt = Field(0, description="Rows the pass must run anyway: another data-parallel rank's rows when ranks share one tier, or the original full graph when results are only masked.", examples=[25])
    fixed_round_s: NonNegFloat = Field(0.0, description="Time per round that does not shrink with fewer rows (draft, host work), seconds.", examples=[0.002])
    per_row_s: NonNegFloat = Field(0.0, description="Time per executed verify row, seconds.", examples=[0.0001])
    row_bytes: Annotated[int, Field(ge=0, le=10**9)] | None = Field(None, description="Bytes per verify row of a per-row buffer (e.g. a packed grammar mask row, at most 1e9), for its capacity.", examples=[18992])
    variants: list[BudgetVariant] = Field(default_factory=list, max_length=20, description="Variants of the batch to compare.")


def _group_expected(g: SpecGroup) -> tuple[float | None, float | None]:
    """Expected tokens per round for one request of the group, and the misread-log value."""
    k = g.draft_tokens
    if g.position_acceptance is not None:
        p = np.asarray(g.position_acceptance[:k], dtype=float)
        if len(p) < k:
            raise CalcInputError("groups", f"position_acceptance has {len(p)} entries for {k} draft tokens")
        if g.position_acceptance_kind == "conditional":
            q = np.cumprod(p)
            return 1.0 + float(q.sum()), None
        if np.any(np.diff(p) > 1e-12):
            raise CalcInputError("groups", "cumulative acceptance cannot increase with position")
        return 1.0 + float(p.sum()), 1.0 + float(np.cumprod(p).sum())
    if g.acceptance_rate is not None:
        return float(expected_tokens(g.acceptance_rate, k)), None
    return None, None


def _whole(n: int) -> int | float:
    """A whole count as a JSON integer while float64 holds it exactly, else as a float (JSON integers stop at 64 bits)."""
    return n if abs(n) < 2**53 else float(n)


def _budget(groups_in: list, tiers, min_rows: int, fixed: float, per_row: float, loc=("groups",)) -> dict:
    groups, total_e, known, rows = [], 0.0, True, 0
    for i, g in enumerate(groups_in):
        try:
            e, misread = _group_expected(g)
        except CalcInputError as err:
            raise CalcInputError(loc + (i,), err.message) from None
        r = g.count * (g.draft_tokens + 1)
        rows += r
        if e is None:
            known = False
        else:
            total_e += g.count * e
        item = {"label": g.label or f"group {i + 1}", "count": g.count, "draft_tokens": g.draft_tokens,
                "expected_tokens_per_request": e, "rows": r}
        if misread is not None:
            item["if_log_misread_as_conditional"] = misread
        groups.append(item)
    need = max(rows, min_rows)
    executed, over = need, False
    if tiers:
        fits = sorted(t for t in tiers if t >= need)
        if fits:
            executed = fits[0]
        else:
            over = True
    rt = fixed + per_row * executed
    return {"groups": groups, "rows": rows, "needed_rows": need, "executed_rows": executed, "padding_rows": executed - rows,
            "above_largest_tier": over, "expected_tokens_per_round": total_e if known else None, "round_s": rt,
            "tokens_per_s": (total_e / rt if rt > 0 else None) if known else None,
            "expected_tokens_per_row": (total_e / executed if executed else None) if known else None}


def compute_verify_budget(req: VerifyBudgetRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    b = _budget(req.groups, req.graph_row_tiers, req.min_executed_rows, req.fixed_round_s, req.per_row_s)
    res.step("verify rows", "Σ count × (k + 1) (each request also verifies its last accepted token)",
             " + ".join(f"{g.count}×({g.draft_tokens}+1)" for g in req.groups[:8]) + (" + …" if len(req.groups) > 8 else ""), b["rows"], "rows")
    if b["expected_tokens_per_round"] is not None:
        res.step("expected tokens per round", "Σ count × E_i, E_i = 1 + Σ_j Π_{i≤j} p_i",
                 " + ".join(f"{g['count']}×{num(g['expected_tokens_per_request'])}" for g in b["groups"][:8]), b["expected_tokens_per_round"], "tokens")
    if req.graph_row_tiers:
        res.step("rows executed", "smallest graph tier ≥ max(rows, rows run anyway)",
                 f"tiers {req.graph_row_tiers}, need {b['needed_rows']}", b["executed_rows"], "rows")
    if b["above_largest_tier"]:
        res.assume(f"{b['needed_rows']} rows exceed the largest graph tier {max(req.graph_row_tiers)}; counted as run eagerly at that size.")
    if req.fixed_round_s or req.per_row_s:
        res.step("round time", "t = fixed + per_row × executed rows", f"{fmt_s(req.fixed_round_s)} + {fmt_s(req.per_row_s)} × {b['executed_rows']}", b["round_s"], "s")
        if b["tokens_per_s"] is not None:
            res.step("expected throughput", "Σ E_i / t", f"{num(b['expected_tokens_per_round'])} / {fmt_s(b['round_s'])}", b["tokens_per_s"], "tokens/s")
    if req.row_bytes is not None:
        b["row_buffer_bytes"] = _whole(b["rows"] * req.row_bytes)
        res.step("per-row buffer capacity", "rows × row bytes", f"{b['rows']} × {num(req.row_bytes)} = {fmt_bytes(b['row_buffer_bytes'])}", b["row_buffer_bytes"], "B")
    variants = []
    for i, v in enumerate(req.variants):
        groups = list(req.groups)
        if v.draft_tokens is not None:
            if len(v.draft_tokens) != len(groups):
                raise CalcInputError(("variants", i, "draft_tokens"), f"{len(v.draft_tokens)} limits for {len(groups)} groups")
            groups = [g.model_copy(update={"draft_tokens": k}) for g, k in zip(groups, v.draft_tokens)]
        vb = _budget(groups, req.graph_row_tiers, req.min_executed_rows if v.min_executed_rows is None else v.min_executed_rows,
                     req.fixed_round_s, req.per_row_s, loc=("variants", i))
        vb["label"] = v.label or f"variant {i + 1}"
        if req.row_bytes is not None:
            vb["row_buffer_bytes"] = _whole(vb["rows"] * req.row_bytes)
        variants.append(vb)
        res.step(f"variant: {vb['label']}", "same batch with the variant's limits", f"{vb['rows']} rows → {vb['executed_rows']} executed",
                 vb["tokens_per_s"] if vb["tokens_per_s"] is not None else vb["executed_rows"], "tokens/s" if vb["tokens_per_s"] is not None else "rows")
    b["variants"] = variants
    res.outputs = _out(b)
    res.assume(
        "Per-request acceptance is conditional on all earlier drafts being accepted; EOS, output limits and "
        "request-end truncation are not counted.",
        "Rows executed are what the kernel runs: masking results of a larger graph saves no matrix work, and ranks that "
        "must share a graph tier all run the largest one.",
        "Round time = fixed part + per-row part; a teaching cost model, to be replaced by measured costs.",
    )
    res.headline = _budget_headline(res.outputs)
    return res


def _budget_headline(o: dict) -> str:
    """Rows a verify batch runs, the padding, and the tokens it yields."""
    text = (f"Verifying {hf.plural(len(o.get('groups') or []), 'group')} of drafts needs {hf.fmt_count(o.get('needed_rows'))} rows; "
            f"the kernel runs {hf.fmt_count(o.get('executed_rows'))} ({hf.fmt_count(o.get('padding_rows'))} padding)"
            f"{' above the largest graph tier' if o.get('above_largest_tier') else ''} and yields "
            f"{hf.fmt_num(o.get('expected_tokens_per_round'))} tokens per round")
    if o.get("round_s") is not None:
        text += f" in {hf.fmt_seconds(o['round_s'])}"
    if o.get("tokens_per_s") is not None:
        text += f", {hf.fmt_num(o['tokens_per_s'])} tokens/s"
    variants = o.get("variants") or []
    if variants:
        v = variants[0]
        text += f"; variant \u201c{v.get('label')}\u201d runs {hf.fmt_count(v.get('executed_rows'))} rows"
    return hf.sentence(text)


# --------------------------------------------------------------------------- outputs

#: a number, or one per point when an input is swept (null where not finite)


class SpeculativeSimulationOut(Outputs):
    rounds: int = Field(description="Rounds simulated per point.")
    seed: int = Field(description="Seed of the generator.")
    mean_tokens_per_round: OutSweep = Field(description="Sample mean of tokens per round (accepted drafts + 1).")
    standard_error: OutSweep = Field(description="Standard error of that mean (null for a single round).")
    z_score_vs_closed_form: OutSweep = Field(description="(sample mean − closed form) / standard error (0 when the "
                                            "error is 0).")
    simulated_speedup: OutSweep = Field(description="Sample mean / round cost, ×.")


class SpeculativeDecodingOutputs(Outputs):
    """Outputs of speculative-decoding; lists where acceptance_rate or draft_tokens is swept. Costs are in plain
    target decode steps."""

    expected_tokens_per_round: OutSweep = Field(description="E = (1 − α^(k+1)) / (1 − α) tokens per verify round.")
    expected_accepted_drafts: OutSweep = Field(description="E − 1, accepted draft tokens per round.")
    round_cost_steps: OutSweep = Field(description="k·c + v, cost of a round in plain decode steps.")
    speedup: OutSweep = Field(description="E / (k·c + v) over plain decoding, ×.")
    best_k: int | list[int] = Field(description="Draft length in 1..32 with the highest speedup.")
    best_speedup: OutSweep = Field(description="Speedup at best_k, ×.")
    max_draft_cost_per_round_steps: OutSweep = Field(description="Largest draft cost per round that still gains, E − v, "
                                                    "in decode steps.")
    tokens_per_round_without_bonus: OutSweep = Field(description="E − α^k: tokens per round if a fully accepted round "
                                                    "added no bonus token.")
    page_rule_speedup: OutSweep = Field(description="The rule of thumb k·α / (k·c + v), ×, for comparison.")
    page_rule_relative_error: OutSweep = Field(description="page_rule_speedup / speedup − 1.")
    speedup_limit_infinite_k: OutSweep = Field(None, description="Speedup as k → ∞, 1 / ((1 − α)·v), × (with "
                                              "draft_cost_ratio 0 and a constant v; null at α = 1).")
    verify_cost_ratio: OutSweep = Field(None, description="v per point, the step model's verify pass ÷ plain step (with a "
                                        "model and hardware).")
    target_step: SpeculativeTargetStepOut | None = Field(None, description="The target's plain step and verify passes "
                                                         "from the step model (with a model and hardware).")
    time_per_token_s: OutSweep = Field(None, description="Time per output token, s (with target_step_s, or a model with "
                                       "hardware).")
    round_time_s: OutSweep = Field(None, description="Time of one round, s (with target_step_s).")
    tokens_per_s: OutSweep = Field(None, description="Output tokens per second, tokens/s (with target_step_s).")
    max_draft_time_per_round_s: OutSweep = Field(None, description="Largest draft time per round that still gains, s "
                                                "(with target_step_s).")
    setup_amortization_tokens: OutSweep = Field(None, description="Output tokens needed to pay back setup_s, tokens "
                                               "(null when drafting does not gain; with setup_s).")
    end_to_end_speedup: OutSweep = Field(None, description="Amdahl speedup of the whole task, × (with decode_fraction).")
    simulation: SpeculativeSimulationOut | None = Field(None, description="Monte Carlo check (with simulate).")


class VerifyBudgetGroupOut(Outputs):
    label: str = Field(description="The group's label (default: group N).")
    count: int = Field(description="Requests in the group.")
    draft_tokens: int = Field(description="Draft tokens each request verifies.")
    expected_tokens_per_request: float | None = Field(description="Expected tokens per round of one request (null "
                                                      "without an acceptance).")
    rows: int = Field(description="Verify rows of the group, count × (k + 1).")
    if_log_misread_as_conditional: float | None = Field(None, description="Tokens per request if the cumulative log "
                                                        "were multiplied again as conditional (cumulative only).")


class VerifyBudgetRoundOut(Outputs):
    """One verification round of a batch (the base request or a variant)."""

    groups: list[VerifyBudgetGroupOut] = Field(description="Per request group, in request order.")
    rows: int = Field(description="Verify rows the requests need, Σ count × (k + 1).")
    needed_rows: int = Field(description="max(rows, rows run anyway).")
    executed_rows: int = Field(description="Rows the pass runs: the smallest graph tier holding needed_rows.")
    padding_rows: int = Field(description="executed_rows − rows.")
    above_largest_tier: bool = Field(description="needed_rows exceed every graph tier (run eagerly at that size).")
    expected_tokens_per_round: float | None = Field(description="Σ count × expected tokens, tokens (null when a group "
                                                    "has no acceptance).")
    round_s: float | None = Field(description="fixed + per_row × executed rows, s.")
    tokens_per_s: float | None = Field(description="Expected tokens / round time, tokens/s (null: unknown or a zero "
                                       "round time).")
    expected_tokens_per_row: float | None = Field(description="Expected tokens / executed rows (null: unknown).")
    row_buffer_bytes: int | float | None = Field(None, description="rows × row_bytes, B (with row_bytes; past 2^53 "
                                                 "written as a float).")


class VerifyBudgetVariantOut(VerifyBudgetRoundOut):
    label: str = Field(description="The variant's label (default: variant N).")


class SpeculativeVerifyBudgetOutputs(VerifyBudgetRoundOut):
    """Outputs of speculative-verify-budget: the round as requested, then each variant."""

    variants: list[VerifyBudgetVariantOut] = Field(description="Variants, in request order.")


CALCULATORS = [
    Calculator(
        name="speculative-decoding",
        family="speculative",
        title="Speculative decoding: tokens per round and speedup",
        summary="Expected tokens per verify round, speedup and time per token for acceptance α, k draft tokens and "
                "draft cost c; the best k; where the rule 'k × acceptance / cost' goes wrong; optional Monte Carlo check.",
        description="E = (1 − α^(k+1)) / (1 − α) tokens per round (k + 1 at α = 1); speedup = E / (k·c + v) with c the "
                    "draft cost per token and v the verify cost, both in plain target decode steps. best_k searches "
                    "k = 1..32. With target_step_s: time per token, the largest draft time that still gains, and the "
                    "tokens needed to amortise a setup. `simulate` runs seeded rounds (draft j accepted with "
                    "probability α while all earlier ones were; one target token per round) and reports the mean with "
                    "its standard error. Limits: constant α per position; no EOS, batching or rollback costs.",
        request_model=SpeculativeRequest,
        compute=compute_speculative,
        outputs_model=SpeculativeDecodingOutputs,
        example={"acceptance_rate": [0.25, 0.5, 0.75, 0.9], "draft_tokens": 4, "draft_cost_ratio": 0.05,
                 "target_step_s": 0.001, "simulate": {"rounds": 20000, "seed": 7}},
        cases=("speculative-execution", "history-drafts-and-rollout", "inference-training-scenarios"),
        sweepable=("acceptance_rate", "draft_tokens"),
        work=simulation_work,
        chart=Chart(x="acceptance_rate", y=("speedup", "page_rule_speedup"), x_label="acceptance rate α", y_label="speedup ×"),
    ),
    Calculator(
        name="speculative-verify-budget",
        family="speculative",
        title="Speculative verification budget for a batch",
        summary="Rows verified per round for requests with their own acceptance and draft limits, the graph tier "
                "actually executed, round time and expected tokens per second.",
        description="Each request verifies k_i + 1 rows and yields E_i = 1 + Σ_j Π_{i≤j} p_i tokens in expectation. "
                    "The round runs the smallest captured graph tier that holds max(rows, rows run anyway); time = "
                    "fixed + per-row × executed rows; throughput = Σ E_i / time. Per-position logs that are already "
                    "cumulative (vLLM's per-position acceptance) are summed, not multiplied again.",
        request_model=VerifyBudgetRequest,
        compute=compute_verify_budget,
        outputs_model=SpeculativeVerifyBudgetOutputs,
        example={"groups": [{"acceptance_rate": 0.9, "draft_tokens": 6}, {"acceptance_rate": 0.5, "draft_tokens": 2},
                            {"acceptance_rate": 0.3, "draft_tokens": 1, "count": 2}],
                 "graph_row_tiers": [8, 16, 32], "fixed_round_s": 0.002, "per_row_s": 0.0001},
        cases=("speculative-execution", "structured-generation"),
    ),
]
