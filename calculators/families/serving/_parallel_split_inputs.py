"""`parallel-split`'s inputs resolved: which step model, the TP candidates, the TP link (the hardware's scale-up link by
default), the first-pass model's inputs, the pipeline hand-off, and the explanation steps and assumptions of both
models (kept apart so that the calculator module stays under the size limit)."""
from __future__ import annotations

import math

import numpy as np

from calculators.framework import CalcInputError, fmt_bytes, fmt_flops, fmt_rate, fmt_s, Lookup, num, Result
from calculators.domain import (
    Fmt, FORMATS, format_label, groups_from_model, kv_sizes, layout_of, measured_link_fits, model_weight_bytes,
    resolve_format, shipped_weight_formats,
)
from calculators.perf import measured_system_of, rates_from_spec, Rates, resolve_link, Split, split_problems

#: inputs only the first-pass model reads: any of them given selects it
FIRST_PASS_INPUTS = ("weight_bytes", "weight_bytes_per_param", "weight_read_bytes", "kv_bytes", "kv_bytes_per_value", "layers",
                     "hidden_size", "allreduces_per_layer", "message_bytes", "activation_bytes", "step_tokens", "flops_per_token")

# --------------------------------------------------------------------------- choosing the model, the candidates, the link

def step_model_of(req, rec, hw) -> tuple[str, object, Rates | None, str]:
    """(layers | first_pass, the model's layout or None, the device rates of the layers model, why that model)."""
    given = [f for f in FIRST_PASS_INPUTS if f in req.model_fields_set and getattr(req, f) is not None]
    lay, rates, missing = None, None, None
    if rec is not None and rec.layer_groups:
        try:
            lay = layout_of(rec)
        except CalcInputError as e:
            missing = ("model", f"a model whose layers are understood ({e.message})")
    else:
        missing = ("model", "a model with itemised layers (model or model_config)")
    if missing is None:
        peaks, bw = None, req.memory_bandwidth_bytes_per_s
        if hw is not None:
            try:
                r = rates_from_spec(hw)
                peaks, bw = r.peak_flop_per_s, bw or r.memory_bandwidth_bytes_per_s
            except CalcInputError:
                bw = bw or hw.memory_bandwidth_bytes_per_s
        if req.peak_flop_per_s is not None:
            peaks = {"BF16": req.peak_flop_per_s}       # one given rate for every precision
        if not peaks:
            missing = ("hardware" if hw is not None else "peak_flop_per_s",
                       "a device's peak FLOP/s: a hardware with dense peak rows, or peak_flop_per_s")
        elif bw is None:
            missing = ("memory_bandwidth_bytes_per_s", "a memory bandwidth: hardware or memory_bandwidth_bytes_per_s")
        else:
            rates = Rates(peaks, bw)
    if req.step_model == "layers":
        if given:
            raise CalcInputError(given[0], f"{given[0]} is an input of the first-pass model: drop it, or use step_model='first_pass'")
        if missing:
            raise CalcInputError(missing[0], f"step_model='layers' needs {missing[1]}")
    if req.step_model == "first_pass":
        return "first_pass", lay, None, "asked for"
    if given:
        return "first_pass", lay, None, f"{', '.join(given)} given"
    if missing:
        return "first_pass", lay, None, f"the layers model needs {missing[1]}"
    return "layers", lay, rates, "default"


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def candidates_of(req, lay) -> tuple[list[int], list[dict]]:
    """The TP degrees to evaluate, and (with `devices`) the divisors the model's heads rule out."""
    if req.devices is None:
        if req.tp is None:
            raise CalcInputError("tp", "give tp (the candidate TP degrees) or devices (the devices in total)")
        return (list(req.tp) if isinstance(req.tp, list) else [req.tp]), []
    if req.devices % req.pp:
        raise CalcInputError("devices", f"{req.devices} devices do not split into {req.pp} pipeline stages")
    per_stage = req.devices // req.pp
    if req.tp is not None:
        tps = list(req.tp) if isinstance(req.tp, list) else [req.tp]
        bad = [t for t in tps if per_stage % t]
        if bad:
            raise CalcInputError("tp", f"TP={', '.join(map(str, bad[:6]))} does not divide the {per_stage} devices of a stage")
        return tps, []
    keep, dropped = [], []
    for t in divisors(per_stage):
        why = split_problems(lay, Split(tp=t, pp=req.pp)) if lay is not None else []
        (dropped.append({"tp": t, "why": "; ".join(why)}) if why else keep.append(t))
    if not keep:
        raise CalcInputError("devices", f"no TP degree dividing {per_stage} suits the model: " + dropped[0]["why"])
    return keep, dropped


