"""Bytes of values stored in a number format: payload bits, block scales, outliers, per-tensor scales.

A format is described by `bits_per_value`, a `group_size` of values sharing one scale (a
"block"), the `scale_bytes_per_group` of that scale (plus zero-point/min when the format has one),
optional `tensor_scale_bytes` stored once per tensor, and an optional sparse outlier side store
(`outlier_fraction` of the values cost `bits_per_outlier` extra bits each). Named formats
(`q4_0`, `mxfp4`, `nvfp4`, ...) are shorthands for such a spec; the table below states each layout.

The format table itself lives in `calculators.domain.formats`, shared by every calculator, so a format
means the same bytes everywhere.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.domain import Fmt, FormatField, FORMATS, MODEL_CONFIG_FIELD, model_record, output_label, resolve_format
from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, Lookup, NonNegFloat,
    NonNegIntSweep, num, out, Outputs, OutSweep, PosFloatSweep, PosInt, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf


# --------------------------------------------------------------------------- the calculator

class Tensor(CalcRequest):
    """One tensor of a set (e.g. the inputs and outputs of an operator chain)."""

    name: str = Field(max_length=100, description="Label.", examples=["gate_up"])
    values: Annotated[int, Field(ge=0, le=10**18)] = Field(description="Number of values (elements).", examples=[25_165_824])
    format: FormatField | None = Field(None, description="Format of this tensor; default: the request's `format`.")
    row_length: PosInt | None = Field(None, description="Values per row: scale blocks never span rows. Default: blocks tile the whole tensor.")
    count: Annotated[int, Field(ge=0, le=10**9)] = Field(1, description="How many times it counts (2 = written and read back).")


class QuantizationRequest(CalcRequest):
    """Bytes of `values` values (or a `shape`, a model's parameters — `model` or `model_config` —, or a list of tensors) in a format."""

    values: NonNegIntSweep | None = Field(None, description="Number of values (elements). Sweepable.", examples=[50_331_648])
    shape: Annotated[list[PosInt], Field(min_length=1, max_length=8)] | None = Field(
        None, description="Tensor shape instead of `values`; its last dimension is the row length.", examples=[[12288, 4096]])
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id: its parameter count is the number of values.", examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    params: Literal["total", "active"] = Field("total", description="With `model` or `model_config`: all parameters or those "
                                               "active per token (from a config.json: counted from its shapes).")
    row_length: PosInt | None = Field(None, description="Values per row (scale blocks never span rows). Default: last dim of `shape`, else none.")
    format: FormatField = Field("bf16", description="Storage format: a name (see the description) or {bits_per_value, group_size, "
                                "scale_bytes_per_group, tensor_scale_bytes, outlier_fraction, bits_per_outlier}.", examples=["q4_0"])
    compare: Annotated[list[FormatField], Field(max_length=32)] = Field(
        default_factory=list, description="More formats to size side by side (same values).", examples=[["bf16", "fp8", "mxfp4", "nvfp4"]])
    reference_format: FormatField = Field("bf16", description="Format the compression ratio is measured against.")
    tensors: Annotated[list[Tensor], Field(min_length=1, max_length=256)] | None = Field(
        None, description="Instead of one tensor: a list of tensors in their own formats, summed.")
    measured_bytes: NonNegFloat | None = Field(None, description="A measured size (e.g. a file) to compare with the nominal size, bytes.",
                                               examples=[88_014_818_560])
    convert_bytes_per_s: PosFloatSweep | None = Field(
        None, description="Effective read+write throughput of a conversion pass (reference format → this format), bytes/s. Sweepable.",
        examples=[100e9])


#: a number, or one per point when `values` or `convert_bytes_per_s` is swept (null where not finite)


