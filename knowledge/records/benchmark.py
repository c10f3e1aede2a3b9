"""Published end-to-end serving measurements (`knowledge/data/benchmarks/*.yaml`): one record per point.

A point is one deployment (model, hardware and count, framework and version, precisions, TP/PP/EP/DP,
ISL/OSL, dataset) under one load (a closed loop of `concurrency` users, an open-loop `requests_per_s`, an
offline run or an MLPerf server scenario), with the figures the source prints converted to SI units
(seconds, tokens/s) and the raw text as printed (`as_published`). Each point names its source, the exact
page or file (`url`) and where in it (`locator`). See DATA-FORMAT.md, section "benchmarks/".
"""
from __future__ import annotations

import math
import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from knowledge.records.base import Label, PositiveInt, Problems, Record, Slug, SourceId, Text, join, ref, refuse

#: the frameworks a point may name (`other` needs `framework_name`)
BenchmarkFramework = Literal["vllm", "sglang", "trtllm", "other"]
FRAMEWORKS: tuple[str, ...] = ("vllm", "sglang", "trtllm", "other")
#: statistics a latency may carry (seconds each); `median` is the 50th percentile
STATISTICS = ("mean", "median", "p90", "p95", "p99", "min", "max")
#: statistics that must not decrease in this order
ORDERED = ("min", "median", "p90", "p95", "p99", "max")
#: a duration in seconds must be below this (a larger one is almost surely milliseconds written as seconds)
MAX_DURATION_S = 1e4
#: per-token latencies (TPOT, ITL) above this are milliseconds written as seconds
MAX_PER_TOKEN_S = 10.0
#: how far `output_tokens_per_s_per_device` x `devices` may be from `output_tokens_per_s` (sources round)
PER_DEVICE_SLACK = 0.05
DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
#: a rate's name: `…_per_s`, or per something (`…_per_s_per_device`, `…_per_s_per_user`)
RATE = re.compile(r"_per_s(_per_[a-z]+)?$")


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _duration_problems(path: str, name: str, node: Any) -> Problems:
    """A latency: a mapping of statistics, each a positive number of seconds below the bound, in order."""
    if not isinstance(node, dict):
        return [(path, "a latency is a mapping of statistics in seconds, e.g. {mean: 0.512, median: 0.44, p99: 1.9}")]
    if not node:
        return [(path, "no statistic given: omit the latency instead")]
    out: Problems = []
    limit = MAX_PER_TOKEN_S if name in ("tpot_s", "itl_s") else MAX_DURATION_S
    for k, v in node.items():
        where = join(path, k)
        if k == "p50":
            out.append((where, "write the 50th percentile as `median`"))
        elif k not in STATISTICS:
            out.append((where, f"unknown statistic: one of {', '.join(STATISTICS)}"))
        elif not _positive_number(v):
            out.append((where, f"impossible value: a latency in seconds must be > 0 (got {v!r})"))
        elif v >= limit:
            out.append((where, f"impossible value: {v} s is not below {limit:g} s (milliseconds written as seconds? "
                               "convert ms to s)"))
    if not out:
        present = [(k, node[k]) for k in ORDERED if k in node]
        for (a, x), (b, y) in zip(present, present[1:]):
            if y < x:
                out.append((join(path, b), f"{b} ({y}) is below {a} ({x})"))
    return out


def _rate_problems(path: str, v: Any) -> Problems:
    if not _positive_number(v):
        return [(path, f"impossible value: a rate (per second) must be a positive number (got {v!r})")]
    return []


class BenchmarkLatency(BaseModel):
    """One latency's statistics, in seconds (only those the source prints)."""

    model_config = ConfigDict(extra="forbid")
    mean: Optional[float] = None
    median: Optional[float] = Field(None, description="The 50th percentile.")
    p90: Optional[float] = None
    p95: Optional[float] = None
    p99: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None


