"""Calculator endpoints: one POST route per registered calculator, the list, and batch.

Routes are generated from the registry so the OpenAPI document carries each calculator's own
request schema and an operationId equal to its Python-style name (`kv_cache`). Every calculation passes the
cost model of `calculators.framework.limits` before any work (413 over a limit) and a costly one runs in the bounded
pool of `api.service` (503 with Retry-After when it is full); a batch is also checked as a whole.
"""
import functools
import inspect
import warnings
from typing import Any

from fastapi import APIRouter, Body, Depends, Path, Request
from pydantic import Field, ValidationError, create_model
from pydantic.warnings import UnsupportedFieldAttributeWarning
from starlette.responses import Response

from api import schemas as S
from api.deps import get_store
from api.markdown import render_markdown, wants_markdown
from api.problems import MAX_DETAILED_FAILURES, ProblemResponse, brief_problem, problem_body
from api.requests import OrjsonRoute
from api.responses import FastJSONResponse
from api.routes.common import NotFound
from api.service import CalculationFailed, calculate, calculate_here, case_refs, in_pool
from calculators.framework import limits
from calculators.framework.registry import REGISTRY, Calculator
from knowledge.store import Store

router = APIRouter(tags=["calculators"], route_class=OrjsonRoute)

MARKDOWN_DOC = {"text/markdown": {"schema": {"type": "string"},
                                  "example": "# kv-cache\n\n| step | formula | … |"}}

