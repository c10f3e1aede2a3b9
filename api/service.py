"""Running a calculator for any front end (REST, batch, CLI, site, MCP): validate, compute, wrap.

The envelope is the DESIGN's: calculator, inputs (with sources of store facts), outputs, steps,
assumptions, cases, explanation_url.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
from pydantic import BaseModel, ValidationError

from api.problems import problem_body, pydantic_errors
from calculators.core import CalcInputError
from calculators.registry import REGISTRY, Calculator


class CalculationFailed(Exception):
    """A request that cannot be answered: carries its problem body and HTTP status."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        super().__init__(body.get("detail"))


def case_refs(store, slugs) -> list[dict]:
    refs = []
    for slug in slugs:
        c = store.get("case", slug) if store else None
        if c:
            refs.append({"slug": slug, "title_zh": c["title_zh"], "title_en": c["title_en"], "url": f"/cases/{slug}"})
    return refs


def explanation_url(name: str, body: dict) -> str:
    return f"/calculators/{name}?" + urlencode({"body": orjson.dumps(body).decode()})


def _enrich_sources(store, sources: list[dict]) -> list[dict]:
    out = []
    for s in sources:
        s = dict(s)
        src = store.get("source", s.get("source")) if store and s.get("source") else None
        if src:
            s.setdefault("source_url", src.get("url"))
            s["source_url"] = s.get("source_url") or src.get("url")
            s["source_title"] = src.get("title")
        out.append(s)
    return out


def validate_request(calc: Calculator, body: Any) -> BaseModel:
    if isinstance(body, calc.request_model):
        return body
    try:
        return calc.request_model.model_validate(body)
    except ValidationError as exc:
        errors = pydantic_errors(exc.errors(include_url=False), ("body",))
        fields = ", ".join(sorted({e["field"] for e in errors}))
        raise CalculationFailed(422, problem_body(422, "Invalid request", f"invalid field(s): {fields}", errors,
                                                  "validation")) from None


def calculate(name: str, body: Any, store) -> dict:
    """The envelope for `body` (a dict or an already validated request model)."""
    calc = REGISTRY.get(name)
    if calc is None:
        raise CalculationFailed(404, problem_body(404, "Unknown calculator",
                                                  f"no calculator named {name!r}; see /api/v1/calculators", kind="not-found"))
    request = validate_request(calc, body)
    lookup = store.lookup if store is not None else _no_store
    try:
        result = calc.compute(request, lookup)
    except CalcInputError as exc:
        from api.problems import field_name
        field = field_name(exc.loc)
        raise CalculationFailed(exc.status, problem_body(
            exc.status, "Invalid request" if exc.status == 422 else "Request too large", f"{field}: {exc.message}",
            [{"field": field, "in": "body", "message": exc.message, "type": "value_error"}],
            "validation" if exc.status == 422 else "too-large")) from None
    except (ArithmeticError, ValueError) as exc:  # a calculator bug on accepted input: say so, never hide it
        raise CalculationFailed(500, problem_body(500, "Calculator error", f"{name} failed on a valid request: {exc}",
                                                  kind="calculator-bug")) from None
    body_json = request.model_dump(mode="json", exclude_unset=True)
    inputs = dict(result.inputs)
    inputs["sources"] = _enrich_sources(store, result.sources)
    return {
        "calculator": name,
        "inputs": inputs,
        "outputs": result.outputs,
        "steps": [s.as_dict() for s in result.steps],
        "assumptions": result.assumptions,
        "cases": case_refs(store, calc.cases),
        "explanation_url": explanation_url(name, body_json),
    }


def _no_store(kind: str, ident: str) -> dict:
    raise KeyError(ident)
