"""Serving estimate: what a serving benchmark (`vllm bench serve`, `genai-perf`, `trtllm-bench`) would report for one
deployment — TTFT, TPOT, ITL, end-to-end latency and tokens/s per device at a closed-loop concurrency, a Poisson
rate, or offline.

Steps:
1. the engine's step times from the step model (`calculators.perf`): the decode step of one engine at a grid of
   batches at the mean decode context I + O/2 (measured kernels of the framework on the GPU where they exist,
   else the peak-rate bound), plus the collectives over the tensor-parallel link; one request's prefill as the
   time its chunks add to the steps they share (each chunk's step minus the weight reads a step makes anyway);
2. KV capacity: what one device holds after its weights, per request at the mean context, capped by
   `max_num_seqs`;
3. the steady state of continuous batching with chunked prefill (`_serving_estimate_model`): TPOT = D(B) / (1 −
   X·P), solved with the load (Little's law for a closed loop; M/D/1 for the token budget under Poisson arrivals),
   checked against a step-by-step simulation in the tests.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.domain import (
    FORMATS, FormatField as Format, MODEL_CONFIG_FIELD, groups_from_model, hardware_spec, kv_sizes, layout_of,
    model_record, note_scope, resolve_format, usable_memory_bytes,
)
from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Fraction, Lookup, NonNegFloat, PosFloat, Profile, Result, fmt_s,
    num, request_inputs,
)
from calculators.framework import headline as hf
from calculators.perf import (
    DUAL_STREAM_TOKENS, ESTIMATE_FIELD, Estimate, FRAMEWORK_FIELD, MeasuredFramework, Split, bound_of, collectives_s,
    dual_stream_hidden_s, kernel_source, load_system, measured_of, rates_from_spec, runs_dual_stream, split_problems,
    step_ops, tp_link, weight_bytes_per_rank,
)
from calculators.families.serving._benchmark_points import calibration, measured_figures, nearest_points
from calculators.families.serving._plan_search import weight_formats
from calculators.families.serving._serving_estimate_model import (
    MAX_RUN_STEPS, SteadyState, StepCurve, closed_loop, open_loop, run,
)
from calculators.families.serving._serving_estimate_outputs import ServingEstimateOutputs
from calculators.families.serving._serving_estimate_spec import ServingSpeculativeIn, speculation

#: the token budget of a step (prefill chunk + decode tokens) when none is given: vLLM V1's max_num_batched_tokens
#: for its API server on GPUs of ≥ 70 GiB, SGLang's chunked_prefill_size and TensorRT-LLM's max_num_tokens all default
#: to 8,192 in the versions the measured kernels come from (engine defaults, not store facts)
DEFAULT_TOKEN_BUDGET = 8192
#: running requests an engine admits when max_num_seqs is not given (engine defaults, as above; SGLang sizes its
#: max_running_requests from memory, so only the KV capacity caps it)
DEFAULT_MAX_SEQS = {"vllm": 1024, "sglang": None, "trtllm": 2048}
#: whether the engine mixes prefill chunks into decode steps by default: vLLM V1 and TensorRT-LLM do; SGLang runs a
#: prefill batch on its own unless --enable-mixed-chunk is given (an engine default, not a store fact)
MIXED_PREFILL = {"vllm": True, "sglang": False, "trtllm": True}
#: the decode-batch grid the step curve is evaluated on (interpolated between), up to the engine's slots
_GRID = np.unique(np.round(np.geomspace(1, 1 << 16, 49))).astype(float)
#: stored published runs each answer compares itself with (each costs one more estimate)
NEAREST = 1
#: prefill chunks timed one by one; a longer prompt is timed by its first and last chunks and interpolated
_MAX_CHUNKS = 64


class ServingEstimateRequest(CalcRequest):
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id of the store.",
                              examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    hardware: str = Field(min_length=1, max_length=100, description="Hardware id (one device's memory, bandwidth and "
                          "peaks; its measured kernels where NVIDIA AIConfigurator measured them).", examples=["h100-sxm"])
    tp: int = Field(1, ge=1, le=1024, description="Tensor-parallel degree of an engine.")
    pp: int = Field(1, ge=1, le=256, description="Pipeline stages of an engine (each keeps pp micro-batches in flight, "
                       "as vLLM's virtual engines do).")
    ep: int = Field(1, ge=1, le=1024, description="Expert-parallel degree inside the TP group (MoE).")
    dp_attention: bool = Field(False, description="Attention data-parallel over the tp ranks (MoE; SGLang's "
                               "--enable-dp-attention): each rank runs the attention of its own requests, ep = tp.")
    replicas: int = Field(1, ge=1, le=100_000, description="Independent copies of the engine behind one load balancer.")
    weight_format: Format | None = Field(None, description="Weight format (default: the model's published one).")
    kv_format: Format = Field("bf16", description="KV cache format (vLLM's default `auto` is the model dtype, BF16).")
    framework: MeasuredFramework = FRAMEWORK_FIELD
    estimate: Estimate | None = ESTIMATE_FIELD
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id of the tensor-parallel group "
                             "(default: the hardware's scale-up link).")
    moe_kernel: Literal["trtllm"] | None = Field(None, description="The MoE kernel family the engine was launched with, "
                                                 "where it has a choice (default: the kernels the framework's own "
                                                 "measured table holds). trtllm: TensorRT-LLM's generated MoE kernels "
                                                 "(TensorRT-LLM `moe_config: backend: TRTLLM`; SGLang and vLLM run them "
                                                 "through FlashInfer), timed on the rows of whichever framework's table "
                                                 "on this GPU measured them (SGLang's first).")
    input_tokens: int = Field(ge=1, le=10_000_000, description="Mean input (prompt) tokens per request.", examples=[1024])
    output_tokens: int = Field(ge=1, le=1_000_000, description="Mean output tokens per request.", examples=[1024])
    concurrency: int | None = Field(None, ge=1, le=10_000_000, description="Closed loop: this many users, each sending its "
                                       "next request when the last one ends (`vllm bench serve --max-concurrency`).",
                                       examples=[64])
    arrival_rate_per_s: PosFloat | None = Field(None, description="Open loop: Poisson arrivals per second (`vllm bench "
                                                "serve --request-rate`). With neither this nor concurrency: offline, "
                                                "as many requests as the KV cache holds (`trtllm-bench throughput`).")
    num_prompts: int | None = Field(None, ge=1, le=100_000, description="A finite run of this many requests, simulated "
                                    "step by step as the benchmark sends them: with `concurrency`, a closed loop that "
                                    "stops after num_prompts (its first wave arrives at once); alone, a burst "
                                    "(`--request-rate inf` without a concurrency cap). Without it: the steady state.")
    output_tokens_spread: Fraction = Field(0.0, description="Output lengths uniform over output_tokens × [1 − spread, "
                                           "1 + spread] in a simulated run (0: all equal).")
    input_tokens_spread: Fraction = Field(0.0, description="The same for input lengths.")
    prefix_hit_rate: Fraction = Field(0.0, description="Share of each prompt found in the prefix cache (0..1): not "
                                      "prefilled again, still attended to.")
    chunked_prefill_tokens: int = Field(DEFAULT_TOKEN_BUDGET, ge=1, le=1_048_576, description="Token budget of one step "
                                           "(vLLM max_num_batched_tokens, SGLang chunked_prefill_size, TensorRT-LLM "
                                           "max_num_tokens); default 8,192.")
    max_num_seqs: int | None = Field(None, ge=1, le=1_000_000, description="Running requests an engine admits (default: "
                                        "vLLM 1,024, TensorRT-LLM 2,048, SGLang only its KV capacity).")
    memory_utilization: Fraction = Field(0.9, description="Fraction of device memory the engine may use (vLLM's "
                                         "gpu_memory_utilization; default 0.9).")
    runtime_reserve_bytes: NonNegFloat = Field(0.0, description="Bytes per device kept for activations, CUDA graphs "
                                               "and the runtime on top of the weights (default 0).")
    calibration: Literal["auto", "none"] = Field("auto", description="auto: scale every step time by the efficiency "
                                                 "factor fitted on stored published runs of this hardware × framework "
                                                 "(else this hardware), where one exists (the answer names it, its "
                                                 "points and sources, and its leave-one-source-out error); none: the "
                                                 "step model's times, unscaled.")
    speculative: ServingSpeculativeIn | None = Field(None, description="Speculative decoding: each step verifies k drafts + 1 "
                                              "position per sequence and yields (1 − α^(k+1)) / (1 − α) tokens; "
                                              "acceptance is an input (default: off).")

    @model_validator(mode="after")
    def _check(self):
        if self.model is None and self.hf_config is None:
            raise ValueError("give `model` (an id) or `model_config`")
        if self.concurrency is not None and self.arrival_rate_per_s is not None:
            raise ValueError("give concurrency (closed loop) or arrival_rate_per_s (Poisson), not both")
        if self.num_prompts is not None and self.arrival_rate_per_s is not None:
            raise ValueError("num_prompts simulates a closed loop or a burst; a Poisson load is answered in its "
                             "steady state (drop num_prompts)")
        return self


def _slots(req, res: Result, lay, groups, hw, split: Split, wf, kf, ctx: float) -> tuple[int, int, float, float]:
    """(KV slots per engine, KV tokens per engine, weight bytes per device, KV bytes per request per device)."""
    usable = float(usable_memory_bytes(hw.memory_bytes, req.memory_utilization, req.runtime_reserve_bytes))
    w = float(weight_bytes_per_rank(lay, split, wf)["per_rank"])
    free = usable - w
    if free <= 0:
        raise CalcInputError("tp", f"one device of {hw.id} holds {num(usable / 2**30, 4)} GiB usable; its share of the "
                             f"weights is {num(w / 2**30, 4)} GiB: give a larger tp or pp, or a smaller weight_format")
    at = split.attention_tp
    per_req = float(kv_sizes(groups, kf, FORMATS["fp32"], np.asarray(int(round(ctx))), tp=at).device_bytes_per_request)
    per_tok = float(kv_sizes(groups, kf, FORMATS["fp32"], np.asarray(1), tp=at).device_bytes_per_request)
    per_req, per_tok = per_req / split.pp, per_tok / split.pp
    ranks_holding = split.tp if split.dp_attention else 1     # dp attention: each rank keeps its own requests' KV
    slots = int(free // per_req) * ranks_holding if per_req > 0 else 10**9
    tokens = int(free // per_tok) * ranks_holding if per_tok > 0 else 10**12
    res.step("weights per device", "the split's share of the weights (experts over ep, the rest over tp, layers over pp)",
             f"TP {split.tp}, EP {split.ep}, PP {split.pp}", w, "B")
    res.step("KV slots", "(usable − weights) ÷ KV per request at the mean context I + O/2"
             + (" × tp (DP attention)" if split.dp_attention else ""),
             f"({num(usable / 2**30, 4)} − {num(w / 2**30, 4)}) GiB ÷ {num(per_req / 2**20, 4)} MiB", slots, "requests")
    return slots, tokens, w, per_req


def _times(ops, rates, system, framework, link, scale: float = 1.0):
    """(kernels bound, kernels measured or None, collectives) of one operation list, arrays over its points; the
    measured kernels less what SGLang's dual-stream MoE hides (`dual_stream_hidden_s`), × `scale` (a proxy device's
    bandwidth ratio, else 1)."""
    kb = np.asarray(bound_of(ops, rates).total_s, dtype=float)
    comm = collectives_s(ops, link)
    km = None
    if system is not None:
        est = measured_of(ops, system, framework)
        km = (np.asarray(est.total_s, dtype=float) - np.asarray(est.comm_s, dtype=float)
              - dual_stream_hidden_s(ops, est, framework)) * scale
    return kb, km, comm


def _prefill(lay, split, wf, kf, times, grid: np.ndarray, new: int, cached: int, budget: int):
    """(added, its collectives, its bound: arrays over the decode grid; chunks) of one request's prefill of `new`
    tokens after `cached`, joining steps that decode B requests: its tokens ride the steps' GEMMs and expert reads,
    so each chunk adds N(B + chunk) − N(B), N the kernels of a step without attention over context, plus the chunk's
    own causal attention (its prefill step minus N(chunk))."""
    n = max(1, math.ceil(new / budget))
    if n <= _MAX_CHUNKS:
        sizes = np.full(n, float(budget))
        sizes[-1] = new - budget * (n - 1)
        ctx = cached + budget * np.arange(n, dtype=float)
        weight = np.ones(n)
    else:      # first, middle and last chunks, each standing for its share of the prompt
        sizes = np.array([budget, budget, new - budget * (n - 1)], dtype=float)
        ctx = np.array([cached, cached + budget * (n // 2), cached + budget * (n - 1)], dtype=float)
        weight = np.array([1.0, n - 2.0, 1.0])
    # N at every batch the curve needs: the grid, the grid plus each chunk, each chunk alone, and a token grid up to
    # a full step (the slots' decodes + the budget) for the simulated runs' steps
    tok_grid = np.unique(np.round(np.geomspace(1, grid[-1] + budget, 64)))
    need = np.unique(np.concatenate([grid, (grid[:, None] + sizes[None, :]).ravel(), sizes, tok_grid]))
    flat = step_ops(lay, "decode", need, 1, 1, split, wf, kf, include_lm_head=False)
    nb, nm, nc = times(flat)
    at = lambda m: np.searchsorted(need, m)
    pre = step_ops(lay, "prefill", 1, sizes, ctx, split, wf, kf)
    pb, pm, pc = times(pre)
    k_n = nm if nm is not None else nb
    k_p = pm if pm is not None else pb

    def added(kern_n, kern_p, comm_n, comm_p, with_comm: bool):
        g = grid[:, None] + sizes[None, :]
        ride = kern_n[at(g)] - kern_n[at(grid)][:, None]
        own = np.maximum(kern_p - kern_n[at(sizes)], 0.0)
        total = ride + own[None, :]
        c = comm_n[at(g)] - comm_n[at(grid)][:, None] + np.maximum(comm_p - comm_n[at(sizes)], 0.0)[None, :]
        if with_comm:
            total = total + c
        return np.maximum(total, 0.0) @ weight, np.maximum(c, 0.0) @ weight

    p, p_comm = added(k_n, k_p, nc, pc, True)
    p_bound, _ = added(nb, pb, nc, pc, True)
    own = (np.maximum(k_p - k_n[at(sizes)], 0.0) + np.maximum(pc - nc[at(sizes)], 0.0)) @ weight / max(new, 1)
    tokens = (tok_grid, (k_n + nc)[at(tok_grid)], float(own))
    return p, p_comm, p_bound, n, tokens


def compute(req: ServingEstimateRequest, lookup: Lookup, nearest: bool = True) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    rec = model_record(req, lookup, res)
    try:
        lay = layout_of(rec)
    except CalcInputError as exc:
        raise CalcInputError("model", f"the step model cannot read {rec.id}'s layers: {exc.message}") from None
    for note in lay.notes:
        res.assume(note)
    hw = hardware_spec(lookup, req.hardware, "hardware")
    note_scope(res, hw)
    hw.require_memory_and_bandwidth("hardware")
    hw.cite(res, "memory_bytes", "memory_bandwidth_bytes_per_s")
    if req.dp_attention and not (lay.moe_layers and lay.experts):
        raise CalcInputError("dp_attention", "attention data parallelism is for MoE models (ep = tp over the experts)")
    ep = req.tp if req.dp_attention and req.ep == 1 else req.ep
    if req.dp_attention and req.ep == 1:
        res.assume(f"DP attention: the experts are spread over all {req.tp} ranks (ep = tp).")
    split = Split(tp=req.tp, ep=ep, pp=req.pp, dp_attention=req.dp_attention)
    why = split_problems(lay, split)
    if why:
        raise CalcInputError("ep" if why[0].startswith(("ep ", "expert")) else "tp", "; ".join(why))
    wf, wname = weight_formats(rec, req.weight_format)
    kf = resolve_format(req.kv_format, "kv_format")
    groups = groups_from_model(rec, res, "model")
    I, O = req.input_tokens, req.output_tokens
    ctx = I + O / 2.0
    res.step("mean decode context", "I + O / 2", f"{num(I)} + {num(O)} / 2", ctx, "tokens")

    # ---- what the step times come from
    rates = rates_from_spec(hw)
    system = None
    basis = "bound"
    name, proxy = kernel_source(lookup, hw, req.estimate)
    if name is not None:
        system = load_system(lookup, name, hw, framework=req.framework)
        if req.moe_kernel is not None:
            if not (lay.moe_layers and lay.experts):
                raise CalcInputError("moe_kernel", f"{rec.id} has no MoE layers: moe_kernel applies to MoE models")
            system, from_fw = system.with_moe_kernels(req.moe_kernel)
            res.assume(f"MoE kernels: {req.moe_kernel} (moe_kernel), timed on the {from_fw} table's rows of that "
                       f"kernel family measured on {system.name}" + ("." if from_fw == req.framework else
                       f", not {req.framework}'s own table (which measures another kernel)."))
    elif req.estimate == "measured":
        raise CalcInputError("estimate", f"no measured kernels for hardware {hw.id!r}; use estimate='bound' (or "
                                 "leave estimate unset: a device without kernels then borrows a measured device's)")
    elif req.moe_kernel is not None:
        res.assume(f"moe_kernel {req.moe_kernel} changes nothing here: the step times are the peak-rate bound, which "
                   "reads no kernel tables.")
    scale = proxy.scale if proxy is not None else 1.0
    times = lambda ops: _times(ops, rates, system, req.framework, link, scale)
    link, lid = tp_link(lookup, res, req.link, hw, req.tp)

    # ---- KV capacity
    slots, kv_tokens, w_dev, kv_req = _slots(req, res, lay, groups, hw, split, wf, kf, ctx)
    spec = speculation(req, res, lay, split, hw, wf, kf, groups, ctx, lookup)     # _serving_estimate_spec
    slots, kv_tokens, w_dev, kv_req = spec.memory(slots, kv_tokens, w_dev, kv_req)
    if slots < 1:
        raise CalcInputError("input_tokens", f"one request of {num(ctx)} tokens does not fit in the KV memory left beside "
                             "the weights: give a larger tp or pp, a smaller kv_format, or shorter requests")
    cap = req.max_num_seqs if req.max_num_seqs is not None else DEFAULT_MAX_SEQS[req.framework]
    if req.max_num_seqs is None:
        res.assume(f"max_num_seqs: {req.framework}'s default, "
                   + (f"{cap:,} running requests" if cap else "none (only the KV capacity caps the batch)")
                   + " (an engine default, not a stored fact; give max_num_seqs for yours).")
    engine_slots = min(slots, cap) if cap else slots
    engines = req.replicas * req.pp
    devices = req.tp * req.pp * req.replicas

    # ---- the step curve of one engine
    grid = _GRID[_GRID <= max(engine_slots, 1)]
    if grid[-1] < engine_slots:
        grid = np.append(grid, float(engine_slots))
    dec = step_ops(lay, "decode", grid, 1, ctx, split, wf, kf)
    kb, km, comm = times(dec)
    if system is not None and km is not None:
        first = measured_of(step_ops(lay, "decode", 1, 1, ctx, split, wf, kf), system, req.framework)
        basis = f"measured ({first.framework} {first.version} kernels on {system.name})"
        if proxy is not None:
            basis = (f"proxy ({first.framework} {first.version} kernels measured on {system.name}, × {num(scale, 3)} "
                     "for the bandwidth ratio)")
            res.assume(proxy.reason + ". Expect its TPOT to be optimistic where this device's engine is slower than "
                       "the proxy's (calibration='auto' applies the factor fitted on published runs of it).")
        for table, trec in system.tables.items():
            res.cite({"record": system.name, "field": f"measured {table}", "value": None,
                      "source": "aiconfigurator-core-0.12.0", "locator": f"{trec.get('file')} (sha256 {str(trec.get('sha256'))[:12]}…)"})
    else:
        res.assume(f"{hw.id} has no measured kernels: every step time is its peak-rate bound, which real engines do not "
                   "reach (expect TPOT to be optimistic, by several times on unmeasured hardware).")
    hand = (req.pp - 1) * grid * lay.d * 2.0 / (float(link(2)[1]) if link is not None else hw.memory_bandwidth_bytes_per_s)
    d_bound = kb + comm + hand
    d = (km if km is not None else kb) + comm + hand
    new = max(1, int(round(I * (1.0 - req.prefix_hit_rate))))
    p, p_comm, p_bound, chunks, (tok_grid, tok_s, own) = _prefill(lay, split, wf, kf, times, grid, new, I - new,
                                                                  req.chunked_prefill_tokens)
    if km is not None and runs_dual_stream(dec, req.framework):
        res.assume(f"SGLang with expert parallelism does not fuse the shared experts into the routed kernel and runs "
                   f"them on a second CUDA stream beside the router and routed experts in decode steps of at most "
                   f"{DUAL_STREAM_TOKENS:,} tokens: those steps take the longer of the two, not their sum.")
    cal = calibration(req.calibration, res, lookup, hw.id, req.framework,
                      "bound" if km is None else ("proxy" if proxy is not None else "measured"))
    k = cal["factor"] if cal["applied"] else 1.0
    d, p, p_comm, d_comm = d * k, p * k, p_comm * k, (comm + hand) * k
    curve = StepCurve(grid, d, d_comm, p, p_comm, chunks, tok_grid, tok_s * k, own * k)
    res.step("decode step D(1)", "one engine's decode kernels at batch 1 + its collectives", basis, float(d[0]), "s")
    res.step("prefill added P(B)", "Σ over its chunks [N(B + chunk) − N(B)] + the chunk's causal attention: what a "
             "prefill adds to steps decoding B requests (N: a step's kernels without attention over context)",
             f"{num(new)} new tokens in {chunks} chunk(s) of ≤ {num(req.chunked_prefill_tokens)}; P(1) = "
             f"{fmt_s(float(p[0]))}, P({num(grid[-1])}) = {fmt_s(float(p[-1]))}", float(p[0]), "s")
    curve, d_bound, d_comm = spec.curve(curve, d_bound, d_comm, times, grid, new, I - new, k)
    O_run = spec.steps(O)       # 1 + the decode steps a request takes (O without speculation)

    # ---- the steady state
    load = "concurrency" if req.concurrency is not None else ("poisson" if req.arrival_rate_per_s is not None else "offline")
    if req.num_prompts is not None:
        load = "concurrency" if req.concurrency is not None else "burst"
        st = _simulated(req, res, curve, new, engines, engine_slots, round(O_run))
    elif load == "poisson":
        st = open_loop(curve, req.arrival_rate_per_s / engines, O_run, engine_slots, new / req.chunked_prefill_tokens)
    else:
        users = req.concurrency / engines if load == "concurrency" else float(engine_slots)
        st = closed_loop(curve, users, O_run, engine_slots)
    st = spec.per_token(st, round(O_run) if req.num_prompts is not None else O_run)
    if load == "offline":
        res.assume(f"Offline: every engine runs as many requests as it has slots ({engine_slots:,}), as a throughput "
                   "benchmark that queues all prompts at once does; TTFT then includes the wait for a slot.")
    if load == "concurrency" and req.concurrency % engines:
        res.assume(f"{req.concurrency} users over {engines} engines: {num(req.concurrency / engines)} each on average.")
    res.assume("Continuous batching with chunked prefill, in the steady state: each step decodes one token of every "
               "running request and adds prefill chunks within the token budget; TPOT is the mean step, prefill "
               "interference included. Output lengths are their mean (no early stops), steps run back to back (no "
               "CPU scheduling gaps), and the warm-up burst of a benchmark's first wave is not counted.")
    if req.pp > 1:
        res.assume(f"Pipeline: {req.pp} stages keep {req.pp} micro-batches in flight, so each stage pipeline is "
                   f"{req.pp} engines of 1/{req.pp} of the users; a token crosses every stage (step = all layers + "
                   f"{req.pp - 1} hand-offs).")
    outputs = _outputs(req, res, st, curve, d_bound, grid, kb, d_comm, load, engines, devices, slots,
                       kv_tokens, engine_slots, w_dev, kv_req, basis, ctx, p_bound)
    outputs["calibration"] = cal
    outputs.update(spec.outputs(outputs))
    outputs["nearest_measurements"] = _nearest(req, res, lookup) if nearest else []
    res.outputs = outputs
    res.headline = spec.headline(_headline(req, rec, outputs, wname if req.weight_format is not None else
                                           f"{wname} as published"))
    return res


def _nearest(req, res: Result, lookup: Lookup) -> list[dict]:
    """The stored published run nearest to this deployment, estimated the same way: how far off this method was
    there (a measurement of this exact deployment, where one is stored, is the nearest at distance 0)."""
    found = nearest_points(lookup, rec_id(req), req.hardware, req.framework, req.tp, req.input_tokens,
                           req.output_tokens, req.concurrency, limit=NEAREST)
    rows = []
    for dist, point, body, notes in found:
        try:
            o = compute(ServingEstimateRequest.model_validate({**body, "calibration": "none"}), lookup,
                        nearest=False).outputs
        except (CalcInputError, ValueError):
            continue
        meas = measured_figures(point)
        pred = {"tpot_s": o["tpot_s"]["mean"], "ttft_s": o["ttft_s"]["mean"],
                "output_tokens_per_s_per_device": o["output_tokens_per_s_per_device"]}
        err = {k: (pred[k] / meas[k] - 1.0) if (pred[k] and meas[k]) else None for k in pred}
        rows.append({"id": point["id"], "source": point.get("source"), "url": point.get("url"),
                     "distance": round(float(dist), 6), "request": body, "measured": meas, "predicted": pred,
                     "error": err})
        said = "; ".join(f"{_FIGURE[k]} {v * 100:+.3g} %" for k, v in err.items() if v is not None)
        res.assume(f"Nearest published run: {point['id']} ({point.get('source')}"
                   + (", this very deployment" if dist == 0 else f", distance {num(dist, 3)}")
                   + f"): the uncalibrated estimate's error there is {said or 'not measurable (no comparable figure)'}; "
                   "the validation report compares every stored run.")
    if not rows:
        res.assume("No stored published run of this model or accelerator to compare with: this estimate is not "
                   "validated (the validation report gives the errors measured elsewhere).")
    return rows


_FIGURE = {"tpot_s": "TPOT", "ttft_s": "TTFT", "output_tokens_per_s_per_device": "tokens/s per device"}


def rec_id(req) -> str | None:
    return req.model


def _simulated(req, res: Result, curve: StepCurve, new: int, engines: int, slots: int,
               out: int | None = None) -> SteadyState:
    """A finite run of one engine (its share of the prompts and users), step by step, as a SteadyState."""
    prompts = max(1, math.ceil(req.num_prompts / engines))
    users = max(1, math.ceil((req.concurrency or req.num_prompts) / engines))
    O = out or req.output_tokens      # with speculation: 1 + the decode steps a request takes
    # steps ≈ decode tokens / the batch they run at + prefill tokens / the budget: priced before the run starts
    steps = prompts * O / max(min(users, slots, prompts), 1) + prompts * new / req.chunked_prefill_tokens
    if steps > MAX_RUN_STEPS:
        raise CalcInputError("num_prompts", f"a run of {prompts:,} prompts × {O:,} output tokens takes about "
                             f"{num(steps)} engine steps, more than the {MAX_RUN_STEPS:,} simulated: give fewer prompts "
                             "or drop num_prompts for the steady state")
    mixed = MIXED_PREFILL[req.framework]
    r = run(curve, prompts, users, new, O, slots, req.chunked_prefill_tokens, new,
            req.output_tokens_spread, req.input_tokens_spread, mixed=mixed)
    if not mixed:
        res.assume(f"{req.framework} runs prefill as steps of their own (SGLang's default; --enable-mixed-chunk mixes "
                   "them): in the simulated run a step with prompts waiting prefills up to the token budget of them and "
                   "the running requests decode nothing in it. (The steady state, which has no individual steps, "
                   "prices prefill as the marginal cost of mixed chunks.)")
    res.step("simulated run", "every step: one token of each running request + prefill chunks within the token "
             "budget in arrival order; TPOT = (e2e − TTFT) / (O − 1) per request, then the mean",
             f"{prompts:,} prompts, {users:,} at a time, {r.steps:,} steps on one engine", r.duration_s, "s")
    res.assume(f"Simulated run: {req.num_prompts:,} prompts" + (f", {req.concurrency:,} at a time" if req.concurrency
               else ", all sent at once") + f", spread over {engines} engine(s); lengths "
               + ("equal" if not (req.output_tokens_spread or req.input_tokens_spread) else
                  f"uniform ±{num(req.output_tokens_spread * 100)} % (output), ±{num(req.input_tokens_spread * 100)} % (input)")
               + "; prefill costs P per prompt, spread evenly over its tokens.")
    x = prompts / r.duration_s
    return SteadyState(True, x, r.decode_batch, r.in_service, r.tpot_mean_s, float(curve.decode(r.decode_batch)),
                       r.prefill_fraction, r.ttft_p50_s, r.ttft_mean_s, r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s,
                       0.0, r.e2e_mean_s, r.steps, duration_s=r.duration_s, tpot_p50_s=r.tpot_p50_s,
                       output_tokens=r.output_tokens / prompts)


def _outputs(req, res, st, curve, d_bound, grid, kb, comm, load, engines, devices, slots, kv_tokens, engine_slots,
             w_dev, kv_req, basis, ctx, p_bound) -> dict:
    O, I = req.output_tokens, req.input_tokens

    def fin(x):
        return float(x) if x is not None and math.isfinite(x) else None

    if st.stable:
        x_all = st.completion_rate_per_s * engines
        tpot = st.step_s
        res.step("TPOT", "T = D(B) / (1 − X·P), solved with the load", f"D({num(st.decode_batch, 4)}) = "
                 f"{fmt_s(st.decode_step_s)}, X·P = {num(st.prefill_fraction, 3)}", tpot, "s")
        res.step("TTFT (mean)", "wait + rest of the running step + chunks × D + P", f"{fmt_s(st.queue_wait_s)} + "
                 f"{fmt_s(st.ttft_service_s)}", st.ttft_mean_s, "s")
        O = st.output_tokens or O
        res.step("output tokens/s", "X × O × engines", f"{num(st.completion_rate_per_s, 4)} × {num(O)} × {engines}",
                 x_all * O, "tokens/s")
        b = st.decode_batch
        dc = float(np.interp(b, grid, comm))
        bound = float(np.interp(b, grid, d_bound))
        pf = st.prefill_fraction
        shares = {"prefill": pf, "decode": (1 - pf) * (st.decode_step_s - dc) / st.decode_step_s,
                  "communication": (1 - pf) * dc / st.decode_step_s}
    else:
        res.assume(f"The Poisson load of {num(req.arrival_rate_per_s)} requests/s exceeds what the deployment serves: "
                   "queues grow without end, so latencies and throughput are null.")
        x_all = tpot = bound = None
        shares = {"prefill": None, "decode": None, "communication": None}
    tok = fin(x_all * O) if x_all is not None else None
    return {
        "load": load, "stable": st.stable,
        "ttft_s": {"mean": fin(st.ttft_mean_s), "p50": fin(st.ttft_p50_s), "p90": fin(st.ttft_p90_s),
                   "p99": fin(st.ttft_p99_s)},
        "tpot_s": {"mean": fin(tpot), "p50": fin(st.tpot_p50_s if st.tpot_p50_s is not None else tpot)},
        "itl_s": {"mean": fin(tpot)},
        "e2e_s": {"mean": fin(st.e2e_s)},
        "requests_per_s": fin(x_all),
        "output_tokens_per_s": tok,
        "output_tokens_per_s_per_device": tok / devices if tok is not None else None,
        "output_tokens_per_s_per_user": 1.0 / tpot if tpot else None,
        "total_tokens_per_s": fin(x_all * (I + O)) if x_all is not None else None,
        "method": "simulated run" if st.duration_s is not None else "steady state",
        "duration_s": fin(st.duration_s),
        "concurrency": fin(st.in_service * engines) if st.stable else None,
        "decode_batch": fin(st.decode_batch),
        "queue_wait_s": fin(st.queue_wait_s),
        "kv_capacity_requests": int(min(slots * engines, 2**53)),
        "kv_capacity_tokens": int(min(kv_tokens * engines, 2**53)),
        "slots_per_engine": int(engine_slots),
        "engines": engines, "devices": devices,
        "bound_tpot_s": bound,
        "step_shares": shares,
        "basis": basis,
        "step_curve": {"decode_batch": [int(x) for x in grid], "decode_step_s": [float(x) for x in curve.decode_s],
                       "decode_step_bound_s": [float(x) for x in d_bound], "prefill_added_s": [float(x) for x in curve.prefill_s],
                       "prefill_chunks": int(curve.chunks), "decode_context_tokens": float(ctx)},
        "weights_per_device_bytes": w_dev,
        "kv_bytes_per_request_per_device": kv_req,
    }


def _headline(req, rec, o: dict, wname: str) -> str:
    who = hf.name_of(rec)
    split = f"TP {req.tp}" + (f" PP {req.pp}" if req.pp > 1 else "") + (f" EP {req.ep}" if req.ep > 1 else "") \
        + (" DP-attention" if req.dp_attention else "")
    where = f"{o['devices']} × {req.hardware} ({split}{f', {req.replicas} replicas' if req.replicas > 1 else ''}, {wname})"
    if o["load"] == "concurrency":
        at = f"at concurrency {req.concurrency:,}" + (f" ({req.num_prompts:,} prompts)" if req.num_prompts else "")
    elif o["load"] == "burst":
        at = f"in a burst of {req.num_prompts:,} prompts"
    elif o["load"] == "poisson":
        at = f"at {hf.fmt_num(req.arrival_rate_per_s)} requests/s (Poisson)"
    else:
        at = "offline"
    if not o["stable"]:
        return hf.sentence(f"{who} on {where} cannot serve {at}: the queue grows without end")
    text = (f"{who} on {where}, {req.input_tokens:,} in / {req.output_tokens:,} out {at}: TPOT "
            f"{hf.fmt_seconds(o['tpot_s']['mean'])}, TTFT {hf.fmt_seconds(o['ttft_s']['mean'])}, "
            f"{hf.fmt_num(o['output_tokens_per_s_per_device'])} output tokens/s per device "
            f"({o['basis'].split(' (')[0]} step times; floor {hf.fmt_seconds(o['bound_tpot_s'])})")
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="serving-estimate",
        profile=Profile(0.02, 4_000_000, 4000),
        mcp_tool=True,
        family="serving_estimate",
        title="Serving estimate (what a serving benchmark reports)",
        summary="TTFT, TPOT, ITL, end-to-end latency and output tokens/s per device of one deployment at a closed-loop "
                "concurrency, a Poisson rate or offline: continuous batching with chunked prefill over the step model "
                "(measured kernels where they exist), capped by the KV cache.",
        description="Decode step D(B) of one engine at the mean context I + O/2 (step model: measured kernels of the "
                    "framework on the GPU, else the peak-rate bound, plus the collectives over the TP link); a "
                    "request's prefill adds P to the steps it shares; TPOT = D(B) / (1 − X·P), with X and B from the "
                    "load (closed loop: Little's law over the KV slots; Poisson: X = λ, M/D/1 for the token budget).",
        request_model=ServingEstimateRequest,
        compute=compute,
        outputs_model=ServingEstimateOutputs,
        example={"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "input_tokens": 1024,
                 "output_tokens": 1024, "concurrency": 64},
        cases=("workload-and-provisioning",),
        extra_examples=({"model": "gpt-oss-120b", "hardware": "h100-sxm", "tp": 2, "ep": 2, "input_tokens": 1024,
                         "output_tokens": 1024, "arrival_rate_per_s": 2.0},
                        {"model": "llama-3.1-8b", "hardware": "h100-sxm", "input_tokens": 128, "output_tokens": 2048}),
    ),
]
