"""The typed answer of `roofline`: work, time and bound of an operation or a model step, the model step's split into
linear / head / attention FLOPs and weight / KV bytes, the operation's own figures, and the measured estimate.

A paired sweep makes a per-point output a list; a grid request (`grid: true`) nests it one list per grid axis, in
axis order (at most one axis per grid field, so at most `_MAX_AXES` levels)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from calculators.framework import Outputs, OutSweep

#: the grid fields of `roofline` (batch, tokens, context_tokens, kv_format, peak_flop_per_s,
#: memory_bandwidth_bytes_per_s): a grid has at most this many axes
_MAX_AXES = 6


def _up_to_grid(point: Any) -> Any:
    """`point`, a list of it (a paired sweep or a 1-axis grid), or nested lists of it up to `_MAX_AXES` deep."""
    level, union = point, point
    for _ in range(_MAX_AXES):
        level = list[level]
        union = union | level
    return union


#: a number per point (null where not finite): a scalar, a sweep's list, or a grid's nested lists
RooflineNum = _up_to_grid(float | None)
#: a whole count per point (written as a float past 2^53), shaped like RooflineNum
RooflineCount = _up_to_grid(int | float | None)
#: which term bounds each point; null (not nested) when only one of peak and bandwidth is known
RooflineBound = None | _up_to_grid(Literal["compute", "memory"])
#: an operation's figure: a number, or one per point of its paired sweep (operations have no grid)
#: an operation's whole count, shaped like OutSweep
RooflineOpCount = int | float | None | list[int | float]


class RooflineFlopsByComponentOut(Outputs):
    """Linear FLOPs of the step per component (model or architecture with shapes)."""

    attention: RooflineNum = Field(description="Attention projections, FLOP.")
    dense_ffn: RooflineNum = Field(description="Dense FFN matrices, FLOP.")
    routed_experts: RooflineNum = Field(description="The experts_per_token routed experts each token uses, FLOP.")
    shared_experts: RooflineNum = Field(description="Shared experts, FLOP.")
    router: RooflineNum = Field(description="Router matrices, FLOP.")


class RooflineOperandBytesOut(Outputs):
    """A GEMM's operands, each moved once (compulsory traffic), over `count` GEMMs."""

    a: OutSweep = Field(description="A (M × K), B.")
    b: OutSweep = Field(description="B, the weight (K × N), B.")
    c: OutSweep = Field(description="The output C (M × N), B.")


class RooflineMeasuredKernelsOut(Outputs):
    """Which measured kernel tables the estimate reads."""

    system: str = Field(description="Measured system id.")
    framework: str = Field(description="Framework the kernels were measured in.")
    version: str = Field(description="Its version.")
    tables: dict[str, str] = Field(description="Framework and version of each table read, by table name.")


class RooflineOutputs(Outputs):
    """Outputs of roofline. FLOP, bytes (B) and seconds per step or operation; lists where a field is swept, nested
    lists on a grid. Times need a peak and/or a bandwidth (hardware or explicit rates)."""

    flops: RooflineNum = Field(description="Arithmetic work, FLOP.")
    bytes: RooflineNum = Field(description="Bytes moved to and from memory, B.")
    arithmetic_intensity: RooflineNum = Field(description="flops / bytes, FLOP/B (null when no bytes move).")
    bound: RooflineBound = Field(description="'compute' or 'memory': the larger of the two times (null unless both "
                                 "peak and bandwidth are known).")
    compute_time_s: RooflineNum = Field(None, description="flops / (peak × devices × compute efficiency), s "
                                        "(with a peak).")
    memory_time_s: RooflineNum = Field(None, description="bytes / (bandwidth × devices × bandwidth efficiency), s "
                                       "(with a bandwidth).")
    ridge_point: RooflineNum = Field(None, description="Intensity where the two times meet, effective peak / "
                                     "effective bandwidth, FLOP/B (with both).")
    time_s: RooflineNum = Field(None, description="max(compute time, memory time) with perfect overlap, s (the one "
                                "known term when only one is).")
    tokens_per_s: RooflineNum = Field(None, description="Tokens of the step / time, tokens/s (model steps).")
    linear_flops: RooflineNum = Field(None, description="2 × active matrix parameters × tokens, FLOP (model steps).")
    lm_head_flops: RooflineNum = Field(None, description="Output projection for the positions that need logits, FLOP "
                                       "(0 without shapes).")
    attention_flops: RooflineNum = Field(None, description="QKᵀ and AV over the causal pairs, FLOP (0 without shapes).")
    causal_pairs: RooflineCount = Field(None, description="(query, key) pairs of all sequences of the step, before "
                                        "windows (model steps with shapes).")
    linear_flops_by_component: RooflineFlopsByComponentOut | None = Field(None, description="linear_flops per "
                                                                         "component (model steps with shapes).")
    experts_touched_per_layer: RooflineNum = Field(None, description="Expected distinct experts the step reads per "
                                                   "MoE layer, E·(1 − (1 − k/E)^tokens) (MoE models).")
    weight_bytes: RooflineNum = Field(None, description="Weights read once per step (MoE: the experts touched), B.")
    kv_read_bytes: RooflineNum = Field(None, description="KV history read, B.")
    kv_write_bytes: RooflineNum = Field(None, description="KV of the step's new tokens written, B.")
    kv_cache_bytes: RooflineNum = Field(None, description="KV cache of the batch after the step, B.")
    tokens_in_step: RooflineCount = Field(None, description="Tokens processed, tokens per sequence × batch (model steps).")
    measured_time_s: RooflineNum = Field(None, description="Step time from measured kernels, summed op by op, s "
                                         "(measured estimate).")
    measured_parts_s: dict[str, RooflineNum] | None = Field(None, description="Measured time per op (qkv_proj, "
                                                            "attention, moe, allreduce …), s (measured estimate).")
    measured_to_bound_ratio: RooflineNum = Field(None, description="measured time / time_s (measured estimate).")
    measured_extrapolated_fraction: RooflineNum = Field(None, description="Share of kernel lookups outside the "
                                                        "measured range (measured estimate).")
    measured_fallback_fraction: RooflineNum = Field(None, description="Share of the measured time from ops with no measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: RooflineMeasuredKernelsOut | None = Field(None, description="The kernel tables read (measured "
                                                                "estimate).")
    operand_bytes: RooflineOperandBytesOut | None = Field(None, description="A GEMM's operands, each once (gemm).")
    a_reads: RooflineOpCount = Field(None, description="Times A is read with output-stationary tiles, ⌈N / tile_n⌉ "
                                   "(gemm with tiles).")
    b_reads: RooflineOpCount = Field(None, description="Times B is read, ⌈M / tile_m⌉ (gemm with tiles).")
    tile_buffer_bytes: OutSweep = Field(None, description="On-chip bytes of one tile with its K slice and FP32 "
                                             "accumulator, B (gemm with tile_k).")
    pairs: RooflineOpCount = Field(None, description="(query, key) pairs of one instance (attention).")
    score_matrix_fp32_bytes: float | None = Field(None, description="The score matrix in FP32 if it were "
                                                  "materialised, 4 × pairs × heads, B (attention).")
    read_bytes: OutSweep = Field(None, description="Tensors read, × count, B (custom).")
    write_bytes: OutSweep = Field(None, description="Tensors written, × count, B (custom).")
    grid_axes: list[str] | None = Field(None, description="Fields spread over the grid, in axis order (grid requests).")
    grid_shape: list[int] | None = Field(None, description="Points along each axis (grid requests).")
