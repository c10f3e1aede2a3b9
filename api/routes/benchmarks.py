"""Published end-to-end serving measurements ("what did anyone measure for X on Y?"): a list with filters and one point."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from api import schemas as S
from api.deps import get_store
from api.queries import BenchmarkQuery
from api.responses import FastJSONResponse
from api.routes.common import NotFound, page
from knowledge.store import Store

router = APIRouter(tags=["benchmarks"])
Id = Annotated[str, Path(min_length=1, max_length=200, description="Benchmark point id (lowercase slug).")]


@router.get("/benchmarks", response_model=S.Page[S.Benchmark], summary="List published serving measurements",
            description="End-to-end serving results as published (MLPerf Inference, InferenceX, vendor and framework "
                        "pages): the full configuration (model, hardware and count, framework and version, precisions, "
                        "TP/PP/EP/DP, ISL/OSL, dataset), the load (concurrency, rate, offline or server scenario) and "
                        "the figures in SI units (`ttft_s`, `tpot_s` in seconds; tokens/s), each point with its source, "
                        "url, locator and date. `model` takes a store id or the Hugging Face name, `hardware` a store id "
                        "or the published accelerator name (case-insensitive). Ordered by model and hardware.")
def list_benchmarks(request: Request, query: Annotated[BenchmarkQuery, Query()],
                    store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/benchmarks/{benchmark_id}", response_model=S.Benchmark, summary="Get one published serving measurement",
            description="One point: configuration, load, figures (SI), the raw text as published, source, url and "
                        "locator. Unknown ids answer 404 with the closest ids.")
def get_benchmark(benchmark_id: Id, store: Store = Depends(get_store)):
    rec = store.get("benchmark", benchmark_id)
    if rec is None:
        raise NotFound("benchmark", benchmark_id, "/api/v1/benchmarks")
    return FastJSONResponse(rec)