class Measured(BaseModel):
    """The figures of a point in SI units: latencies in seconds (`_s`, a mapping of statistics), rates per
    second (`_per_s`). Only what the source prints (or what is derived from it, said in the point's note).
    Other keys are allowed when their name ends in a unit (`_s` or `_per_s`)."""

    model_config = ConfigDict(extra="allow")
    ttft_s: Optional[BenchmarkLatency] = Field(None, description="Time to first token, seconds.")
    tpot_s: Optional[BenchmarkLatency] = Field(None, description="Time per output token after the first, seconds.")
    itl_s: Optional[BenchmarkLatency] = Field(None, description="Inter-token latency, seconds.")
    e2e_s: Optional[BenchmarkLatency] = Field(None, description="End-to-end request latency, seconds.")
    output_tokens_per_s: Optional[float] = Field(None, description="Output tokens per second of the whole deployment.")
    output_tokens_per_s_per_device: Optional[float] = Field(
        None, description="Output tokens per second per accelerator (as published, or derived: see the note).")
    output_tokens_per_s_per_user: Optional[float] = Field(None, description="Output tokens per second of one request.")
    total_tokens_per_s: Optional[float] = Field(None, description="Input plus output tokens per second.")
    total_tokens_per_s_per_device: Optional[float] = None
    input_tokens_per_s: Optional[float] = None
    requests_per_s: Optional[float] = Field(None, description="Completed requests per second.")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if not data:
            raise refuse(("", "no figure given: a point needs at least one measured number"))
        problems: Problems = []
        for key, value in data.items():
            name = str(key)
            if name.endswith("_ms"):
                problems.append((name, "milliseconds: convert to seconds and name the field `…_s`"))
            elif RATE.search(name):
                problems += _rate_problems(name, value)
            elif name.endswith("_s"):
                problems += _duration_problems(name, name, value)
            else:
                problems.append((name, "unit missing: a figure's name ends in _s (seconds, a mapping of statistics) "
                                       "or _per_s (a rate; _per_s_per_device for one accelerator)"))
        if problems:
            raise refuse(*problems)
        return data


class BenchmarkLoad(BaseModel):
    """How the benchmark loaded the deployment: exactly one of a closed loop (`concurrency`), an open-loop
    rate (`requests_per_s`), an offline run (`offline: true`) or an MLPerf server scenario."""

    model_config = ConfigDict(extra="forbid")
    concurrency: Optional[PositiveInt] = Field(None, description="Closed loop: at most N requests in flight "
                                                                 "(`vllm bench serve --max-concurrency N`).")
    requests_per_s: Optional[float] = Field(None, description="Open loop: Poisson arrivals at this rate.")
    offline: Optional[bool] = Field(None, description="Offline / maximum throughput (MLPerf Offline, trtllm-bench).")
    server_scenario: Optional[bool] = Field(None, description="MLPerf Server: Poisson arrivals under latency targets.")
    target_qps: Optional[float] = Field(None, description="The server scenario's Poisson arrival rate, requests/s "
                                                          "(MLPerf's `target_qps`).")
    ttft_limit_s: Optional[float] = Field(None, description="The server scenario's TTFT limit, seconds.")
    tpot_limit_s: Optional[float] = Field(None, description="The server scenario's TPOT limit, seconds.")

    @model_validator(mode="after")
    def _one_kind(self) -> "BenchmarkLoad":
        problems: Problems = []
        given = [k for k in ("concurrency", "requests_per_s", "offline", "server_scenario") if getattr(self, k)]
        for flag in ("offline", "server_scenario"):
            if getattr(self, flag) is False:
                problems.append((flag, f"write {flag}: true, or leave it out"))
        if self.requests_per_s is not None and not _positive_number(self.requests_per_s):
            problems.append(("requests_per_s", f"impossible value: must be > 0 (got {self.requests_per_s})"))
        if len(given) != 1 and not problems:
            problems.append(("", "exactly one of concurrency, requests_per_s, offline: true, server_scenario: true "
                                 f"(got {', '.join(given) or 'none'})"))
        for target in ("target_qps", "ttft_limit_s", "tpot_limit_s"):
            value = getattr(self, target)
            if value is not None:
                if not self.server_scenario:
                    problems.append((target, "a target rate or latency limit belongs to a server scenario"))
                elif not (_positive_number(value) and value < MAX_DURATION_S):
                    problems.append((target, f"impossible value: > 0 and < {MAX_DURATION_S:g} (got {value})"))
        if problems:
            raise refuse(*problems)
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("concurrency", "requests_per_s", "offline", "server_scenario") if getattr(self, k))

    @property
    def offered_requests_per_s(self) -> Optional[float]:
        """The open-loop arrival rate: `requests_per_s`, or a server scenario's `target_qps`."""
        return self.requests_per_s if self.requests_per_s is not None else self.target_qps


