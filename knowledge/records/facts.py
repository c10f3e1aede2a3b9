"""Fact records: sources, hardware (devices and their aggregates), links, model architectures, prices."""
from __future__ import annotations

import re
from typing import Any, Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from calculators.domain import HARDWARE_KINDS, per_device_value, price_date

from knowledge.records.base import (Commit, CountFact, Fact, FactGroup, Label, PositiveInt, Problems, Record, Sha256,
                                    Ratio, Slug, SourceId, Text, Window, join, ref, refs, refuse)


# ---------------------------------------------------------------------------- sources

class Source(Record):
    """A document that facts cite (datasheet, paper, model config …)."""

    id: Slug
    title: Text
    url: Text
    kind: Literal["datasheet", "whitepaper", "paper", "model-config", "docs", "book", "web", "report", "repo"]
    publisher: Optional[str] = None
    date: Optional[Label] = None
    accessed: Optional[Label] = None
    license: Optional[str] = None
    note: Optional[str] = None
    notes: Optional[str] = None


# ---------------------------------------------------------------------------- hardware and links

Scope = Literal["device", "node", "rack", "pod"]
Sparsity = Literal["dense", "structured", "unspecified"]
SCOPES: tuple[str, ...] = get_args(Scope)
#: what kind of machine a hardware record is (calculators.domain.hardware_kind derives it when the record says none)
HardwareKind = Literal[tuple(HARDWARE_KINDS)]  # type: ignore[valid-type]
#: keys of a hardware record's `unknown` mapping: a figure field, or one peak row by precision and sparsity
UNKNOWN_KEY = re.compile(r"^(?:memory_bytes|memory_bandwidth_bytes_per_s|power_w|"
                         r"peak_(?P<precision>[a-z0-9]+)_(?P<sparsity>dense|structured|unspecified))$")


class Peak(FactGroup):
    """One peak rate of a device: precision, accumulator, execution unit and sparsity."""

    input_precision: Text
    accumulator: Optional[str] = None
    unit: Literal["tensor", "vector", "cube", "matrix", "npu"] = Field(
        description="tensor, vector, cube …: the execution unit the peak is for.")
    sparsity: Sparsity = Field(description="dense, structured (2:4) sparsity, or unspecified when the source does not say.")
    flop_per_s: Fact

    @field_validator("sparsity", mode="before")
    @classmethod
    def _sparsity(cls, v: Any) -> Any:
        if v not in get_args(Sparsity):
            raise refuse(("", "must be dense, structured or unspecified (the source does not say)"))
        return v


class Hardware(Record, FactGroup):
    """An accelerator or a system of them (node, rack, pod), with sourced memory, bandwidth and peaks."""

    id: Slug
    name: Text
    vendor: Optional[str] = None
    architecture: Optional[str] = None
    form_factor: Optional[str] = None
    kind: Optional[HardwareKind] = Field(None, description="data-centre-gpu, accelerator, laptop-desktop or rack-system; "
                                         "when absent, derived from scope, vendor, form factor and name (the API always "
                                         "gives it).")
    scope: Scope = Field("device", description="device, or the aggregate the numbers cover: node, rack or pod.")
    devices_in_scope: int = Field(1, ge=1, description="Devices the numbers cover: 1 for a device, 72 for an NVL72 rack.")
    memory_bytes: Optional[Fact] = None
    memory_bandwidth_bytes_per_s: Optional[Fact] = None
    power_w: Optional[Fact] = None
    links: refs("link") = []
    peaks: list[Peak] = []
    unknown: dict[str, str] = Field(default_factory=dict, description=(
        "Figures the record lacks, each with the reason: memory_bytes, memory_bandwidth_bytes_per_s, power_w, "
        "or peak_<precision>_<sparsity> (peak_bf16_dense, peak_fp8_dense) -> why no sourced value is stored."))
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _unknown_is_unknown(self) -> "Hardware":
        """An `unknown` entry names a figure the record really lacks, with a reason; never a stored one."""
        problems: Problems = []
        for name, why in self.unknown.items():
            where = join("unknown", name)
            if not UNKNOWN_KEY.match(name):
                problems.append((where, "name memory_bytes, memory_bandwidth_bytes_per_s, power_w or "
                                        "peak_<precision>_<dense|structured|unspecified> (e.g. peak_fp8_dense)"))
            elif not str(why or "").strip():
                problems.append((where, "say why the figure is unknown (a non-empty reason)"))
            elif self.has_figure(name):
                problems.append((where, f"the record stores {name}; drop it from unknown"))
        if problems:
            raise refuse(*problems)
        return self

    def has_figure(self, name: str) -> bool:
        """Whether the record stores the figure an `unknown` key names (a field, or a peak row)."""
        m = UNKNOWN_KEY.match(name)
        if m is None:
            return False
        if m.group("precision") is None:
            return getattr(self, name) is not None
        return any(p.input_precision.lower() == m.group("precision") and p.sparsity == m.group("sparsity")
                   for p in self.peaks)

    @model_validator(mode="after")
    def _what_numbers_count(self) -> "Hardware":
        """A device covers one device and its facts are per device; an aggregate's facts say what
        they count (`per`); a memory capacity says how its GB reads (`basis`) and who backs that."""
        problems: Problems = []
        if self.scope == "device" and self.devices_in_scope != 1:
            problems.append(("devices_in_scope", f"a device-scope record covers exactly 1 device (got {self.devices_in_scope})"))
        for name, fact in self.facts():
            if self.scope == "device" and fact.per is not None:
                problems.append((join(name, "per"), "a device record's facts are per device: drop per"))
            elif self.scope != "device" and fact.per is None:
                problems.append((join(name, "per"), f"on a {self.scope} record say what the figure counts: "
                                                    "per: device, total or system"))
        m = self.memory_bytes
        if m is not None:
            missing = [k for k in ("basis", "basis_source", "basis_locator") if getattr(m, k) is None]
            if missing:
                problems.append(("memory_bytes", f"a memory capacity needs {', '.join(missing)} "
                                                 "(binary or decimal GB, and the source that backs the reading)"))
            elif m.basis == "decimal" and not m.note:
                problems.append(("memory_bytes.note", "a decimal memory capacity needs a note saying why"))
        if problems:
            raise refuse(*problems)
        return self

    def facts(self) -> list[tuple[str, Fact]]:
        """The declared facts of the record, with their field paths."""
        named = [(n, getattr(self, n)) for n in ("memory_bytes", "memory_bandwidth_bytes_per_s", "power_w")]
        named += [(f"peaks.{i}.flop_per_s", p.flop_per_s) for i, p in enumerate(self.peaks)]
        return [(n, f) for n, f in named if f is not None]

    @property
    def memory_per_device_bytes(self) -> Optional[float]:
        """Memory of one device: the fact itself for a device (or `per: device`), the total over
        the devices in scope divided by their number otherwise; None for a whole-system figure."""
        m = self.memory_bytes
        if m is None:
            return None
        return per_device_value(float(m.value), m.per, self.scope, self.devices_in_scope)