def tp_link(req, hw, res: Result, need: bool) -> str | None:
    """The TP link id: the request's, else (when a link is needed and its bandwidth not given) the hardware's
    scale-up link, said so; a hardware that lists none is a 422 naming `link`."""
    if req.link is not None or not need or req.link_bandwidth_bytes_per_s is not None or hw is None:
        return req.link
    link = hw.scale_up_link
    if link is None:
        raise CalcInputError("link", f"{hw.id} lists no scale-up link: give link (a link id, e.g. nvlink4) "
                                     "or link_bandwidth_bytes_per_s")
    res.inputs["link"] = link
    res.assume(f"link not given: using {link} (the scale-up link of {hw.id}, source: the first of the links its "
               f"hardware record lists, {', '.join(hw.links)}); pass link to choose another.")
    return link


def own_link_of(lookup: Lookup, hardware: str | None, link: str | None) -> bool:
    """Whether the measured all-reduces of the hardware's system were measured over this link."""
    system = measured_system_of(lookup, hardware)
    if system is None or link is None:
        return False
    fits = measured_link_fits(lookup, link, hardware)     # the hardware's own system when it was measured over the link
    return bool(fits) and fits[0].source.get("system") == system


# --------------------------------------------------------------------------- the inputs of each model

def first_pass_inputs(req, res: Result, rec) -> dict:
    """W, W read, KV of the batch and of one sequence, layers, hidden size and the KV format of the first-pass model."""
    def from_model(field: str, explicit):
        if explicit is not None or rec is None:
            return explicit
        v = rec.value(field, loc=field)
        res.cite(rec.source(field))
        return v

    layers = from_model("layers", req.layers)
    if layers is None:
        raise CalcInputError("layers", "give layers or a model id")
    hidden = req.hidden_size
    if hidden is None and rec is not None and (req.message_bytes is None or req.pp > 1):
        hidden = from_model("hidden_size", None)
    W, wlabel = req.weight_bytes, None
    if W is None:
        if rec is None:
            raise CalcInputError("weight_bytes", "give weight_bytes or a model id")
        shipped = shipped_weight_formats(rec.weight_dtype)
        bpp = req.weight_bytes_per_param
        if req.weight_format is not None:
            W, wlabel = model_weight_bytes(rec, req.weight_format, res, "weight_format"), format_label(req.weight_format)
        else:
            params = rec.value("params_total", loc="model")
            res.cite(rec.source("params_total"))
            if bpp is None and shipped is not None and not shipped.components:
                bpp = shipped.main.effective_bits / 8
                wlabel = shipped.main.name
                res.assume(f"Weight format: as published, {shipped.label} ({num(bpp)} B/param); pass weight_format to change it.")
            if bpp is None:  # a mixed published format (MXFP4 experts beside BF16 …): the engine counts it per component
                W, wlabel = model_weight_bytes(rec, None, res, "weight_format"), shipped.label if shipped else "bf16"
            else:
                W = res.step("weight bytes", "W = params × bytes/param", f"{num(params)} × {num(bpp)}", float(params) * bpp, "B")
    W_read = req.weight_read_bytes if req.weight_read_bytes is not None else W
    kfmt, KV = None, req.kv_bytes
    if KV is None:
        if rec is not None and req.context_tokens is not None:
            kfmt = (resolve_format(req.kv_format, "kv_format") if req.kv_format is not None
                    else Fmt(f"{num(req.kv_bytes_per_value)} B/value", 8.0 * req.kv_bytes_per_value))
            if not rec.layer_groups:
                raise CalcInputError("model", f"{rec.id} has no layer groups; give kv_bytes")
            groups = groups_from_model(rec, res, "model")
            per_seq = float(kv_sizes(groups, kfmt, FORMATS["fp32"], np.asarray(req.context_tokens, dtype=np.int64)).bytes_per_request)
            KV = res.step("KV bytes", "KV = batch × Σ_groups count × Σ_streams dim × retained(N) × bytes",
                          f"{req.batch} × {fmt_bytes(per_seq)} (N = {num(req.context_tokens)})", per_seq * req.batch, "B")
        else:
            KV = 0.0
            res.assume("No KV given (kv_bytes, or model + context_tokens): KV taken as 0.")
    kv_label = kfmt.name if kfmt is not None and kfmt.name in FORMATS else ("fp8" if req.kv_bytes_per_value == 1 else "bf16")
    return {"layers": int(layers), "hidden": hidden, "W": float(W), "W_read": float(W_read), "KV": float(KV), "wlabel": wlabel,
            "kv_label": kv_label}


