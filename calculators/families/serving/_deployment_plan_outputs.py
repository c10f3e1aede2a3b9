"""The typed answer of `deployment-plan`: one plan (memory per device, prefill and decode pools, cost), and the
outputs envelope with the best plan, the Pareto set and every candidate."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from calculators.framework import Outputs, OutNum
from calculators.families.serving._serving_estimate_outputs import NearestOut, TtftOut


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


class PlanScreenOut(Outputs):
    """The vectorised screen's figures of a candidate the second pass re-estimated."""

    ttft_s: OutNum = Field(description="p90 time to first token on the screen (prefill + M/M/1 tail), s.")
    tpot_s: OutNum = Field(description="TPOT on the screen (decode step stretched by the prefill load), s.")
    tokens_per_s_per_user: OutNum = Field(description="1 / TPOT on the screen, tokens/s.")
    meets_slo: bool
    reason: str | None


class PlanEstimateOut(Outputs):
    """serving-estimate's answer for a candidate at the plan's load (the same figures as calling it with `request`)."""

    request: dict = Field(description="The serving-estimate request of this deployment and load.")
    stable: bool = Field(description="False when the load exceeds what the replicas serve.")
    ttft_s: TtftOut
    tpot_s: OutNum = Field(description="Mean TPOT with chunked-prefill interference, s.")
    e2e_s: OutNum = Field(description="Mean end-to-end latency, s.")
    requests_per_s: OutNum = Field(description="Completed requests per second, whole deployment.")
    output_tokens_per_s_per_device: OutNum = Field(description="Output tokens/s per device.")
    concurrency: OutNum = Field(description="Requests holding a KV slot, whole deployment (mean).")
    decode_batch: OutNum = Field(description="Requests decoding in a step, per engine (mean).")
    queue_wait_s: OutNum = Field(description="Mean wait for a share of the token budget, s.")
    slots_per_engine: int = Field(description="min(KV capacity, max_num_seqs = batch), requests.")
    prefill_share: OutNum = Field(description="Share of the time spent on prefill work (X·P).")
    bound_tpot_s: OutNum = Field(description="Peak-rate floor of TPOT at the reached batch, s.")
    basis: str = Field(description="What its step times come from.")


class ErrorStatsOut(Outputs):
    n: int = Field(description="Compared points with this figure.")
    median_abs_error: OutNum = Field(description="Median |predicted / measured − 1|.")
    p90_abs_error: OutNum = Field(description="90th percentile (nearest rank) of |predicted / measured − 1|.")
    max_abs_error: OutNum = Field(description="Largest |predicted / measured − 1|.")
    within_25_percent: OutNum = Field(description="Share of points within ±25 %.")


class ValidationClassOut(Outputs):
    """How far serving-estimate was off on the stored published runs of the best plan's hardware × framework."""

    id: str = Field(description="'<hardware>/<framework>'.")
    points: int = Field(description="Published points of this class the validation compares.")
    tpot_s: ErrorStatsOut
    output_tokens_per_s_per_device: ErrorStatsOut
    ttft_s: ErrorStatsOut


class ReEstimateOut(Outputs):
    """The second pass: shortlisted candidates re-estimated by serving-estimate."""

    re_estimated: int = Field(description="Candidates re-estimated.")
    meeting_slo: int = Field(description="Of them, those meeting both SLOs on serving-estimate's figures.")
    limit: int = Field(description="Shortlist size (cheapest first on the screen's cost order); the walk goes further "
                       "only until one candidate meets the SLOs.")
    skipped: str | None = Field(description="Why no candidate was re-estimated, or null.")


class LaunchOut(Outputs):
    """How to start the best plan: the framework's command line and a Kubernetes manifest (issue #25 item 6)."""

    framework: Literal["vllm", "sglang", "trtllm"]
    argv: list[str] = Field(description="The command as an argument vector (the frameworks' own argument names, each "
                            "cited in knowledge/data/launch-args.yaml).")
    command: str = Field(description="The same command, shell-quoted (shlex.split(command) == argv).")
    env: dict[str, str] = Field(description="Environment variables the command needs.")
    extra_config_yaml: str | None = Field(description="TensorRT-LLM's --extra_llm_api_options file, or null.")
    kubernetes_manifest_yaml: str | None = Field(description="A Deployment and a Service for the plan's replicas; empty "
                                                 "with a note when a replica needs more than one node.")
    image: str = Field(description="The framework's public container image.")
    port: int = Field(description="The port the server listens on.")
    health_path: str = Field(description="HTTP readiness path.")
    devices_per_replica: int
    replicas: int
    multi_node: bool = Field(description="True when one replica spans several nodes (a multi-node launcher is needed).")
    model_repository: str = Field(description="The Hugging Face repository the command serves.")
    notes: list[str] = Field(description="How each value was chosen and what the command leaves out.")


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
    figures: Literal["serving-estimate", "screen"] = Field("screen", description="Where ttft_s, tpot_s and meets_slo "
                                                          "come from: serving-estimate (second pass) or the screen.")
    screen: PlanScreenOut | None = Field(None, description="The screen's figures of a re-estimated candidate.")
    serving_estimate: PlanEstimateOut | None = Field(None, description="serving-estimate's answer (re-estimated "
                                                     "candidates; null when it refused the deployment).")
    nearest_measurement: NearestOut | None = Field(None, description="Best only: the nearest stored published run, "
                                                   "estimated the same way, with the error there.")
    validation_class: ValidationClassOut | None = Field(None, description="Best only: serving-estimate's validation "
                                                        "errors on this hardware × framework.")
    launch: LaunchOut | None = Field(None, description="Best only: the command line and Kubernetes manifest that "
                                     "start this configuration.")


class DeploymentPlanOutputs(Outputs):
    """Outputs of deployment-plan (USD, seconds, bytes)."""

    headline: str = Field(description="The answer in one sentence (same as the envelope's headline).")
    best: PlanOut | None = Field(description="Cheapest configuration per million output tokens that meets both SLOs.")
    why: str
    configurations_evaluated: int
    meeting_slo: int
    re_estimate: ReEstimateOut = Field(description="The second pass over the shortlist (serving-estimate).")
    pareto: list[PlanOut] = Field(description="Fitting configurations not beaten on tokens/s per device and per user.")
    candidates: list[PlanOut]
