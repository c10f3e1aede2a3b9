"""Number formats: one table for weights, KV cache, activations and optimizer state.

A format is payload bits per value, an optional block of `group` values sharing a scale of
`scale_bytes` (plus zero point/min when the format has one), optional bytes stored once per
tensor, and an optional sparse outlier side store. Every calculator resolves format names through
`resolve_format`, so "q4_k" or "FP8" means the same bytes in kv-cache, weight-memory, roofline
and the rest. Names are case-insensitive and common aliases (bfloat16, float8_e4m3fn …) are
accepted; the canonical names are listed in `FormatName`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field

from calculators.framework import CalcInputError, CalcRequest, Fraction, num


@dataclass(frozen=True)
class Fmt:
    """A resolved storage format."""

    name: str
    bits: float                 # payload bits per value
    group: int = 1              # values sharing one scale block (0 or 1 with no scale: none)
    scale_bytes: float = 0.0    # bytes of scale (+ zero point / min) per group
    tensor_bytes: float = 0.0   # bytes stored once per tensor (global scale)
    outlier_fraction: float = 0.0
    outlier_bits: float = 0.0
    layout: str = ""

    @property
    def _blocks(self) -> bool:
        return bool(self.scale_bytes) and self.group > 0

    def entry_bytes(self, values: float) -> float:
        """Bytes of one row of `values` values (blocks do not span rows)."""
        if values <= 0:
            return 0.0
        groups = math.ceil(values / self.group) if self._blocks else 0
        return values * self.bits / 8.0 + groups * self.scale_bytes + values * self.outlier_fraction * self.outlier_bits / 8.0

    def bytes_of(self, values: Any) -> Any:
        """Bytes of `values` values stored as one run (array-friendly): payload + ceil(values / group) scales.

        Per-tensor bytes are not included (the number of tensors is not known here)."""
        v = np.asarray(values, dtype=float)
        b = v * self.bits / 8.0 + v * self.outlier_fraction * self.outlier_bits / 8.0
        if self._blocks:
            b = b + np.ceil(v / self.group) * self.scale_bytes
        return b

    @property
    def effective_bits(self) -> float:
        """Bits per value with block scales and outliers, when the rows are a whole number of groups."""
        return self.bits + (8.0 * self.scale_bytes / self.group if self._blocks else 0.0) + self.outlier_fraction * self.outlier_bits

    def describe(self) -> str:
        parts = [f"{num(self.bits)} bit/value"]
        if self._blocks:
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
    Fmt("fp8", 8, layout="FP8 (E4M3 or E5M2), 1 B per value; any per-tensor, per-block or per-head scales are not counted"),
    Fmt("fp8_per_tensor", 8, tensor_bytes=4, layout="FP8 with one FP32 scale per tensor (4 B once)"),
    Fmt("int8", 8, layout="INT8, 1 B per value, scales not counted"),
    Fmt("int4", 4, layout="INT4 packed two per byte, scales not counted"),
    Fmt("fp4", 4, layout="ideal FP4, 4 bits per value, scales not counted"),
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
    "fp32", "bf16", "fp16", "fp8", "fp8_per_tensor", "int8", "int4", "fp4", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
    "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp8", "mxfp6", "mxfp4", "nvfp4", "fp4_block16", "int4_g128", "int4_g128_zp",
]
assert set(FormatName.__args__) == set(FORMATS)  # type: ignore[attr-defined]

#: Other spellings accepted for the canonical names (framework and PyTorch dtype names).
ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "f8_e4m3": "fp8",
    "e2m1": "fp4", "float4_e2m1": "fp4", "int4_awq": "int4_g128_zp", "q4_k_m": "q4_k", "q5_k_m": "q5_k",
    "q4_k_s": "q4_k", "q5_k_s": "q5_k", "q6_k_m": "q6_k",
}


def canonical_name(value: Any) -> Any:
    """A format name folded to its canonical spelling (case-insensitive, aliases resolved); other values pass."""
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_")
        return ALIASES.get(key, key)
    return value


class FormatSpec(CalcRequest):
    """A storage format given by numbers instead of a name."""

    name: str | None = Field(None, max_length=100, description="Label shown in the outputs.", examples=["m2xfp"])
    bits_per_value: Annotated[float, Field(gt=0, le=256, allow_inf_nan=False)] = Field(
        description="Payload bits per value (4 for FP4/INT4).", examples=[4])
    group_size: Annotated[int, Field(ge=0, le=10**12)] = Field(
        1, description="Values sharing one scale block (32 for q4_0/MXFP4, 16 for NVFP4; 0 = no blocks). Blocks never span a row.",
        examples=[32])
    scale_bytes_per_group: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = Field(
        0.0, description="Bytes of scale (plus zero point/min) per group, e.g. 2 for an FP16 scale.", examples=[2])
    tensor_scale_bytes: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] = Field(
        0.0, description="Bytes stored once per tensor (a global FP32 scale = 4).", examples=[0])
    outlier_fraction: Fraction = Field(0.0, description="Fraction of values that also get an outlier entry (0..1).", examples=[0.1])
    bits_per_outlier: Annotated[float, Field(ge=0, le=1024, allow_inf_nan=False)] = Field(
        0.0, description="Extra bits per outlier entry (index + value bits).", examples=[8])


#: A request field holding a format: a name (any case, aliases accepted) or a FormatSpec.
FormatField = Annotated[FormatName, BeforeValidator(canonical_name)] | FormatSpec
FORMAT_HELP = ("Format name (case-insensitive: " + "|".join(FORMATS) + "; aliases such as bfloat16, float8_e4m3fn) "
               "or {bits_per_value, group_size, scale_bytes_per_group}.")


def resolve_format(value: Any, loc: str = "format", default: str = "bf16") -> Fmt:
    """A request's format (name, spec or an already resolved Fmt) as a `Fmt`."""
    if value is None:
        value = default
    if isinstance(value, Fmt):
        return value
    if isinstance(value, str):
        try:
            return FORMATS[canonical_name(value)]
        except KeyError:
            raise CalcInputError(loc, f"unknown format {value!r}; known: {', '.join(FORMATS)}") from None
    if isinstance(value, FormatSpec):
        return Fmt(value.name or _spec_label(value), value.bits_per_value, value.group_size, value.scale_bytes_per_group,
                   value.tensor_scale_bytes, value.outlier_fraction, value.bits_per_outlier, layout="given by numbers")
    raise CalcInputError(loc, f"not a format: {value!r}")


