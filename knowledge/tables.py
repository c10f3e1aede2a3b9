"""SQLModel tables of the store, derived from the typed records (a test checks they match `knowledge/migrations/`).

A record table is declared once, as the list of record fields (or properties) that become columns:
the column's type comes from the record's annotation (a fact stores its value: a float, an int for a
count) and its value from the typed record, so adding a sortable column is one name here plus a
migration. `doc` is the full record as JSON text (with per-field provenance); the other columns exist
for filtering and sorting in SQL.
"""
from __future__ import annotations

import json
import types
from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar, Iterator, Literal, Optional, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel
from sqlmodel import Field, SQLModel

from knowledge import records as R
from knowledge.measurements import FIT_METHOD, FITTED_TABLES  # noqa: F401  (MeasuredFit rows use them)


@dataclass(frozen=True)
class Column:
    """One store column: its name, Python type and how to read it from a typed record."""

    name: str
    type: type
    extract: Callable[[Any], Any]


def scalar_type(annotation: Any) -> type:
    """The column type of a record annotation: Optional/Annotated unwrapped, a Literal of text is
    str, a fact is float (int for a CountFact)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return scalar_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return scalar_type(next(a for a in get_args(annotation) if a is not type(None)))
    if origin is Literal:
        return type(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, R.Fact):
        return int if issubclass(annotation, R.CountFact) else float
    if annotation in (str, int, float, bool):
        return annotation
    raise TypeError(f"no column type for {annotation!r}")


def _plain(value: Any, typ: type) -> Any:
    if isinstance(value, R.Fact):
        value = value.value
    return None if value is None else typ(value)


def field_column(record: type[BaseModel], name: str) -> Column:
    """A column read from the record field (or property) of the same name."""
    if name in record.model_fields:
        typ = scalar_type(record.model_fields[name].annotation)
    else:
        typ = scalar_type(get_type_hints(getattr(record, name).fget)["return"])
    return Column(name, typ, lambda rec: _plain(getattr(rec, name), typ))


class RecordTable(SQLModel):
    """A table of one record kind: its columns and the JSON `doc` of each record."""

    columns: ClassVar[tuple[Column, ...]] = ()

    @classmethod
    def row(cls, raw: dict, rec: BaseModel) -> dict[str, Any]:
        """The row of one record: every declared column from the typed record, `doc` from the raw one."""
        row = {c.name: c.extract(rec) for c in cls.columns}
        row["doc"] = json.dumps(raw, ensure_ascii=False, default=str)
        return row


def record_table(class_name: str, table: str, record: type[BaseModel], *columns: str | Column) -> type[RecordTable]:
    """A SQLModel table class for `record`: the first column is the primary key, `doc` comes last."""
    cols = tuple(c if isinstance(c, Column) else field_column(record, c) for c in columns)
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {"__tablename__": table, "__module__": __name__, "columns": cols,
                                 "__doc__": f"Store table `{table}`: columns of {record.__name__} records, and `doc`."}
    for i, c in enumerate(cols):
        annotations[c.name] = c.type if i == 0 else Optional[c.type]
        namespace[c.name] = Field(primary_key=True) if i == 0 else None
    annotations["doc"] = str
    namespace["__annotations__"] = annotations
    return type(class_name, (RecordTable,), namespace, table=True)  # type: ignore[call-arg]


def _chapters(case: R.Case) -> str:
    return "," + ",".join(str(x) for x in case.cited_chapters) + ","


Source = record_table("Source", "source", R.Source, "id", "title", "url", "kind", "publisher", "date", "accessed")
Hardware = record_table("Hardware", "hardware", R.Hardware, "id", "name", "vendor", "architecture", "form_factor",
                        "scope", "devices_in_scope", "memory_bytes", "memory_per_device_bytes",
                        "memory_bandwidth_bytes_per_s", "power_w")
Link = record_table("Link", "link", R.Link, "id", "name", "kind", "generation", "one_way_bytes_per_s", "latency_s",
                    "direction_convention")
Model = record_table("Model", "model", R.Model, "id", "name", "family", "organisation", "kind", "attention",
                     "weight_dtype", "layers", "hidden_size", "params_total", "params_active")
Framework = record_table("Framework", "framework", R.Framework, "id", "name", "kind", "url", "license")
Price = record_table("Price", "price", R.Price, "id", "provider", "model", "date", "input_usd_per_mtok",
                     "cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "output_usd_per_mtok")
CaseStudy = record_table("CaseStudy", "case_study", R.Case, "slug", "title_zh", "title_en", "section", "section_en",
                         "section_order", Column("chapters", str, _chapters), "summary", "summary_zh", "source_url",
                         "source_commit")
Derivation = record_table("Derivation", "derivation", R.Derivation, "id", Column("case_slug", str, lambda d: d.case),
                          "name", "family", "title", "calculator",
                          Column("bound", bool, lambda d: d.calculator is not None))
Glossary = record_table("Glossary", "glossary", R.Glossary, "id", "term", "kind")
Claim = record_table("Claim", "claim", R.Claim, "id", "verdict", "calculator")


def _statistic(latency: str, stat: str) -> Column:
    """A column of one latency statistic of a benchmark point (`ttft_median_s`), seconds."""
    return Column(f"{latency.removesuffix('_s')}_{stat}_s", float, lambda b: b.statistic(latency, stat))


def _figure(name: str) -> Column:
    """A column of one rate of a benchmark point's figures (`output_tokens_per_s`)."""
    return Column(name, float, lambda b: _plain(getattr(b.measured, name), float))


