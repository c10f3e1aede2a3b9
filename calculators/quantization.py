"""Bytes of values stored in a number format: payload bits, block scales, outliers, per-tensor scales.

A format is described by `bits_per_value`, a `group_size` of values sharing one scale (a
"block"), the `scale_bytes_per_group` of that scale (plus zero-point/min when the format has one),
optional `tensor_scale_bytes` stored once per tensor, and an optional sparse outlier side store
(`outlier_fraction` of the values cost `bits_per_outlier` extra bits each). Named formats
(`q4_0`, `mxfp4`, `nvfp4`, ...) are shorthands for such a spec; the table below states each layout.

The kv-cache, prefix-cache and kv-eviction calculators use the same format table (`FORMATS`,
`resolve_format`), so a KV format means the same bytes everywhere.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.core import (
    CalcInputError,
    CalcRequest,
    Fraction,
    Lookup,
    NonNegFloat,
    NonNegIntSweep,
    PosFloatSweep,
    PosInt,
    Result,
    broadcast,
    fact_source,
    fact_value,
    fetch,
    first,
    fmt_bytes,
    num,
    out,
)


@dataclass(frozen=True)
class Fmt:
    """A resolved storage format."""

    name: str
    bits: float                 # payload bits per value
    group: int = 1              # values sharing one scale block
    scale_bytes: float = 0.0    # bytes of scale (+ zero point / min) per group
    tensor_bytes: float = 0.0   # bytes stored once per tensor (global scale)
    outlier_fraction: float = 0.0
    outlier_bits: float = 0.0
    layout: str = ""

    def entry_bytes(self, values: float) -> float:
        """Bytes of one row of `values` values (blocks do not span rows)."""
        if values <= 0:
            return 0.0
        groups = math.ceil(values / self.group) if self.scale_bytes else 0
        return values * self.bits / 8.0 + groups * self.scale_bytes + values * self.outlier_fraction * self.outlier_bits / 8.0

    @property
    def effective_bits(self) -> float:
        """Bits per value with block scales and outliers, when the rows are a whole number of groups."""
        return self.bits + (8.0 * self.scale_bytes / self.group) + self.outlier_fraction * self.outlier_bits

    def describe(self) -> str:
        parts = [f"{num(self.bits)} bit/value"]
        if self.scale_bytes:
            parts.append(f"{num(self.scale_bytes)} B scale per {num(self.group)} values")
        if self.outlier_fraction:
            parts.append(f"{num(self.outlier_fraction * 100)} % outliers × {num(self.outlier_bits)} bit")
        if self.tensor_bytes:
            parts.append(f"{num(self.tensor_bytes)} B per tensor")
        return f"{self.name}: " + ", ".join(parts) + f" = {num(self.effective_bits)} effective bit/value"


#: Named formats and the layouts they assume (bytes exact for the block formats).
FORMATS: dict[str, Fmt] = {f.name: f for f in (
    Fmt("fp32", 32, layout="IEEE binary32, 4 B per value"),
    Fmt("bf16", 16, layout="bfloat16, 2 B per value"),
    Fmt("fp16", 16, layout="IEEE binary16, 2 B per value"),
    Fmt("fp8", 8, layout="FP8 (E4M3 or E5M2), 1 B per value; any per-tensor or per-head scales are not counted"),
    Fmt("fp8_per_tensor", 8, tensor_bytes=4, layout="FP8 with one FP32 scale per tensor (4 B once)"),
    Fmt("int8", 8, layout="INT8, 1 B per value, scales not counted"),
    Fmt("int4", 4, layout="INT4 packed two per byte, scales not counted"),
    Fmt("q8_0", 8, 32, 2, layout="GGML q8_0: blocks of 32 INT8 values + one FP16 scale = 34 B per 32 values"),
    Fmt("q4_0", 4, 32, 2, layout="GGML q4_0: blocks of 32 4-bit values + one FP16 scale = 18 B per 32 values"),
    Fmt("q4_1", 4, 32, 4, layout="GGML q4_1: 32 4-bit values + FP16 scale + FP16 min = 20 B per 32 values"),
    Fmt("q5_0", 5, 32, 2, layout="GGML q5_0: 32 5-bit values + FP16 scale = 22 B per 32 values"),
    Fmt("q5_1", 5, 32, 4, layout="GGML q5_1: 32 5-bit values + FP16 scale + FP16 min = 24 B per 32 values"),
    Fmt("q2_k", 2, 256, 20, layout="GGML q2_K: 256 2-bit values + 16 B sub-block scales/mins + 2 FP16 = 84 B per 256"),
    Fmt("q3_k", 3, 256, 14, layout="GGML q3_K: 256 3-bit values + 12 B scales + FP16 = 110 B per 256"),
    Fmt("q4_k", 4, 256, 16, layout="GGML q4_K: 256 4-bit values + 12 B scales/mins + 2 FP16 = 144 B per 256"),
    Fmt("q5_k", 5, 256, 16, layout="GGML q5_K: 256 5-bit values + 12 B scales/mins + 2 FP16 = 176 B per 256"),
    Fmt("q6_k", 6, 256, 18, layout="GGML q6_K: 256 6-bit values + 16 INT8 sub-block scales + FP16 = 210 B per 256"),
    Fmt("mxfp8", 8, 32, 1, layout="OCP MX FP8: 32 FP8 values share one 8-bit E8M0 scale = 33 B per 32"),
    Fmt("mxfp6", 6, 32, 1, layout="OCP MX FP6: 32 FP6 values + one E8M0 scale = 25 B per 32"),
    Fmt("mxfp4", 4, 32, 1, layout="OCP MX FP4 (E2M1): 32 values + one E8M0 scale = 17 B per 32 (4.25 bit/value)"),
    Fmt("nvfp4", 4, 16, 1, tensor_bytes=4,
        layout="NVFP4: 16 FP4 (E2M1) values + one FP8 (E4M3) scale = 9 B per 16, plus one FP32 global scale per tensor"),
    Fmt("fp4_block16", 4, 16, 1, layout="block-16 FP4: 16 4-bit values + one 1-byte FP8 scale = 9 B per 16 (4.5 bit/value), no global scale"),
    Fmt("int4_g128", 4, 128, 2, layout="INT4 weight-only, group 128 with one FP16 scale = 66 B per 128 (4.125 bit/value), no zero point"),
    Fmt("int4_g128_zp", 4, 128, 4, layout="INT4, group 128 with FP16 scale + FP16 zero point = 68 B per 128 (4.25 bit/value)"),
)}

FormatName = Literal[
    "fp32", "bf16", "fp16", "fp8", "fp8_per_tensor", "int8", "int4", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
    "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp8", "mxfp6", "mxfp4", "nvfp4", "fp4_block16", "int4_g128", "int4_g128_zp",
]
assert set(FormatName.__args__) == set(FORMATS)  # type: ignore[attr-defined]


class FormatSpec(CalcRequest):
    """A storage format given by numbers instead of a name."""

    name: str | None = Field(None, max_length=100, description="Label shown in the outputs.", examples=["m2xfp"])
    bits_per_value: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] = Field(
        description="Payload bits per value (4 for FP4/INT4).", examples=[4])
    group_size: Annotated[int, Field(ge=1, le=10**12)] = Field(
        1, description="Values sharing one scale block (32 for q4_0/MXFP4, 16 for NVFP4). Blocks never span a row.", examples=[32])
    scale_bytes_per_group: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = Field(
        0.0, description="Bytes of scale (plus zero point/min) per group, e.g. 2 for an FP16 scale.", examples=[2])
    tensor_scale_bytes: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] = Field(
        0.0, description="Bytes stored once per tensor (a global FP32 scale = 4).", examples=[0])
    outlier_fraction: Fraction = Field(0.0, description="Fraction of values that also get an outlier entry (0..1).", examples=[0.1])
    bits_per_outlier: Annotated[float, Field(ge=0, le=1024, allow_inf_nan=False)] = Field(
        0.0, description="Extra bits per outlier entry (index + value bits).", examples=[8])


FormatField = FormatName | FormatSpec


def resolve_format(value: FormatField | None, loc: str, default: str = "bf16") -> Fmt:
    """A request's format (name or spec) as a `Fmt`."""
    if value is None:
        value = default
    if isinstance(value, str):
        try:
            return FORMATS[value]
        except KeyError:  # pragma: no cover - pydantic already restricts names
            raise CalcInputError(loc, f"unknown format {value!r}") from None
    return Fmt(value.name or "custom", value.bits_per_value, value.group_size, value.scale_bytes_per_group,
               value.tensor_scale_bytes, value.outlier_fraction, value.bits_per_outlier,
               layout="given by numbers")


