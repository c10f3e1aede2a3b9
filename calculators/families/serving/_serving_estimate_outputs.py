"""The answer of `serving-estimate` (private to it): what a serving benchmark prints, per deployment."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from calculators.framework import Outputs
from calculators.families.serving._serving_estimate_spec import ServingSpeculativeOut


class TtftOut(Outputs):
    """Time to first token, s: queueing for a slot or the token budget, the rest of the running step, the prefill."""

    mean: float | None = Field(description="Mean, s (null when the load is not served: queues grow without end).")
    p50: float | None = Field(description="Median, s.")
    p90: float | None = Field(description="90th percentile, s.")
    p99: float | None = Field(description="99th percentile, s.")


class TpotOut(Outputs):
    """Time per output token after the first, s: the mean step every running request sees."""

    mean: float | None = Field(description="Mean, s.")
    p50: float | None = Field(description="Median, s (the steady state's mean step: this model has no spread of steps).")


class MeanOut(Outputs):
    mean: float | None = Field(description="Mean, s.")


class StepSharesOut(Outputs):
    """Where a replica's time goes in the steady state (fractions summing to 1)."""

    prefill: float | None = Field(description="Prefill work added to the steps (the requests' chunks), a fraction.")
    decode: float | None = Field(description="Decode kernels, a fraction.")
    communication: float | None = Field(description="Collectives (tensor-parallel all-reduces, expert all-to-alls, "
                                        "pipeline hand-offs), a fraction.")


class StepCurveOut(Outputs):
    """The step times the steady state is solved over (one engine)."""

    decode_batch: list[int] = Field(description="Decode batches of the grid, requests.")
    decode_step_s: list[float] = Field(description="Decode step at each batch (kernels + collectives), s.")
    decode_step_bound_s: list[float] = Field(description="Its peak-rate bound (+ the same collectives), s.")
    prefill_added_s: list[float] = Field(description="Time one request's prefill adds to the steps it shares, at each "
                                         "decode batch of the grid, s.")
    prefill_chunks: int = Field(description="Steps one prefill is spread over (⌈new input tokens / token budget⌉).")
    decode_context_tokens: float = Field(description="Mean context of a decoding request, I + O/2, tokens.")


class NearestOut(Outputs):
    """A stored published run near this deployment, estimated by the same method: the error there."""

    id: str = Field(description="Benchmark point id (its page: the benchmarks list of the site).")
    source: str | None = Field(description="Its source id.")
    url: str | None = Field(description="Where its numbers are published.")
    distance: float = Field(description="How far it is from this deployment: 3 for another model or accelerator, 1 for "
                            "another framework, plus the log-ratios of TP, lengths and concurrency (0: this one).")
    request: dict = Field(description="The serving-estimate request that describes it.")
    measured: dict[str, float | None] = Field(description="Its published TPOT and TTFT (s) and output tokens/s per device.")
    predicted: dict[str, float | None] = Field(description="This method's estimate of the same figures, uncalibrated.")
    error: dict[str, float | None] = Field(description="predicted / measured − 1 per figure.")


class CalibrationOut(Outputs):
    """The efficiency factor the step times were scaled by, and what it rests on."""

    requested: Literal["auto", "none"] = Field(description="The request's calibration option.")
    applied: bool = Field(description="Whether a factor scaled the step times (auto, and one was fitted here).")
    factor: float | None = Field(description="What every step time (decode, prefill, collectives) was multiplied by.")
    group: str | None = Field(description="The published points it was fitted on: this hardware × framework, or this "
                              "hardware with any framework.")
    points: int = Field(description="Published points it was fitted on.")
    sources: list[str] = Field(description="Their sources.")
    leave_one_source_out: dict | None = Field(description="The error of factors fitted without each point's own "
                                              "source, over this group's points (median |error| and n per metric).")


class ServingEstimateOutputs(Outputs):
    """A deployment's serving benchmark, predicted: latency per request and throughput of the whole deployment."""

    load: Literal["concurrency", "poisson", "offline", "burst"] = Field(
        description="How requests arrive: a closed loop of `concurrency` users, Poisson at `arrival_rate_per_s`, "
                    "offline (as many as the KV cache holds), or a burst of `num_prompts` sent at once.")
    method: Literal["steady state", "simulated run"] = Field(description="The steady state of the load, or a finite run "
                                                             "of num_prompts simulated step by step.")
    duration_s: float | None = Field(None, description="A simulated run's length, s (null in the steady state).")
    stable: bool = Field(description="False when the offered Poisson load exceeds what the deployment serves (the "
                         "queue grows without end; latencies are null).")
    ttft_s: TtftOut = Field(description="Time to first token, s.")
    tpot_s: TpotOut = Field(description="Time per output token after the first, s.")
    itl_s: MeanOut = Field(description="Inter-token latency, s (one token per step: equal to TPOT without speculative "
                           "decoding).")
    e2e_s: MeanOut = Field(description="End-to-end latency of a request, TTFT + (O − 1) × TPOT, s.")
    requests_per_s: float | None = Field(description="Completed requests per second, whole deployment.")
    output_tokens_per_s: float | None = Field(description="Output tokens per second, whole deployment.")
    output_tokens_per_s_per_device: float | None = Field(description="Output tokens per second per device.")
    output_tokens_per_s_per_user: float | None = Field(description="Output tokens per second one request sees after "
                                                       "its first token, 1 / TPOT.")
    total_tokens_per_s: float | None = Field(description="(input + output) tokens per second, whole deployment.")
    concurrency: float | None = Field(description="Requests holding a KV slot, whole deployment (reached, mean).")
    decode_batch: float | None = Field(description="Requests decoding in a step, per engine (mean).")
    queue_wait_s: float | None = Field(description="Mean wait before a request's prefill starts (for a KV slot, or "
                                       "for a share of the token budget), s.")
    kv_capacity_requests: int = Field(description="Requests whose KV fits at the mean context I + O/2, whole "
                                      "deployment (before max_num_seqs).")
    kv_capacity_tokens: int = Field(description="Tokens of KV the deployment holds (per engine × engines).")
    slots_per_engine: int = Field(description="Requests one engine runs at once: min(KV capacity, max_num_seqs).")
    engines: int = Field(description="Independent schedulers: replicas × pipeline stages (each stage pipeline keeps "
                         "pp micro-batches in flight).")
    devices: int = Field(description="tp × pp × replicas, devices.")
    bound_tpot_s: float | None = Field(description="The peak-rate floor of TPOT at the reached batch: decode kernels "
                                       "at the peak rates + the collectives, no prefill interference, s.")
    step_shares: StepSharesOut = Field(description="Where the time goes.")
    basis: str = Field(description="What the step times come from: measured kernels (framework, version, GPU) or the "
                       "peak-rate bound.")
    step_curve: StepCurveOut = Field(description="The step times behind the answer.")
    nearest_measurements: list[NearestOut] = Field(description="The nearest stored published run(s), estimated the same "
                                                   "way, with this method's error there (empty: nothing to compare "
                                                   "with, the estimate is not validated).")
    calibration: CalibrationOut = Field(description="The efficiency factor fitted on published runs that scaled the "
                                        "step times, or why none did.")
    speculative: ServingSpeculativeOut | None = Field(None, description="Speculative decoding as run: method, k, the given "
                                               "acceptance, tokens per step, verify and draft costs (null: off).")
    weights_per_device_bytes: float = Field(description="Weight bytes on one device, B.")
    kv_bytes_per_request_per_device: float = Field(description="KV of one request at the mean context on one device, B.")
