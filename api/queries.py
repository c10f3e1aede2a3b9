"""The list queries: one parser for limit, offset, sort and filters, shared by the JSON list routes
and the site's list pages.

Each list is a Pydantic model declared as FastAPI query parameters (`Annotated[HardwareQuery, Query()]`)
on both the `/api/v1/...` route and its HTML page, and `query.run(store)` answers both, so a page and
its JSON twin give the same items for the same query string. Blank parameters (an empty form field,
`?vendor=`) mean "not given", and text is trimmed, so a submitted filter form and a hand-written URL agree.
"""
from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calculators.domain import HARDWARE_KINDS, hardware_kind
from knowledge.store import Page, Store

Limit = Annotated[int, Field(ge=1, le=1000, description="Items per page (1–1000).")]
Offset = Annotated[int, Field(ge=0, le=1_000_000, description="Items to skip.")]


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


class ListQuery(BaseModel):
    """What every list shares; subclasses declare their filters, then `limit` and `offset`, and name the
    store columns the filters map to."""

    model_config = ConfigDict(extra="ignore")

    #: the record kind listed
    kind_listed: ClassVar[str] = ""
    #: filter field -> store column matched exactly (text case-insensitively); unlisted fields are not filters
    exact: ClassVar[dict[str, str]] = {}
    #: filter field -> store column matched as a substring
    substring: ClassVar[dict[str, str]] = {}

    if TYPE_CHECKING:  # every list declares these last, so they follow its filters in the OpenAPI document
        limit: int
        offset: int

    @model_validator(mode="before")
    @classmethod
    def _drop_blanks(cls, data: Any) -> Any:
        """Trim text and drop blank values (lists lose their blank elements) so that defaults apply."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, list):
                value = [v.strip() if isinstance(v, str) else v for v in value if not _blank(v)]
                if not value:
                    continue
            elif _blank(value):
                continue
            elif isinstance(value, str):
                value = value.strip()
            out[key] = value
        return out

    def where(self) -> dict[str, Any]:
        """Exact-match filters for `Store.list` (unset ones are None, which the store skips)."""
        return {column: getattr(self, name) for name, column in self.exact.items()}

    def contains(self) -> dict[str, str]:
        """Substring filters for `Store.list`."""
        return {column: getattr(self, name) for name, column in self.substring.items() if getattr(self, name)}

    def sort_column(self) -> tuple[str | None, bool]:
        """(column, descending) of the requested order; lists without `sort` keep the store's order."""
        sort = getattr(self, "sort", None)
        return (sort.value if isinstance(sort, Enum) else sort), bool(getattr(self, "desc", False))

    def run(self, store: Store) -> Page:
        """The page of records this query asks for."""
        sort, desc = self.sort_column()
        return store.list(self.kind_listed, self.where(), self.limit, self.offset, sort, desc,
                          contains=self.contains() or None)

    def filters(self) -> dict[str, Any]:
        """The filter values as a page shows them in its form ('' when unset)."""
        names = [*self.exact, *self.substring]
        return {n: ("" if getattr(self, n) is None else getattr(self, n)) for n in names}


Text = Annotated[str | None, Field(max_length=100)]
NameContains = Annotated[str | None, Field(max_length=200, description="Substring of the name.")]
Descending = Annotated[bool, Field(description="Sort descending.")]


# --------------------------------------------------------------------------- facts

class HardwareSort(str, Enum):
    name = "name"
    vendor = "vendor"
    memory_bytes = "memory_bytes"
    memory_bandwidth_bytes_per_s = "memory_bandwidth_bytes_per_s"
    power_w = "power_w"


class ModelSort(str, Enum):
    name = "name"
    family = "family"
    layers = "layers"
    hidden_size = "hidden_size"
    params_total = "params_total"
    params_active = "params_active"


#: the kinds a hardware list filters by (calculators.domain.HARDWARE_KINDS), as an enum so that an unknown one is a
#: 422 naming `kind`
HardwareKind = Enum("HardwareKind", {k.replace("-", "_"): k for k in HARDWARE_KINDS}, type=str)


