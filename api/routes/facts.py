"""Fact resources: hardware, links, models, frameworks, prices, sources — lists with filters and gets."""
from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from api import schemas as S
from api.deps import get_store
from api.queries import (
    FrameworkQuery,
    HardwareQuery,
    LinkQuery,
    ModelQuery,
    PriceQuery,
    SourceQuery,
)
from api.responses import FastJSONResponse
from api.problems import problem
from api.price_marks import mark_prices
from api.routes.common import NotFound, page
from calculators.domain import AmbiguousModelId, hardware_kind, resolve_model_id
from calculators.framework import UnknownId
from knowledge.store import Store

router = APIRouter(tags=["facts"])
Id = Annotated[str, Path(min_length=1, max_length=200, description="Record id (lowercase slug).")]


def _get(store: Store, kind: str, ident: str, endpoint: str) -> dict:
    rec = store.get(kind, ident)
    if rec is None:
        raise NotFound(kind, ident, endpoint)
    return FastJSONResponse(rec)


@router.get("/hardware", response_model=S.Page[S.Hardware], summary="List accelerators and systems",
            description="Accelerators and systems with memory, bandwidth, power and per-precision peak rates; "
                        "every number carries its source and locator. Filter by vendor, architecture, scope or kind "
                        "(data-centre-gpu, accelerator, laptop-desktop, rack-system; an unknown kind is a 422); `q` "
                        "matches the name. Every record says its `kind`.")
def list_hardware(request: Request, query: Annotated[HardwareQuery, Query()],
                  store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/hardware/{hardware_id}", response_model=S.Hardware, summary="Get one accelerator or system",
            description="One device with the source and locator of every number. Unknown ids answer 404.")
def get_hardware(hardware_id: Id, store: Store = Depends(get_store)):
    rec = store.get("hardware", hardware_id)
    if rec is None:
        raise NotFound("hardware", hardware_id, "/api/v1/hardware")
    return FastJSONResponse({**rec, "kind": hardware_kind(rec)})


@router.get("/links", response_model=S.Page[S.Link], summary="List interconnects",
            description="NVLink, PCIe, InfiniBand, Ethernet links with one-way bandwidth and the direction "
                        "convention of the published number.")
def list_links(request: Request, query: Annotated[LinkQuery, Query()],
               store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/links/{link_id}", response_model=S.Link, summary="Get one interconnect",
            description="One link with its one-way bandwidth (SI bytes/s), the direction convention of the published number, and sources. Unknown ids answer 404.")
def get_link(link_id: Id, store: Store = Depends(get_store)):
    return _get(store, "link", link_id, "/api/v1/links")


@router.get("/models", response_model=S.Page[S.Model], summary="List model architectures",
            description="Model architectures with layers, heads, KV heads, MoE and attention layout (layer groups "
                        "and cache streams), each number sourced to the published config or report.")
def list_models(request: Request, query: Annotated[ModelQuery, Query()],
                store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


ModelName = Annotated[str, Path(min_length=1, max_length=200, description="Model id, or a name it resolves from: "
                                 "case-insensitive, or a Hugging Face model name (Llama-3.1-8B-Instruct), with or "
                                 "without -Instruct.")]
RepoOwner = Annotated[str, Path(min_length=1, max_length=100, description="Owner of a Hugging Face repository "
                                "(meta-llama).")]

_GET_MODEL = ("One model: every shape number with its source (published config or report) and locator, MoE and MLA "
              "details, and the attention layer groups the kv-cache calculator uses. A name that is not an id is "
              "resolved as calculators resolve `model` (case-insensitive, Hugging Face repository, with or without "
              "-Instruct): the record is answered with `Content-Location` naming its id. A name that reads as several "
              "models answers 422 listing them; unknown names answer 404.")


@router.get("/models/{model_id}", response_model=S.Model, summary="Get one model architecture", description=_GET_MODEL)
def get_model(model_id: ModelName, store: Store = Depends(get_store)):
    return _model(store, model_id)


@router.get("/models/{owner}/{model_id}", response_model=S.Model, summary="Get one model by its Hugging Face repository",
            description="The model a Hugging Face repository name (owner/name, e.g. meta-llama/Llama-3.1-8B-Instruct) "
                        "resolves to; otherwise as get_model.")
def get_model_by_repository(owner: RepoOwner, model_id: ModelName, store: Store = Depends(get_store)):
    return _model(store, f"{owner}/{model_id}")


def _model(store: Store, model_id: str):
    if store.get("model", model_id) is not None:
        return _get(store, "model", model_id, "/api/v1/models")
    try:
        mid, _ = resolve_model_id(store.lookup, model_id, "model_id")
    except AmbiguousModelId as exc:
        return problem(422, "Ambiguous model name", exc.message, kind="validation",
                       errors=[{"field": "model_id", "in": "path", "message": exc.message, "type": "ambiguous_id",
                                "suggestions": exc.candidates}],
                       candidates=exc.candidates, see="/api/v1/models")
    except UnknownId:
        raise NotFound("model", model_id, "/api/v1/models") from None
    return FastJSONResponse(store.get("model", mid), headers={"Content-Location": f"/api/v1/models/{mid}"})


@router.get("/frameworks", response_model=S.Page[S.Framework], summary="List inference and training frameworks",
            description="Frameworks with dated feature rows (version or date each feature landed) and sources.")
def list_frameworks(request: Request, query: Annotated[FrameworkQuery, Query()],
                    store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/frameworks/{framework_id}", response_model=S.Framework, summary="Get one framework",
            description="One framework with its dated feature rows, each with a source and locator. Unknown ids answer 404.")
def get_framework(framework_id: Id, store: Store = Depends(get_store)):
    return _get(store, "framework", framework_id, "/api/v1/frameworks")


@router.get("/prices", response_model=S.Page[S.PriceMarked], summary="List dated price points",
            description="USD per million tokens (input, cache read, cache write, output) and USD per GPU-hour, each "
                        "dated, with its region, and sourced; each marked with its `age_months`, whether it is "
                        "`stale` (over 12 months old) and, for GPU-hour offers, `default_for_device` (the price the "
                        "calculators default to for that hardware).")
def list_prices(request: Request, query: Annotated[PriceQuery, Query()],
                store: Store = Depends(get_store)) -> FastJSONResponse:
    result = query.run(store)
    return page(request, replace(result, items=mark_prices(store, result.items)))


@router.get("/prices/{price_id}", response_model=S.PriceMarked, summary="Get one price point",
            description="One dated price point (USD per million tokens or per GPU-hour) with its source and the marks "
                        "of the list (`age_months`, `stale`, `default_for_device`). Unknown ids answer 404.")
def get_price(price_id: Id, store: Store = Depends(get_store)):
    rec = store.get("price", price_id)
    if rec is None:
        raise NotFound("price", price_id, "/api/v1/prices")
    return FastJSONResponse(mark_prices(store, [rec])[0])


@router.get("/sources", response_model=S.Page[S.Source], summary="List sources",
            description="Every document a fact cites: URL, title, publisher, date.")
def list_sources(request: Request, query: Annotated[SourceQuery, Query()],
                 store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/sources/{source_id}", response_model=S.Source, summary="Get one source and the facts citing it",
            description="A source document (URL, title, publisher, date) and every stored fact that cites it, with field and locator.")
def get_source(source_id: Id, store: Store = Depends(get_store)):
    src = store.get("source", source_id)
    if src is None:
        raise NotFound("source", source_id, "/api/v1/sources")
    return FastJSONResponse({**src, "facts": store.facts_from_source(source_id)})
