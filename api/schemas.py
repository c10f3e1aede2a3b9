"""Response models of the JSON API (request models of calculators live with the calculators).

Records keep every numeric fact as a `Fact` (value + source + locator), so a client always gets
the provenance with the number. Models allow extra fields: the data files may carry more.
"""
from __future__ import annotations

from typing import Any, Generic, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Fact(Open):
    """One sourced number in SI units, with where it was published."""

    value: float = Field(description="The number, in the SI unit named by the field (bytes, bytes/s, FLOP/s, s, W, USD).")
    source: str = Field(description="Source id; see /api/v1/sources/{id}.")
    locator: Optional[str] = Field(None, description="Where in the source: table, page, section or config key.")
    as_published: Optional[str] = Field(None, description="The number as the source prints it, with its unit convention.")
    note: Optional[str] = None
    source_url: Optional[str] = None
    source_title: Optional[str] = None


class Source(Open):
    id: str
    title: str
    url: str
    kind: Optional[str] = None
    publisher: Optional[str] = None
    date: Optional[str] = None
    accessed: Optional[str] = None


class Peak(Open):
    input_precision: str
    accumulator: Optional[str] = None
    unit: str = Field(description="tensor, vector, cube …: the execution unit the peak is for.")
    sparsity: str = Field(description="dense, structured (2:4) sparsity, or unspecified when the source does not say.")
    flop_per_s: Fact


class Hardware(Open):
    id: str
    name: str
    vendor: Optional[str] = None
    architecture: Optional[str] = None
    form_factor: Optional[str] = None
    scope: Optional[str] = None
    devices_in_scope: Optional[int] = None
    memory_bytes: Optional[Fact] = None
    memory_bandwidth_bytes_per_s: Optional[Fact] = None
    power_w: Optional[Fact] = None
    links: list[str] = []
    peaks: list[Peak] = []
    notes: Optional[str] = None


class Link(Open):
    id: str
    name: str
    kind: Optional[str] = None
    generation: Optional[str] = None
    one_way_bytes_per_s: Optional[Fact] = None
    direction_convention: Optional[str] = None
    latency_s: Optional[Fact] = None


class ModelStream(Open):
    dim: int
    window: Optional[int] = None
    ratio: int = 1
    name: Optional[str] = None


class ModelLayerGroup(Open):
    count: int
    streams: list[ModelStream] = []
    state_elements: int = 0
    name: Optional[str] = None


class Model(Open):
    id: str
    name: str
    family: Optional[str] = None
    organisation: Optional[str] = None
    kind: Optional[str] = None
    attention: Optional[str] = None
    weight_dtype: Optional[str] = None
    layers: Optional[Fact] = None
    hidden_size: Optional[Fact] = None
    heads: Optional[Fact] = None
    kv_heads: Optional[Fact] = None
    head_dim: Optional[Fact] = None
    ffn_size: Optional[Fact] = None
    vocab_size: Optional[Fact] = None
    params_total: Optional[Fact] = None
    params_active: Optional[Fact] = None
    moe: Optional[dict[str, Any]] = None
    mla: Optional[dict[str, Any]] = None
    layer_groups: list[ModelLayerGroup] = []
    layer_groups_provenance: Optional[dict[str, Any]] = None
    notes: Optional[str] = None


class Feature(Open):
    feature: str
    name: Optional[str] = None
    since: Optional[str] = None
    date: Optional[str] = None
    source: str
    locator: Optional[str] = None


class Framework(Open):
    id: str
    name: str
    kind: Optional[str] = None
    url: Optional[str] = None
    license: Optional[str] = None
    summary: Optional[str] = None
    features: list[Feature] = []


class Price(Open):
    id: str
    provider: Optional[str] = None
    model: Optional[str] = None
    date: Optional[str] = None


class CaseRef(BaseModel):
    slug: str
    title_zh: str
    title_en: str
    url: str = Field(description="HTML page of the case on this service.")


class Derivation(Open):
    id: str = Field(description="`<case>/<name>`")
    case: str
    name: str
    family: Optional[str] = None
    title: Optional[str] = None
    formula: Optional[str] = None
    inputs: dict[str, Any] = {}
    printed: dict[str, Any] = {}
    calculator: Optional[str] = None
    request: Optional[dict[str, Any]] = None
    expected: Optional[dict[str, Any]] = None
    note: Optional[str] = None


class Case(Open):
    slug: str
    title_zh: str
    title_en: str
    section: Optional[str] = None
    section_en: Optional[str] = None
    section_order: Optional[int] = None
    cited_chapters: list[int] = []
    summary: Optional[str] = None
    source_url: Optional[str] = None
    source_commit: Optional[str] = None
    related: list[str] = []


class CaseDetail(Case):
    derivations: list[Derivation] = []
    related_cases: list[CaseRef] = []


class Glossary(Open):
    id: str


class Claim(Open):
    id: str


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int = Field(description="Number of records matching the filters (all pages).")
    limit: int
    offset: int
    next: Optional[str] = Field(None, description="URL of the next page, when there is one.")


class SearchHit(BaseModel):
    kind: str
    id: str
    title: str
    url: str
    api_url: str
    snippet: str
    score: float


class SearchResults(BaseModel):
    query: str
    items: list[SearchHit]
    total: int
    limit: int
    offset: int


class Step(BaseModel):
    label: str
    formula: str
    substituted: str
    value: Any = None
    unit: str


class Envelope(BaseModel):
    """What every calculator answers."""

    calculator: str
    inputs: dict[str, Any] = Field(description="The request as resolved, with `sources` for facts taken from the store.")
    outputs: dict[str, Any]
    steps: list[Step]
    assumptions: list[str]
    cases: list[CaseRef]
    explanation_url: str


class CalculatorInfo(BaseModel):
    name: str
    title: str
    family: str
    summary: str
    description: str
    endpoint: str
    request_schema: dict[str, Any]
    example: dict[str, Any]
    sweepable: list[str]
    cases: list[CaseRef]


class BatchItem(BaseModel):
    calculator: str = Field(description="A registered calculator name, e.g. kv-cache.")
    request: dict[str, Any] = Field(description="Its request body.")


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: list[BatchItem] = Field(max_length=1000, description="Up to 1,000 calculator requests, answered in order.")


class BatchResult(BaseModel):
    status: int
    response: Optional[Envelope] = None
    problem: Optional[dict[str, Any]] = None


class BatchResponse(BaseModel):
    results: list[BatchResult]


class Health(BaseModel):
    status: str
    version: str
    content_hash: str
    built_at: Optional[str] = None
    counts: dict[str, int]


class CoverageCase(BaseModel):
    slug: str
    title_zh: str
    stored: int
    bound: int
    families_unbound: list[str]


class Coverage(BaseModel):
    cases: int
    derivations: int
    bound: int
    bound_fraction: float
    calculators_used: list[str]
    per_case: list[CoverageCase]
    families_without_calculator: list[str]