class HardwareQuery(ListQuery):
    kind_listed: ClassVar[str] = "hardware"
    exact: ClassVar[dict[str, str]] = {"vendor": "vendor", "architecture": "architecture", "scope": "scope"}
    substring: ClassVar[dict[str, str]] = {"q": "name"}

    vendor: Text = Field(None, description="e.g. NVIDIA, AMD, Huawei, Google, Apple")
    architecture: Text = Field(None, description="e.g. Hopper, Blackwell")
    scope: Text = Field(None, description="device, node, rack or pod")
    kind: HardwareKind | None = Field(None, description="data-centre-gpu, accelerator (TPU, Trainium, Gaudi, Ascend "
                                      "NPU...), laptop-desktop (Apple M-series, GeForce, RTX workstation) or rack-system "
                                      "(racks, pods and other multi-device systems); every record's `kind` says which")
    q: NameContains = None
    sort: HardwareSort | None = None
    desc: Descending = False
    limit: Limit = 50
    offset: Offset = 0

    def run(self, store: Store) -> Page:
        """The page asked for, each record with its `kind`; the kind is derived (hardware_kind), not a store column,
        so a kind filter reads every record the other filters keep (a few hundred at most) and pages them here."""
        if self.kind is None:
            found = super().run(store)
        else:
            sort, desc = self.sort_column()
            every = store.list(self.kind_listed, self.where(), 1_000_000, 0, sort, desc, contains=self.contains() or None)
            kept = [h for h in every.items if hardware_kind(h) == self.kind.value]
            found = Page(kept[self.offset:self.offset + self.limit], len(kept), self.limit, self.offset)
        for h in found.items:
            h["kind"] = hardware_kind(h)
        return found

    def filters(self) -> dict[str, Any]:
        return {**super().filters(), "kind": "" if self.kind is None else self.kind.value}


class LinkQuery(ListQuery):
    kind_listed: ClassVar[str] = "link"
    exact: ClassVar[dict[str, str]] = {"kind": "kind"}

    kind: Text = Field(None, description="nvlink, pcie, infiniband, ethernet")
    limit: Limit = 50
    offset: Offset = 0


class ModelQuery(ListQuery):
    kind_listed: ClassVar[str] = "model"
    exact: ClassVar[dict[str, str]] = {"family": "family", "kind": "kind", "attention": "attention"}
    substring: ClassVar[dict[str, str]] = {"q": "name"}

    family: Text = Field(None, description="e.g. qwen, deepseek, llama")
    kind: Text = Field(None, description="dense or moe")
    attention: Text = Field(None, description="e.g. gqa, mla")
    q: NameContains = None
    sort: ModelSort | None = None
    desc: Descending = False
    limit: Limit = 50
    offset: Offset = 0


class FrameworkQuery(ListQuery):
    kind_listed: ClassVar[str] = "framework"
    exact: ClassVar[dict[str, str]] = {"kind": "kind"}

    kind: Text = None
    limit: Limit = 50
    offset: Offset = 0


class PriceQuery(ListQuery):
    kind_listed: ClassVar[str] = "price"
    exact: ClassVar[dict[str, str]] = {"provider": "provider"}

    provider: Text = None
    limit: Limit = 200   # every price on one page: sources link to their rows by anchor
    offset: Offset = 0


class SourceQuery(ListQuery):
    kind_listed: ClassVar[str] = "source"
    exact: ClassVar[dict[str, str]] = {"kind": "kind", "publisher": "publisher"}

    kind: Text = Field(None, description="datasheet, paper, model-config …")
    publisher: Annotated[str | None, Field(max_length=200)] = None
    limit: Limit = 50
    offset: Offset = 0


# --------------------------------------------------------------------------- cases and what hangs off them

class CaseQuery(ListQuery):
    kind_listed: ClassVar[str] = "case"
    exact: ClassVar[dict[str, str]] = {"section": "section_order"}
    substring: ClassVar[dict[str, str]] = {"q": "title_en"}

    chapter: Annotated[int | None, Field(ge=1, le=99, description="Cited by this chapter.")] = None
    section: Annotated[int | None, Field(ge=1, le=99, description="Index section (chapter group).")] = None
    q: Annotated[str | None, Field(max_length=200, description="Substring of the English title.")] = None
    limit: Limit = 100
    offset: Offset = 0

    def contains(self) -> dict[str, str]:
        """The title substring, and the chapter as an element of the stored `,2,8,` chapter list."""
        out = super().contains()
        if self.chapter is not None:
            out["chapters"] = f",{self.chapter},"
        return out

    def filters(self) -> dict[str, Any]:
        return {"chapter": self.chapter, "section": self.section, "q": self.q or ""}


class DerivationQuery(ListQuery):
    kind_listed: ClassVar[str] = "derivation"
    exact: ClassVar[dict[str, str]] = {"case": "case_slug", "family": "family", "calculator": "calculator",
                                       "bound": "bound"}

    case: Annotated[str | None, Field(max_length=200)] = None
    family: Text = None
    calculator: Text = None
    bound: bool | None = None
    limit: Limit = 100
    offset: Offset = 0


class GlossaryQuery(ListQuery):
    kind_listed: ClassVar[str] = "glossary"
    exact: ClassVar[dict[str, str]] = {"kind": "kind"}

    kind: Text = None
    limit: Limit = 100
    offset: Offset = 0


class ClaimQuery(ListQuery):
    kind_listed: ClassVar[str] = "claim"
    exact: ClassVar[dict[str, str]] = {"verdict": "verdict"}

    verdict: Text = None
    limit: Limit = 100
    offset: Offset = 0


# --------------------------------------------------------------------------- published benchmarks

class BenchmarkFrameworkName(str, Enum):
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"
    other = "other"