class Benchmark(Record):
    """One published end-to-end serving measurement: the full configuration, the load, the figures in SI units
    and where a reader finds them (source, url, locator, date)."""

    model_config = ConfigDict(extra="forbid")
    id: Slug
    source: SourceId = Field(description="Source id (sources-benchmarks.yaml); see /api/v1/sources/{id}.")
    url: Text = Field(description="The exact page or file the numbers are on.")
    locator: Text = Field(description="Where in it: table, chart, file entry.")
    date: Label = Field(description="Date of the run or its publication, as precise as known (YYYY, YYYY-MM or YYYY-MM-DD).")
    model: Optional[ref("model")] = Field(None, description="Store model id, when the store has the model.")
    model_hf: Text = Field(description="Hugging Face repository of the model as published (owner/name).")
    hardware: Optional[ref("hardware")] = Field(None, description="Store hardware id, when the store has it.")
    hardware_name: Text = Field(description="The accelerator as published.")
    devices: PositiveInt = Field(description="Accelerators used in total.")
    framework: BenchmarkFramework = Field(description="vllm, sglang, trtllm or other (named in framework_name).")
    framework_name: Optional[str] = None
    framework_version: Optional[Label] = Field(None, description="As published; null when not stated.")
    weight_format: Text = Field(description="Weight precision of the run: bf16, fp16, fp8, fp4, nvfp4, mxfp4, int4 …")
    kv_format: Optional[Label] = Field(None, description="KV-cache precision; null when not stated.")
    tp: PositiveInt
    pp: PositiveInt = 1
    ep: Optional[PositiveInt] = Field(1, description="Expert parallelism; 1 for a dense model, null when the source "
                                                     "does not state it for an MoE model.")
    dp_attention: bool = False
    replicas: PositiveInt = Field(1, description="Independent engine copies.")
    input_tokens: Optional[float] = Field(description="Mean input (prompt) tokens per request; null when the source "
                                                      "does not print it (say so in note).")
    output_tokens: Optional[float] = Field(description="Mean output tokens per request; null when the source does not "
                                                       "print it (say so in note).")
    dataset: Text = Field(description="random, sharegpt, mlperf-openorca …")
    load: BenchmarkLoad
    config: dict[str, Any] = Field({}, description="Any other published setting (max_num_seqs, chunked prefill …).")
    measured: Measured
    as_published: Text = Field(description="The raw figures as the source prints them.")
    note: Optional[str] = None

    @field_validator("config", mode="before")
    @classmethod
    def _config(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("date")
    @classmethod
    def _date(cls, v: str) -> str:
        if not DATE.match(v):
            raise refuse(("", f"a date is YYYY, YYYY-MM or YYYY-MM-DD (got {v!r})"))
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("https://", "http://")):
            raise refuse(("", f"must be an http(s) URL of the page or file the numbers are on (got {v!r})"))
        return v

    @field_validator("model_hf")
    @classmethod
    def _hf(cls, v: str) -> str:
        owner, _, name = v.partition("/")
        if not owner or not name or " " in owner:
            raise refuse(("", f"a Hugging Face repository is owner/name, e.g. meta-llama/Llama-3.3-70B-Instruct (got {v!r})"))
        return v

    @field_validator("input_tokens", "output_tokens", mode="before")
    @classmethod
    def _tokens(cls, v: Any) -> Any:
        if v is not None and not _positive_number(v):
            raise refuse(("", f"impossible value: a mean token count must be > 0 (got {v!r})"))
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Benchmark":
        problems: Problems = []
        for name in ("input_tokens", "output_tokens"):
            if getattr(self, name) is None and not self.note:
                problems.append((name, "null (not printed by the source) needs a note saying so"))
        if self.framework == "other" and not self.framework_name:
            problems.append(("framework_name", "framework: other needs the framework's name"))
        if not self.dp_attention and self.devices != self.tp * self.pp * self.replicas:
            problems.append(("devices", f"{self.devices} devices, but tp x pp x replicas = {self.tp} x {self.pp} x "
                                        f"{self.replicas} = {self.tp * self.pp * self.replicas}"))
        if self.ep is not None and self.ep > self.devices:
            problems.append(("ep", f"expert parallelism {self.ep} is more than the {self.devices} devices"))
        m = self.measured
        total, per = m.output_tokens_per_s, m.output_tokens_per_s_per_device
        if total is not None and per is not None and abs(per * self.devices - total) > PER_DEVICE_SLACK * total:
            problems.append(("measured.output_tokens_per_s_per_device",
                             f"{per} x {self.devices} devices = {per * self.devices:.1f}, but output_tokens_per_s is "
                             f"{total} (more than {PER_DEVICE_SLACK:.0%} apart)"))
        if m.ttft_s and m.e2e_s and m.ttft_s.mean and m.e2e_s.mean and m.ttft_s.mean > m.e2e_s.mean:
            problems.append(("measured.ttft_s.mean", f"mean TTFT {m.ttft_s.mean} s exceeds mean E2E {m.e2e_s.mean} s"))
        if problems:
            raise refuse(*problems)
        return self

    def statistic(self, latency: str, stat: str) -> Optional[float]:
        """One latency statistic in seconds (`statistic("ttft_s", "median")`), None when not published."""
        node = getattr(self.measured, latency, None)
        return getattr(node, stat, None) if node is not None else None