class Link(Record, FactGroup):
    """An interconnect with its one-way bandwidth and the direction convention of the published number."""

    id: Slug
    name: Text
    kind: Optional[Literal["nvlink", "pcie", "infiniband", "ethernet", "other"]] = None
    generation: Optional[Label] = None
    one_way_bytes_per_s: Optional[Fact] = None
    direction_convention: Optional[str] = None
    latency_s: Optional[Fact] = None


# ---------------------------------------------------------------------------- models

class ModelStream(BaseModel):
    """A cache stream of a layer group: values stored per retained entry, window and ratio."""

    model_config = ConfigDict(extra="allow")
    name: Optional[str] = None
    dim: PositiveInt
    window: Window = None
    ratio: Ratio = 1


class ModelLayerGroup(BaseModel):
    """Layers that share one attention layout (the kv-cache calculator's streams form)."""

    model_config = ConfigDict(extra="allow")
    name: Optional[str] = None
    count: PositiveInt
    streams: list[ModelStream] = []
    state_elements: int = Field(0, ge=0, description="Recurrent state elements per layer (KDA/SSM), else 0.")
    kv_heads: Optional[PositiveInt] = Field(None, description="KV heads of these layers when they differ from the model's.")
    state_heads: Optional[PositiveInt] = Field(None, description="Heads the recurrent state is split over, when it differs.")


class Provenance(BaseModel):
    """Where a structural (non-numeric) part of a record comes from."""

    model_config = ConfigDict(extra="allow")
    source: Optional[SourceId] = None
    locator: Optional[str] = None
    note: Optional[str] = None


class ConfigProvenance(BaseModel):
    """The exact published config a model's numbers were read from: repository, commit or file hash, path."""

    model_config = ConfigDict(extra="allow")
    repository: Text = Field(description="e.g. Qwen/Qwen3-8B on Hugging Face, or a git URL.")
    revision: Optional[Commit] = Field(None, description="Commit the config was read at (40 hex).")
    file_sha256: Optional[Sha256] = Field(None, description="SHA-256 of the config file when no commit is known.")
    path: Text = Field(description="Path of the config inside the repository, e.g. config.json.")
    source: Optional[SourceId] = None
    via: Optional[str] = Field(None, description="Where the bytes were fetched from, when not the repository itself.")
    file: Optional[str] = Field(None, description="The local copy under knowledge/data/model-configs/.")
    record: Optional[Literal["hand-written", "imported"]] = Field(
        None, description="How the record was written: by hand, or by knowledge/model_import.py from the config.")
    note: Optional[str] = None

    @model_validator(mode="after")
    def _pinned(self) -> "ConfigProvenance":
        if not (self.revision or self.file_sha256):
            raise refuse(("revision", "config provenance needs a revision (commit) or a file_sha256"))
        return self