class BenchmarkSort(str, Enum):
    date = "date"
    devices = "devices"
    concurrency = "concurrency"
    ttft_median_s = "ttft_median_s"
    tpot_median_s = "tpot_median_s"
    tpot_mean_s = "tpot_mean_s"
    output_tokens_per_s = "output_tokens_per_s"
    output_tokens_per_s_per_device = "output_tokens_per_s_per_device"


Count = Annotated[int | None, Field(ge=1, le=10_000_000)]


class BenchmarkQuery(ListQuery):
    """Published serving measurements. `model` is a store model id or the Hugging Face name as published, `hardware`
    a store hardware id or the accelerator's published name (each case-insensitive); the rest match exactly."""

    kind_listed: ClassVar[str] = "benchmark"
    exact: ClassVar[dict[str, str]] = {"model": "model", "hardware": "hardware", "framework": "framework",
                                       "source": "source", "weight_format": "weight_format", "devices": "devices",
                                       "input_tokens": "input_tokens", "output_tokens": "output_tokens",
                                       "concurrency": "concurrency"}
    #: filter -> (column when the value is a store id of `kind`, column otherwise, kind)
    either: ClassVar[dict[str, tuple[str, str, str]]] = {"model": ("model", "model_hf", "model"),
                                                         "hardware": ("hardware", "hardware_name", "hardware")}

    model: Annotated[str | None, Field(max_length=200, description="Store model id (e.g. deepseek-r1) or Hugging "
                                       "Face name as published (e.g. deepseek-ai/DeepSeek-R1-0528).")] = None
    hardware: Annotated[str | None, Field(max_length=200, description="Store hardware id (e.g. h200-sxm) or the "
                                          "accelerator's published name.")] = None
    framework: BenchmarkFrameworkName | None = None
    source: Annotated[str | None, Field(max_length=200, description="Source id, e.g. mlperf-inference-v5.1.")] = None
    weight_format: Text = Field(None, description="e.g. fp8, fp4, bf16")
    devices: Count = Field(None, description="Accelerators in total.")
    input_tokens: Count = Field(None, description="Mean input tokens per request.")
    output_tokens: Count = Field(None, description="Mean output tokens per request.")
    concurrency: Count = Field(None, description="Closed-loop concurrency (points with another kind of load have none).")
    sort: BenchmarkSort | None = None
    desc: Descending = False
    limit: Limit = 200
    offset: Offset = 0

    def where(self) -> dict[str, Any]:
        out = super().where()
        if self.framework is not None:
            out["framework"] = self.framework.value
        return out

    def resolved(self, store: Store) -> dict[str, Any]:
        """The exact filters with `model` and `hardware` read as a store id when they name one, else as the
        published name."""
        where = self.where()
        for name, (id_column, name_column, kind) in self.either.items():
            value = where.pop(name, None)
            if value is not None:
                column = id_column if value.lower() in store.records.get(kind, {}) else name_column
                where[column] = value
        return where

    def run(self, store: Store) -> Page:
        sort, desc = self.sort_column()
        return store.list(self.kind_listed, self.resolved(store), self.limit, self.offset, sort, desc)

    def filters(self) -> dict[str, Any]:
        out = super().filters()
        out["framework"] = self.framework.value if self.framework is not None else ""
        return out


# --------------------------------------------------------------------------- search

#: kinds of search results (no docstring: it would become the OpenAPI description of `Kind`)
class Kind(str, Enum):
    case = "case"
    model = "model"
    hardware = "hardware"
    link = "link"
    framework = "framework"
    derivation = "derivation"
    glossary = "glossary"
    claim = "claim"
    calculator = "calculator"


class SearchPageQuery(ListQuery):
    """A search as the site page takes it: without `q` the page shows the search form."""

    q: Annotated[str | None, Field(max_length=500, description="Words or Chinese text.")] = None
    kind: Annotated[list[Kind] | None, Field(description="Restrict to these kinds.")] = None
    limit: Limit = 20
    offset: Offset = 0

    def kinds(self) -> set[str] | None:
        return {k.value for k in self.kind} if self.kind else None

    def run_search(self, index: Any) -> tuple[list, int]:
        """(hits, total) from the search index; no hits without a query or an index."""
        if not self.q or index is None:
            return [], 0
        return index.search(self.q, self.kinds(), self.limit, self.offset)


class SearchQuery(SearchPageQuery):
    """A search as the JSON route takes it: `q` is required."""

    q: Annotated[str, Field(min_length=1, max_length=500, description="Words or Chinese text.")]


#: list kind -> its query model (the site and the tests look lists up by kind)
LIST_QUERIES: dict[str, type[ListQuery]] = {
    q.kind_listed: q for q in (HardwareQuery, LinkQuery, ModelQuery, FrameworkQuery, PriceQuery, SourceQuery,
                               CaseQuery, DerivationQuery, GlossaryQuery, ClaimQuery, BenchmarkQuery)
}
