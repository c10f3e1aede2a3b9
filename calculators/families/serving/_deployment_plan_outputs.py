"""The typed answer of `deployment-plan`: one plan (memory per device, prefill and decode pools, cost), and the
outputs envelope with the best plan, the Pareto set and every candidate."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from calculators.framework import Outputs, OutNum



class MemoryOut(Outputs):
    weights: float | None = Field(description="Weight bytes per device, B.")
    kv: float | None = Field(description="KV bytes of the batch per device, B.")
    total: float | None = Field(description="weights + kv, B.")


class PrefillPoolOut(Outputs):
    tp: int
    dp_attention: bool = Field(False, description="The prefill pool runs DP attention.")
    replicas: int
    devices: int
    prefill_s: float | None = Field(description="One request's prefill, s.")
    kv_transfer_s: float | None = Field(description="Shipping its KV to the decode pool, s.")
    ttft_s: float | None = Field(description="Prefill + p90 wait + KV transfer, s.")


class DecodePoolOut(Outputs):
    tp: int
    batch: int
    replicas: int | None
    devices: int | None


class PlanOut(Outputs):
    """One configuration (aggregated or disaggregated)."""

    hardware: str
    mode: Literal["aggregated", "disaggregated"]
    tp: int
    pp: int
    ep: int
    dp_attention: bool = Field(False, description="Attention data-parallel over the tp ranks (experts over all of them).")
    batch: int = Field(description="Concurrent sequences per replica (per stage).")
    replicas: int | None = Field(description="Replicas (disaggregated: decode replicas); null when none suffices.")
    total_devices: int | None
    ttft_s: OutNum = Field(description="p90 time to first token, s.")
    tpot_s: OutNum = Field(description="Mean time per output token, s.")
    prefill_s: OutNum = Field(description="One request's prefill, s.")
    decode_step_s: OutNum = Field(description="One decode step, s.")
    tokens_per_step: OutNum = Field(1.0, description="Output tokens a sequence gains per decode step (1; 1 + accepted "
                                    "drafts with MTP).")
    tokens_per_s_per_device: OutNum = Field(description="Output tokens/s per device at the offered load.")
    tokens_per_s_per_user: OutNum = Field(description="Output tokens/s one request sees.")
    memory_per_device_bytes: MemoryOut
    fits: bool
    meets_slo: bool
    priced: bool
    cost_per_hour_usd: OutNum = Field(description="USD per hour of all devices.")
    cost_per_mtok_usd: OutNum = Field(description="USD per million output tokens.")
    cost_per_mtok_total_usd: OutNum = Field(description="USD per million input + output tokens.")
    prefill_load: OutNum = Field(None, description="Prefill utilisation of a replica (aggregated).")
    prefill_pool: PrefillPoolOut | None = Field(None, description="The prefill pool (disaggregated).")
    decode_pool: DecodePoolOut | None = Field(None, description="The decode pool (disaggregated).")
    ratio: str | None = Field(None, description="'P prefill : D decode' devices (disaggregated).")
    reason: str | None = Field(description="Why it fails, or null.")
    step_source: str = Field(description="Where the step times come from (measured kernels or bound).")
    price_source: str = Field(description="Where the device price comes from.")
    link: str | None = Field(description="Link id of the TP group.")


class DeploymentPlanOutputs(Outputs):
    """Outputs of deployment-plan (USD, seconds, bytes)."""

    headline: str = Field(description="The answer in one sentence (same as the envelope's headline).")
    best: PlanOut | None = Field(description="Cheapest configuration per million output tokens that meets both SLOs.")
    why: str
    configurations_evaluated: int
    meeting_slo: int
    pareto: list[PlanOut] = Field(description="Fitting configurations not beaten on tokens/s per device and per user.")
    candidates: list[PlanOut]
