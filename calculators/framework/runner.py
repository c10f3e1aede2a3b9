"""The one way to run a calculator, for every front end (REST, batch, MCP, CLI, site, derivation checks).

`run(name, body, lookup)` validates `body`, computes, and wraps the result in the DESIGN's
envelope. Failures are typed (`RunError` subclasses carrying an HTTP-like status and the field
errors), so each front end maps them its own way: a problem+json response, an MCP tool error,
an exit code.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from calculators.framework import limits
from calculators.framework.calculator import Calculator
from calculators.framework.errors import CalcInputError, UnknownId
from calculators.framework.request import CalcRequest
from calculators.framework.lookup import Lookup, ids_of, no_lookup
from calculators.framework.result import Result, request_inputs
from calculators.framework.sweeps import on_grid
from calculators.framework.registry import REGISTRY
from calculators.framework.suggest import close_matches, phrase


@dataclass
class FieldError:
    """One thing wrong with a request: the field as the user wrote it, and why."""

    field: str
    message: str
    type: str = "value_error"
    where: str = "body"
    suggestions: list[str] = field(default_factory=list)   # what the user probably meant (did-you-mean)

    def as_dict(self) -> dict:
        d = {"field": self.field, "in": self.where, "message": self.message, "type": self.type}
        if self.suggestions:
            d["suggestions"] = list(self.suggestions)
        return d


@dataclass
class RunError(Exception):
    """A request that cannot be answered; `status` follows HTTP (404, 413, 422, 500)."""

    status: int
    kind: str                    # not-found | validation | too-large | calculator-bug
    title: str
    detail: str
    errors: list[FieldError] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)   # for a 404: the known names closest to the one asked for
    see: str | None = None                                 # for a 404: the list to choose from
    extensions: dict = field(default_factory=dict)         # for a 413 over a limit: the limit, the cost, the advice

    def __str__(self) -> str:
        return self.detail


def unknown_calculator(name: str) -> RunError:
    """A 404 naming the list of calculators and the names closest to `name`."""
    found = close_matches(name, list(REGISTRY))
    return RunError(404, "not-found", "Unknown calculator",
                    f"no calculator named {name!r}; see /api/v1/calculators.{phrase(found)}",
                    suggestions=found, see="/api/v1/calculators")


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


def field_errors(errors: Sequence[dict], prefix: Sequence[Any] = (), model: type[BaseModel] | None = None,
                 text: str | bytes | None = None) -> list[FieldError]:
    """Pydantic errors as FieldErrors, one per field (a scalar-or-list field fails once per union member:
    the first reason is kept). Each says how to fix it: an unknown field names the nearest real field of
    `model` (the request model, when known), a bad choice the nearest allowed value, a JSON syntax error
    where it is (line and column when `text`, the body as sent, is given)."""
    out: list[FieldError] = []
    seen: set[str] = set()
    tags = _model_tags()
    for e in errors:
        loc = tuple(prefix) + tuple(e.get("loc", ()))
        where = loc[0] if loc and loc[0] in ("body", "query", "path", "header") else "body"
        kind = e.get("type", "value_error")
        if kind == "json_invalid":       # the location is a character offset into the text, not a field
            out.append(FieldError("body", json_syntax_message(e, text), kind, where))
            continue
        parts = loc[1:] if loc and loc[0] in ("query", "path", "header", "body") else loc
        parts = tuple(p for p in parts if not (isinstance(p, str) and p in tags))  # union members that are models
        name = field_name(parts)
        if name in seen:
            continue
        seen.add(name)
        message, suggestions = e.get("msg", "invalid"), []
        if kind == "extra_forbidden" and parts and isinstance(parts[-1], str):
            message, suggestions = _unknown_field(str(parts[-1]), _fields_at(model, parts[:-1]))
        elif kind in ("literal_error", "enum") and isinstance(e.get("input"), str):
            allowed = _choices((e.get("ctx") or {}).get("expected", ""))
            suggestions = close_matches(e["input"], allowed)
            if suggestions:
                message = message.rstrip(".") + "." + phrase(suggestions)
        out.append(FieldError(name, message, kind, where, suggestions))
    return out


def json_syntax_message(error: dict, text: str | bytes | None = None) -> str:
    """'JSON syntax error at line L, column C: <reason>' for a json_invalid error (its loc ends with the
    character offset; `text` is the document, to turn the offset into a line and column)."""
    loc = error.get("loc") or ()
    pos = loc[-1] if loc and isinstance(loc[-1], int) else None
    reason = (error.get("ctx") or {}).get("error") or error.get("msg") or "invalid JSON"
    if pos is None or text is None:
        return f"JSON syntax error: {reason}" + (f" (at character {pos})" if pos is not None else "")
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    before = text[:pos]
    line = before.count("\n") + 1
    column = pos - (before.rfind("\n") + 1) + 1
    return f"JSON syntax error at line {line}, column {column}: {reason}"


def _model_tags() -> set[str]:
    """Names pydantic adds to an error location for a union member that is a request model (`kv_format.FormatSpec`)."""
    names, todo = set(), [CalcRequest]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            names.add(sub.__name__)
            todo.append(sub)
    return names


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models a type annotation holds (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in getattr(tp, "__args__", ()) or () for m in _models_in(arg)]


def _fields_at(model: type[BaseModel] | None, parts: Sequence[Any]) -> list[str]:
    """The public field names of the (nested) model at `parts` inside `model` ([] when unknown)."""
    models = [model] if model is not None else []
    for p in parts:
        if isinstance(p, int):
            continue
        nxt = []
        for m in models:
            for name, info in m.model_fields.items():
                if p in (name, info.alias):
                    nxt += _models_in(info.annotation)
        models = nxt
    names: list[str] = []
    for m in models:
        names += [info.alias or name for name, info in m.model_fields.items()]
    return list(dict.fromkeys(names))


def _unknown_field(name: str, known: list[str]) -> tuple[str, list[str]]:
    """The message for an unknown field (the error's `field` names it): the nearest real ones, else all."""
    if not known:
        return "unknown field: not part of this request", []
    found = close_matches(name, known)
    if found:
        return f"unknown field.{phrase(found)}", found
    return f"unknown field; this object takes: {', '.join(known)}", []


_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _choices(expected: str) -> list[str]:
    """The allowed values listed in pydantic's `expected` ("'a', 'b' or 'c'")."""
    found = _QUOTED.findall(expected)
    return found or [p.strip() for p in re.split(r",| or ", expected) if p.strip()]


def compute(name: str, body: Any, lookup: Lookup = no_lookup) -> tuple[Calculator, BaseModel, Result]:
    """Validate and compute with the calculator's own exceptions (pydantic's ValidationError,
    CalcInputError): the layer unit tests use; front ends call `solve` or `run`."""
    calc = REGISTRY.get(name)
    if calc is None:
        raise unknown_calculator(name)
    request = body if isinstance(body, calc.request_model) else calc.request_model.model_validate(body)
    limits.check(calc, request)      # bounded work: refuse (LimitExceeded, a 413) before any of it is done
    return calc, request, calc.compute(request, lookup)


def unknown_id_error(exc: UnknownId, lookup: Lookup) -> FieldError:
    """An unknown store id as a field error with the ids closest to it (when the lookup can list them)."""
    field = field_name(exc.loc)
    found = close_matches(exc.ident, ids_of(lookup, exc.kind))
    hint = phrase(found)
    return FieldError(field, exc.message + ("." + hint if hint else ""), "unknown_id", "body", found)


def solve(name: str, body: Any, lookup: Lookup = no_lookup) -> tuple[Calculator, BaseModel, Result]:
    """`compute` with every failure turned into a typed RunError naming the field and what to fix."""
    try:
        return compute(name, body, lookup)
    except ValidationError as exc:
        calc = REGISTRY.get(name)
        errors = field_errors(exc.errors(include_url=False), ("body",), calc.request_model if calc else None)
        raise RunError(422, "validation", "Invalid request",
                       "invalid field(s): " + "; ".join(f"{e.field}: {e.message}" for e in errors), errors) from None
    except UnknownId as exc:
        err = unknown_id_error(exc, lookup)
        raise RunError(422, "validation", "Invalid request", f"{err.field}: {err.message}", [err]) from None
    except CalcInputError as exc:
        field = field_name(exc.loc)
        if exc.status == 422:
            raise RunError(422, "validation", "Invalid request", f"{field}: {exc.message}",
                           [FieldError(field, exc.message)]) from None
        raise RunError(exc.status, "too-large", "Request too large", f"{field}: {exc.message}",
                       [FieldError(field, exc.message)], extensions=getattr(exc, "extensions", {})) from None
    except (ArithmeticError, ValueError) as exc:  # a calculator bug on accepted input: say so, never hide it
        raise RunError(500, "calculator-bug", "Calculator error", f"{name} failed on a valid request: {exc}") from None


#: `urlencode`'s escaping of one byte (quote_plus: letters, digits and `_.-~` kept, space as +, the rest %XX).
_QUERY_ESCAPE = {b: (chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.-~") else
                     "+" if b == 0x20 else f"%{b:02X}") for b in range(256)}
#: the characters a JSON body of numbers escapes (`%` first, then `+` before space becomes `+`)
_QUERY_COMMON = '%+ ,[]{}:"'
_QUERY_PLAIN = bytes(b for b in range(256) if _QUERY_ESCAPE[b] == chr(b) or chr(b) in _QUERY_COMMON)


def query_escape(data: bytes) -> str:
    """`quote_plus(data)`, the same text in C-speed passes (a sweep's body is tens of kB of digits and commas,
    which `quote_plus` would escape with a Python call per character)."""
    text = data.decode("latin-1")
    if data.translate(None, _QUERY_PLAIN):          # a byte beyond the common ones: one table pass
        return text.translate(_QUERY_ESCAPE)
    for ch in _QUERY_COMMON:
        if ch in text:
            text = text.replace(ch, _QUERY_ESCAPE[ord(ch)])
    return text


def calculator_url(name: str, body: dict | None = None) -> str:
    """The explainer page of a calculator, with `body` as its shareable query (the site's URL for it)."""
    if body is None:
        return f"/calculators/{name}"
    return _url_with_json(name, orjson.dumps(body))


def _url_with_json(name: str, body_json: bytes) -> str:
    """The calculator page whose `body` query is this JSON text (already encoded, so it is not encoded twice)."""
    return f"/calculators/{name}?body=" + query_escape(body_json)


#: longest explanation URL given whole: 8,000 characters is what common servers and proxies accept in a request
#: line (nginx's default header buffer is 8 KiB); a sweep beyond it links the page of its first point
EXPLANATION_URL_MAX = 8000


def explanation_link(calc: Calculator, body: dict) -> str:
    """The explainer page computing `body`; when that URL would be longer than EXPLANATION_URL_MAX (a sweep of
    thousands of points), the page of the sweep's first point (every swept field at its first value), which is
    the point the headline and the steps describe; when even that is too long, the calculator's form."""
    body_json = orjson.dumps(body)
    if len(body_json) <= EXPLANATION_URL_MAX:                # escaping only lengthens: test the cheap bound first
        url = _url_with_json(calc.name, body_json)
        if len(url) <= EXPLANATION_URL_MAX:
            return url
    url = calculator_url(calc.name, first_point(body, calc.sweepable))
    return url if len(url) <= EXPLANATION_URL_MAX else calculator_url(calc.name)


def first_point(body: dict, sweepable: Sequence[str]) -> dict:
    """`body` with every swept field (dotted paths into nested objects) at its first value; the rest shared."""
    first = dict(body)
    for path in sweepable:
        *parents, leaf = path.split(".")
        node = first
        for key in parents:
            child = node.get(key)
            if not isinstance(child, dict):
                node = None
                break
            node[key] = node = dict(child)                  # copy on the way down: `body` is never changed
        if node is not None and isinstance(node.get(leaf), list) and node[leaf]:
            node[leaf] = node[leaf][0]
    return first


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
        "outputs": result.outputs if result.grid_shape is None else on_grid(result.outputs, result.grid_shape),
        "steps": [s.as_dict() for s in result.steps],
        "assumptions": result.assumptions,
        "cases": case_refs(lookup, calc.cases),
        "explanation_url": explanation_link(calc, request_inputs(request, exclude_unset=True, by_alias=True)),
    }


def run(name: str, body: Any, lookup: Lookup = no_lookup) -> dict:
    """Validate `body`, compute and wrap: the envelope, or a RunError saying what to fix."""
    calc, request, result = solve(name, body, lookup)
    return envelope(calc, request, result, lookup)