def pipeline_link(req, lookup: Lookup, res: Result, hidden, act: float, alpha, B_link):
    """(one hand-off as a function of step tokens, bytes per token, its α and B) between pipeline stages."""
    if req.pp == 1:
        return (lambda tok: 0.0 * np.asarray(tok, dtype=float)), 0.0, 0.0, None
    if hidden is None:
        raise CalcInputError("hidden_size", "pipeline hand-offs need hidden_size or a model id")
    a_pp, b_pp = resolve_link(lookup, res, req.pp_link, req.pp_link_alpha_s, req.pp_link_bandwidth_bytes_per_s, loc="pp_link",
                              alpha_loc="pp_link_alpha_s")
    if req.pp_link is None:
        a_pp = at(alpha, 0) if a_pp is None else a_pp
        b_pp = at(B_link, 0) if b_pp is None else b_pp
    if b_pp is None:
        raise CalcInputError("pp_link_bandwidth_bytes_per_s", "give the bandwidth between stages (or a TP link)")
    a_pp = a_pp or 0.0
    per_tok = req.handoff_tensors * float(hidden) * act
    return (lambda tok: a_pp + per_tok * np.asarray(tok, dtype=float) / b_pp), per_tok, a_pp, b_pp


def steps(res: Result, mode: str, model, t: dict, tp_list: list[int], B_hbm: float, alpha, B_link, tot: dict, req) -> None:
    """The explanation steps of the first candidate (and the all-reduce at the first p > 1)."""
    i0 = 0
    ia = next((i for i, v in enumerate(tp_list) if v > 1), i0)
    p0, pa = tp_list[i0], tp_list[ia]
    if mode == "first_pass":
        res.step("memory time", "t_mem = (W + KV) / (p × B_hbm)",
                 f"({fmt_bytes(model.W_read)} + {fmt_bytes(tot['kv_bytes'])}) / ({p0} × {fmt_rate(B_hbm)})", t["mem_t"][i0], "s")
        per_layer = f"{num(model.layers)} × {model.allreduces_per_layer}"
    else:
        res.step(f"weights per device (p = {p0})", "W_dev = Σ components ÷ their split (heads and FFN width over tp, experts over "
                 "ep·moe_tp; norms and router replicated) ÷ pp", f"{fmt_bytes(tot['weight_bytes'])} of weights, TP = {p0}, PP = {req.pp}",
                 t["w_dev"][i0], "B")
        res.step(f"KV per device (p = {p0})", "KV_dev = batch × KV of the rank's KV heads (replicated below one head per rank) at N ÷ pp",
                 f"{req.batch} × {fmt_bytes(model.kv_per_seq(p0)[0])} (N = {num(req.context_tokens or 0)})", t["kv_dev"][i0], "B")
        res.step(f"memory time (p = {p0})", "t_mem = Σ bytes one rank reads (weights in their formats, KV within each window, "
                 "activations) / B_hbm", f"{fmt_bytes(t['bytes'][i0])} / {fmt_rate(B_hbm)}", t["mem_t"][i0], "s")
        res.step(f"compute time (p = {p0})", "t_compute = Σ FLOPs of one rank / the peak of each op's precision",
                 f"{fmt_flops(t['flops'][i0])} at the device's dense peaks", t["comp_t"][i0], "s")
        per_layer = f"{num(model.lay.layers)} × 2"
    M = tot["message_bytes"]
    res.step(f"ring all-reduce (p = {pa})", "t_ar = 2(p−1)α + 2(p−1)/p × M / B_link",
             f"{num(2 * (pa - 1))} × {fmt_s(at(alpha, ia))} + {fmt_bytes(2 * (pa - 1) / pa * M)} / "
             f"{fmt_rate(at(B_link, ia)) if B_link is not None else '—'}", t["ar_t"][ia], "s")
    res.step(f"communication (p = {pa})", "t_comm = layers × all-reduces per layer × t_ar", f"{per_layer} × {fmt_s(t['ar_t'][ia])}",
             t["comm_t"][ia], "s")
    local = np.maximum(t["mem_t"], t["comp_t"])
    res.step(f"step time (p = {p0})", "T = max(t_mem, t_compute) + t_comm" + (" + (pp − 1) × t_h" if req.pp > 1 else ""),
             f"{fmt_s(local[i0])} + {fmt_s(t['comm_t'][i0])}" + (f" + {fmt_s(t['hand_t'][i0])}" if req.pp > 1 else ""),
             t["step"][i0], "s")


