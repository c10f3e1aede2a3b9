"""Weight memory: parameters and bytes of a model, per storage format, and how they fit on devices.

Three ways to describe what is stored:
- `model` (store id) or `architecture` (explicit shapes): parameters counted matrix by matrix
  (attention projections for MHA/GQA/MLA, SwiGLU FFN, MoE experts + shared experts + router,
  embeddings and LM head with the tie flag, RMSNorm vectors);
- `params`: an explicit parameter count (e.g. a model's size label), sweepable;
- `tensors`: a list of named tensor shapes (one layer's matrices, a buffer, an index), repeated
  `copies` times.

The module also holds the shared helpers that the roofline, training-compute, checkpoint and
serving-cost calculators use: storage formats and the per-component parameter ledger.
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, Fraction, list_series, Lookup,
    NonNegFloat, num,
    out, Outputs, OutSweep, PosFloatSweep, PosInt, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    bits_per_param, COMPONENTS, exact, explain_memory_rule, format_bytes, FORMAT_HELP, format_label, FormatField,
    hardware_spec, layout_ledger, layout_of, ledger, MODEL_CONFIG_FIELD, note_scope, resolve_arch, resolve_format, ShapeArchitecture,
    shipped_weight_formats, usable_memory_bytes, WeightFormats,
)
from calculators.framework import headline as hf

# Storage formats come from the one table every calculator shares.
Format = FormatField

# --------------------------------------------------------------------------- architecture

# --------------------------------------------------------------------------- request

class TensorSpec(CalcRequest):
    name: str = Field("tensor", max_length=200, description="Label shown in the outputs.")
    shape: list[PosInt] = Field(min_length=1, max_length=8, description="Dimensions; values = product.", examples=[[4096, 12288]])
    count: PosInt = Field(1, description="Identical tensors of this shape (e.g. 3 SwiGLU matrices, 2 buffer slots).")
    format: Format | None = Field(None, description="Storage format of this tensor; defaults to the request's `weight_format`.")


class ComponentFormats(CalcRequest):
    """Per-component overrides of `weight_format` (e.g. routed experts 4-bit, the rest BF16)."""

    attention: Format | None = None
    dense_ffn: Format | None = None
    routed_experts: Format | None = None
    shared_experts: Format | None = None
    router: Format | None = None
    norms: Format | None = None
    embeddings: Format | None = None
    lm_head: Format | None = None


class WeightMemoryRequest(CalcRequest):
    """Exactly one of `model`, `architecture`, `params`, `tensors` describes what is stored."""

    #: `format` was this request's name for the weights' format (quantization's `format` sizes any values, so the
    #: rename holds here only)
    renamed_fields = {"format": "weight_format"}

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store (e.g. qwen3-8b).", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    architecture: ShapeArchitecture | None = Field(None, description="Explicit shapes instead of a model id.")
    params: PosFloatSweep | None = Field(None, description="Explicit parameter count (e.g. 235e9 for a '235B' label). Sweepable.", examples=[235e9])
    tensors: list[TensorSpec] | None = Field(None, min_length=1, max_length=200, description="Explicit tensors (one group), repeated `copies` times.")
    copies: PosInt = Field(1, description="Repeat the `tensors` group this many times (e.g. layers).")
    weight_format: Format | None = Field(None, description="Storage format of every component (default: the model's published "
                                  "weight format, else bf16). " + FORMAT_HELP)
    component_formats: ComponentFormats | None = Field(None, description="Per-component format overrides (model/architecture only).")
    compare_formats: list[Format] = Field(default_factory=list, max_length=20, description="Further formats to report side by side (all components in that format).")
    include_embeddings: bool = Field(True, description="Count the input embedding and LM head.")
    include_norms: bool = Field(True, description="Count RMSNorm weight vectors.")
    qk_norm: bool | None = Field(None, description="Override: the model has per-head Q/K norms (Qwen3). Default: the record's flag, else false.")
    devices: PosIntSweep | None = Field(None, description="Devices sharing one replica (tensor/expert parallel degree). Sweepable. "
                                        "Default: the device count of `hardware` (72 for an NVL72 rack), else 1.", examples=[8])
    expert_parallel: bool = Field(False, description="Place whole experts on devices (ceil(experts/devices) each) instead of slicing every expert.")
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id whose memory_bytes is the per-device capacity.", examples=["h100-sxm"])
    memory_per_device_bytes: PosFloatSweep | None = Field(None, description="Per-device memory capacity in bytes (80 GiB = 85899345920; "
                                                          "a decimal 80 GB = 80e9), instead of `hardware`. Sweepable.")
    memory_utilization: Fraction | None = Field(None, description="Fraction of capacity the engine may use (default 0.9, vLLM's "
                                                "gpu_memory_utilization).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="Bytes reserved per device on top of that (default 0).")

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("model", "hf_config", "architecture", "params", "tensors") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of model, model_config, architecture, params, tensors")
        if self.hardware and self.memory_per_device_bytes is not None:
            raise ValueError("give hardware or memory_per_device_bytes, not both")
        return self


# --------------------------------------------------------------------------- outputs

#: a number, or one per point when `devices`, `params` or `memory_per_device_bytes` is swept (null where not finite)
#: a parameter count: a whole number, written as a float past 2^53 (JSON integers stop at 64 bits)
WeightCount = int | float


class WeightMemoryComponentOut(Outputs):
    params: WeightCount = Field(description="Parameters of the component (0 when excluded).")
    bytes: float | None = Field(description="Its bytes in its format, group scales included, B.")
    format: str = Field(description="Its storage format.")


class WeightMemoryBreakdownOut(Outputs):
    """Parameters and bytes per component of the model."""

    attention: WeightMemoryComponentOut = Field(description="Attention projections (Q, K, V, O or MLA's), all layers.")
    dense_ffn: WeightMemoryComponentOut = Field(description="Dense FFN matrices, all dense layers.")
    routed_experts: WeightMemoryComponentOut = Field(description="Every routed expert of every MoE layer.")
    shared_experts: WeightMemoryComponentOut = Field(description="Shared experts of the MoE layers.")
    router: WeightMemoryComponentOut = Field(description="Router (gate) matrices.")
    norms: WeightMemoryComponentOut = Field(description="RMSNorm weight vectors.")
    embeddings: WeightMemoryComponentOut = Field(description="Input embedding table.")
    lm_head: WeightMemoryComponentOut = Field(description="Output projection (0 when tied to the embeddings).")


class WeightMemoryPerLayerOut(Outputs):
    attention_params: WeightCount = Field(description="Attention parameters of one layer.")
    dense_ffn_params: WeightCount = Field(description="Dense FFN parameters of one layer (0 without one).")
    expert_params: WeightCount = Field(description="Parameters of one routed expert.")
    norm_params: WeightCount = Field(description="Norm parameters of one layer.")
    forward_flops_per_token: float | None = Field(description="Forward matrix FLOPs per token of an average layer, "
                                           "2 × active matrix params / layers, FLOP.")


class WeightMemoryFormatOut(Outputs):
    """Every component stored in one of `compare_formats`."""

    format: str = Field(description="Format name.")
    bits_per_param: float | None = Field(description="Average bits per parameter, group scales included, bit.")
    bytes_total: OutSweep = Field(description="All weights in that format, B.")
    per_device_bytes: OutSweep = Field(description="bytes_total / devices, B (an even split).")


class WeightMemoryTensorOut(Outputs):
    name: str = Field(description="The tensor's label.")
    shape: list[int] = Field(description="Its dimensions.")
    count: int = Field(description="Identical tensors of this shape.")
    format: str = Field(description="Its storage format.")
    params_each: WeightCount = Field(description="Values of one tensor, the product of the shape.")
    bytes_each: float | None = Field(description="Bytes of one tensor, B.")
    params: WeightCount = Field(description="count × params_each.")
    bytes: float | None = Field(description="count × bytes_each, B.")


class WeightMemoryOutputs(Outputs):
    """Outputs of weight-memory; lists where `devices`, `params` or `memory_per_device_bytes` is swept. The breakdown
    needs shapes (model or architecture); the fit needs a memory capacity (hardware or memory_per_device_bytes)."""

    params_total: OutSweep = Field(description="Parameters stored.")
    bytes_total: OutSweep = Field(description="Bytes of all weights, group scales included, B.")
    bits_per_param: OutSweep = Field(description="bytes × 8 / parameters, bit.")
    devices: int | list[int] = Field(description="Devices sharing one replica.")
    per_device_bytes: OutSweep = Field(description="Weights on one device: sharded parts / devices + replicated "
                                        "norms and router, B.")
    breakdown: WeightMemoryBreakdownOut | None = Field(None, description="Per component (model or architecture).")
    core_matrix_params: WeightCount | None = Field(None, description="Matrix parameters of attention, FFN, experts and "
                                           "router (model or architecture).")
    core_matrix_bytes: float | None = Field(None, description="Bytes of those matrices, B (model or architecture).")
    params_active: WeightCount | None = Field(None, description="Parameters one token uses: active experts, shared "
                                      "experts, attention, norms, embeddings, head (model or architecture).")
    per_layer: WeightMemoryPerLayerOut | None = Field(None, description="Per-layer counts (model or architecture).")
    tensors: list[WeightMemoryTensorOut] | None = Field(None, description="One row per tensor (tensors requests).")
    group_params: WeightCount | None = Field(None, description="Values of one group of tensors (tensors requests).")
    group_bytes: float | None = Field(None, description="Bytes of one group of tensors, B (tensors requests).")
    copies: int | None = Field(None, description="Copies of the group (tensors requests).")
    memory_per_device_bytes: OutSweep = Field(None, description="Memory capacity of one device, B (with a capacity).")
    usable_per_device_bytes: OutSweep = Field(None, description="capacity × utilization − reserve, B.")
    remaining_per_device_bytes: OutSweep = Field(None, description="usable − weights per device, B (negative: does "
                                                  "not fit).")
    fits: bool | list[bool] | None = Field(None, description="The weights fit the usable memory of each device.")
    min_devices: WeightCount | None | list[WeightCount | None] = Field(None, description="Fewest devices that hold the weights "
                                                       "(null when the replicated part alone does not fit).")
    by_format: list[WeightMemoryFormatOut] | None = Field(None, description="One row per `compare_formats` entry.")


def device_memory(req, lookup: Lookup, res: Result, loc: str = "hardware"):
    """Per-device memory capacity from `hardware` (a node or rack is read per device; cited), else None."""
    if getattr(req, "hardware", None):
        hw = hardware_spec(lookup, req.hardware, loc)
        note_scope(res, hw)
        mem = hw.require("memory_bytes", loc)
        hw.cite(res, "memory_bytes")
        return mem, hw
    return None, None


# --------------------------------------------------------------------------- compute

def _fmt_for(req: WeightMemoryRequest, comp: str, shipped: WeightFormats | None = None) -> Format:
    """A component's format: its override, else the request's `weight_format`, else the model's published one, else bf16."""
    cf = req.component_formats
    f = getattr(cf, comp) if cf else None
    if f is not None:
        return f
    if req.weight_format is not None:
        return req.weight_format
    if shipped is not None:
        return shipped.for_component(comp)
    return "bf16"