class QuantizationFormatOut(Outputs):
    """The same values sized in one of the `compare` formats."""

    format: str = Field(description="Format name (or the spec's label, 'custom' for bare numbers).")
    bits_per_value: float | None = Field(description="Payload bits per value, bit.")
    effective_bits_per_value: OutSweep = Field(description="All bytes × 8 / values, scales and outliers included, bit.")
    bytes_per_value: OutSweep = Field(description="effective bits / 8, B.")
    payload_bytes: OutSweep = Field(description="values × bits / 8, B.")
    scale_bytes: OutSweep = Field(description="Block scales (and zero points), B.")
    outlier_bytes: OutSweep = Field(description="Sparse outlier side store, B.")
    tensor_scale_bytes: OutSweep = Field(description="Per-tensor scale, B.")
    total_bytes: OutSweep = Field(description="payload + scales + outliers + per-tensor scale, B.")
    compression_vs_reference: OutSweep = Field(description="Reference bytes / these bytes (null when these are 0).")


class QuantizationTensorOut(Outputs):
    """One tensor of a `tensors` request."""

    name: str = Field(description="The tensor's label.")
    values: int = Field(description="Values (elements) of one copy.")
    format: str = Field(description="Format it is stored in.")
    count: int = Field(description="How many times it counts.")
    effective_bits_per_value: float | None = Field(description="Bytes × 8 / values of one copy, bit.")
    payload_bytes: float | None = Field(description="Payload of one copy, B.")
    scale_bytes: float | None = Field(description="Block scales of one copy, B.")
    bytes_each: float | None = Field(description="All bytes of one copy, B.")
    bytes: float | None = Field(description="count × bytes_each, B.")


class QuantizationOutputs(Outputs):
    """Outputs of quantization; lists where `values` or `convert_bytes_per_s` is swept. A `tensors` request sums its
    tensors and leaves out the single-format keys (format, bits, outliers, per-tensor scale)."""

    values: int | float | list[int | float] = Field(description="Values sized (a tensor's elements, a model's "
                                                    "parameters, or the sum of count × values over `tensors`); whole, "
                                                    "written as a float past 2^53.")
    format: str | None = Field(None, description="Format name (single-format requests).")
    bits_per_value: float | None = Field(None, description="Payload bits per value of the format, bit.")
    effective_bits_per_value: OutSweep = Field(description="All bytes × 8 / values, scales and outliers included, bit "
                                               "(null for zero values in a tensors request).")
    bytes_per_value: OutSweep = Field(None, description="effective bits / 8, B (single-format requests).")
    payload_bytes: OutSweep = Field(description="values × bits / 8, B.")
    scale_bytes: OutSweep = Field(description="Block scales (and zero points), B.")
    outlier_bytes: OutSweep = Field(None, description="Sparse outlier side store, B (single-format requests).")
    tensor_scale_bytes: OutSweep = Field(None, description="Per-tensor scale, B (single-format requests).")
    total_bytes: OutSweep = Field(description="payload + scales + outliers + per-tensor scale, B.")
    reference_format: str = Field(description="Format the compression is measured against.")
    reference_bytes: OutSweep = Field(description="The same values in the reference format, B.")
    compression_vs_reference: OutSweep = Field(description="reference bytes / total bytes (null when the total is 0).")
    saved_bytes: OutSweep = Field(description="reference − total bytes, B (negative: the format is larger).")
    formats: list[QuantizationFormatOut] = Field(description="One row per `compare` format (empty for tensors).")
    tensors: list[QuantizationTensorOut] | None = Field(None, description="One row per tensor (tensors requests).")
    measured_bytes: float | None = Field(None, description="The measured size given, B (with measured_bytes).")
    measured_bits_per_value: OutSweep = Field(None, description="measured bytes × 8 / values, bit (with measured_bytes).")
    measured_over_nominal: OutSweep = Field(None, description="measured / computed total bytes (with measured_bytes).")
    convert_bytes_moved: OutSweep = Field(None, description="Bytes a conversion pass reads and writes, reference + "
                                          "target, B (with convert_bytes_per_s).")
    convert_s: OutSweep = Field(None, description="Time of that pass at the given throughput, s (with "
                                "convert_bytes_per_s).")