#: the errors every calculation may answer for its size or the server's load (beside the app-wide ones)
LIMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"model": S.Problem, "description": "Request body over the size limit, or a calculation over a work limit: "
          "the problem names the `limit` ({name, env, value}), the request's `cost` (points, variants, series, "
          "point-evaluations, estimated CPU seconds, memory and answer bytes) and `advice` on how to split it."},
    503: {"model": S.Problem, "description": "Every calculation thread is busy and the queue is full: retry after "
          "the seconds in the `Retry-After` header. Also a calculation the guard stopped (`overrun`: past the CPU "
          "seconds one request may spend; `out-of-memory`: past the worker's memory cap).", "headers": {"Retry-After": {
              "description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}},
}


def _problem(exc: CalculationFailed) -> ProblemResponse:
    return ProblemResponse(exc.body, status_code=exc.status, headers=exc.headers or None)


@functools.lru_cache(maxsize=None)
def _schema_of(model: type) -> dict:
    """A request model's JSON schema, generated once (pydantic takes ~15 ms per call for the larger ones)."""
    return model.model_json_schema()


def _info(calc: Calculator, store: Store) -> dict:
    return {"name": calc.name, "title": calc.title, "family": calc.family, "summary": calc.summary,
            "description": calc.description or calc.summary, "endpoint": f"/api/v1/calculators/{calc.name}",
            "request_schema": _schema_of(calc.request_model), "example": calc.example,
            "sweepable": list(calc.sweepable), "cases": case_refs(store, calc.cases)}


@router.get("/calculators", response_model=list[S.CalculatorInfo], summary="List calculators",
            description="Every registered calculator: name, summary, JSON schema of its request, a full example "
                        "request and the cases that explain its method.")
def list_calculators(store: Store = Depends(get_store)):
    return [_info(c, store) for c in REGISTRY.values()]


@router.get("/calculators/{name}", response_model=S.CalculatorInfo, summary="Describe one calculator",
            description="One calculator: its summary, method, request JSON schema, an example request and the cases that explain it.")
def get_calculator(name: str = Path(max_length=100), store: Store = Depends(get_store)):
    calc = REGISTRY.get(name)
    if calc is None:
        raise NotFound("calculator", name, "/api/v1/calculators")
    return _info(calc, store)


@router.post("/calculators:batch", response_model=S.BatchResponse, summary="Run many calculator requests",
             description="Up to 1,000 calculator requests in one call, answered in order; each item succeeds or "
                         "fails on its own (`status` 200 with `response`, or 4xx with a `problem`; an item over a "
                         "work limit is a 413 item; past the first " + str(MAX_DETAILED_FAILURES) + " failed items, "
                         "a failed item's problem gives its title, status and `errors_count` only). The batch is one request for the limits: the costs of its "
                         "items are summed, and a batch over a limit is refused as a whole with 413.\n\n"
                         + limits.describe_limits(), responses=LIMIT_RESPONSES)
def run_batch(batch: S.BatchRequest, store: Store = Depends(get_store)) -> Response:
    items = [_prepared(item.calculator, item.request) for item in batch.requests]
    costs = [cost for _, cost in items if cost is not None]
    try:
        limits.check_total(costs)
    except limits.LimitExceeded as exc:
        return _problem(CalculationFailed(413, _too_large(exc)))
    cheap = sum(c.evaluations for c in costs) <= limits.limit("INLINE_EVALUATIONS")
    try:
        results = in_pool(_run_items, batch.requests, [body for body, _ in items], store, cheap=cheap)
    except CalculationFailed as exc:
        return _problem(exc)
    return FastJSONResponse({"results": results})


def _prepared(name: str, body: dict) -> tuple[Any, limits.Cost | None]:
    """An item validated (so that it is not validated twice) with its cost; the body as given and no cost when
    it is invalid or over a limit on its own (the runner then answers the item with its problem, without work)."""
    calc = REGISTRY.get(name)
    if calc is None:
        return body, None
    try:
        request = calc.request_model.model_validate(body)
        return request, limits.check(calc, request)
    except (ValidationError, limits.LimitExceeded, ValueError):
        return body, None


def _run_items(items: list[S.BatchItem], bodies: list[Any], store: Store) -> list[dict]:
    """Every item of a batch, one after the other on this thread. The first MAX_DETAILED_FAILURES failed items
    answer their full (bounded) problem, later ones `brief_problem`: title, status and how many errors. The items
    share one CPU guard (a batch is one request): when it stops an item, the batch is answered with its 503."""
    results, failed = [], 0
    with limits.guard():
        for item, body in zip(items, bodies):
            try:
                results.append({"status": 200, "response": calculate_here(item.calculator, body, store)})
            except CalculationFailed as exc:
                if exc.status == 503:
                    raise
                failed += 1      # past the first failures, an item's problem is brief: the answer stays bounded
                problem = exc.body if failed <= MAX_DETAILED_FAILURES else brief_problem(exc.body)
                results.append({"status": exc.status, "problem": problem})
    return results


def _too_large(exc: limits.LimitExceeded) -> dict:
    """The 413 problem of a batch over a limit as a whole."""
    body = problem_body(413, "Request too large", exc.message,
                        [{"field": "requests", "in": "body", "message": exc.message, "type": "limit_exceeded"}],
                        "too-large")
    body.update(exc.extensions)
    return body


#: FastAPI names a body parameter's FieldInfo with the alias "body"; pydantic, building a request model's validator at
#: its first request (the models defer their build: see CalcRequest), warns that an alias there has no effect. It has
#: none, as intended: the request body is the model itself.
warnings.filterwarnings("ignore", message="The 'alias' attribute with value 'body'", category=UnsupportedFieldAttributeWarning)


def _endpoint(calc: Calculator):
    def endpoint(request: Request, body: Any, store: Store = Depends(get_store)) -> Response:
        try:
            envelope = calculate(calc.name, body, store)
        except CalculationFailed as exc:
            return _problem(exc)
        if wants_markdown(request):
            return Response(render_markdown(envelope, calc), media_type="text/markdown; charset=utf-8")
        return FastJSONResponse(envelope)

    examples = {"example": {"summary": "Worked example", "value": calc.example}}
    for i, ex in enumerate(calc.extra_examples):
        examples[f"example{i + 2}"] = {"summary": f"Example {i + 2}", "value": ex}
    params = list(inspect.signature(endpoint).parameters.values())
    params[1] = params[1].replace(annotation=calc.request_model,
                                  default=Body(..., openapi_examples=examples, description=calc.request_model.__doc__))
    endpoint.__signature__ = inspect.Signature(params, return_annotation=Response)
    endpoint.__name__ = calc.operation_id
    endpoint.__doc__ = calc.description or calc.summary
    return endpoint


def envelope_model(calc: Calculator) -> type:
    """The envelope a calculator answers, with its typed `outputs` when it declares an outputs model (so
    the OpenAPI document and generated clients know every output), else the generic Envelope."""
    if calc.outputs_model is None:
        return S.Envelope
    stem = calc.outputs_model.__name__.removesuffix("Outputs") or calc.outputs_model.__name__
    return create_model(f"{stem}Envelope", __base__=S.Envelope, __doc__=f"What {calc.name} answers.",
                        outputs=(calc.outputs_model, Field(description="The numbers computed, typed.")))


for _calc in REGISTRY.values():
    router.add_api_route(
        f"/calculators/{_calc.name}", _endpoint(_calc), methods=["POST"], name=_calc.operation_id,
        response_model=envelope_model(_calc), summary=_calc.title, description=(_calc.description or _calc.summary) +
        "\n\nAnswers JSON (the calculator envelope) or, with `Accept: text/markdown`, the explanation as Markdown."
        + (f"\n\nSweepable fields (a list instead of a scalar): {', '.join(_calc.sweepable)}." if _calc.sweepable else "")
        + "\n\n" + limits.describe_limits(),
        responses={200: {"content": MARKDOWN_DOC}, **LIMIT_RESPONSES},
    )


@router.post("/calculators/{name}", include_in_schema=False)
def unknown_calculator(name: str = Path(max_length=100)):
    """A POST to a name no calculator has: 404 with the closest names (not 405 from the GET route beside it)."""
    raise NotFound("calculator", name, "/api/v1/calculators")