def _json_column(name: str, attr: str) -> Column:
    """A column holding one block of a benchmark point as JSON text (`config_json`)."""
    return Column(name, str, lambda b: json.dumps(getattr(b, attr).model_dump(exclude_none=True)
                                                   if isinstance(getattr(b, attr), BaseModel) else getattr(b, attr),
                                                   ensure_ascii=False, default=str))


Benchmark = record_table(
    "Benchmark", "benchmark", R.Benchmark, "id", "source", "url", "locator", "date", "model", "model_hf", "hardware",
    "hardware_name", "devices", "framework", "framework_name", "framework_version", "weight_format", "kv_format",
    "tp", "pp", "ep", "dp_attention", "replicas", "input_tokens", "output_tokens", "dataset",
    Column("load_kind", str, lambda b: b.load.kind),
    Column("concurrency", int, lambda b: b.load.concurrency),
    Column("requests_per_s_offered", float, lambda b: b.load.offered_requests_per_s),
    Column("offline", bool, lambda b: bool(b.load.offline)),
    Column("server_scenario", bool, lambda b: bool(b.load.server_scenario)),
    *(_statistic(lat, stat) for lat, stat in (("ttft_s", "mean"), ("ttft_s", "median"), ("ttft_s", "p99"),
                                              ("tpot_s", "mean"), ("tpot_s", "median"), ("tpot_s", "p99"),
                                              ("itl_s", "mean"), ("itl_s", "median"), ("e2e_s", "mean"),
                                              ("e2e_s", "median"))),
    *(_figure(n) for n in ("output_tokens_per_s", "output_tokens_per_s_per_device", "output_tokens_per_s_per_user",
                           "total_tokens_per_s", "requests_per_s")),
    _json_column("config_json", "config"), _json_column("measured_json", "measured"), "as_published", "note")


class HardwarePeak(SQLModel, table=True):
    """One peak rate of a device (a row per precision, unit and sparsity)."""

    __tablename__ = "hardware_peak"
    hardware_id: str = Field(primary_key=True)
    input_precision: str = Field(primary_key=True)
    accumulator: Optional[str] = Field(default=None, primary_key=True)
    unit: str = Field(primary_key=True)
    sparsity: str = Field(primary_key=True)
    flop_per_s: float
    source_id: str
    locator: Optional[str] = None

    @classmethod
    def rows(cls, hw: R.Hardware) -> list[dict[str, Any]]:
        return [{"hardware_id": hw.id, "input_precision": p.input_precision, "accumulator": p.accumulator,
                 "unit": p.unit, "sparsity": p.sparsity, "flop_per_s": p.flop_per_s.value,
                 "source_id": p.flop_per_s.source, "locator": p.flop_per_s.locator} for p in hw.peaks]


class FrameworkFeature(SQLModel, table=True):
    """A dated feature row of a framework."""

    __tablename__ = "framework_feature"
    framework_id: str = Field(primary_key=True)
    feature: str = Field(primary_key=True)
    name: Optional[str] = None
    since: Optional[str] = Field(default=None, primary_key=True)
    date: Optional[str] = None
    source_id: str
    locator: Optional[str] = None

    @classmethod
    def rows(cls, fw: R.Framework) -> list[dict[str, Any]]:
        return [{"framework_id": fw.id, "feature": f.feature, "name": f.name, "since": f.since, "date": f.date,
                 "source_id": f.source, "locator": f.locator} for f in fw.features]