def _sizes(fmt: Fmt, values: np.ndarray, row_length: int | None) -> dict[str, np.ndarray]:
    values = values.astype(float)
    payload = values * fmt.bits / 8.0
    if fmt.scale_bytes:
        if row_length:
            rows = np.ceil(values / row_length)
            groups = rows * math.ceil(row_length / fmt.group)
        else:
            groups = np.ceil(values / fmt.group)
        scale = groups * fmt.scale_bytes
    else:
        scale = values * 0.0
    outlier = values * fmt.outlier_fraction * fmt.outlier_bits / 8.0
    tensor = np.where(values > 0, fmt.tensor_bytes, 0.0)
    total = payload + scale + outlier + tensor
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(values > 0, total * 8.0 / np.where(values > 0, values, 1.0), fmt.effective_bits)
    return {"payload_bytes": payload, "scale_bytes": scale, "outlier_bytes": outlier, "tensor_scale_bytes": tensor,
            "total_bytes": total, "effective_bits_per_value": eff}


def _intify(a):
    """Integral byte counts print as integers."""
    arr_ = np.asarray(a, dtype=float)
    if arr_.size and np.all(np.isfinite(arr_)) and np.all(arr_ == np.round(arr_)) and np.all(np.abs(arr_) < 2**53):
        return out(arr_.astype(np.int64))
    return out(arr_)


def _format_row(fmt: Fmt, label, sizes: dict, ref_total) -> dict:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sizes["total_bytes"] > 0, ref_total / np.where(sizes["total_bytes"] > 0, sizes["total_bytes"], 1.0), np.nan)
    return {"format": label, "bits_per_value": fmt.bits, "effective_bits_per_value": out(sizes["effective_bits_per_value"]),
            "bytes_per_value": out(sizes["effective_bits_per_value"] / 8.0),
            "payload_bytes": _intify(sizes["payload_bytes"]), "scale_bytes": _intify(sizes["scale_bytes"]),
            "outlier_bytes": _intify(sizes["outlier_bytes"]), "tensor_scale_bytes": _intify(sizes["tensor_scale_bytes"]),
            "total_bytes": _intify(sizes["total_bytes"]), "compression_vs_reference": out(ratio)}


