"""Fact resources: hardware, links, models, frameworks, prices, sources — lists with filters and gets."""
from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Path, Query, Request

from api import schemas as S
from api.deps import get_store
from api.responses import FastJSONResponse
from api.routes.common import Descending, Limit, NotFound, Offset, page
from knowledge.store import Store

router = APIRouter(tags=["facts"])
Id = Annotated[str, Path(min_length=1, max_length=200, description="Record id (lowercase slug).")]


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


def _get(store: Store, kind: str, ident: str, endpoint: str) -> dict:
    rec = store.get(kind, ident)
    if rec is None:
        raise NotFound(kind, ident, endpoint)
    return FastJSONResponse(rec)


@router.get("/hardware", response_model=S.Page[S.Hardware], summary="List accelerators and systems",
            description="Accelerators and systems with memory, bandwidth, power and per-precision peak rates; "
                        "every number carries its source and locator. Filter by vendor, architecture or scope; "
                        "`q` matches the name.")
def list_hardware(request: Request, store: Store = Depends(get_store),
                  vendor: Annotated[Optional[str], Query(max_length=100, description="e.g. NVIDIA, AMD, Huawei, Google, Apple")] = None,
                  architecture: Annotated[Optional[str], Query(max_length=100, description="e.g. Hopper, Blackwell")] = None,
                  scope: Annotated[Optional[str], Query(max_length=100, description="single_device or system_aggregate")] = None,
                  q: Annotated[Optional[str], Query(max_length=200, description="Substring of the name.")] = None,
                  sort: Optional[HardwareSort] = None, desc: Descending = False,
                  limit: Limit = 50, offset: Offset = 0):
    res = store.list("hardware", {"vendor": vendor, "architecture": architecture, "scope": scope}, limit, offset,
                     sort.value if sort else None, desc, contains={"name": q} if q else None)
    return page(request, res)


@router.get("/hardware/{hardware_id}", response_model=S.Hardware, summary="Get one accelerator or system",
            description="One device with the source and locator of every number. Unknown ids answer 404.")
def get_hardware(hardware_id: Id, store: Store = Depends(get_store)):
    return _get(store, "hardware", hardware_id, "/api/v1/hardware")


@router.get("/links", response_model=S.Page[S.Link], summary="List interconnects",
            description="NVLink, PCIe, InfiniBand, Ethernet links with one-way bandwidth and the direction "
                        "convention of the published number.")
def list_links(request: Request, store: Store = Depends(get_store),
               kind: Annotated[Optional[str], Query(max_length=100, description="nvlink, pcie, infiniband, ethernet")] = None,
               limit: Limit = 50, offset: Offset = 0):
    return page(request, store.list("link", {"kind": kind}, limit, offset))


@router.get("/links/{link_id}", response_model=S.Link, summary="Get one interconnect",
            description="One link with its one-way bandwidth (SI bytes/s), the direction convention of the published number, and sources. Unknown ids answer 404.")
def get_link(link_id: Id, store: Store = Depends(get_store)):
    return _get(store, "link", link_id, "/api/v1/links")


@router.get("/models", response_model=S.Page[S.Model], summary="List model architectures",
            description="Model architectures with layers, heads, KV heads, MoE and attention layout (layer groups "
                        "and cache streams), each number sourced to the published config or report.")
def list_models(request: Request, store: Store = Depends(get_store),
                family: Annotated[Optional[str], Query(max_length=100, description="e.g. qwen, deepseek, llama")] = None,
                kind: Annotated[Optional[str], Query(max_length=100, description="dense or moe")] = None,
                attention: Annotated[Optional[str], Query(max_length=100, description="e.g. gqa, mla")] = None,
                q: Annotated[Optional[str], Query(max_length=200, description="Substring of the name.")] = None,
                sort: Optional[ModelSort] = None, desc: Descending = False,
                limit: Limit = 50, offset: Offset = 0):
    res = store.list("model", {"family": family, "kind": kind, "attention": attention}, limit, offset,
                     sort.value if sort else None, desc, contains={"name": q} if q else None)
    return page(request, res)


@router.get("/models/{model_id}", response_model=S.Model, summary="Get one model architecture",
            description="One model: every shape number with its source (published config or report) and locator, MoE and MLA details, and the attention layer groups the kv-cache calculator uses. Unknown ids answer 404.")
def get_model(model_id: Id, store: Store = Depends(get_store)):
    return _get(store, "model", model_id, "/api/v1/models")


@router.get("/frameworks", response_model=S.Page[S.Framework], summary="List inference and training frameworks",
            description="Frameworks with dated feature rows (version or date each feature landed) and sources.")
def list_frameworks(request: Request, store: Store = Depends(get_store),
                    kind: Annotated[Optional[str], Query(max_length=100)] = None,
                    limit: Limit = 50, offset: Offset = 0):
    return page(request, store.list("framework", {"kind": kind}, limit, offset))


@router.get("/frameworks/{framework_id}", response_model=S.Framework, summary="Get one framework",
            description="One framework with its dated feature rows, each with a source and locator. Unknown ids answer 404.")
def get_framework(framework_id: Id, store: Store = Depends(get_store)):
    return _get(store, "framework", framework_id, "/api/v1/frameworks")


@router.get("/prices", response_model=S.Page[S.Price], summary="List dated price points",
            description="USD per million tokens (input, cache read, cache write, output), each dated and sourced.")
def list_prices(request: Request, store: Store = Depends(get_store),
                provider: Annotated[Optional[str], Query(max_length=100)] = None,
                limit: Limit = 50, offset: Offset = 0):
    return page(request, store.list("price", {"provider": provider}, limit, offset))


@router.get("/prices/{price_id}", response_model=S.Price, summary="Get one price point",
            description="One dated price point in USD per million tokens, with its source. Unknown ids answer 404.")
def get_price(price_id: Id, store: Store = Depends(get_store)):
    return _get(store, "price", price_id, "/api/v1/prices")


@router.get("/sources", response_model=S.Page[S.Source], summary="List sources",
            description="Every document a fact cites: URL, title, publisher, date.")
def list_sources(request: Request, store: Store = Depends(get_store),
                 kind: Annotated[Optional[str], Query(max_length=100, description="datasheet, paper, model-config …")] = None,
                 publisher: Annotated[Optional[str], Query(max_length=200)] = None,
                 limit: Limit = 50, offset: Offset = 0):
    return page(request, store.list("source", {"kind": kind, "publisher": publisher}, limit, offset))


@router.get("/sources/{source_id}", response_model=S.Source, summary="Get one source and the facts citing it",
            description="A source document (URL, title, publisher, date) and every stored fact that cites it, with field and locator.")
def get_source(source_id: Id, store: Store = Depends(get_store)):
    src = store.get("source", source_id)
    if src is None:
        raise NotFound("source", source_id, "/api/v1/sources")
    return FastJSONResponse({**src, "facts": store.facts_from_source(source_id)})