def assumptions(req, res: Result, rec, mode: str, why_mode: str, tp_list: list[int]) -> None:
    if mode == "layers":
        res.assume("Step model: layer by layer (the step model of calculators.perf) for one rank of each TP degree: projections, "
                   "attention over each layer's window, FFN or the experts the batch touches, norms and the LM head; the bound is "
                   "max(Σ FLOPs / peak, Σ bytes / B_hbm), i.e. perfect overlap of the kernels.",
                   "Two ring all-reduces per layer over the TP link, after the kernels (no overlap); KV heads fewer than the TP "
                   "ranks are replicated; experts are sliced over the TP ranks (no expert parallelism here).")
    else:
        res.assume(f"Step model: the book's first pass ({why_mode}). Every step reads the weights and KV once, split evenly over the "
                   "TP ranks; local compute is below the memory time unless flops_per_token and peak_flop_per_s are given.",
                   f"{req.allreduces_per_layer} ring all-reduce(s) of M bytes per layer, serialised after the memory access (no "
                   "overlap); no LM-head reduction, kernel efficiency or host launch overhead.",
                   "per_device_bytes = (W + KV) / (tp × pp) + workspace: no replication. KV heads fewer than tp ranks, or an MLA "
                   "latent cache, are replicated in practice and need more memory.")
        if rec is not None:
            kvh = rec.value("kv_heads", required=False)
            bad = [t for t in tp_list if kvh and t > 1 and (kvh % t and t % kvh)]
            if kvh and any(t > kvh for t in tp_list):
                res.assume(f"{rec.id} has {int(kvh)} KV heads: at tp > {int(kvh)} the KV is replicated, not split.")
            if bad:
                res.assume(f"tp = {', '.join(map(str, bad))} does not divide the {int(kvh)} KV heads evenly.")
            if str(rec.kind) == "moe" and req.weight_read_bytes is None:
                res.assume("MoE model: all weights are counted as read per step; give weight_read_bytes for the experts a step "
                           "touches (the layers step model counts them itself).")
    if req.pp > 1:
        res.assume("Pipeline stages run one after another for a token: the memory time is not cut by pp, (pp − 1) hand-offs are added; "
                   "stages are balanced. Throughput with microbatches is bounded by one stage's time.")


def at(x, i: int):
    """Point i of a per-candidate array, or the scalar itself."""
    return float(np.asarray(x).reshape(-1)[i]) if np.ndim(x) else x


__all__ = ["FIRST_PASS_INPUTS", "assumptions", "at", "candidates_of", "divisors", "first_pass_inputs", "own_link_of",
           "pipeline_link", "step_model_of", "steps", "tp_link"]
