"""serving-estimate's speculative decoding (private to it): what drafting k tokens and verifying them does to a step.

A speculative engine step, for every running sequence, verifies k drafted tokens plus its own next one in one forward
of the target (k + 1 query positions: the GEMMs see B × (k + 1) rows, attention reads the cache once for k + 1
queries, the LM head scores every position) and drafts the next k tokens:

- `mtp`: k passes of the model's own multi-token-prediction module(s) (`num_nextn_predict_layers`; with fewer modules
  than drafts the engines run the last module again, as vLLM and SGLang do for DeepSeek's single module);
- `eagle`: k passes of a one-layer draft head on the target's hidden states, priced as one decoder layer of the
  target's own shape (the MTP module shape of the step model) with its weights and one layer of KV;
- `draft-model`: k decode steps of a separate store model (its own step model at the same tensor parallelism), its
  weights and its KV per request added to the device memory;
- `ngram`: drafts looked up in the prompt and output so far (prompt lookup), no GPU work.

Drafts are accepted in order until the first rejection, each with probability α once the ones before it were (iid),
and the target adds one token of its own, so a step yields E = 1 + α + … + α^k = (1 − α^(k+1)) / (1 − α) tokens
per sequence (`_speculative_step.expected_tokens`, which speculative-decoding uses too). A request then needs (O − 1) / E decode steps after its first token:
the steady state and the simulated run are solved over those steps, TPOT = step ÷ E, ITL is the step (one streamed
chunk of about E tokens per step), and the KV per request is the target's (plus the draft's own where it has one).
Acceptance is an input, never fitted: give α or the mean accepted draft tokens per step.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.domain import FORMATS, as_model, groups_from_model, kv_sizes, layout_of, resolve_model, usable_memory_bytes
from calculators.framework import CalcInputError, CalcRequest, Fraction, NonNegFloat, Outputs, fmt_s, num
from calculators.perf import Split, split_problems, step_ops, weight_bytes_per_rank
from calculators.families.serving._plan_search import _one_layer_kv, weight_formats
from calculators.families.serving._speculative_step import expected_tokens

#: longest draft a serving step verifies here (engines run a handful; each draft is a pass of the step model)
MAX_SERVING_DRAFTS = 64
Method = Literal["mtp", "draft-model", "eagle", "ngram"]


class ServingSpeculativeIn(CalcRequest):
    """Speculative decoding of every running request (the names of the `speculative-decoding` calculator)."""

    method: Method = Field(description="Who drafts: mtp (the model's multi-token-prediction modules), eagle (a "
                           "one-layer draft head on the target's hidden states), draft-model (a smaller store model: "
                           "draft_model), ngram (prompt lookup, no GPU work).", examples=["mtp"])
    draft_tokens: int | None = Field(None, ge=1, le=MAX_SERVING_DRAFTS, description="k: tokens drafted and verified "
                                     "per step (vLLM num_speculative_tokens, SGLang speculative_num_steps); default for "
                                     "mtp: the model's number of MTP modules, required otherwise.", examples=[3])
    acceptance_rate: Fraction | None = Field(None, description="α: probability that a draft token is accepted given "
                                             "that all earlier drafts of the step were (iid per position). An input: "
                                             "measure it on your traffic.", examples=[0.8])
    mean_accepted_tokens: NonNegFloat | None = Field(None, description="Or: mean draft tokens accepted per step, "
                                                     "without the target's own token (≤ k); vLLM's 'mean acceptance "
                                                     "length' and SGLang's 'accept length' are 1 + this.", examples=[1.8])
    draft_model: str | None = Field(None, min_length=1, max_length=100, description="With method draft-model: the "
                                    "draft's store model id.", examples=["llama-3.1-8b"])

    @model_validator(mode="after")
    def _check(self):
        if (self.acceptance_rate is None) == (self.mean_accepted_tokens is None):
            raise ValueError("give acceptance_rate (α per draft token) or mean_accepted_tokens, exactly one: "
                             "acceptance is an input, never fitted")
        if self.method == "draft-model" and self.draft_model is None:
            raise ValueError("method draft-model needs draft_model (a store model id)")
        if self.method != "draft-model" and self.draft_model is not None:
            raise ValueError(f"draft_model is for method draft-model, not {self.method}")
        return self


class ServingSpeculativeOut(Outputs):
    """Speculative decoding as the estimate ran it (acceptance given, never fitted)."""

    method: Method = Field(description="Who drafts.")
    draft_tokens: int = Field(description="k: tokens drafted and verified per step.")
    acceptance_rate: float = Field(description="α per draft token (given, or implied by mean_accepted_tokens).")
    acceptance_given_as: Literal["acceptance_rate", "mean_accepted_tokens"] = Field(
        description="Which input set the acceptance (an input, never fitted to anything).")
    expected_tokens_per_step: float = Field(description="E = (1 − α^(k+1)) / (1 − α): tokens a sequence gains per step.")
    draft_model: str | None = Field(description="The draft model (method draft-model).")
    plain_step_s: float = Field(description="The decode step without speculation at the reached batch, s.")
    verify_step_s: float = Field(description="The target's forward over k + 1 positions per sequence at the reached "
                                 "batch (kernels + collectives), s.")
    draft_s: float = Field(description="The k draft passes at the reached batch (0 for ngram), s.")
    step_s: float = Field(description="The mean step with prefill interference (the ITL), s; TPOT = step_s / E.")
    draft_prefill_s: float = Field(description="What drafting adds to one request's prefill (the draft or MTP "
                                   "module over the prompt), s.")
    draft_weights_per_device_bytes: float = Field(description="Draft weights on one device (MTP modules, draft head or "
                                                  "draft model), B.")
    draft_kv_bytes_per_request_per_device: float = Field(description="The draft's KV of one request at the mean "
                                                         "context on one device, B.")


def alpha_for(mean_accepted: float, k: int) -> float:
    """The iid α whose E − 1 = α + … + α^k is `mean_accepted` (bisection: E rises with α)."""
    if mean_accepted <= 0:
        return 0.0
    if mean_accepted >= k:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if float(expected_tokens(mid, k)) - 1.0 < mean_accepted:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class NoSpeculation:
    """Without `speculative`: every hook hands its input back."""

    on = False

    def memory(self, slots, kv_tokens, w_dev, kv_req):
        return slots, kv_tokens, w_dev, kv_req

    def curve(self, curve, d_bound, d_comm, times, grid, new, cached, factor):
        return curve, d_bound, d_comm

    def steps(self, output_tokens):
        return output_tokens

    def per_token(self, st, used):
        return st

    def outputs(self, outputs: dict) -> dict:
        return {"speculative": None}

    def headline(self, text: str) -> str:
        return text


@dataclass
class Speculation:
    spec: ServingSpeculativeIn
    res: object
    req: object
    lay: object
    split: Split
    wf: object
    kf: object
    hw: object
    groups: list
    ctx: float
    k: int
    alpha: float
    e: float
    drec: object = None
    dlay: object = None
    dsplit: Split | None = None
    dwf: object = None
    extra_w: float = 0.0
    extra_kv: float = 0.0
    on: bool = True
    got: dict = field(default_factory=dict)

    # ---- memory: the draft's weights and KV beside the target's
    def memory(self, slots, kv_tokens, w_dev, kv_req):
        m = self.spec.method
        if m in ("mtp", "eagle"):
            lay_d = self.lay if m == "mtp" else dataclasses.replace(self.lay, mtp_layers=1)
            self.extra_w = float(weight_bytes_per_rank(lay_d, self.split, self.wf, mtp=True)["components_per_rank"]["mtp"])
            sizes = kv_sizes(self.groups, self.kf, FORMATS["fp32"], np.asarray(int(round(self.ctx))),
                             tp=self.split.attention_tp)
            self.extra_kv = lay_d.mtp_layers * _one_layer_kv(self.lay, sizes)
        elif m == "draft-model":
            self.extra_w = float(weight_bytes_per_rank(self.dlay, self.dsplit, self.dwf)["per_rank"])
            dgroups = groups_from_model(self.drec, self.res, "speculative.draft_model")
            self.extra_kv = float(kv_sizes(dgroups, self.kf, FORMATS["fp32"], np.asarray(int(round(self.ctx))),
                                           tp=self.dsplit.attention_tp).device_bytes_per_request)
        if not (self.extra_w or self.extra_kv):
            return slots, kv_tokens, w_dev, kv_req
        req = self.req
        usable = float(usable_memory_bytes(self.hw.memory_bytes, req.memory_utilization, req.runtime_reserve_bytes))
        free, free_new = usable - w_dev, usable - w_dev - self.extra_w
        if free_new <= 0:
            raise CalcInputError(("speculative", "draft_model" if m == "draft-model" else "method"),
                                 f"the draft's {num(self.extra_w / 2**30, 4)} GiB per device do not fit beside the "
                                 f"target's {num(w_dev / 2**30, 4)} GiB: give a larger tp or a smaller draft")
        per_req = kv_req + self.extra_kv
        ranks = self.split.tp if self.split.dp_attention else 1
        new_slots = int(free_new // per_req) * ranks if per_req > 0 else slots
        tokens = int(kv_tokens * (free_new / free) * (kv_req / per_req)) if per_req > 0 else kv_tokens
        self.res.step("KV slots with the draft", "(usable − weights − draft weights) ÷ (KV + draft KV per request)",
                      f"({num(usable / 2**30, 4)} − {num(w_dev / 2**30, 4)} − {num(self.extra_w / 2**30, 4)}) GiB ÷ "
                      f"({num(kv_req / 2**20, 4)} + {num(self.extra_kv / 2**20, 4)}) MiB", new_slots, "requests")
        return new_slots, tokens, w_dev + self.extra_w, per_req

    # ---- the step: verify k + 1 positions, draft k tokens
    def curve(self, curve, d_bound, d_comm, times, grid, new, cached, factor):
        lay, split, wf, kf, k, m = self.lay, self.split, self.wf, self.kf, self.k, self.spec.method
        plain_kern = (curve.decode_s - curve.decode_comm_s) / factor          # the plain step's kernels, unscaled
        vkb, vkm, vc = times(step_ops(lay, "decode", grid, k + 1, self.ctx, split, wf, kf))
        # a verify pass does the plain step's work and more: measured tables interpolated below it are taken as it
        vk = np.maximum(vkm if vkm is not None else vkb, plain_kern)
        zero = np.zeros_like(grid, dtype=float)
        dkb = dk = dc = zero
        pre_k = pre_c = 0.0
        if m in ("mtp", "eagle"):
            lay_d = lay if m == "mtp" else dataclasses.replace(lay, mtp_layers=1)
            fkb, fkm, fc = times(step_ops(lay_d, "decode", grid, k + 1, self.ctx, split, wf, kf, mtp_drafts=k))
            dkb, dc = np.maximum(fkb - vkb, 0.0), np.maximum(fc - vc, 0.0)
            dk = np.maximum(fkm - vkm, 0.0) if vkm is not None else dkb
            a = times(step_ops(lay_d, "prefill", 1, new, cached, split, wf, kf, mtp_drafts=lay_d.mtp_layers))
            b = times(step_ops(lay, "prefill", 1, new, cached, split, wf, kf))
            pre_k = max(float(_kern(a) - _kern(b)), 0.0)
            pre_c = max(float(np.ravel(a[2])[0] - np.ravel(b[2])[0]), 0.0)
        elif m == "draft-model":
            one_b, one_m, one_c = times(step_ops(self.dlay, "decode", grid, 1, self.ctx, self.dsplit, self.dwf, kf))
            dkb, dk, dc = k * one_b, k * (one_m if one_m is not None else one_b), k * one_c
            a = times(step_ops(self.dlay, "prefill", 1, new, cached, self.dsplit, self.dwf, kf))
            pre_k, pre_c = float(_kern(a)), float(np.ravel(a[2])[0])
        comm = vc + dc
        step = (vk + dk + comm) * factor
        self.got = {"grid": grid, "plain": np.asarray(curve.decode_s), "verify": (vk + vc) * factor,
                    "draft": (dk + dc) * factor, "prefill": (pre_k + pre_c) * factor}
        self.res.step("verify step V(1)", "the target's decode step over k + 1 positions per sequence (GEMM rows B × "
                      "(k + 1), attention of k + 1 queries over the cache, logits at every position)",
                      f"k = {k}: V(1) = {fmt_s(float(self.got['verify'][0]))} vs D(1) = "
                      f"{fmt_s(float(curve.decode_s[0]))}", float(self.got["verify"][0]), "s")
        self.res.step("draft cost Q(1)", {"mtp": "k passes of the MTP module (one layer + [embedding; hidden] "
                      "projection + LM head)", "eagle": "k passes of a one-layer draft head of the target's shape",
                      "draft-model": "k decode steps of the draft model", "ngram": "prompt lookup on the CPU: 0"}[m],
                      f"k = {k}", float(self.got["draft"][0]), "s")
        p_new = curve.prefill_s + self.got["prefill"]
        pc_new = curve.prefill_comm_s + pre_c * factor
        extra = {}
        if "own_per_token_s" in {f.name for f in dataclasses.fields(curve)}:     # a run prices prefill per token
            extra["own_per_token_s"] = curve.own_per_token_s + self.got["prefill"] / max(new, 1)
        return (dataclasses.replace(curve, decode_s=step, decode_comm_s=comm * factor, prefill_s=p_new,
                                    prefill_comm_s=pc_new, **extra),
                vkb + vc + dkb + dc, comm * factor)

    # ---- the load: fewer steps per request, then per-token figures
    def steps(self, output_tokens):
        """1 + the decode steps a request of `output_tokens` takes: (O − 1) / E of them after its first token."""
        return 1.0 + (output_tokens - 1.0) / self.e

    def per_token(self, st, used):
        """The steady state (or run) solved over `used` (1 + decode steps per request), read per output token."""
        O = self.req.output_tokens
        f = (used - 1.0) / (O - 1.0) if O > 1 and used > 1 else 1.0 / self.e
        self.got["step_s"] = st.step_s
        self.got["batch"] = st.decode_batch
        tokens = None if st.output_tokens is None else (
            1.0 + (st.output_tokens - 1.0) / f if f > 0 else st.output_tokens)
        self.res.step("TPOT with speculation", "T ÷ E: each step yields E tokens per sequence", f"{fmt_s(st.step_s)} ÷ "
                      f"{num(self.e, 4)}", st.step_s * f, "s")
        return dataclasses.replace(st, step_s=st.step_s * f,
                                   tpot_p50_s=None if st.tpot_p50_s is None else st.tpot_p50_s * f, output_tokens=tokens)

    def outputs(self, outputs: dict) -> dict:
        g, b = self.got, self.got.get("batch")
        at = (lambda a: float(np.interp(b, g["grid"], a))) if b is not None and math.isfinite(b) else (lambda a: float(a[0]))
        step = g.get("step_s")
        bound = outputs.get("bound_tpot_s")
        return {
            "itl_s": {"mean": float(step) if step is not None and math.isfinite(step) else None},
            "bound_tpot_s": bound / self.e if bound is not None else None,
            "speculative": {
                "method": self.spec.method, "draft_tokens": self.k, "acceptance_rate": self.alpha,
                "acceptance_given_as": "acceptance_rate" if self.spec.acceptance_rate is not None else "mean_accepted_tokens",
                "expected_tokens_per_step": self.e, "draft_model": self.drec.id if self.drec is not None else None,
                "plain_step_s": at(g["plain"]), "verify_step_s": at(g["verify"]), "draft_s": at(g["draft"]),
                "step_s": float(step) if step is not None and math.isfinite(step) else at(g["verify"]) + at(g["draft"]),
                "draft_prefill_s": float(g["prefill"]), "draft_weights_per_device_bytes": self.extra_w,
                "draft_kv_bytes_per_request_per_device": self.extra_kv,
            },
        }

    def headline(self, text: str) -> str:
        what = self.spec.method + (f" {self.drec.id}" if self.drec is not None else "")
        return (text.rstrip(".") + f"; speculative ({what}, k = {self.k}, α = {num(self.alpha, 3)} given: "
                f"{num(self.e, 3)} tokens per step).")


def _kern(t) -> float:
    kb, km, _ = t
    return np.ravel(km if km is not None else kb)[0]


def speculation(req, res, lay, split: Split, hw, wf, kf, groups, ctx: float, lookup) -> Speculation | NoSpeculation:
    """The request's speculative decoding, checked against the model and split (NoSpeculation without one)."""
    spec: ServingSpeculativeIn | None = getattr(req, "speculative", None)
    if spec is None:
        return NoSpeculation()
    m = spec.method
    if req.pp > 1:
        raise CalcInputError(("speculative", "method"), "speculative decoding with pipeline stages (pp > 1) is not "
                             "modelled here: give pp = 1")
    if m == "mtp" and not lay.mtp_layers:
        raise CalcInputError(("speculative", "method"), f"{lay.name} ships no multi-token-prediction module "
                             "(num_nextn_predict_layers is 0 or absent): use eagle, draft-model or ngram")
    k = spec.draft_tokens if spec.draft_tokens is not None else (lay.mtp_layers if m == "mtp" else None)
    if k is None:
        raise CalcInputError(("speculative", "draft_tokens"), f"method {m} needs draft_tokens (k)")
    if spec.mean_accepted_tokens is not None and spec.mean_accepted_tokens > k:
        raise CalcInputError(("speculative", "mean_accepted_tokens"), f"at most k = {k} drafts can be accepted per "
                             f"step, not {num(spec.mean_accepted_tokens)}")
    alpha = spec.acceptance_rate if spec.acceptance_rate is not None else alpha_for(spec.mean_accepted_tokens, k)
    e = float(expected_tokens(alpha, k)) if spec.acceptance_rate is not None else 1.0 + spec.mean_accepted_tokens
    out = Speculation(spec, res, req, lay, split, wf, kf, hw, groups, ctx, int(k), float(alpha), e)
    if m == "draft-model":
        loc = ("speculative", "draft_model")
        drec = as_model(resolve_model(lookup, spec.draft_model, loc)[0])
        try:
            dlay = layout_of(drec, "speculative.draft_model")
        except CalcInputError as exc:
            raise CalcInputError(loc, f"the step model cannot read {drec.id}'s layers: {exc.message}") from None
        dsplit = Split(tp=req.tp)
        why = split_problems(dlay, dsplit)
        if why:
            raise CalcInputError(loc, f"{drec.id} at the target's TP {req.tp}: " + "; ".join(why))
        if dlay.vocab != lay.vocab:
            res.assume(f"The draft {drec.id} has a vocabulary of {dlay.vocab:,} tokens, the target {lay.vocab:,}: "
                       "engines need the same tokenizer (padding of the embedding table aside).")
        dwf, dname = weight_formats(drec, None)
        out.drec, out.dlay, out.dsplit, out.dwf = drec, dlay, dsplit, dwf
        res.assume(f"Draft model {drec.id} ({dname} as published) at TP {req.tp} beside the target: its weights and "
                   "KV are added to each device; each of its k passes is one decode step of one token per sequence.")
    given = (f"α = {num(alpha, 4)} given" if spec.acceptance_rate is not None else
             f"{num(spec.mean_accepted_tokens, 4)} accepted drafts per step given (implied iid α = {num(alpha, 4)})")
    res.step("expected tokens per step E", "(1 − α^(k+1)) / (1 − α) = 1 + α + … + α^k",
             f"k = {k}, α = {num(alpha, 4)}", e, "tokens")
    res.assume(f"Speculative decoding ({m}): each step verifies k = {k} drafts + 1 position per sequence in one target "
               f"forward and drafts the next {k}; {given}. Acceptance is an input, never fitted; drafts are accepted "
               "in order, each with the same probability (iid), so a step yields E tokens and TPOT = step ÷ E; ITL is "
               "the step (one streamed chunk per step). The benchmark's output lengths are kept (no early stop).")
    if m == "mtp" and k > lay.mtp_layers:
        res.assume(f"{lay.name} ships {lay.mtp_layers} MTP module(s) for k = {k} drafts: the last module runs again for "
                   "the extra drafts (as vLLM and SGLang chain them); its acceptance is what you gave.")
    if m == "eagle":
        res.assume("EAGLE head priced as one decoder layer of the target's own shape (the step model's MTP module "
                   "shape, MoE when the target's layers are) plus its [embedding; hidden] projection, one layer of KV.")
    if m == "ngram":
        res.assume("ngram drafts come from a lookup in the prompt and output so far on the CPU: no GPU time, no memory.")
    return out


__all__ = ["MAX_SERVING_DRAFTS", "NoSpeculation", "Speculation", "ServingSpeculativeIn", "ServingSpeculativeOut", "alpha_for",
           "speculation"]
