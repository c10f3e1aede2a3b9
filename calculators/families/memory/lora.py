"""Multi-LoRA serving: adapter size, GPU slots, grouped-kernel padding, load time and load/prefill overlap.

The book's method (case `multi-lora-serving`): a rank-r adapter on a d_in→d_out projection adds
r·(d_in + d_out) parameters per layer; sharing one base model across adapters moves the cost to
slots (pinned adapters hold them even when idle), to low-rank tiling (each adapter's tokens are
padded to whole blocks), and to load time, which a scheduler can overlap with prefill or not.
Given a memory budget (bytes, or a hardware id under the shared memory rule), minus the base weights and a KV reserve,
it answers how many adapters fit.
"""
from __future__ import annotations


from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, Fraction, LIST_SEP, Lookup,
    NonNegFloat, NonNegFloatSweep, NonNegInt, num, out, Outputs, OutSweep, PosFloatSweep, PosInt, PosIntSweep,
    Profile, quiet, request_inputs, Result,
)
from calculators.domain import (
    explain_memory_rule, FORMAT_HELP, FormatField, hardware_spec, MODEL_CONFIG_FIELD, model_record, note_scope,
    weights_in_budget,
)
from calculators.framework import headline as H


#: module name -> (d_in, d_out) as functions of the model's facts
MODEL_MODULES = {
    "q_proj": lambda f: (f["hidden_size"], f["heads"] * f["head_dim"]),
    "k_proj": lambda f: (f["hidden_size"], f["kv_heads"] * f["head_dim"]),
    "v_proj": lambda f: (f["hidden_size"], f["kv_heads"] * f["head_dim"]),
    "o_proj": lambda f: (f["heads"] * f["head_dim"], f["hidden_size"]),
    "gate_proj": lambda f: (f["hidden_size"], f["ffn_size"]),
    "up_proj": lambda f: (f["hidden_size"], f["ffn_size"]),
    "down_proj": lambda f: (f["ffn_size"], f["hidden_size"]),
}
FFN_MODULES = {"gate_proj", "up_proj", "down_proj"}
MAX_SCHEDULE = 64
#: tokens of one batch grouped by adapter
Group = Annotated[list[NonNegInt], Field(min_length=1, max_length=4096)]
# Bounded counts: the bounds sit inside the Annotated type, where pydantic enforces them (a `le=` given to
# Field() next to a core alias such as PosInt is silently overridden by the alias's own bound).
ScheduleCount = Annotated[int, Field(ge=1, le=MAX_SCHEDULE)]
SlotCount = Annotated[int, Field(ge=0, le=100_000)]


class Module(CalcRequest):
    """One linear projection of a layer that an adapter may target."""

    name: str = Field(min_length=1, max_length=100, description="Module name, e.g. q_proj.", examples=["q_proj"])
    d_in: PosInt = Field(description="Input width of the projection (elements).", examples=[4096])
    d_out: PosInt = Field(description="Output width of the projection (elements).", examples=[4096])


class BatchTime(CalcRequest):
    """Prefill time of a batch of `batch` requests."""

    batch: ScheduleCount = Field(description=f"Requests in the batch (at most {MAX_SCHEDULE}).", examples=[3])
    prefill_s: NonNegFloat = Field(description="Seconds the GPU spends on that batch's prefill.", examples=[0.020])


class Schedule(CalcRequest):
    """Requests that arrive together, each for a different adapter that must first be loaded."""

    requests: ScheduleCount = Field(description=f"Simultaneous requests, one distinct not-yet-loaded adapter each (at most {MAX_SCHEDULE}).",
                             examples=[4])
    load_s: NonNegFloat | None = Field(None, description="Time to load one adapter on the single copy stream, seconds. "
                                       "Omitted: the copy-only lower bound bytes_per_adapter / link_bandwidth_bytes_per_s.",
                                       examples=[0.004])
    prefill_s_by_batch: list[BatchTime] = Field(min_length=1, max_length=MAX_SCHEDULE,
                                                description="Prefill time per batch size; every batch size the policies "
                                                            "form must be listed.")