def compute(req: QuantizationRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    fmt = resolve_format(req.format, "format")
    ref = resolve_format(req.reference_format, "reference_format")
    given = [k for k in ("values", "shape", "model", "model_config", "tensors")
             if getattr(req, "hf_config" if k == "model_config" else k) is not None]
    if len(given) != 1:
        raise CalcInputError(given[1] if len(given) > 1 else "values",
                             "give exactly one of `values`, `shape`, `model`, `model_config` or `tensors`")
    res.step("format", "effective bits = bits + 8 × scale bytes / group + outlier fraction × outlier bits",
             fmt.describe(), fmt.effective_bits, "bit/value")
    res.assume(f"Layout of {fmt.name}: {fmt.layout}.")

    if req.tensors is not None:
        res = _tensors(req, res, fmt, ref)
        res.headline = _headline(req, res.outputs, fmt)
        return res

    row = req.row_length
    if req.shape is not None:
        values = np.asarray(float(np.prod(np.asarray(req.shape, dtype=float))))
        if values > 1e18:
            raise CalcInputError("shape", "more than 1e18 values")
        row = row or req.shape[-1]
        res.step("values", "n = product of the shape", " × ".join(num(d) for d in req.shape), values, "values")
    elif req.model is not None or req.hf_config is not None:
        rec = model_record(req, lookup, res)
        src = "model" if req.model is not None else "model_config"
        key = "params_total" if req.params == "total" else "params_active"
        if req.hf_config is not None and key not in rec:
            raise CalcInputError("model_config", f"attention '{rec.attention}' has no parameter ledger here, so the "
                                 "config gives no parameter count: give `values` instead")
        values = np.asarray(float(rec.value(key, loc=src)))
        res.cite(rec.source(key))
        res.step("values", f"n = {key} of {req.model if req.model is not None else (rec.name or src)}",
                 num(float(values)), values, "values")
        res.assume("A model's parameter count is sized as if every tensor used the one format; real checkpoints keep "
                   "embeddings, norms or attention in higher precision — list them with `tensors` for that.")
    else:
        values = np.asarray(req.values, dtype=float)

    x = broadcast({"values": values, **({"convert_bytes_per_s": req.convert_bytes_per_s} if req.convert_bytes_per_s is not None else {})})
    values = x["values"]
    sizes = _sizes(fmt, values, row)
    ref_sizes = _sizes(ref, values, row)
    v0 = first(values)
    groups_txt = (f"ceil({num(v0)} / {num(fmt.group)}) groups × {num(fmt.scale_bytes)} B" if not row else
                  f"{num(math.ceil(v0 / row))} rows × ceil({num(row)} / {num(fmt.group)}) groups × {num(fmt.scale_bytes)} B")
    res.step("payload", "payload = n × bits / 8", f"{num(v0)} × {num(fmt.bits)} / 8", sizes["payload_bytes"], "B")
    if fmt.scale_bytes:
        res.step("block scales", "scales = groups × scale bytes", groups_txt, sizes["scale_bytes"], "B")
    if fmt.outlier_fraction:
        res.step("outliers", "outliers = n × p × outlier bits / 8",
                 f"{num(v0)} × {num(fmt.outlier_fraction)} × {num(fmt.outlier_bits)} / 8", sizes["outlier_bytes"], "B")
    res.step("total", "total = payload + scales + outliers + per-tensor scale",
             f"{fmt_bytes(first(sizes['payload_bytes']))} + {num(first(sizes['scale_bytes']))} B + "
             f"{num(first(sizes['outlier_bytes']))} B + {num(first(sizes['tensor_scale_bytes']))} B",
             sizes["total_bytes"], "B")
    t0 = first(sizes["total_bytes"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(sizes["total_bytes"] > 0, ref_sizes["total_bytes"] / np.where(sizes["total_bytes"] > 0, sizes["total_bytes"], 1.0), np.nan)
    res.step("compression", f"ratio = bytes in {ref.name} / bytes in {fmt.name}",
             f"{fmt_bytes(first(ref_sizes['total_bytes']))} / {fmt_bytes(t0)}", ratio, "×")

    outputs = {
        "values": _intify(values), "format": output_label(req.format, fmt),
        "bits_per_value": fmt.bits, "effective_bits_per_value": out(sizes["effective_bits_per_value"]),
        "bytes_per_value": out(sizes["effective_bits_per_value"] / 8.0),
        "payload_bytes": _intify(sizes["payload_bytes"]), "scale_bytes": _intify(sizes["scale_bytes"]),
        "outlier_bytes": _intify(sizes["outlier_bytes"]), "tensor_scale_bytes": _intify(sizes["tensor_scale_bytes"]),
        "total_bytes": _intify(sizes["total_bytes"]),
        "reference_format": output_label(req.reference_format, ref), "reference_bytes": _intify(ref_sizes["total_bytes"]),
        "compression_vs_reference": out(ratio), "saved_bytes": _intify(ref_sizes["total_bytes"] - sizes["total_bytes"]),
    }
    rows = []
    for i, f in enumerate(req.compare):
        cf = resolve_format(f, f"compare.{i}")
        rows.append(_format_row(cf, output_label(f, cf), _sizes(cf, values, row), ref_sizes["total_bytes"]))
        res.step(f"compare: {cf.name}", "total = n × effective bits / 8 (+ per-tensor scale)",
                 f"{num(v0)} values in {cf.describe()}", rows[-1]["total_bytes"] if not isinstance(rows[-1]["total_bytes"], list)
                 else rows[-1]["total_bytes"][0], "B")
    outputs["formats"] = rows

    if req.measured_bytes is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            mbits = np.where(values > 0, req.measured_bytes * 8.0 / np.where(values > 0, values, 1.0), np.nan)
            over = np.where(sizes["total_bytes"] > 0, req.measured_bytes / np.where(sizes["total_bytes"] > 0, sizes["total_bytes"], 1.0), np.nan)
        res.step("measured size", "bits/value = measured bytes × 8 / n", f"{num(req.measured_bytes)} × 8 / {num(v0)}", mbits, "bit/value")
        outputs.update({"measured_bytes": req.measured_bytes, "measured_bits_per_value": out(mbits),
                        "measured_over_nominal": out(over)})
    if req.convert_bytes_per_s is not None:
        moved = ref_sizes["total_bytes"] + sizes["total_bytes"]
        conv = moved / x["convert_bytes_per_s"]
        res.step("conversion pass", f"t = (bytes read in {ref.name} + bytes written in {fmt.name}) / throughput",
                 f"({fmt_bytes(first(ref_sizes['total_bytes']))} + {fmt_bytes(t0)}) / {num(first(x['convert_bytes_per_s']))} B/s",
                 conv, "s")
        outputs.update({"convert_bytes_moved": _intify(moved), "convert_s": out(conv)})
        res.assume("A conversion pass reads every value once in the reference format and writes it once in the target "
                   "format at the given effective throughput; launch and allocation time are not counted.")
    res.outputs = outputs
    _common_assumptions(res)
    res.headline = _headline(req, outputs, fmt)
    return res


def _headline(req: QuantizationRequest, o: dict, fmt: Fmt) -> str:
    """Bytes in the format, bits per value, and the saving against the reference (a sweep: its first point)."""
    n = hf.n_points(req.values, req.convert_bytes_per_s)
    if req.tensors is not None:
        who = f"{hf.plural(len(req.tensors), 'tensor')} ({hf.fmt_big(o.get('values'))} values)"
    elif req.model is not None or req.hf_config is not None:
        who = f"the {hf.fmt_big(o.get('values'))} weights of {req.model or 'the configured model'}"
    else:
        who = f"{hf.fmt_big(o.get('values'))} values"
    name = o.get("format") or fmt.name
    text = (f"{who} in {name} take {hf.fmt_bytes(o.get('total_bytes'))} "
            f"({hf.fmt_num(o.get('effective_bits_per_value'), 4)} bits per value with scales), "
            f"{hf.fmt_num(o.get('compression_vs_reference'))}× smaller than {hf.fmt_bytes(o.get('reference_bytes'))} in "
            f"{o.get('reference_format')}")
    if o.get("convert_s") is not None:
        text += f"; converting takes {hf.fmt_seconds(o['convert_s'])} at {hf.fmt_rate(req.convert_bytes_per_s)}"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


def _tensors(req: QuantizationRequest, res: Result, fmt: Fmt, ref: Fmt) -> Result:
    rows = []
    total = payload = scale = ref_total = 0.0
    nvalues = 0.0
    for i, t in enumerate(req.tensors):
        tf = resolve_format(t.format, f"tensors.{i}.format") if t.format is not None else fmt
        s = _sizes(tf, np.asarray(float(t.values)), t.row_length)
        r = _sizes(ref, np.asarray(float(t.values)), t.row_length)
        each = float(s["total_bytes"])
        rows.append({"name": t.name, "values": t.values, "format": output_label(t.format, tf) if t.format is not None else output_label(req.format, fmt),
                     "count": t.count, "effective_bits_per_value": out(s["effective_bits_per_value"]),
                     "payload_bytes": _intify(s["payload_bytes"]), "scale_bytes": _intify(s["scale_bytes"]),
                     "bytes_each": _intify(each), "bytes": _intify(each * t.count)})
        total += each * t.count
        payload += float(s["payload_bytes"]) * t.count
        scale += float(s["scale_bytes"]) * t.count
        ref_total += float(r["total_bytes"]) * t.count
        nvalues += float(t.values) * t.count
        if i < 12:
            res.step(f"tensor {t.name}", "bytes = count × (payload + scales + …)",
                     f"{t.count} × {fmt_bytes(each)} ({tf.name})", each * t.count, "B")
    res.step("sum of tensors", "total = Σ count × bytes", f"{len(rows)} tensors", total, "B")
    ratio = ref_total / total if total > 0 else None
    res.outputs = {
        "tensors": rows, "total_bytes": _intify(total), "payload_bytes": _intify(payload), "scale_bytes": _intify(scale),
        "values": _intify(nvalues), "effective_bits_per_value": (total * 8 / nvalues) if nvalues else None,
        "reference_format": output_label(req.reference_format, ref), "reference_bytes": _intify(ref_total),
        "compression_vs_reference": ratio, "saved_bytes": _intify(ref_total - total), "formats": [],
    }
    if req.convert_bytes_per_s is not None:
        rates = np.asarray(req.convert_bytes_per_s, dtype=float)
        conv = (ref_total + total) / rates
        res.step("conversion pass", "t = (bytes read + bytes written) / throughput",
                 f"({fmt_bytes(ref_total)} + {fmt_bytes(total)}) / {num(first(rates))} B/s", conv, "s")
        res.outputs.update({"convert_bytes_moved": _intify(ref_total + total), "convert_s": out(conv)})
    if req.measured_bytes is not None:
        res.outputs.update({"measured_bytes": req.measured_bytes,
                            "measured_bits_per_value": req.measured_bytes * 8 / nvalues if nvalues else None,
                            "measured_over_nominal": req.measured_bytes / total if total else None})
    res.assume("`count` repeats a tensor (for operator-boundary traffic: written once and read once = 2).")
    _common_assumptions(res)
    return res


def _common_assumptions(res: Result) -> None:
    res.assume(
        "Block scales are counted per group of `group_size` values; a partial last group (or a row that is not a "
        "multiple of the group) still stores a whole scale.",
        "Sizes are format overhead only: alignment, padding, metadata headers, higher-precision layers and "
        "dequantisation workspace are not included unless listed as tensors.",
        "Same average bits per value does not mean the same numerics: scale type, rounding and outlier handling differ.",
        "Bytes are exact; decimal (MB, GB) and binary (MiB, GiB) readings are labelled.",
    )


CALCULATORS = [
    Calculator(
        name="quantization",
        profile=Profile(1.4e-06, 1568, 493),
        family="quantization",
        title="Quantized storage size",
        summary="Bytes of a tensor, a model or a set of tensors in a number format — payload bits, block scales, "
                "outliers and per-tensor scales — with effective bits per value and the ratio to BF16.",
        description="bytes = n × bits/8 + ceil(n / group) × scale_bytes + n × p × outlier_bits/8 + tensor_scale. "
                    "Named layouts: " + "; ".join(f.layout for f in FORMATS.values()) + ". "
                    "`compare` sizes the same values in more formats; `tensors` sums a list of tensors in their own "
                    "formats (e.g. operator-boundary traffic, mixed-precision checkpoints); `measured_bytes` turns a "
                    "file size into bits per value; `convert_bytes_per_s` times a read-convert-write pass.",
        request_model=QuantizationRequest,
        compute=compute,
        outputs_model=QuantizationOutputs,
        example={"values": 603_979_776, "format": "q4_0", "compare": ["bf16", "fp8", "q8_0", "fp4_block16", "nvfp4"]},
        cases=("kv-quantization-and-execution", "kernel-orchestration-and-quantization", "inference-training-scenarios",
               "training-offload-and-casting"),
        sweepable=("values", "convert_bytes_per_s"),
        families=("weight_memory",),
        chart=Chart(x="values", y=("total_bytes", "reference_bytes"), x_label="values", y_label="bytes"),
        extra_examples=({"shape": [12288, 4096], "format": "mxfp4", "compare": ["bf16", "nvfp4"]},
                        {"model": "llama-3.1-70b", "format": "int4_g128", "compare": ["bf16", "fp8"]}),
    ),
]
