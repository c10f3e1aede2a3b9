"""Records about the book and the ecosystem: frameworks, cases, derivations, glossary, audited claims."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from knowledge.records.base import (Calculator, Commit, Label, Problems, Record, Slug, SourceId, Text, listed, ref,
                                    refs, refuse)
from knowledge.records.facts import Provenance


# ---------------------------------------------------------------------------- frameworks

class Feature(BaseModel):
    """A dated feature row of a framework: when it landed and where that is written."""

    model_config = ConfigDict(extra="allow")
    feature: Text
    name: Optional[str] = None
    since: Optional[Label] = None
    date: Optional[Label] = None
    source: SourceId
    locator: Optional[str] = None
    note: Optional[str] = None
    source_url: Optional[str] = Field(None, description="Filled in by the build from the source.")

    @model_validator(mode="before")
    @classmethod
    def _sourced(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("source"):
            raise refuse(("source", "feature row has no source"))
        return data


class Framework(Record):
    """An inference, training or communication framework with dated feature rows."""

    id: Slug
    name: Text
    kind: Literal["inference-engine", "training", "communication", "kernel-library", "runtime", "orchestration"]
    url: Optional[str] = None
    license: Optional[str] = None
    summary: Optional[str] = None
    strengths: Optional[str] = None
    best_for: Optional[str] = None
    strengths_source: Optional[Provenance] = None
    see_also: refs("source") = []
    features: list[Feature] = []


# ---------------------------------------------------------------------------- cases and derivations

class Uses(BaseModel):
    """The facts a case uses, by kind."""

    model_config = ConfigDict(extra="forbid")
    models: refs("model") = []
    hardware: refs("hardware") = []
    links: refs("link") = []
    frameworks: refs("framework") = []

    @model_validator(mode="before")
    @classmethod
    def _kinds(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                raise refuse(*((str(k), "unknown kind of fact") for k in unknown))
        return data


class Case(Record):
    """A case study of the book, as listed in its index."""

    key: ClassVar[str] = "slug"
    slug: Slug
    title_zh: Text
    title_en: Text
    section: Text
    section_en: Optional[str] = None
    section_order: Optional[int] = None
    cited_chapters: list[int] = []
    summary: Text
    summary_zh: Optional[Annotated[Text, Field(pattern=r"[\u3400-\u9fff]")]] = Field(
        None, description="The summary in Chinese (our own words, 1–3 sentences), for readers and Chinese search.")
    source_commit: Optional[Commit] = None
    source_url: Text
    related: refs("case") = []
    uses: Annotated[Uses, BeforeValidator(lambda v: {} if v is None else v)] = Uses()
    tags: list[str] = []


class Check(BaseModel):
    """A printed number of the book against the expected output, at the book's rounding."""

    model_config = ConfigDict(extra="allow")
    path: Text
    printed: float
    scale: float = 1
    decimals: Optional[int] = None
    rel: Optional[float] = None
    printed_key: Optional[str] = Field(None, description="The `printed` entry this check reads (default: the only "
                                       "entry whose text holds this number).")
    coarse: Optional[str] = Field(None, description="Why a tolerance wider than 5 % of the printed value is right "
                                  "(the book rounds coarser than that and our exact value differs by more).")


class Derivation(Record):
    """A worked example of a case, optionally recomputed by a calculator."""

    id: str = Field(description="`<case>/<name>`")
    case: ref("case")
    name: Text
    family: Text
    title: Text
    formula: Optional[str] = None
    inputs: dict[str, Any] = {}
    printed: dict[str, Any] = {}
    calculator: Optional[Calculator] = None
    request: Optional[dict[str, Any]] = None
    expected: Optional[dict[str, Any]] = None
    checks: Optional[list[Check]] = None
    note: Optional[str] = None
    unbound_reason: Optional[str] = Field(None, description="Why no calculator recomputes this example (unbound only).")
    unchecked: dict[str, str] = Field({}, description="`printed` entries of a bound example that no check reads, "
                                      "each with the reason (a label, a quoted measurement, a number with no output).")

    @model_validator(mode="after")
    def _bound(self) -> "Derivation":
        problems: Problems = []
        if self.calculator is not None:
            if self.request is None:
                problems.append(("request", "a bound derivation needs a request body"))
            if not self.expected:
                problems.append(("expected", "a bound derivation needs expected outputs"))
        if problems:
            raise refuse(*problems)
        return self


# ---------------------------------------------------------------------------- glossary and claims

class Glossary(Record):
    """A method or term, with the paper that introduced it."""

    id: Slug
    term: Text
    term_zh: Optional[str] = None
    kind: Literal["kv-eviction", "speculative-decoding", "caching", "batching", "parallelism"]
    definition: Text
    aliases: list[str] = []
    paper: SourceId
    also_papers: refs("source") = []
    related_calculators: list[Calculator] = []
    seen_in: Optional[SourceId] = None


class ClaimAlternative(BaseModel):
    """Another reading of a claim, recomputed the same way."""

    model_config = ConfigDict(extra="allow")
    label: Text
    calculator: Calculator
    request: dict[str, Any]
    expected: dict[str, Any]


class Claim(Record):
    """An audited numeric claim of a source, recomputed by a calculator."""

    id: Slug
    topic: Text
    claim_en: Text
    claim_zh: Optional[str] = None
    page_value: Optional[Label] = None
    source: SourceId
    locator: Optional[str] = None
    calculator: Calculator
    request: dict[str, Any]
    expected: dict[str, Any]
    alternatives: listed(ClaimAlternative) = []
    recomputed: Optional[str] = None
    assumptions: list[str] = []
    verdict: Literal["holds", "holds-if", "off"]
    off_by: Optional[float] = Field(None, gt=1, description="Only with verdict off: larger / smaller.")
    explanation: Optional[str] = None

    @model_validator(mode="after")
    def _off_by(self) -> "Claim":
        if (self.verdict == "off") != (self.off_by is not None):
            raise refuse(("off_by", "off_by is given exactly when the verdict is off"))
        return self