def _spec_label(spec: FormatSpec) -> str:
    g = f" + {num(spec.scale_bytes_per_group)} B per {spec.group_size} values" if spec.group_size and spec.scale_bytes_per_group else ""
    return f"{num(spec.bits_per_value)}-bit{g}"


def format_label(value: Any) -> str:
    """How a request's format is named in outputs: the canonical name, or a spec's label."""
    if isinstance(value, str):
        return canonical_name(value)
    return resolve_format(value).name


def output_label(value: Any, fmt: Fmt) -> str:
    """A format as the quantization and KV outputs name it: the canonical name of a named format, else the spec's
    own label, or "custom" for a spec given by numbers without one."""
    return canonical_name(value) if isinstance(value, str) else (fmt.name if fmt.layout != "given by numbers" or
                                                                   getattr(value, "name", None) else "custom")


def format_bytes(values: Any, fmt: Any) -> Any:
    """Bytes to store `values` values (array-friendly) in a format given by name, spec or Fmt."""
    return resolve_format(fmt).bytes_of(values)


def bits_per_param(fmt: Any) -> float:
    """Average bits per value including group scales."""
    return resolve_format(fmt).effective_bits


# --------------------------------------------------------------------------- shipped weight formats

@dataclass(frozen=True)
class WeightFormats:
    """The formats a model's published weights are stored in: one main format plus per-component ones."""

    main: Fmt
    components: dict[str, Fmt] = field(default_factory=dict)   # e.g. {"routed_experts": mxfp4}
    label: str = ""
    note: str = ""

    def for_component(self, component: str) -> Fmt:
        return self.components.get(component, self.main)


#: weight_dtype values of model records -> how the published checkpoint stores its weights.
SHIPPED: dict[str, WeightFormats] = {
    "mixed-mxfp4-bf16": WeightFormats(FORMATS["bf16"], {"routed_experts": FORMATS["mxfp4"]}, "mixed-mxfp4-bf16",
                                      "routed experts in MXFP4 (32-value blocks, E8M0 scales); everything else BF16"),
    "mixed-fp8-fp4": WeightFormats(FORMATS["fp8"], {"routed_experts": FORMATS["mxfp4"]}, "mixed-fp8-fp4",
                                   "routed experts in FP4 with UE8M0 block scales, counted with the MXFP4 layout (32-value "
                                   "blocks, an assumption); everything else FP8"),
}


def shipped_weight_formats(weight_dtype: str | None) -> WeightFormats | None:
    """The published weight formats of a model record's `weight_dtype` (None when unknown or absent)."""
    if not weight_dtype:
        return None
    key = str(weight_dtype).lower()
    if key in SHIPPED:
        return SHIPPED[key]
    name = canonical_name(key)
    if name in FORMATS:
        return WeightFormats(FORMATS[name], {}, name, f"all weights in {name}")
    return None
