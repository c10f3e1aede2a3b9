"""The one way to run a calculator, for every front end (REST, batch, MCP, CLI, site, derivation checks).

`run(name, body, lookup)` validates `body`, computes, and wraps the result in the DESIGN's
envelope. Failures are typed (`RunError` subclasses carrying an HTTP-like status and the field
errors), so each front end maps them its own way: a problem+json response, an MCP tool error,
an exit code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence
from urllib.parse import urlencode

import orjson
from pydantic import BaseModel, ValidationError

from calculators.base import Calculator
from calculators.core import CalcInputError, Lookup, Result, no_lookup
from calculators.registry import REGISTRY


@dataclass
class FieldError:
    """One thing wrong with a request: the field as the user wrote it, and why."""

    field: str
    message: str
    type: str = "value_error"
    where: str = "body"

    def as_dict(self) -> dict:
        return {"field": self.field, "in": self.where, "message": self.message, "type": self.type}


@dataclass
class RunError(Exception):
    """A request that cannot be answered; `status` follows HTTP (404, 413, 422, 500)."""

    status: int
    kind: str                    # not-found | validation | too-large | calculator-bug
    title: str
    detail: str
    errors: list[FieldError] = field(default_factory=list)

    def __str__(self) -> str:
        return self.detail


def unknown_calculator(name: str) -> RunError:
    return RunError(404, "not-found", "Unknown calculator", f"no calculator named {name!r}; see /api/v1/calculators")


_TYPE_TAG = re.compile(r"^(constrained-\w+|float|int|str|bool|none|list\[.*\]|dict\[.*\]|[\w-]+\[.*\]|function-\w+\[.*\])$")


def field_name(loc: Sequence[Any]) -> str:
    """`("body", "candidates", 0, "pass_rate")` -> `candidates[0].pass_rate` (the part a user typed).

    Pydantic adds the member type of a union to the location (`tokens.list[int]`); those tags are
    dropped so the name is the field the user wrote."""
    parts = [p for p in loc if p != "body" and not (isinstance(p, str) and _TYPE_TAG.match(p))]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "body"


def field_errors(errors: Sequence[dict], prefix: Sequence[Any] = ()) -> list[FieldError]:
    """Pydantic errors as FieldErrors, one per field (a scalar-or-list field fails once per union member:
    the first reason is kept)."""
    out: list[FieldError] = []
    seen: set[str] = set()
    for e in errors:
        loc = tuple(prefix) + tuple(e.get("loc", ()))
        where = loc[0] if loc and loc[0] in ("body", "query", "path", "header") else "body"
        name = field_name(loc[1:] if loc and loc[0] in ("query", "path", "header") else loc)
        if name in seen:
            continue
        seen.add(name)
        out.append(FieldError(name, e.get("msg", "invalid"), e.get("type", "value_error"), where))
    return out


def compute(name: str, body: Any, lookup: Lookup = no_lookup) -> tuple[Calculator, BaseModel, Result]:
    """Validate and compute with the calculator's own exceptions (pydantic's ValidationError,
    CalcInputError): the layer unit tests use; front ends call `solve` or `run`."""
    calc = REGISTRY.get(name)
    if calc is None:
        raise unknown_calculator(name)
    request = body if isinstance(body, calc.request_model) else calc.request_model.model_validate(body)
    return calc, request, calc.compute(request, lookup)


def solve(name: str, body: Any, lookup: Lookup = no_lookup) -> tuple[Calculator, BaseModel, Result]:
    """`compute` with every failure turned into a typed RunError naming the field and what to fix."""
    try:
        return compute(name, body, lookup)
    except ValidationError as exc:
        errors = field_errors(exc.errors(include_url=False), ("body",))
        raise RunError(422, "validation", "Invalid request",
                       "invalid field(s): " + "; ".join(f"{e.field}: {e.message}" for e in errors), errors) from None
    except CalcInputError as exc:
        field = field_name(exc.loc)
        if exc.status == 422:
            raise RunError(422, "validation", "Invalid request", f"{field}: {exc.message}",
                           [FieldError(field, exc.message)]) from None
        raise RunError(exc.status, "too-large", "Request too large", f"{field}: {exc.message}",
                       [FieldError(field, exc.message)]) from None
    except (ArithmeticError, ValueError) as exc:  # a calculator bug on accepted input: say so, never hide it
        raise RunError(500, "calculator-bug", "Calculator error", f"{name} failed on a valid request: {exc}") from None


def calculator_url(name: str, body: dict | None = None) -> str:
    """The explainer page of a calculator, with `body` as its shareable query (the site's URL for it)."""
    if body is None:
        return f"/calculators/{name}"
    return f"/calculators/{name}?" + urlencode({"body": orjson.dumps(body).decode()})


def _get(lookup: Lookup, kind: str, ident: str) -> dict | None:
    try:
        return lookup(kind, ident)
    except KeyError:
        return None


def case_refs(lookup: Lookup, slugs: Sequence[str]) -> list[dict]:
    """The cases that explain a calculator, as {slug, titles, url} (unknown slugs are skipped)."""
    refs = []
    for slug in slugs:
        c = _get(lookup, "case", slug)
        if c:
            refs.append({"slug": slug, "title_zh": c["title_zh"], "title_en": c["title_en"], "url": f"/cases/{slug}"})
    return refs


def _with_source_titles(lookup: Lookup, sources: list[dict]) -> list[dict]:
    """Each cited fact with its source's URL and title beside the source id."""
    out = []
    for s in sources:
        s = dict(s)
        src = _get(lookup, "source", s["source"]) if s.get("source") else None
        if src:
            s["source_url"] = s.get("source_url") or src.get("url")
            s["source_title"] = src.get("title")
        out.append(s)
    return out


def envelope(calc: Calculator, request: BaseModel, result: Result, lookup: Lookup) -> dict:
    """The DESIGN's calculator envelope for a computed result."""
    inputs = dict(result.inputs)
    config = inputs.pop("hf_config", None)       # the attribute pydantic lets us use; users write `model_config`
    if config is not None:
        inputs["model_config"] = config
    inputs["sources"] = _with_source_titles(lookup, result.sources)
    return {
        "calculator": calc.name,
        "headline": result.headline,
        "inputs": inputs,
        "outputs": result.outputs,
        "steps": [s.as_dict() for s in result.steps],
        "assumptions": result.assumptions,
        "cases": case_refs(lookup, calc.cases),
        "explanation_url": calculator_url(calc.name, request.model_dump(mode="json", exclude_unset=True, by_alias=True)),
    }


def run(name: str, body: Any, lookup: Lookup = no_lookup) -> dict:
    """Validate `body`, compute and wrap: the envelope, or a RunError saying what to fix."""
    calc, request, result = solve(name, body, lookup)
    return envelope(calc, request, result, lookup)
