"""The typed outputs of `parallel-split` (kept apart so that the calculator module stays under the size limit)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from calculators.framework import OutNum, Outputs, OutSweep

Term = Literal["memory", "compute", "communication", "handoff"]
StepModel = Literal["layers", "first_pass"]


class SplitCandidateOut(Outputs):
    tp: int = Field(description="Tensor-parallel degree p.")
    devices: int = Field(description="tp × pp devices.")
    memory_time_s: OutNum = Field(description="Bytes one rank reads / B_hbm, s (first pass: (W + KV) / (p × B_hbm)).")
    compute_time_s: OutNum = Field(description="FLOPs one rank runs / peak FLOP/s, s (first pass: 0 unless flops_per_token and "
                                               "peak_flop_per_s are given).")
    allreduce_time_s: OutNum = Field(description="One ring all-reduce, s.")
    comm_time_s: OutNum = Field(description="All-reduces per step × t_ar, s.")
    handoff_time_s: OutNum = Field(description="(pp − 1) stage hand-offs, s.")
    step_time_s: OutNum = Field(description="max(memory, compute) + communication + hand-offs, s.")
    per_device_bytes: OutNum = Field(description="Weights + KV + workspace on one device, B (first pass: (W + KV) / (tp × pp) + "
                                                 "workspace).")
    free_bytes: OutNum = Field(description="Usable memory minus per_device_bytes, B (null without a capacity).")
    fits: bool = Field(description="per_device_bytes ≤ usable memory.")
    dominant: Term = Field(description="The largest term.")
    measured_step_time_s: OutNum = Field(None, description="Measured estimate of the step, s (measured estimate only): the "
                                                           "measured kernels with the measured all-reduce of the hardware's own "
                                                           "link, or with this link's α–β all-reduces for another link.")


class PipelineOut(Outputs):
    stages: int
    handoff_bytes_per_token: OutNum = Field(description="tensors × hidden × bytes, B.")
    handoff_bytes: OutNum = Field(description="Bytes of one hand-off for the step's tokens, B.")
    handoff_time_s: OutNum = Field(description="One hand-off, s.")
    handoffs_time_s: OutNum = Field(description="(pp − 1) hand-offs, s.")
    link_tokens_per_s: OutNum = Field(description="Tokens per second the stage link can carry.")
    stage_time_s: OutSweep = Field(description="One balanced stage's time per step, s.")
    tokens_per_s_upper: OutSweep = Field(description="Step tokens / stage time: the pipelined throughput bound, tokens/s.")
    bubble_fraction: OutNum = Field(None, description="(pp − 1) / (m + pp − 1) (with microbatches).")
    microbatches_time_s: OutSweep = Field(None, description="(m + pp − 1) × stage time, s (with microbatches).")


class SplitWhatIfOut(Outputs):
    label: str
    step_time_s: OutSweep
    memory_time_s: OutSweep
    comm_time_s: OutSweep
    fits: bool | list[bool]
    best: SplitCandidateOut | None
    why: str
    moved: str = Field(description="How the best candidate moved from the base's, in one sentence.")


class DeviceOptionOut(Outputs):
    rank: int | None = Field(description="1 = the most output tokens/s per device; null for an option that does not fit.")
    tp: int = Field(description="Tensor-parallel degree of one replica.")
    pp: int = Field(description="Pipeline stages of one replica.")
    replicas: int = Field(description="devices / (tp × pp) replicas, each serving its own batch.")
    batch: int = Field(description="Sequences per replica: the given batch, or the largest that fits (0: not even one).")
    step_time_s: OutNum = Field(description="Bound of one decode step of a replica at that batch, s.")
    measured_step_time_s: OutNum = Field(None, description="Measured estimate of that step, s (measured estimate only).")
    tokens_per_s_per_device: OutNum = Field(description="batch / step time / (tp × pp): output tokens per second per device, "
                                                        "with the step time the ranking uses.")
    memory_per_device_bytes: OutNum = Field(description="Weights + KV of that batch + workspace on one device, B.")
    fits: bool = Field(description="memory_per_device_bytes ≤ usable memory per device.")


class DevicesOut(Outputs):
    devices: int = Field(description="Devices in total (N).")
    batch_basis: Literal["given", "largest that fits"] = Field(description="Where each option's batch comes from.")
    ranked_by: Literal["measured", "bound"] = Field(description="The step time behind tokens_per_s_per_device.")
    options: list[DeviceOptionOut] = Field(description="One per valid TP degree, best first (options that do not fit last).")
    best: DeviceOptionOut | None = Field(description="The option with the most output tokens/s per device among those that fit.")
    dropped: list[dict[str, Any]] = Field(description="TP degrees dividing N that the model's heads rule out: {tp, why}.")


class ParallelSplitOutputs(Outputs):
    """Outputs of parallel-split: per-candidate times (s) and bytes (B); the flat fields are lists when `tp` is a list."""

    step_model: StepModel = Field(description="layers: the layer-by-layer step model of the model's layout; first_pass: the "
                                              "book's T(p) = (W+KV)/(p·B_hbm) + all-reduces.")
    weight_format: str | None = Field(description="Weight format the weights are counted in (null with explicit weight bytes).")
    link: str | None = Field(description="Link id of the TP group (given, or the hardware's scale-up link); null with "
                                         "explicit link numbers only.")
    candidates: list[SplitCandidateOut]
    best: SplitCandidateOut | None = Field(description="Fastest candidate that fits (ties: the smaller tp).")
    why: str = Field(description="Why the best candidate is chosen.")
    tp: int | list[int]
    memory_time_s: OutSweep
    comm_time_s: OutSweep
    step_time_s: OutSweep
    per_device_bytes: OutSweep
    free_bytes: OutSweep
    fits: bool | list[bool]
    dominant: Term | list[Term]
    weight_bytes: OutNum = Field(description="Weight bytes W of the whole model, B.")
    kv_bytes: OutNum = Field(description="KV/state bytes of the batch, B.")
    message_bytes: OutNum = Field(description="Bytes M of each all-reduce, B.")
    allreduces: int = Field(description="All-reduces per step (layers × per layer).")
    pipeline: PipelineOut | None
    what_if: list[SplitWhatIfOut]
    devices: DevicesOut | None = Field(None, description="With `devices`: TP × replicas ranked by output tokens/s per device.")
    measured_parts_s: dict[str, OutSweep] | None = Field(None, description="Measured time per op, s (measured estimate only).")
    measured_to_bound_ratio: OutSweep = Field(None, description="Measured / bound step time.")
    measured_extrapolated_fraction: OutSweep = Field(None, description="Fraction of lookups outside the measured range.")
    measured_fallback_fraction: OutSweep = Field(None, description="Share of the measured time from ops with no measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: dict[str, Any] | None = Field(None, description="The measured system, framework, version and tables.")
    measured_best: dict[str, Any] | None = Field(None, description="Fastest fitting candidate by the measured estimate.")


__all__ = ["DeviceOptionOut", "DevicesOut", "ParallelSplitOutputs", "PipelineOut", "SplitCandidateOut", "SplitWhatIfOut",
           "StepModel", "Term"]
