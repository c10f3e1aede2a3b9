"""Published serving measurements: the list (filtered like /api/v1/benchmarks, grouped by model and hardware) and
one point (configuration, load, figures, the text as published, source with locator)."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse

from api.benchmark_text import framework_text, latency, load_text, split_text
from api.queries import BenchmarkFrameworkName, BenchmarkQuery, BenchmarkSort
from api.routes.common import NotFound
from api.site.render import distinct, page_router, pager, render, sort_links, store_of, twin
from api.urls import urls

router = page_router()

#: latencies shown, in this order, with their label
LATENCIES = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E latency"))
#: configuration fields of the detail page, in this order, with their label
CONFIGURATION = (("model_hf", "Model (as published)"), ("hardware_name", "Accelerator (as published)"),
                 ("devices", "Accelerators"), ("framework_version", "Framework version"),
                 ("weight_format", "Weights"), ("kv_format", "KV cache"), ("tp", "Tensor parallel"),
                 ("pp", "Pipeline parallel"), ("ep", "Expert parallel"), ("dp_attention", "DP attention"),
                 ("replicas", "Replicas"), ("input_tokens", "Input tokens (mean)"),
                 ("output_tokens", "Output tokens (mean)"), ("dataset", "Dataset"), ("date", "Date"))


def _groups(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive points of one model on one accelerator, as (label, store ids, points)."""
    out: list[dict[str, Any]] = []
    for p in items:
        key = (p.get("model_hf"), p.get("hardware_name"))
        if not out or out[-1]["key"] != key:
            out.append({"key": key, "model_hf": key[0], "hardware_name": key[1], "model": p.get("model"),
                        "hardware": p.get("hardware"), "points": []})
        out[-1]["points"].append(p)
    return out


def _row(p: dict[str, Any]) -> dict[str, Any]:
    m = p.get("measured") or {}
    name = p.get("framework_name") if p.get("framework") == "other" else p.get("framework")
    version = str(p.get("framework_version") or "").split(" ")[0]
    return {"point": p, "load": load_text(p), "framework_name": name, "version": version, "split": split_text(p),
            "ttft": latency(p, "ttft_s"), "tpot": latency(p, "tpot_s"),
            "per_device": m.get("output_tokens_per_s_per_device"), "total": m.get("output_tokens_per_s")}


@router.get("/benchmarks", response_class=HTMLResponse)
def benchmarks_page(request: Request, query: Annotated[BenchmarkQuery, Query()]) -> HTMLResponse:
    """Published serving measurements, filtered and sorted like /api/v1/benchmarks."""
    store = store_of(request)
    page = query.run(store)
    groups = _groups(page.items) if query.sort is None else [{"key": None, "points": page.items}]
    for g in groups:
        g["rows"] = [_row(p) for p in g["points"]]
    options = {"model": distinct(store, "benchmark", "model_hf"), "hardware": distinct(store, "benchmark", "hardware_name"),
               "framework": [f.value for f in BenchmarkFrameworkName], "source": distinct(store, "benchmark", "source"),
               "weight_format": distinct(store, "benchmark", "weight_format")}
    return render(request, "benchmarks.html.j2", title="Benchmarks", twin=twin(request), page=page, groups=groups,
                  pager=pager(request, page), sorts=sort_links(request, query, BenchmarkSort), filters=query.filters(),
                  options=options, sources=sorted({p["source"] for p in page.items}))


@router.get("/benchmarks/{benchmark_id}", response_class=HTMLResponse)
def benchmark_detail(request: Request, benchmark_id: str) -> HTMLResponse:
    """One published point: its configuration, load, figures in SI units, the text as published and its source."""
    store = store_of(request)
    p = store.get("benchmark", benchmark_id)
    if p is None:
        raise NotFound("benchmark", benchmark_id, urls.api_list("benchmark"))
    m = p.get("measured") or {}
    latencies = [(label, name, m[name]) for name, label in LATENCIES if isinstance(m.get(name), dict)]
    latencies += [(name, name, v) for name, v in m.items() if isinstance(v, dict) and name not in dict(LATENCIES)]
    rates = [(name, v) for name, v in m.items() if not isinstance(v, dict)]
    config = [(label, p.get(key)) for key, label in CONFIGURATION if key in p]
    src = store.get("source", p["source"]) or {}
    same = BenchmarkQuery(model=p.get("model") or p.get("model_hf"), hardware=p.get("hardware") or p.get("hardware_name"))
    return render(request, "benchmark.html.j2", title=p["id"], twin=urls.api_item("benchmark", benchmark_id), p=p,
                  load=load_text(p), framework=framework_text(p), split=split_text(p), config=config,
                  latencies=latencies, rates=rates, src=src, model=store.get("model", p.get("model") or ""),
                  hardware=store.get("hardware", p.get("hardware") or ""),
                  same_url=urls.benchmarks(**{k: v for k, v in same.filters().items() if v}),
                  sources=[p["source"]])