class Fact(SQLModel, table=True):
    """One sourced number of a fact record, addressed by its dotted field path."""

    __tablename__ = "fact"
    kind: str = Field(primary_key=True)
    record_id: str = Field(primary_key=True)
    field: str = Field(primary_key=True)
    value: float
    source_id: str
    locator: Optional[str] = None
    as_published: Optional[str] = None
    note: Optional[str] = None
    per: Optional[str] = None
    basis: Optional[str] = None

    @classmethod
    def rows(cls, kind: str, rec_id: str, node: Any, path: str = "") -> Iterator[dict[str, Any]]:
        """Every fact inside a raw record, declared or free-form (walks nested blocks and lists)."""
        if isinstance(node, dict):
            if "value" in node and "source" in node:
                v = node["value"]
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    yield {"kind": kind, "record_id": rec_id, "field": path, "value": float(v),
                           "source_id": node["source"], "locator": node.get("locator"),
                           "as_published": _text(node.get("as_published")), "note": node.get("note"),
                           "per": node.get("per"), "basis": node.get("basis")}
                return
            for k, v in node.items():
                yield from cls.rows(kind, rec_id, v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from cls.rows(kind, rec_id, v, f"{path}.{i}")


def _text(v: Any) -> Optional[str]:
    return None if v is None else str(v)


class Meta(SQLModel, table=True):
    """Key-value facts about the build (content hash, time, schema version)."""

    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: Optional[str] = None


class MeasurementFile(SQLModel, table=True):
    """One measured table copied from the aiconfigurator-core wheel (`knowledge/data/measured/manifest.yaml`);
    its rows are in `measured_<table_name>`, each row naming its file in `file`."""

    __tablename__ = "measurement_file"
    path: str = Field(primary_key=True)
    system: str
    op: str
    table_name: str
    framework: str
    version: str
    directory_version: Optional[str] = None
    collected_with: Optional[str] = None
    path_in_wheel: str
    sha256: str
    bytes: int
    gpu: Optional[str] = None
    rows: int
    columns: str
    license: str
    package: str
    package_version: str

    @classmethod
    def row(cls, f: dict[str, Any]) -> dict[str, Any]:
        return {**{k: f.get(k) for k in cls.model_fields}, "table_name": f["table"], "columns": ",".join(f["columns"])}


class MeasuredFit(SQLModel, table=True):
    """A derived fact: the α–β line of one measured all-reduce (system, table, GPU count), with its
    residuals and the measured file (manifest path and sha256) it was fitted to."""

    __tablename__ = "measured_fit"
    system: str = Field(primary_key=True)
    table_name: str = Field(primary_key=True)
    gpus: int = Field(primary_key=True)
    start_up_s: float
    algorithm_bytes_per_s: float
    alpha_s: float
    link_bytes_per_s: float
    rms_relative_residual: float
    max_relative_residual: float
    points: int
    message_bytes_min: float
    message_bytes_max: float
    op_name: str
    dtype: Optional[str] = None
    backend: Optional[str] = None
    file: str
    sha256: str
    method: str

    @classmethod
    def row(cls, fit: dict[str, Any], f: dict[str, Any]) -> dict[str, Any]:
        """The row of one fit (`AllReduceFit.as_dict()`) of manifest file `f`."""
        src = fit.get("source") or {}
        return {**{k: fit[k] for k in cls.model_fields if k in fit}, "system": f["system"], "table_name": f["table"],
                "op_name": src.get("op_name", "all_reduce"), "dtype": src.get("dtype"), "backend": src.get("backend"),
                "file": f["path"], "sha256": f["sha256"], "method": FIT_METHOD}


#: kind name used by the API and calculators' lookup -> table class
TABLES: dict[str, type[RecordTable]] = {
    "source": Source, "hardware": Hardware, "link": Link, "model": Model, "framework": Framework,
    "price": Price, "case": CaseStudy, "derivation": Derivation, "glossary": Glossary, "claim": Claim,
    "benchmark": Benchmark,
}
#: every table class, record tables first
ALL_TABLES: tuple[type[SQLModel], ...] = (*TABLES.values(), HardwarePeak, FrameworkFeature, Fact, Meta, MeasurementFile,
                                          MeasuredFit)