class MoE(FactGroup):
    """The mixture-of-experts block of a model."""

    experts: CountFact
    experts_per_token: CountFact
    shared_experts: Optional[CountFact] = None
    expert_ffn_size: Optional[CountFact] = None
    dense_layers: Optional[CountFact] = Field(None, description="Leading dense layers.")
    moe_layer_freq: Optional[CountFact] = Field(None, description="Every n-th layer is MoE.")


class MLA(FactGroup):
    """The multi-head latent attention block of a model."""

    kv_lora_rank: CountFact
    q_lora_rank: Optional[CountFact] = None
    qk_rope_head_dim: Optional[CountFact] = None
    qk_nope_head_dim: Optional[CountFact] = None
    v_head_dim: Optional[CountFact] = None


Inclusion = Literal["included", "excluded", "none", "unstated"]


class ParamsConvention(BaseModel):
    """What a model's params_total / params_active count, module by module: included, excluded, none (the model
    has no such module) or unstated (a published figure that does not say)."""

    model_config = ConfigDict(extra="forbid")
    basis: Literal["computed", "published"] = Field(
        description="computed: the weight-memory ledger over the config's shapes; published: a figure as printed.")
    embeddings: Inclusion = Field(description="The input embedding table and the output head (LM head).")
    indexer: Inclusion = Field(description="The DeepSeek Sparse Attention lightning indexer (params_indexer).")
    mtp: Inclusion = Field(description="The multi-token-prediction modules (num_nextn_predict_layers).")
    vision: Inclusion = Field(description="A vision tower (encoder and projector).")
    note: Optional[str] = None


class Model(Record, FactGroup):
    """A model architecture: shape counts, attention layout, MoE/MLA blocks, each number sourced."""

    id: Slug
    name: Text
    family: Optional[str] = None
    organisation: Optional[str] = None
    kind: Literal["dense", "moe"] = "dense"
    attention: Optional[str] = None
    weight_dtype: Optional[str] = Field(None, description="Format of the shipped weights, e.g. bf16, fp8, mixed-mxfp4-bf16.")
    weight_dtype_locator: Optional[str] = Field(None, description="Config key the weight format was read from.")
    layers: Optional[CountFact] = None
    hidden_size: Optional[CountFact] = None
    heads: Optional[CountFact] = None
    kv_heads: Optional[CountFact] = None
    head_dim: Optional[CountFact] = None
    ffn_size: Optional[CountFact] = None
    vocab_size: Optional[CountFact] = None
    tie_word_embeddings: Optional[bool] = None
    params_total: Optional[Fact] = None
    params_active: Optional[Fact] = None
    params_total_without_embeddings: Optional[Fact] = Field(
        None, description="params_total less the input embeddings and the output head (weight-memory ledger).")
    params_active_without_embeddings: Optional[Fact] = Field(
        None, description="params_active less the input embeddings and the output head (weight-memory ledger).")
    params_indexer: Optional[Fact] = Field(None, description="Weights of the DSA lightning indexer, all layers.")
    params_convention: Optional[ParamsConvention] = Field(
        None, description="What params_total and params_active include (embeddings, indexer, MTP, vision).")
    context_length: Optional[CountFact] = None
    sliding_window: Optional[CountFact] = None
    linear_attention_heads: Optional[CountFact] = None
    linear_attention_head_dim: Optional[CountFact] = None
    linear_attention_layers: Optional[CountFact] = None
    full_attention_layers: Optional[CountFact] = None
    index_n_heads: Optional[CountFact] = None
    index_head_dim: Optional[CountFact] = None
    index_topk: Optional[CountFact] = None
    num_nextn_predict_layers: Optional[CountFact] = None
    moe: Optional[MoE] = None
    mla: Optional[MLA] = None
    layer_groups: Optional[list[ModelLayerGroup]] = None
    layer_groups_provenance: Optional[Provenance] = None
    config_provenance: Optional[ConfigProvenance] = None
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _structure(self) -> "Model":
        problems: Problems = []
        if self.layer_groups is not None:
            if not self.layer_groups:
                problems.append(("layer_groups", "must be a non-empty list"))
            elif not (self.layer_groups_provenance and self.layer_groups_provenance.source):
                problems.append(("layer_groups_provenance", "layer groups have no source"))
        if self.kind == "moe" and self.moe is None:
            problems.append(("moe", "an MoE model needs its moe block"))
        if problems:
            raise refuse(*problems)
        return self


# ---------------------------------------------------------------------------- prices

