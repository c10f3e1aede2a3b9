"""SQLModel tables of the store, one class per table of `migrations/` (a test checks they agree).

`doc` is the full record as JSON text (with per-field provenance); the other columns exist for
filtering and sorting in SQL.
"""
from __future__ import annotations

from typing import Optional

from sqlmodel import Field, SQLModel


class Source(SQLModel, table=True):
    __tablename__ = "source"
    id: str = Field(primary_key=True)
    title: str
    url: str
    kind: Optional[str] = None
    publisher: Optional[str] = None
    date: Optional[str] = None
    accessed: Optional[str] = None
    doc: str


class Hardware(SQLModel, table=True):
    __tablename__ = "hardware"
    id: str = Field(primary_key=True)
    name: str
    vendor: Optional[str] = None
    architecture: Optional[str] = None
    form_factor: Optional[str] = None
    scope: Optional[str] = None
    memory_bytes: Optional[float] = None
    memory_bandwidth_bytes_per_s: Optional[float] = None
    power_w: Optional[float] = None
    doc: str


class HardwarePeak(SQLModel, table=True):
    __tablename__ = "hardware_peak"
    hardware_id: str = Field(primary_key=True)
    input_precision: str = Field(primary_key=True)
    accumulator: Optional[str] = Field(default=None, primary_key=True)
    unit: str = Field(primary_key=True)
    sparsity: str = Field(primary_key=True)
    flop_per_s: float
    source_id: str
    locator: Optional[str] = None


class Link(SQLModel, table=True):
    __tablename__ = "link"
    id: str = Field(primary_key=True)
    name: str
    kind: Optional[str] = None
    generation: Optional[str] = None
    one_way_bytes_per_s: Optional[float] = None
    latency_s: Optional[float] = None
    direction_convention: Optional[str] = None
    doc: str


class Model(SQLModel, table=True):
    __tablename__ = "model"
    id: str = Field(primary_key=True)
    name: str
    family: Optional[str] = None
    organisation: Optional[str] = None
    kind: Optional[str] = None
    attention: Optional[str] = None
    layers: Optional[int] = None
    hidden_size: Optional[int] = None
    params_total: Optional[float] = None
    params_active: Optional[float] = None
    doc: str


class Framework(SQLModel, table=True):
    __tablename__ = "framework"
    id: str = Field(primary_key=True)
    name: str
    kind: Optional[str] = None
    url: Optional[str] = None
    license: Optional[str] = None
    doc: str


class FrameworkFeature(SQLModel, table=True):
    __tablename__ = "framework_feature"
    framework_id: str = Field(primary_key=True)
    feature: str = Field(primary_key=True)
    name: Optional[str] = None
    since: Optional[str] = Field(default=None, primary_key=True)
    date: Optional[str] = None
    source_id: str
    locator: Optional[str] = None


class Price(SQLModel, table=True):
    __tablename__ = "price"
    id: str = Field(primary_key=True)
    provider: Optional[str] = None
    model: Optional[str] = None
    date: Optional[str] = None
    input_usd_per_mtok: Optional[float] = None
    cache_read_usd_per_mtok: Optional[float] = None
    cache_write_usd_per_mtok: Optional[float] = None
    output_usd_per_mtok: Optional[float] = None
    doc: str


class CaseStudy(SQLModel, table=True):
    __tablename__ = "case_study"
    slug: str = Field(primary_key=True)
    title_zh: str
    title_en: str
    section: Optional[str] = None
    section_en: Optional[str] = None
    section_order: Optional[int] = None
    chapters: Optional[str] = None  # comma-separated cited chapters, e.g. ",2,7,"
    summary: Optional[str] = None
    source_url: Optional[str] = None
    source_commit: Optional[str] = None
    doc: str


class Derivation(SQLModel, table=True):
    __tablename__ = "derivation"
    id: str = Field(primary_key=True)
    case_slug: str
    name: str
    family: Optional[str] = None
    title: Optional[str] = None
    calculator: Optional[str] = None
    bound: Optional[bool] = None
    doc: str


class Fact(SQLModel, table=True):
    __tablename__ = "fact"
    kind: str = Field(primary_key=True)
    record_id: str = Field(primary_key=True)
    field: str = Field(primary_key=True)
    value: float
    source_id: str
    locator: Optional[str] = None
    as_published: Optional[str] = None
    note: Optional[str] = None


class Glossary(SQLModel, table=True):
    __tablename__ = "glossary"
    id: str = Field(primary_key=True)
    term: str
    kind: Optional[str] = None
    doc: str


class Claim(SQLModel, table=True):
    __tablename__ = "claim"
    id: str = Field(primary_key=True)
    verdict: Optional[str] = None
    calculator: Optional[str] = None
    doc: str


class Meta(SQLModel, table=True):
    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: Optional[str] = None


#: kind name used by the API and calculators' lookup -> table class
TABLES: dict[str, type[SQLModel]] = {
    "source": Source, "hardware": Hardware, "link": Link, "model": Model, "framework": Framework,
    "price": Price, "case": CaseStudy, "derivation": Derivation, "glossary": Glossary, "claim": Claim,
}
