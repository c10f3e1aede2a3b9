"""Calculator pages: the list, and one calculator computing the request in its URL, with the
explanation, the facts it took from the store, and charts of its sweeps."""
from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from starlette.responses import HTMLResponse, Response

from api.markdown import render_markdown
from api.problems import ProblemResponse
from api.responses import FastJSONResponse
from api.routes.common import NotFound
from api.service import CalculationFailed, calculate, case_refs
from calculators.framework import jsonable
from api.site import charts, planner
from api.site.format import flatten_outputs, pretty_json
from api.site.forms import (
    Spec,
    field_schema,
    field_specs,
    field_text,
    request_from_query,
)
from api.site.render import page_router, render, store_of
from api.urls import urls
from calculators.framework.registry import REGISTRY, Calculator
from knowledge.store import Store

log = logging.getLogger("casebook.site")

router = page_router()

#: the page sections a calculator may ask for (its entry's `page_section`): a module with `read_view`, `section`,
#: `visible_outputs`
SECTIONS = {"planner": planner}


def _previews(calc: Calculator, body: dict, store: Store, specs: list[Spec]) -> list[dict[str, Any]]:
    """Sweeps around a request that does not sweep, one chart per derived request (a line per
    compared value when the calculator's entry names one in `compare`)."""
    out = []
    values: list = [None]
    compare = calc.compare
    if compare and calc.chart.kind == "line" and compare[0] in {s["name"] for s in specs}:
        current = body.get(compare[0])
        values = list(dict.fromkeys(([current] if isinstance(current, str) else []) + list(compare[1])))
    for caption, derived, current in charts.derived_bodies(calc.chart, body, field_schema(calc, specs, calc.chart.x)):
        merged, url = None, None
        for v in values:
            b = derived if v is None else {**derived, compare[0]: v}
            try:
                env = jsonable(calculate(calc.name, b, store))   # the page reads plain values
            except CalculationFailed:
                continue
            d = charts.extract(calc.chart, b, env["outputs"], title=calc.title, highlight=current)
            if d is None:
                continue
            if v is not None:
                for s in d.series:
                    s.name = str(v) if len(d.series) == 1 else f"{s.name} ({v})"
            if merged is None:
                merged, url = d, urls.calculator(calc.name, b)
            else:
                merged.series.extend(d.series)
        if merged is not None:
            if len(values) > 1:
                caption += f"; one line per {compare[0]}"
            out.append({"data": merged, "caption": caption, "url": url})
    return out


def result_charts(calc: Calculator, body: dict, envelope: dict, store: Store, specs: list[Spec]) -> list[dict[str, Any]]:
    """Charts of this result: its variants side by side, its own sweep, or sweeps around it (previews)."""
    if calc.chart is None:
        return []
    out = []
    try:
        variants = charts.extract_variants(calc.chart, envelope["outputs"], title=calc.title)
        if variants:
            out.append({"data": variants, "caption": "your request and its variants, part by part", "url": None})
        data = charts.extract(calc.chart, body, envelope["outputs"], title=calc.title)
        if data:
            out.append({"data": data, "caption": "the sweep of your request", "url": None})
            return out
        out.extend(_previews(calc, body, store, specs))
    except Exception:  # a chart must never take the page down: log it and show the numbers without it
        log.exception("chart of %s failed", calc.name)
    return out


def _own_section(own, name: str, body: dict, envelope: dict, view) -> dict[str, Any] | None:
    """The calculator's own section (None without one, or when it fails: the page then lists every output)."""
    if own is None:
        return None
    try:
        return own.section(name, body, envelope, view)
    except Exception:
        log.exception("the section of %s failed", name)
        return None


def _outputs(own, envelope: dict | None, extra: dict | None) -> list[dict[str, Any]]:
    """Rows of the generic result table, without the outputs the calculator's own section shows."""
    if envelope is None:
        return []
    return flatten_outputs(own.visible_outputs(envelope["outputs"]) if own and extra else envelope["outputs"])


@router.get("/calculators", response_class=HTMLResponse)
def calculators_page(request: Request) -> HTMLResponse:
    """Every registered calculator with its summary, sweepable fields and cases."""
    store = store_of(request)
    calcs = [{"calc": c, "cases": case_refs(store, c.cases), "url": urls.calculator(c.name)} for c in REGISTRY.values()]
    return render(request, "calculators.html.j2", title="Calculators", twin=urls.api_list("calculator"), calcs=calcs)


def _twin(calc: Calculator, body: dict | None, problem: dict | None, fmt: str, store: Store) -> Response:
    """The page's question answered as data: the calculator envelope as JSON (`_format=json`) or Markdown (`md`), or
    the problem that stopped it, as the API answers the same body."""
    if problem is None:
        try:
            envelope = calculate(calc.name, body, store)
        except CalculationFailed as exc:
            problem, headers = exc.body, exc.headers
        else:
            if fmt == "md":
                return Response(render_markdown(envelope, calc), media_type="text/markdown; charset=utf-8")
            return FastJSONResponse(envelope)
    else:
        headers = {}
    return ProblemResponse(problem, status_code=problem.get("status", 422), headers=headers)


@router.get("/calculators/{name}", response_class=HTMLResponse)
def calculator_page(request: Request, name: str) -> HTMLResponse:
    """One calculator computing the request in the URL (its worked example when none is given)."""
    store = store_of(request)
    calc = REGISTRY.get(name)
    if calc is None:
        raise NotFound("calculator", name, urls.api_list("calculator"))
    specs = field_specs(calc)
    body, given, problem = request_from_query(request.query_params, calc, specs)
    twin_format = request.query_params.get("_format")
    if twin_format in ("json", "md"):
        return _twin(calc, body, problem, twin_format, store)
    own = SECTIONS.get(calc.page_section) if calc.page_section else None
    view, view_problem = own.read_view(request.query_params) if own else (None, None)
    if view_problem is not None:
        problem = view_problem if problem is None else {**problem, "errors": problem.get("errors", []) + view_problem["errors"]}
    envelope, status, chart_list, extra, headers = None, 200, [], None, {}
    if problem is None:
        try:   # the runner's work limits (413) and the calculation pool (503 + Retry-After) apply as on the API
            envelope = jsonable(calculate(name, body, store))   # the page reads plain values
        except CalculationFailed as exc:
            problem, status, headers = exc.body, exc.status, exc.headers
        else:
            chart_list = result_charts(calc, body, envelope, store, specs)
            extra = _own_section(own, name, body, envelope, view)
    if problem is not None:
        status = problem.get("status", 422) if status == 200 else status
    values = {s["name"]: field_text((body or {}).get(s["name"]), s["widget"]) for s in specs}
    # the permalink carries the body as given (it computed); the envelope's own URL drops defaults
    permalink = urls.calculator(name, body) if envelope is not None else None
    body_text = pretty_json(body) if body is not None else request.query_params.get("body", "")
    twin = urls.calculator(name, body, format="json") if envelope is not None else urls.api_item("calculator", name)
    page = render(request, "calculator.html.j2", title=calc.title, twin=twin, status=status,
                  calc=calc, specs=specs, values=values, body=body, body_text=body_text, given=given, e=envelope,
                  problem=problem, outputs=_outputs(own, envelope, extra), charts=chart_list, extra=extra,
                  cases=case_refs(store, calc.cases), permalink=permalink, example_url=urls.calculator(name, calc.example),
                  derivations=[d for d in store.all("derivation") if d.get("calculator") == name],
                  sources=[s["source"] for s in (envelope or {}).get("inputs", {}).get("sources", []) if s.get("source")])
    page.headers.update(headers)
    return page