def _layout_components(rec, res: Result) -> dict | None:
    """Parameters per component from the layer layout of a model whose attention has no uniform `Arch` (windowed,
    hybrid, linear, DSA): each component can then be counted in its own shipped format."""
    if rec is None or not rec.layer_groups:
        return None
    try:
        lay = layout_of(rec)
    except CalcInputError:
        return None
    for note in lay.notes:
        res.assume(note)
    res.assume(f"{rec.id}: parameters itemised from its layer layout ({', '.join(m.name for m in lay.mixers)}).")
    return dict(layout_ledger(lay)["components"])


def compute(req: WeightMemoryRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    mem_hw, hw = device_memory(req, lookup, res)
    devices_req = req.devices
    if devices_req is None:
        devices_req = hw.devices if hw is not None else 1
        if hw is not None and hw.devices > 1:
            res.assume(f"devices not given: the {hw.scope} {hw.id}'s {hw.devices} devices share the replica.")
    x = broadcast({"devices": devices_req, "params": req.params if req.params is not None else 1.0,
                   "memory_per_device_bytes": req.memory_per_device_bytes if req.memory_per_device_bytes is not None else 1.0})
    devices = x["devices"]
    res.inputs["devices"] = out(devices)
    capacity = None
    if mem_hw is not None:
        capacity = np.asarray(mem_hw) + 0.0 * devices
    elif req.memory_per_device_bytes is not None:
        capacity = x["memory_per_device_bytes"] + 0.0 * devices
    mem = None
    if capacity is not None:
        mem = explain_memory_rule(res, first(capacity), req.memory_utilization, req.runtime_reserve_bytes)
        mem = usable_memory_bytes(capacity, req.memory_utilization, req.runtime_reserve_bytes)
    o: dict = {}

    arch, rec = (None, None)
    if req.model or req.architecture or getattr(req, "model_config", None):
        arch, rec = resolve_arch(req, lookup, res, req.qk_norm)
    shipped = shipped_weight_formats((rec.weight_dtype if rec is not None else None)) if req.weight_format is None else None
    fmt_main = req.weight_format if req.weight_format is not None else (shipped.main if shipped else "bf16")
    if req.weight_format is None and shipped is not None:
        res.assume(f"Weight format: {rec.id} is published as {shipped.label} ({shipped.note}); pass `weight_format` to change it.")
    elif req.weight_format is None:
        res.assume("Weight format: bf16 (no published format known); pass `weight_format` to change it.")
    res.assume(f"Storage format {format_label(fmt_main)}: {num(bits_per_param(fmt_main))} bits per parameter on average "
               f"({resolve_format(fmt_main).layout}).")

    if req.tensors is not None:
        rows, group_params, group_bytes = [], 0.0, 0.0
        for t in req.tensors:
            values = float(math.prod(t.shape))
            f = t.format if t.format is not None else fmt_main
            each = float(format_bytes(values, f))
            rows.append({"name": t.name, "shape": t.shape, "count": t.count, "format": format_label(f),
                         "params_each": values, "bytes_each": each, "params": values * t.count, "bytes": each * t.count})
            group_params += values * t.count
            group_bytes += each * t.count
        t0 = req.tensors[0]
        res.step(f"tensor '{t0.name}'", "values = ∏ shape; bytes = values × bits/8 (+ group scales)",
                 f"{' × '.join(map(str, t0.shape))} = {num(rows[0]['params_each'])} values → {fmt_bytes(rows[0]['bytes_each'])}",
                 rows[0]["bytes_each"], "B")
        res.step("one group", "Σ count × bytes_each", " + ".join(f"{r['count']} × {num(r['bytes_each'])}" for r in rows[:8])
                 + (" + …" if len(rows) > 8 else ""), group_bytes, "B")
        params_total = group_params * req.copies
        bytes_total = group_bytes * req.copies
        if req.copies > 1:
            res.step("all copies", "total = copies × group", f"{req.copies} × {fmt_bytes(group_bytes)}", bytes_total, "B")
        o.update(tensors=rows, group_params=group_params, group_bytes=group_bytes, copies=req.copies)
        sharded, replicated, routed = bytes_total, 0.0, 0.0
        params_arr = np.asarray(params_total)
        bytes_arr = np.asarray(bytes_total)
        res.assume("Tensors are split evenly across the devices (no replicated part).")
    elif arch is None and req.params is None and (lay_comp := _layout_components(rec, res)) is not None:
        comp = lay_comp
        if not req.include_embeddings:
            comp["embeddings"] = comp["lm_head"] = 0
        if not req.include_norms:
            comp["norms"] = 0
        comp_bytes = {k: float(format_bytes(v, _fmt_for(req, k, shipped))) for k, v in comp.items()}
        params_arr, bytes_arr = np.asarray(float(sum(comp.values()))), np.asarray(float(sum(comp_bytes.values())))
        res.step("weight bytes", "Σ component params × bits/8 (layer layout)",
                 " + ".join(f"{k} {num(v)} B" for k, v in comp_bytes.items() if v), bytes_arr, "B")
        o["breakdown"] = {k: {"params": comp[k], "bytes": comp_bytes[k], "format": format_label(_fmt_for(req, k, shipped))}
                          for k in COMPONENTS}
        routed = comp_bytes["routed_experts"]
        replicated = comp_bytes["norms"] + comp_bytes["router"]
        sharded = float(bytes_arr) - replicated - routed
    elif arch is None:
        if req.params is not None:
            params_arr = x["params"]
            res.step("parameters", "N (explicit)", num(first(params_arr)), params_arr, "params")
        else:
            params_arr = np.asarray(float(rec.value("params_total", loc="model")))
            res.cite(rec.source("params_total"))
            res.assume(f"{rec.id} has attention '{rec.attention}', whose projections this calculator does not "
                       "itemise; its stored total parameter count is used instead.")
            res.step("parameters", "N = params_total (store)", num(first(params_arr)), params_arr, "params")
        bytes_arr = format_bytes(params_arr, fmt_main)
        res.step("weight bytes", "W = N × bits/8 (+ group scales)",
                 f"{num(first(params_arr))} × {num(bits_per_param(fmt_main))} / 8", bytes_arr, "B")
        sharded, replicated, routed = bytes_arr, 0.0, 0.0
        res.assume("An explicit parameter count has no per-component split: it is divided evenly across the devices.")
    else:
        led = ledger(arch)
        comp = dict(led["components"])
        if not req.include_embeddings:
            comp["embeddings"] = comp["lm_head"] = 0
        if not req.include_norms:
            comp["norms"] = 0
        comp_bytes = {k: float(format_bytes(v, _fmt_for(req, k, shipped))) for k, v in comp.items()}
        params_total = float(sum(comp.values()))
        bytes_total = float(sum(comp_bytes.values()))
        pl = led["per_layer"]
        a = arch
        if a.attention == "mla":
            res.step("attention params / layer (MLA)",
                     "q (LoRA) + kv_a d×(r_kv+d_rope) + kv_b r_kv×H×(d_nope+d_v) + o H×d_v×d",
                     f"q_lora {a.q_lora}, r_kv {a.kv_lora}, H {a.heads}, d {a.d}", pl["attention"], "params")
        else:
            res.step("attention params / layer", "Q d×H·h + K,V 2×d×KV·h + O H·h×d",
                     f"{a.d}×{a.heads}×{a.head_dim} + 2×{a.d}×{a.kv_heads}×{a.head_dim} + {a.heads}×{a.head_dim}×{a.d}",
                     pl["attention"], "params")
        if a.ffn and a.dense_ffn_layers:
            res.step("dense FFN params / layer", f"{a.ffn_matrices} × d × f", f"{a.ffn_matrices} × {a.d} × {a.ffn}", pl["dense_ffn"], "params")
        if a.experts:
            res.step("experts per MoE layer", "(E + shared) × 3 × d × f_e + router d × E",
                     f"({a.experts} + {a.shared}) × {a.ffn_matrices} × {a.d} × {a.expert_ffn} + {a.d} × {a.experts}",
                     exact((a.experts + a.shared) * pl["expert"] + a.d * a.experts), "params")
        if comp["embeddings"]:
            res.step("embeddings + head", "V × d × (1 if tied else 2)", f"{a.vocab} × {a.d} × {1 if a.tied else 2}",
                     comp["embeddings"] + comp["lm_head"], "params")
        res.step("total parameters", "Σ components", " + ".join(num(v) for v in comp.values() if v), params_total, "params")
        res.step("weight bytes", "Σ component params × bits/8", " + ".join(num(v) for v in comp_bytes.values() if v),
                 bytes_total, "B")
        core_params = led["core_matrix"]
        core_bytes = sum(float(format_bytes(led["active_matrix"]["attention"] if k == "attention" else comp[k], _fmt_for(req, k, shipped)))
                         for k in ("attention", "dense_ffn", "routed_experts", "shared_experts", "router"))
        o.update(
            breakdown={k: {"params": comp[k], "bytes": comp_bytes[k], "format": format_label(_fmt_for(req, k, shipped))} for k in COMPONENTS},
            core_matrix_params=core_params, core_matrix_bytes=core_bytes,
            params_active=led["active_total"],
            per_layer={"attention_params": pl["attention"], "dense_ffn_params": pl["dense_ffn"],
                       "expert_params": pl["expert"], "norm_params": pl["norms"],
                       "forward_flops_per_token": 2 * (led["active_matrix_total"] / a.layers)},
        )
        if req.component_formats:
            over = {k: format_label(getattr(req.component_formats, k)) for k in COMPONENTS
                    if getattr(req.component_formats, k) is not None}
            res.assume("Component formats: " + ", ".join(f"{k} {v}" for k, v in over.items())
                       + f"; everything else {format_label(fmt_main)}.")
        res.assume("Bias vectors, rotary tables and quantisation metadata beyond the chosen format are not counted.",
                   "Embeddings and LM head are split across devices by vocabulary; norms and the router are replicated.")
        if a.experts:
            res.assume("MoE layers hold every routed expert; `params_active` counts the experts_per_token routed experts, "
                       "shared experts, attention, norms, embeddings and head used by one token.")
        routed = comp_bytes["routed_experts"]
        replicated = comp_bytes["norms"] + comp_bytes["router"]
        sharded = bytes_total - replicated - routed
        params_arr = np.asarray(params_total)
        bytes_arr = np.asarray(bytes_total)

    # per-device share
    if arch is not None and req.expert_parallel and arch.experts:
        routed_share = routed * np.ceil(arch.experts / devices) / arch.experts
        res.assume("Expert parallel: whole experts are placed on devices, ceil(experts / devices) per device.")
    else:
        routed_share = routed / devices
    per_device = sharded / devices + replicated + routed_share
    res.step("per device", "W_dev = sharded / n + replicated", f"{fmt_bytes(first(sharded + routed))} / {int(first(devices))}"
             + (f" + {fmt_bytes(replicated)}" if replicated else ""), per_device, "B")

    o.update(params_total=out(params_arr), bytes_total=out(bytes_arr),
             bits_per_param=out(bytes_arr * 8.0 / np.maximum(params_arr, 1e-300)),
             devices=out(devices), per_device_bytes=out(per_device))
    if mem is not None:
        remaining = mem - per_device
        fits = remaining >= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(mem > replicated, np.ceil((sharded + routed) / np.where(mem > replicated, mem - replicated, 1.0)), np.inf)
        res.step("remaining per device", "M_usable − W_dev", f"{fmt_bytes(first(mem))} − {fmt_bytes(first(per_device))}", remaining, "B")
        o.update(memory_per_device_bytes=out(capacity), usable_per_device_bytes=out(mem), remaining_per_device_bytes=out(remaining),
                 fits=out(fits) if np.ndim(fits) else bool(fits), min_devices=out(need))
        res.assume("Fit counts weights only: KV cache, activations, workspace and allocator reserve need their own room.")

    if req.compare_formats:
        rows = []
        for f in req.compare_formats:
            if arch is not None:
                comp_all = o["breakdown"]
                pt = sum(v["params"] for v in comp_all.values())
                b = np.asarray(float(format_bytes(pt, f)))
            else:
                b = format_bytes(params_arr, f)
            rows.append({"format": format_label(f), "bits_per_param": bits_per_param(f), "bytes_total": out(b),
                         "per_device_bytes": out(b / devices)})
        o["by_format"] = rows
        res.step(f"in {rows[0]['format']}", "W = N × bits/8", f"{num(first(params_arr))} × {num(rows[0]['bits_per_param'])} / 8",
                 np.asarray(rows[0]["bytes_total"]), "B")
    res.outputs = o
    res.headline = _headline(req, o, rec, fmt_main, hw)
    return res


def _headline(req: WeightMemoryRequest, o: dict, rec: dict | None, fmt_main: str, hw) -> str:
    """Weights' total size, per-device share and whether they fit (a sweep: its first point)."""
    n = hf.n_points(req.devices, req.params, req.memory_per_device_bytes)
    if rec is not None:
        who = hf.name_of(rec)
    elif req.tensors is not None:
        who = f"{hf.plural(len(req.tensors), 'tensor')}" + (f" × {req.copies} copies" if req.copies > 1 else "")
    else:
        who = f"{hf.fmt_big(o.get('params_total'))} {'parameter' if hf.scalar(o.get('params_total')) == 1 else 'parameters'}"
    fmt = format_label(fmt_main)
    if req.component_formats:
        over = [f"{k.replace('_', ' ')} {format_label(getattr(req.component_formats, k))}" for k in COMPONENTS
                if getattr(req.component_formats, k) is not None]
        fmt += f" ({', '.join(over)})" if over else ""
    text = f"{who} in {fmt} needs {hf.fmt_bytes(o.get('bytes_total'))} of weights"
    devices = hf.scalar(o.get("devices"))
    where = f" on {hw.name}" if hw is not None else ""
    if devices is not None and devices != 1:
        text += f", {hf.fmt_bytes(o.get('per_device_bytes'))} per device across {hf.fmt_count(devices)} devices{where}"
    elif where:
        text += where
    if "fits" in o:
        if hf.first_value(o["fits"]):
            text += f"; that fits, leaving {hf.fmt_bytes(o.get('remaining_per_device_bytes'))} of usable memory per device"
        else:
            need = hf.scalar(o.get("min_devices"))
            text += ("; that does not fit: it needs at least " + hf.plural(need, "device")
                     if need is not None and math.isfinite(need) else "; that does not fit on any number of these devices")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="weight-memory",
        profile=Profile(1.9e-07, 125, 46),
        compare=("weight_format", ("bf16", "fp8", "int4")),
        series=list_series("compare_formats", "formats"),
        family="weight_memory",
        title="Weight memory and fit",
        summary="Parameters and bytes of a model from its shapes (GQA/MLA attention, SwiGLU FFN, MoE experts, "
                "embeddings) or from a parameter count or tensor list, per storage format, and the share per device.",
        description="Counts every matrix per layer (Q, K, V, O or the MLA low-rank projections; gate/up/down; routed "
                    "and shared experts; router), the embedding and LM head (once when tied) and RMSNorm vectors, "
                    "then stores each component in its format (group scales included: q4_0, mxfp4, nvfp4, "
                    "int4_g128 or a custom {bits, group, scale bytes}). Per device: sharded parts / devices + "
                    "replicated norms and router; with expert_parallel, whole experts per device. Weights only.",
        request_model=WeightMemoryRequest,
        compute=compute,
        outputs_model=WeightMemoryOutputs,
        example={"model": "qwen3-235b-a22b", "weight_format": "bf16", "component_formats": {"routed_experts": "mxfp4"},
                 "devices": 8, "memory_per_device_bytes": 80e9, "compare_formats": ["fp8", "int4"]},
        cases=("model-resource-accounting", "model-parallelism", "weight-handoff", "model-operator-examples"),
        sweepable=("devices", "params", "memory_per_device_bytes"),
        chart=Chart(x="devices", y=("per_device_bytes",), x_label="devices", y_label="bytes per device"),
        extra_examples=({"params": [7e9, 70e9, 235e9], "weight_format": "bf16", "compare_formats": ["int8", "int4"]},
                        {"tensors": [{"name": "gate_proj", "shape": [12288, 4096]}], "devices": [4, 8]}),
    ),
]