Pricing = Literal["on-demand", "reserved", "spot", "committed"]
PRICINGS: tuple[str, ...] = get_args(Pricing)
#: the numbers of a price record: one of them makes it a price that needs its region and date
PRICE_FACTS = ("input_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "output_usd_per_mtok",
               "cost_usd_per_mtok", "device_usd_per_hour", "instance_usd_per_hour")
#: relative slack between device price x devices and the published instance price (sources round to cents)
INSTANCE_PRICE_SLACK = 0.005


class Price(Record, FactGroup):
    """A dated price point: USD per million tokens (a model API), or USD per accelerator-hour (a GPU rental).

    A GPU-hour price (`device_usd_per_hour`) is one device's share of an hourly rental; when the source
    prices a whole instance, `instance_usd_per_hour` keeps that figure and `devices_per_instance` the
    divisor. It says how it is bought (`pricing`, `commitment`), where (`region`) and when (`date`)."""

    id: Slug
    name: Text
    provider: Optional[str] = None
    model: Optional[str] = Field(None, description="The priced model (token prices) or accelerator (GPU-hour prices).")
    date: Optional[Label] = None
    input_usd_per_mtok: Optional[Fact] = None
    cache_read_usd_per_mtok: Optional[Fact] = None
    cache_write_usd_per_mtok: Optional[Fact] = None
    output_usd_per_mtok: Optional[Fact] = None
    cost_usd_per_mtok: Optional[Fact] = None
    hardware: Optional[ref("hardware")] = Field(
        None, description="The accelerator rented, an id in hardware.yaml (unset when the store has no record of it).")
    device_usd_per_hour: Optional[Fact] = Field(
        None, description="USD per accelerator per hour: the published per-GPU rate, or the instance rate / devices_per_instance.")
    instance_usd_per_hour: Optional[Fact] = Field(
        None, description="USD per hour for the whole instance, when the source prices the instance.")
    pricing: Optional[Pricing] = Field(
        None, description="on-demand, reserved (capacity booked ahead), spot (interruptible) or committed (term discount).")
    commitment: Optional[str] = Field(None, description="The term bought for reserved or committed prices, e.g. 1 year.")
    region: Optional[str] = Field(None, description="Region or location of the price, as the source gives it.")
    instance: Optional[str] = Field(None, description="Instance type, shape or plan the price is for.")
    devices_per_instance: Optional[PositiveInt] = Field(None, description="Accelerators in that instance.")
    see_also: refs("source") = []
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _gpu_hour(self) -> "Price":
        """Every price says where (`region`) and when (`date`, ISO); a GPU-hour price is positive, says how it is
        bought and agrees with its instance price."""
        problems: Problems = []
        d, inst = self.device_usd_per_hour, self.instance_usd_per_hour
        gpu_fields = ("hardware", "pricing", "commitment", "instance", "devices_per_instance")
        priced = any(getattr(self, f) is not None for f in PRICE_FACTS)   # a record with no number yet is partial
        if priced and not self.region:
            problems.append(("region", "every price needs the region the source gives (write 'not stated by the "
                                       "source' when it gives none)"))
        if priced and not self.date:
            problems.append(("date", "every price needs its date (the day it was read, or the source's own date), "
                                     "ISO: YYYY-MM-DD, or YYYY-MM / YYYY when the source gives no day"))
        elif self.date and price_date(self.date) is None:   # the price rule reads a month or a year as its first day
            problems.append(("date", f"{self.date!r} is not an ISO date (YYYY-MM-DD, or YYYY-MM / YYYY when the source "
                                     "gives no day)"))
        if d is None:
            if inst is not None:
                problems.append(("device_usd_per_hour", "an instance price needs the per-device price it implies"))
            stray = [f for f in gpu_fields if getattr(self, f) is not None]
            if stray:
                problems.append((stray[0], "GPU-rental fields need device_usd_per_hour"))
        else:
            if d.value <= 0:
                problems.append(("device_usd_per_hour", f"a GPU-hour price must be > 0 (got {d.value}); "
                                                        "leave the record out rather than store $0"))
            if not self.pricing:
                problems.append(("pricing", "a GPU-hour price needs it"))
            if self.pricing in ("reserved", "committed") and not self.commitment:
                problems.append(("commitment", f"a {self.pricing} price needs the term bought"))
            if inst is not None:
                n = self.devices_per_instance
                if n is None:
                    problems.append(("devices_per_instance", "an instance price needs the device count"))
                elif inst.value <= 0:
                    problems.append(("instance_usd_per_hour", f"must be > 0 (got {inst.value})"))
                elif abs(d.value * n - inst.value) > INSTANCE_PRICE_SLACK * inst.value:
                    problems.append(("device_usd_per_hour", f"{d.value} x {n} devices = {d.value * n:.4f}, "
                                                            f"but the instance price is {inst.value}"))
        if problems:
            raise refuse(*problems)
        return self