class LoraRequest(CalcRequest):
    """Adapters on a shared base: give `model` (store id), `model_config` (a config.json) or explicit `layers` + `modules`."""

    model: str | None = Field(None, min_length=1, max_length=200, description="Model id in the store (e.g. qwen3-8b); its projections are "
                              "derived from hidden_size, heads, kv_heads, head_dim and ffn_size.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    layers: Annotated[int, Field(ge=1, le=10_000)] | None = Field(None, description="Transformer layers (with explicit modules).", examples=[36])
    modules: list[Module] | None = Field(None, max_length=64, description="Explicit projections per layer (instead of model).")
    rank: PosIntSweep = Field(description="LoRA rank r. Sweepable.", examples=[16])
    target_modules: list[str] | None = Field(None, max_length=64, description="Names of the modules the adapter targets. "
                                             "Omitted: every module (for a model: q/k/v/o/gate/up/down).",
                                             examples=[["q_proj", "v_proj"]])
    adapter_bytes_per_param: Annotated[float, Field(gt=0, le=16, allow_inf_nan=False)] = Field(
        2.0, description="Bytes per adapter parameter (2 = BF16, 1 = FP8, 0.5 = 4-bit).")
    adapters: PosIntSweep = Field(1, description="Adapters kept (e.g. registered in host memory). Sweepable.", examples=[100])
    gpu_slots: SlotCount | None = Field(None, description="Adapter slots on the GPU.", examples=[8])
    pinned_slots: SlotCount = Field(0, description="Slots held by pinned adapters, even when idle.", examples=[6])
    tokens_per_adapter: Group | Annotated[list[Group], Field(min_length=1, max_length=4096)] | None = Field(
        None, description="Tokens of one batch grouped by adapter, e.g. [17,1,1,1]; a list of such lists "
        "compares several batches.", examples=[[[20], [17, 1, 1, 1]]])
    block_tokens: Annotated[int, Field(ge=1, le=65536)] = Field(16, description="Tokens per block of the grouped low-rank kernel.")
    link_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Effective host→GPU copy bandwidth, "
                                                             "bytes/s (12 GiB/s = 12884901888). Sweepable.",
                                                             examples=[12884901888])
    schedule: Schedule | None = Field(None, description="Compare 'load all, then one batch' with 'run the first ready, "
                                      "batch the rest' on one copy stream.")
    memory_budget_bytes: NonNegFloatSweep | None = Field(
        None, description="Memory across the devices for the base weights and the adapters, bytes: with a model (or "
        "`base_weight_bytes`) the base weights are taken out first, then `kv_reserve_bytes`; with `subtract_weights: "
        "false` the budget is already net of the weights. Sweepable. Or give `hardware`.", examples=[24 * 2**30])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: budget = usable memory per "
                                 "device (memory rule) × devices − base weights − kv_reserve_bytes.", examples=["h100-sxm"])
    devices: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="Devices holding the base model and adapters, with `hardware` (default: the record's device count, "
        "1 for a single GPU).", examples=[1])
    base_weight_bytes: NonNegFloat | None = Field(None, description="Base weights resident across the devices, bytes "
                                                  "(default with a model: its published weight bytes).")
    weight_format: FormatField | None = Field(None, description="Format of the base weights (default: the model's published "
                                              "one). " + FORMAT_HELP)
    subtract_weights: bool | None = Field(None, description="Whether the budget (`memory_budget_bytes` or the "
                                          "hardware's memory) still holds the base weights. Default: yes when they are "
                                          "known (a model, or `base_weight_bytes`).")
    kv_reserve_bytes: NonNegFloat = Field(0.0, description="Bytes kept for the KV cache across the devices, subtracted from "
                                          "the budget (default 0: adapters may take all the free memory).", examples=[40e9])
    memory_utilization: Fraction | None = Field(None, description="With `hardware`: usable fraction of device memory (default "
                                                "0.9, vLLM's gpu_memory_utilization).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="With `hardware`: bytes reserved per device on top (default 0).")


# --------------------------------------------------------------------------- outputs

IntSweep = int | list[int]


class ModuleOut(Outputs):
    name: str
    d_in: int = Field(description="Input width, elements.")
    d_out: int = Field(description="Output width, elements.")
    params_per_layer: IntSweep = Field(description="r × (d_in + d_out) adapter parameters per layer.")


class PolicyOut(Outputs):
    completion_s: list[float | None] = Field(description="Completion time of each request, s.")
    start_s: list[float | None] = Field(description="Prefill start of each request, s.")
    gpu_busy_s: float | None = Field(description="GPU time spent on prefill, s.")
    mean_s: float | None = Field(description="Mean completion, s.")
    max_s: float | None = Field(description="Last completion, s.")
    mean_wait_s: float | None = Field(description="Mean wait before prefill starts, s.")


class ScheduleOut(Outputs):
    load_end_s: list[float | None] = Field(description="When each adapter finishes loading, s.")
    load_all: PolicyOut
    ready_first: PolicyOut


class LoraOutputs(Outputs):
    """Outputs of lora: bytes in B (decimal and binary readings are the caller's), FLOPs per token; lists where swept."""

    modules: list[ModuleOut]
    layers: int
    params_per_adapter: IntSweep = Field(description="Parameters of one adapter.")
    bytes_per_adapter: OutSweep = Field(description="Bytes of one adapter, B.")
    bytes_all_adapters: OutSweep = Field(description="bytes_per_adapter × adapters, B.")
    free_slots: int | None = Field(None, description="gpu_slots − pinned_slots (only with gpu_slots).")
    base_flops_per_token: float | None = Field(description="FLOPs per token of the targeted base projections.")
    lora_flops_per_token: OutSweep = Field(description="FLOPs per token of the adapter on them.")
    lora_over_base: OutSweep = Field(description="lora_flops_per_token / base_flops_per_token.")
    tokens: IntSweep | None = Field(None, description="Tokens per batch (with tokens_per_adapter).")
    blocks: IntSweep | None = Field(None, description="Σ ceil(tokens_i / block) per batch.")
    padded_positions: IntSweep | None = Field(None, description="block × blocks per batch.")
    efficiency: OutSweep = Field(None, description="tokens / padded positions per batch.")
    base_flops: OutSweep = Field(None, description="Base FLOPs of the batch's tokens.")
    lora_flops: OutSweep = Field(None, description="Adapter FLOPs of the batch's tokens.")
    lora_padded_flops: OutSweep = Field(None, description="Adapter FLOPs the grouped kernel spends on padded positions.")
    load_lower_bound_s: OutSweep = Field(None, description="bytes_per_adapter / link_bandwidth_bytes_per_s, s.")
    schedule: ScheduleOut | None = None
    budget_bytes: OutSweep = Field(None, description="Bytes available for adapters after weights and KV reserve, B "
                                   "(with memory_budget_bytes or hardware).")
    adapters_that_fit: int | float | list[int | float] | None = Field(
        None, description="floor(budget / bytes_per_adapter): whole numbers (floats beyond 2^53).")
    all_adapters_fit: bool | list[bool] | None = Field(None, description="bytes_all_adapters ≤ budget.")


def _modules(req: LoraRequest, lookup: Lookup, res: Result) -> tuple[int, list[tuple[str, int, int]], dict | None]:
    if req.model is not None or req.hf_config is not None:
        if req.modules is not None or req.layers is not None:
            raise CalcInputError("modules" if req.modules is not None else "layers",
                                 "give model (or model_config) or explicit layers + modules, not both")
        rec = model_record(req, lookup, res)
        src = "model" if req.model is not None else "model_config"
        layers = int(rec.value("layers", loc=src))
        res.cite(rec.source("layers"))
        wanted = req.target_modules or list(MODEL_MODULES)
        needed = {"hidden_size", "heads", "kv_heads", "head_dim"}
        if FFN_MODULES & set(wanted):
            needed.add("ffn_size")
        facts = {}
        for key in sorted(needed):
            v = rec.value(key, required=False)
            if v is None:
                raise CalcInputError("target_modules", f"{rec.id or src} has no sourced {key}"
                                     + (" (an MoE model has no dense FFN; target attention modules)" if key == "ffn_size" else ""))
            facts[key] = int(v)
            res.cite(rec.source(key))
        mods = []
        for name in MODEL_MODULES:
            if name in FFN_MODULES and "ffn_size" not in facts:
                continue
            d_in, d_out = MODEL_MODULES[name](facts)
            mods.append((name, d_in, d_out))
        return layers, mods, rec
    if req.modules is None or req.layers is None:
        raise CalcInputError("model" if req.modules is None else "layers", "give model, model_config, or layers and modules")
    names = [m.name for m in req.modules]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise CalcInputError(("modules", i, "name"), f"duplicate module {n!r}")
    return req.layers, [(m.name, m.d_in, m.d_out) for m in req.modules], None


def _count(a):
    """Whole counts as JSON integers while float64 holds them exactly."""
    a = np.asarray(a)
    return out(a.astype(np.int64)) if np.all(np.abs(a) < 2**53) else out(a)


def _simulate(n: int, load_s: float, table: dict[int, float]) -> dict:
    """Single copy stream loads adapters in order; two policies decide when prefill batches start."""
    load_end = [(i + 1) * load_s for i in range(n)]

    def prefill(k: int) -> float:
        if k not in table:
            raise CalcInputError(("schedule", "prefill_s_by_batch"), f"no prefill time given for a batch of {k}")
        return table[k]

    # load all, then one batch
    start = load_end[-1]
    done = start + prefill(n)
    load_all = {"completion_s": [done] * n, "start_s": [start] * n, "gpu_busy_s": prefill(n)}
    # ready first: whenever the GPU is free, batch every request whose adapter is loaded
    t, pending, comp, starts, busy = 0.0, list(range(n)), [0.0] * n, [0.0] * n, 0.0
    while pending:
        ready = [i for i in pending if load_end[i] <= t + 1e-15]
        if not ready:
            t = min(load_end[i] for i in pending)
            continue
        d = prefill(len(ready))
        for i in ready:
            starts[i], comp[i] = t, t + d
        busy += d
        t += d
        pending = [i for i in pending if i not in ready]
    ready_first = {"completion_s": comp, "start_s": starts, "gpu_busy_s": busy}
    for pol in (load_all, ready_first):
        pol["mean_s"] = sum(pol["completion_s"]) / n
        pol["max_s"] = max(pol["completion_s"])
        pol["mean_wait_s"] = sum(pol["start_s"]) / n
    return {"load_end_s": load_end, "load_all": load_all, "ready_first": ready_first}


@quiet
def compute(req: LoraRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    layers, mods, rec = _modules(req, lookup, res)
    by_name = {m[0]: m for m in mods}
    targets = req.target_modules or [m[0] for m in mods]
    for i, t in enumerate(targets):
        if t not in by_name:
            raise CalcInputError(("target_modules", i), f"unknown module {t!r}; known: {', '.join(by_name)}")
        if t in targets[:i]:
            raise CalcInputError(("target_modules", i), f"module {t!r} listed twice")
    chosen = [by_name[t] for t in targets]
    width = sum(d_in + d_out for _, d_in, d_out in chosen)          # Σ (d_in + d_out)
    base_macs = sum(d_in * d_out for _, d_in, d_out in chosen)       # Σ d_in·d_out

    if req.memory_budget_bytes is not None and req.hardware is not None:
        raise CalcInputError("memory_budget_bytes", "give either `memory_budget_bytes` or `hardware`, not both")
    x = broadcast({"rank": req.rank, "adapters": req.adapters,
                   **({"link_bandwidth_bytes_per_s": req.link_bandwidth_bytes_per_s}
                      if req.link_bandwidth_bytes_per_s is not None else {}),
                   **({"memory_budget_bytes": req.memory_budget_bytes} if req.memory_budget_bytes is not None else {})})
    r = np.asarray(req.rank, dtype=np.int64)  # counts stay integers (rank ≤ 1e15 × widths fits in int64 only when small)
    if float(np.max(r)) * layers * width > 2**62:
        raise CalcInputError("rank", "rank × layers × module widths is too large to count")
    for name, d_in, d_out in chosen[:4]:
        res.step(f"{name} params per layer", "r × (d_in + d_out)", f"{num(first(r))} × ({d_in} + {d_out})",
                 r * (d_in + d_out), "parameters")
    params = layers * r * width
    res.step("parameters per adapter", "layers × Σ r·(d_in + d_out)", f"{layers} × {num(first(r))} × {num(width)}",
             params, "parameters")
    bytes_one = params * req.adapter_bytes_per_param
    res.step("bytes per adapter", "params × adapter_bytes_per_param", f"{num(first(params))} × {num(req.adapter_bytes_per_param)} = "
             f"{fmt_bytes(first(bytes_one))}", bytes_one, "B")
    bytes_all = bytes_one * x["adapters"]
    res.step("all adapters", "bytes_per_adapter × adapters", f"{num(first(bytes_one))} B × {num(first(x['adapters']))} = "
             f"{fmt_bytes(first(bytes_all))}", bytes_all, "B")
    outputs: dict = {"modules": [{"name": n, "d_in": a, "d_out": b, "params_per_layer": out(r * (a + b))}
                                 for n, a, b in chosen], "layers": layers,
                     "params_per_adapter": out(params), "bytes_per_adapter": out(bytes_one),
                     "bytes_all_adapters": out(bytes_all)}

    if req.gpu_slots is not None:
        if req.pinned_slots > req.gpu_slots:
            raise CalcInputError("pinned_slots", f"{req.pinned_slots} pinned slots exceed the {req.gpu_slots} GPU slots")
        free = req.gpu_slots - req.pinned_slots
        res.step("free GPU slots", "gpu_slots − pinned_slots", f"{req.gpu_slots} − {req.pinned_slots}", free, "slots")
        outputs["free_slots"] = free
    elif req.pinned_slots:
        raise CalcInputError("gpu_slots", "pinned_slots needs gpu_slots")

    base_per_token = 2.0 * layers * base_macs
    lora_per_token = 2.0 * params
    res.step("FLOPs per token on the targeted projections", "base 2·layers·Σ d_in·d_out; LoRA 2·layers·Σ r(d_in + d_out)",
             f"base 2×{layers}×{num(base_macs)}; LoRA 2×{num(first(params))}", lora_per_token, "FLOP")
    outputs["base_flops_per_token"] = base_per_token
    outputs["lora_flops_per_token"] = out(lora_per_token)
    outputs["lora_over_base"] = out(lora_per_token / base_per_token)

    if req.tokens_per_adapter is not None:
        batches = req.tokens_per_adapter
        nested = bool(batches) and isinstance(batches[0], list)
        groups = batches if nested else [batches]
        if sum(len(g) for g in groups) > 100_000:
            raise CalcInputError("tokens_per_adapter", "more than 100,000 groups in total", status=413)
        b = req.block_tokens
        blocks = np.array([sum(-(-t // b) for t in g) for g in groups], dtype=object).astype(float)
        tokens = np.array([sum(g) for g in groups], dtype=object).astype(float)
        positions = blocks * b
        with np.errstate(divide="ignore", invalid="ignore"):
            eff = np.where(positions > 0, tokens / np.where(positions > 0, positions, 1), np.nan)
        g0 = groups[0]
        res.step("blocks", "Σ_i ceil(tokens_i / block)", " + ".join(f"ceil({t}/{b})" for t in g0[:16])
                 + (" + …" if len(g0) > 16 else ""), blocks[0], "blocks")
        res.step("padded positions and fill", "positions = block × blocks; fill = tokens / positions",
                 f"{b} × {num(blocks[0])} = {num(positions[0])}; {num(tokens[0])} / {num(positions[0])}", eff[0], "fraction")
        pick = (lambda a: a) if nested else (lambda a: a[0])
        outputs["tokens"] = _count(pick(tokens))
        outputs["blocks"] = _count(pick(blocks))
        outputs["padded_positions"] = _count(pick(positions))
        outputs["efficiency"] = out(pick(eff))
        try:  # a rank sweep and a list of batches pair up element-wise
            base_flops = base_per_token * pick(tokens)
            lora_flops = np.asarray(lora_per_token) * pick(tokens)
            padded = np.asarray(lora_per_token) * pick(positions)
        except ValueError:
            raise CalcInputError("tokens_per_adapter", "a rank sweep and a list of batches must have the same length") from None
        outputs["base_flops"] = out(base_flops)
        outputs["lora_flops"] = out(lora_flops)
        outputs["lora_padded_flops"] = out(padded)

    if req.link_bandwidth_bytes_per_s is not None:
        t_load = bytes_one / x["link_bandwidth_bytes_per_s"]
        res.step("copy-only load time", "bytes_per_adapter / link_bandwidth_bytes_per_s",
                 f"{fmt_bytes(first(bytes_one))} / {num(first(x['link_bandwidth_bytes_per_s']))} B/s = {fmt_s(first(t_load))}",
                 t_load, "s")
        outputs["load_lower_bound_s"] = out(t_load)

    if req.schedule is not None:
        s = req.schedule
        if "free_slots" in outputs and s.requests > outputs["free_slots"]:
            raise CalcInputError(("schedule", "requests"), f"{s.requests} adapters need more than the {outputs['free_slots']} free slots")
        if s.load_s is not None:
            load = s.load_s
        elif "load_lower_bound_s" in outputs:
            load = float(first(outputs["load_lower_bound_s"]))
        else:
            raise CalcInputError(("schedule", "load_s"), "give load_s or link_bandwidth_bytes_per_s")
        table = {}
        for i, bt in enumerate(s.prefill_s_by_batch):
            if bt.batch in table:
                raise CalcInputError(("schedule", "prefill_s_by_batch", i, "batch"), f"batch size {bt.batch} listed twice")
            table[bt.batch] = bt.prefill_s
        sim = _simulate(s.requests, load, table)
        la, rf = sim["load_all"], sim["ready_first"]
        res.step("load all, then one batch", "t = n·t_load + prefill(n)",
                 f"{s.requests} × {fmt_s(load)} + {fmt_s(table[s.requests])}", la["max_s"], "s")
        res.step("first ready runs, rest batched", "greedy: when the GPU is free, batch every loaded adapter",
                 "completions " + LIST_SEP.join(fmt_s(v) for v in rf["completion_s"]), rf["mean_s"], "s (mean)")
        outputs["schedule"] = sim

    _budget(req, lookup, res, rec, x, bytes_one, bytes_all, outputs)

    res.outputs = outputs
    res.headline = _headline(req, rec, outputs)
    res.assume(
        "Adapter parameters per targeted projection: r × (d_in + d_out) (A: d_in×r, B: r×d_out); no bias, extra trained "
        "modules or quantisation metadata.",
        "Binary units: 1 MiB = 2^20 B, 1 GiB = 2^30 B; decimal GB/s are converted by the caller.",
        "Load lower bound = bytes / link bandwidth: data movement only, no allocation, registration or kernel setup.",
        "Grouped kernel: each adapter's tokens are padded to whole blocks; FLOPs count a multiply-add as 2 and only the "
        "targeted projections.",
    )
    if req.schedule is not None:
        res.assume("Schedule: one copy stream loads adapters in request order; copy and compute overlap ideally; "
                   "completion means end of prefill, not full TTFT or a percentile.")
    return res


def _budget(req: LoraRequest, lookup: Lookup, res: Result, rec: dict | None, x: dict, bytes_one, bytes_all,
            outputs: dict) -> None:
    """How many adapters fit: budget = (given bytes, or usable memory × devices) − base weights − KV reserve."""
    if req.hardware is None and req.memory_budget_bytes is None:
        for k in ("devices", "base_weight_bytes", "weight_format", "memory_utilization", "runtime_reserve_bytes",
                  "subtract_weights"):
            if getattr(req, k) is not None:
                raise CalcInputError(k, "only used with `memory_budget_bytes` or `hardware`")
        if req.kv_reserve_bytes:
            raise CalcInputError("kv_reserve_bytes", "needs memory_budget_bytes or hardware")
        return
    n = None
    if req.hardware is None:
        for k in ("devices", "memory_utilization", "runtime_reserve_bytes"):
            if getattr(req, k) is not None:
                raise CalcInputError(k, "only used with `hardware`")
        total = x["memory_budget_bytes"]
    else:
        hw = hardware_spec(lookup, req.hardware, "hardware")
        note_scope(res, hw)
        capacity = hw.require("memory_bytes", "hardware")
        hw.cite(res, "memory_bytes")
        per_dev = float(explain_memory_rule(res, capacity, req.memory_utilization, req.runtime_reserve_bytes))
        n = req.devices if req.devices is not None else hw.devices
        total = res.step("usable memory", "usable per device × devices", f"{fmt_bytes(per_dev)} × {n}", per_dev * n, "B")
    weights = weights_in_budget(req, rec, res, n or 1, needed=req.hardware is not None, bytes_field="base_weight_bytes")
    budget = total - (weights or 0.0) - req.kv_reserve_bytes
    res.step("adapter budget", "budget = memory − base weights − kv_reserve_bytes",
             f"{fmt_bytes(first(total))} − {fmt_bytes(weights or 0.0)} − {fmt_bytes(req.kv_reserve_bytes)}", budget, "B")
    res.assume(("Adapter budget on " + f"{n} × {hw.id}: the memory rule's usable bytes" if n else "Adapter budget: the memory given")
               + (" minus the base weights" if weights is not None else "")
               + (" and the KV reserve" if req.kv_reserve_bytes else " (no KV reserve given: the adapters may take all "
                  "of it, leaving nothing for the KV cache; give kv_reserve_bytes)")
               + "; weights and adapters are split evenly over the devices (as tensor parallelism shards both).")
    budget = np.maximum(np.asarray(budget, dtype=float), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(bytes_one > 0, np.floor(budget / np.where(bytes_one > 0, bytes_one, 1.0)), np.inf)
    res.step("adapters that fit", "floor(budget / bytes_per_adapter)",
             f"floor({num(first(budget))} B / {num(first(bytes_one))} B)", fit, "adapters")
    outputs["budget_bytes"] = out(budget)
    outputs["adapters_that_fit"] = _count(fit) if np.all(np.isfinite(fit)) else out(fit)
    outputs["all_adapters_fit"] = out(np.asarray(bytes_all) <= budget)


def _headline(req: LoraRequest, rec: dict | None, o: dict) -> str:
    name = (rec.label or "the model") if rec else f"a {o['layers']}-layer model"
    rank = H.scalar(req.rank)
    mods = ", ".join(m["name"] for m in o["modules"][:4]) + (" …" if len(o["modules"]) > 4 else "")
    s = f"A rank-{H.fmt_count(rank)} adapter of {name} on {mods} takes {H.fmt_bytes(o['bytes_per_adapter'])}"
    if "adapters_that_fit" in o:
        fit = H.scalar(o["adapters_that_fit"])
        after = [w for w, on in (("the base weights", req.subtract_weights is not False and (rec is not None or req.base_weight_bytes is not None)),
                                 ("the KV reserve", bool(req.kv_reserve_bytes))) if on]
        after_text = f" after {' and '.join(after)}" if after else ""
        if req.hardware:
            n = req.devices if req.devices is not None else None
            where = f" left on {n} × {req.hardware}" if n else f" left on {req.hardware}"
            s += f", so {H.plural(fit, 'adapter')} fit in the {H.fmt_bytes(o['budget_bytes'])}{where}{after_text}"
        else:
            s += f", so {H.plural(fit, 'adapter')} fit in the {H.fmt_bytes(o['budget_bytes'])} left{after_text}"
    else:
        n = H.scalar(req.adapters)
        s += f"; {H.plural(n, 'adapter')} {'takes' if n == 1 else 'take'} {H.fmt_bytes(o['bytes_all_adapters'])}"
    return H.sentence(s + H.sweep_note(req.rank, req.adapters, req.memory_budget_bytes, req.link_bandwidth_bytes_per_s))


CALCULATORS = [
    Calculator(
        name="lora",
        profile=Profile(3.5e-07, 314, 25),
        mcp_tool=True,
        family="lora",
        title="Multi-LoRA serving",
        summary="Size of a LoRA adapter from the model's projections and rank, GPU slots left after pinning, padding of "
                "the grouped low-rank kernel, copy-only load time, FLOPs, and two load/prefill overlap policies.",
        description="Per targeted projection an adapter adds r·(d_in + d_out) parameters per layer; bytes = layers × Σ × "
                    "adapter_bytes_per_param. Free slots = gpu_slots − pinned_slots. Grouped kernel: blocks = Σ ceil(t_i / block), "
                    "positions = block·blocks, fill = tokens / positions. Load lower bound = bytes / link. FLOPs: base "
                    "2·d_in·d_out, LoRA 2·r·(d_in + d_out) per token per projection. Schedule: a single copy stream loads "
                    "n adapters; 'load all' starts one batch after the last load; 'ready first' greedily batches the "
                    "loaded adapters whenever the GPU is free. Limits: dense projections only (no MoE experts); ideal "
                    "overlap; no queueing or arrivals beyond the simultaneous batch. Budget: adapters that fit = floor((memory_budget_bytes, or "
                    "usable memory × devices) − base weights − kv_reserve_bytes) / bytes_per_adapter).",
        request_model=LoraRequest,
        outputs_model=LoraOutputs,
        compute=compute,
        example={"model": "qwen3-8b", "rank": 16, "target_modules": ["q_proj", "v_proj"], "adapter_bytes_per_param": 2,
                 "adapters": 100, "gpu_slots": 8, "pinned_slots": 6, "tokens_per_adapter": [[20], [17, 1, 1, 1]],
                 "block_tokens": 16, "link_bandwidth_bytes_per_s": 12884901888},
        cases=("multi-lora-serving",),
        sweepable=("rank", "adapters", "link_bandwidth_bytes_per_s"),
        chart=Chart(x="rank", y=("bytes_per_adapter",), x_label="LoRA rank", y_label="bytes per adapter"),
        extra_examples=({"layers": 36, "modules": [{"name": "q_proj", "d_in": 4096, "d_out": 4096},
                                                   {"name": "v_proj", "d_in": 4096, "d_out": 1024}],
                         "rank": 16, "gpu_slots": 8,
                         "schedule": {"requests": 4, "load_s": 0.004,
                                      "prefill_s_by_batch": [{"batch": 1, "prefill_s": 0.016},
                                                             {"batch": 3, "prefill_s": 0.020},
                                                             {"batch": 4, "prefill_s": 0.022}]}},
                        {"model": "qwen3-8b", "rank": 16, "target_modules": ["q_proj", "v_proj"], "adapters": 1000,
                         "hardware": "h100-sxm", "kv_reserve_bytes": 40e9},
                        {"model": "qwen3-8b", "rank": [8, 16, 64], "memory_budget_bytes": 24 * 2**30}),
    ),
]
