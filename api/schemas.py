"""Response models of the JSON API (request models of calculators live with the calculators).

Records are the typed records of `knowledge.records`: every numeric fact is a `Fact` (value +
source + locator), so a client always gets the provenance with the number. Record models allow
extra fields: the data files may carry more.
"""
from __future__ import annotations

from typing import Any, Generic, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from knowledge import records as R

T = TypeVar("T")


# The records the API serves are the data files' typed records (knowledge/records/), each with
# every number as a Fact (value + source + locator): one declaration for the data, the store's
# columns and these public schemas.
Fact = R.Fact
CountFact = R.CountFact
Source = R.Source
Peak = R.Peak
Hardware = R.Hardware
Link = R.Link
ModelStream = R.ModelStream
ModelLayerGroup = R.ModelLayerGroup
Model = R.Model
Feature = R.Feature
Framework = R.Framework
Price = R.Price
Derivation = R.Derivation
Case = R.Case
Glossary = R.Glossary
Claim = R.Claim


class CaseRef(BaseModel):
    slug: str
    title_zh: str
    title_en: str
    url: str = Field(description="HTML page of the case on this service.")


class CaseDetail(R.Case):
    """A case with its worked examples and the cases it relates to."""

    derivations: list[Derivation] = []
    related_cases: list[CaseRef] = []


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
    headline: str = Field(description="The answer in one sentence (for a sweep or what-if, its first point).")
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