def format_label(value: FormatField | None, fmt: Fmt) -> str | dict:
    return value if isinstance(value, str) else fmt.name


def model_weight_format(rec: dict) -> Fmt | None:
    """The single storage format of a model's published weights, when it has one."""
    return FORMATS.get(str(rec.get("weight_dtype", "")).lower())


# --------------------------------------------------------------------------- the calculator

class Tensor(CalcRequest):
    """One tensor of a set (e.g. the inputs and outputs of an operator chain)."""

    name: str = Field(max_length=100, description="Label.", examples=["gate_up"])
    values: Annotated[int, Field(ge=0, le=10**18)] = Field(description="Number of values (elements).", examples=[25_165_824])
    format: FormatField | None = Field(None, description="Format of this tensor; default: the request's `format`.")
    row_length: PosInt | None = Field(None, description="Values per row: scale blocks never span rows. Default: blocks tile the whole tensor.")
    count: Annotated[int, Field(ge=0, le=10**9)] = Field(1, description="How many times it counts (2 = written and read back).")


class QuantizationRequest(CalcRequest):
    """Bytes of `values` values (or a `shape`, a model's parameters, or a list of tensors) in a format."""

    values: NonNegIntSweep | None = Field(None, description="Number of values (elements). Sweepable.", examples=[50_331_648])
    shape: Annotated[list[PosInt], Field(min_length=1, max_length=8)] | None = Field(
        None, description="Tensor shape instead of `values`; its last dimension is the row length.", examples=[[12288, 4096]])
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id: its parameter count is the number of values.", examples=["llama-3.1-70b"])
    params: Literal["total", "active"] = Field("total", description="With `model`: all parameters or those active per token.")
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
    res = Result(inputs=req.model_dump(mode="json", exclude_none=True), outputs={})
    fmt = resolve_format(req.format, "format")
    ref = resolve_format(req.reference_format, "reference_format")
    given = [k for k in ("values", "shape", "model", "tensors") if getattr(req, k) is not None]
    if len(given) != 1:
        raise CalcInputError(given[1] if len(given) > 1 else "values",
                             "give exactly one of `values`, `shape`, `model` or `tensors`")
    res.step("format", "effective bits = bits + 8 × scale bytes / group + outlier fraction × outlier bits",
             fmt.describe(), fmt.effective_bits, "bit/value")
    res.assume(f"Layout of {fmt.name}: {fmt.layout}.")

    if req.tensors is not None:
        return _tensors(req, res, fmt, ref)

    row = req.row_length
    if req.shape is not None:
        values = np.asarray(float(np.prod(np.asarray(req.shape, dtype=float))))
        if values > 1e18:
            raise CalcInputError("shape", "more than 1e18 values")
        row = row or req.shape[-1]
        res.step("values", "n = product of the shape", " × ".join(num(d) for d in req.shape), values, "values")
    elif req.model is not None:
        rec = fetch(lookup, "model", req.model, "model")
        key = "params_total" if req.params == "total" else "params_active"
        values = np.asarray(float(fact_value(rec, key, loc="model")))
        res.cite(fact_source(rec, key))
        res.step("values", f"n = {key} of {req.model}", num(float(values)), values, "values")
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
        "values": _intify(values), "format": format_label(req.format, fmt),
        "bits_per_value": fmt.bits, "effective_bits_per_value": out(sizes["effective_bits_per_value"]),
        "bytes_per_value": out(sizes["effective_bits_per_value"] / 8.0),
        "payload_bytes": _intify(sizes["payload_bytes"]), "scale_bytes": _intify(sizes["scale_bytes"]),
        "outlier_bytes": _intify(sizes["outlier_bytes"]), "tensor_scale_bytes": _intify(sizes["tensor_scale_bytes"]),
        "total_bytes": _intify(sizes["total_bytes"]),
        "reference_format": format_label(req.reference_format, ref), "reference_bytes": _intify(ref_sizes["total_bytes"]),
        "compression_vs_reference": out(ratio), "saved_bytes": _intify(ref_sizes["total_bytes"] - sizes["total_bytes"]),
    }
    rows = []
    for i, f in enumerate(req.compare):
        cf = resolve_format(f, f"compare.{i}")
        rows.append(_format_row(cf, format_label(f, cf), _sizes(cf, values, row), ref_sizes["total_bytes"]))
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
    return res


def _tensors(req: QuantizationRequest, res: Result, fmt: Fmt, ref: Fmt) -> Result:
    rows = []
    total = payload = scale = ref_total = 0.0
    nvalues = 0.0
    for i, t in enumerate(req.tensors):
        tf = resolve_format(t.format, f"tensors.{i}.format") if t.format is not None else fmt
        s = _sizes(tf, np.asarray(float(t.values)), t.row_length)
        r = _sizes(ref, np.asarray(float(t.values)), t.row_length)
        each = float(s["total_bytes"])
        rows.append({"name": t.name, "values": t.values, "format": format_label(t.format, tf) if t.format is not None else format_label(req.format, fmt),
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
        "reference_format": format_label(req.reference_format, ref), "reference_bytes": _intify(ref_total),
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


# Imported last: other families import this module's helpers, and the registry imports every family.
from calculators.base import Calculator, Chart

CALCULATORS = [
    Calculator(
        name="quantization",
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
