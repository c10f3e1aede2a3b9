"""The one way to run a calculator, for every front end (REST, batch, MCP, CLI, site, derivation checks).

`solve(name, body, lookup)` validates `body` and computes; `compute` does the same with the calculator's own
exceptions (for unit tests). Failures are typed `RunError`s that carry data, not prose with links in it: the HTTP-like
status, the field errors (field, reason, suggestions, and for an unknown id its kind and value), and for a 404 the
kind of list to choose from. The front ends (`api/`) turn them into a problem+json body, an MCP tool error or an
exit code in one place, and add their own pointers (a URL, a tool name) through `describe(pointer)`. The envelope
with its links is built in `api/envelope.py`.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from calculators.framework import limits
from calculators.framework.calculator import Calculator
from calculators.framework.errors import CalcInputError, UnknownId
from calculators.framework.request import CalcRequest, renamed_notes, unit_notes
from calculators.framework.lookup import Lookup, ids_of, no_lookup
from calculators.framework.result import Result
from calculators.framework.registry import REGISTRY
from calculators.framework.suggest import close_matches, phrase


#: how a front end points at the list of a record kind (a URL, an MCP tool name), or None for no pointer
Pointer = Callable[[str], str | None] | None

#: at most this many errors are reported for one request field (`tokens` with its list elements `tokens[i]`);
#: the rest are counted in `FieldErrors.omitted` (the problem's `errors_omitted`), so that 20,000 invalid sweep
#: values answer a small problem, not one entry each
MAX_ERRORS_PER_FIELD = 20
#: at most this many errors in one problem, over all its fields
MAX_ERRORS = 50
#: the key of `omitted` for the errors of fields past the first MAX_ERRORS named there (many unknown keys)
OTHER_FIELDS = "(other fields)"
#: a field name (an unknown key as sent) is quoted up to this many characters
MAX_FIELD_CHARS = 200


@dataclass
class FieldError:
    """One thing wrong with a request: the field as the user wrote it, why, and what was probably meant.

    For an unknown id, `kind` and `value` name it (`model`, `qwen9`): a front end points at the list of that kind
    and the `suggestions` are the closest ids."""

    field: str
    message: str                                            # the reason, without pointers
    type: str = "value_error"
    where: str = "body"
    suggestions: list[str] = field(default_factory=list)   # what the user probably meant (did-you-mean)
    kind: str | None = None                                 # the record kind of an unknown id
    value: str | None = None                                # the unknown id itself

    def text(self, pointer: Pointer = None) -> str:
        """The message for a person: the reason, where to look (`pointer(kind)`, when given) and the did-you-mean
        of an unknown id."""
        msg = self.message
        where = pointer(self.kind) if pointer and self.kind else None
        if where:
            msg += f"; see {where}"
        if self.kind and self.suggestions:
            msg += "." + phrase(self.suggestions)
        return msg

    def as_dict(self, pointer: Pointer = None) -> dict:
        d = {"field": self.field, "in": self.where, "message": self.text(pointer), "type": self.type}
        if self.suggestions:
            d["suggestions"] = list(self.suggestions)
        if self.kind:
            d.update({"reason": self.message, "kind": self.kind, "value": self.value})
            where = pointer(self.kind) if pointer else None
            if where:
                d["see"] = where
        return d


class FieldErrors(list):
    """The field errors of one request, bounded: at most MAX_ERRORS_PER_FIELD per top-level field and MAX_ERRORS
    in all, first come first kept; `omitted` counts the errors left out per top-level field (`{"tokens": 19981}`)."""

    def __init__(self, errors=(), omitted: dict[str, int] | None = None):
        super().__init__(errors)
        self.omitted: dict[str, int] = dict(omitted or {})

    def omit(self, top: str) -> None:
        """Count one error on `top` as left out (past MAX_ERRORS fields named, the rest are `OTHER_FIELDS`)."""
        if top not in self.omitted and len(self.omitted) >= MAX_ERRORS:
            top = OTHER_FIELDS
        self.omitted[top] = self.omitted.get(top, 0) + 1

    @property
    def total(self) -> int:
        """How many errors the request had, reported or not."""
        return len(self) + sum(self.omitted.values())


def top_field(name: str) -> str:
    """The request field an error is on: `tokens[3]` -> `tokens`, `candidates[0].pass_rate` -> `candidates`."""
    return re.split(r"[.\[]", name, maxsplit=1)[0] or name


def omitted_text(omitted: dict[str, int]) -> str:
    """'; and 19981 more errors not shown (tokens: 19981; see errors_omitted)' or ''."""
    if not omitted:
        return ""
    n = sum(omitted.values())
    per = ", ".join(f"{k}: {v}" for k, v in omitted.items())
    return f"; and {n} more error{'s' if n != 1 else ''} not shown ({per}; see errors_omitted)"


@dataclass
class RunError(Exception):
    """A request that cannot be answered; `status` follows HTTP (404, 413, 422, 500; 503 when the guard stops it)."""

    status: int
    kind: str                    # not-found | validation | too-large | overrun | out-of-memory | calculator-bug
    title: str
    detail: str                  # what is wrong, in words, without pointers (made from `lead` and the errors when given)
    errors: list[FieldError] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)   # for a 404: the known names closest to the one asked for
    see: str | None = None                                 # for a 404: the kind of list to choose from
    extensions: dict = field(default_factory=dict)         # for a 413 over a limit: the limit, the cost, the advice
    lead: str | None = None                                # given: the detail is `lead: field: message; …` of the errors
    omitted: dict[str, int] = field(default_factory=dict)  # errors left out of `errors`, per field (FieldErrors)

    def __post_init__(self) -> None:
        if not self.omitted and isinstance(self.errors, FieldErrors):
            self.omitted = dict(self.errors.omitted)
        if self.lead is not None:
            self.detail = self.describe()

    def describe(self, pointer: Pointer = None) -> str:
        """The detail for a person, with the front end's pointers (`pointer(kind)`: a URL, a tool name)."""
        if self.lead is not None:
            parts = "; ".join(f"{e.field}: {e.text(pointer)}" for e in self.errors) + omitted_text(self.omitted)
            return f"{self.lead}: {parts}" if self.lead else parts
        where = pointer(self.see) if pointer and self.see else None
        if where:
            return f"{self.detail}; see {where}.{phrase(self.suggestions)}"
        return f"{self.detail}.{phrase(self.suggestions)}" if self.suggestions else self.detail

    def __str__(self) -> str:
        return self.describe()


def unknown_calculator(name: str) -> RunError:
    """A 404 naming the list of calculators and the names closest to `name`."""
    found = close_matches(name, list(REGISTRY))
    return RunError(404, "not-found", "Unknown calculator", f"no calculator named {name!r}", suggestions=found,
                    see="calculator")


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
                 text: str | bytes | None = None) -> FieldErrors:
    """Pydantic errors as FieldErrors, one per field (a scalar-or-list field fails once per union member:
    the first reason is kept). Each says how to fix it: an unknown field names the nearest real field of
    `model` (the request model, when known), a bad choice the nearest allowed value, a JSON syntax error
    where it is (line and column when `text`, the body as sent, is given).

    Bounded: at most MAX_ERRORS_PER_FIELD errors per top-level field and MAX_ERRORS in all are kept; the others
    are counted per field in the answer's `omitted`."""
    out = FieldErrors()
    seen: set[str] = set()
    per_field: dict[str, int] = {}
    tags = _model_tags()
    for e in errors:
        loc = tuple(prefix) + tuple(e.get("loc", ()))
        where = loc[0] if loc and loc[0] in ("body", "query", "path", "header") else "body"
        kind = e.get("type", "value_error")
        if kind == "json_invalid":       # the location is a character offset into the text, not a field
            if len(out) >= MAX_ERRORS:
                out.omit("body")
                continue
            out.append(FieldError("body", json_syntax_message(e, text), kind, where))
            continue
        parts = loc[1:] if loc and loc[0] in ("query", "path", "header", "body") else loc
        parts = tuple(p for p in parts if not (isinstance(p, str) and p in tags))  # union members that are models
        name = field_name(parts)
        if name in seen:
            continue
        seen.add(name)
        if len(name) > MAX_FIELD_CHARS:
            name = name[:MAX_FIELD_CHARS] + "…"
        top = top_field(name)
        per_field[top] = per_field.get(top, 0) + 1
        if per_field[top] > MAX_ERRORS_PER_FIELD or len(out) >= MAX_ERRORS:
            out.omit(top)
            continue
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
    # the guard is the last line (limits.Overrun past its CPU budget); NumPy's floating-point warnings are off for
    # every calculator, as `quiet` does: extreme inputs overflow to inf and the outputs report non-finite as null
    with limits.guard(), np.errstate(all="ignore"):
        res = calc.compute(request, lookup)
    notes = renamed_notes(request)   # old field names: read, and the answer says what they are now
    notes = [*unit_notes(request), *notes]   # unit strings read, implausible bare numbers (warnings first)
    if notes:
        res.assumptions[:0] = notes
    return calc, request, res


def unknown_id_error(exc: UnknownId, lookup: Lookup) -> FieldError:
    """An unknown store id as a field error with the ids closest to it (when the lookup can list them)."""
    found = close_matches(exc.ident, ids_of(lookup, exc.kind))
    return FieldError(field_name(exc.loc), exc.message, "unknown_id", "body", found, exc.kind, exc.ident)


def solve(name: str, body: Any, lookup: Lookup = no_lookup) -> tuple[Calculator, BaseModel, Result]:
    """`compute` with every failure turned into a typed RunError naming the field and what to fix."""
    try:
        return compute(name, body, lookup)
    except ValidationError as exc:
        calc = REGISTRY.get(name)
        errors = field_errors(exc.errors(include_url=False), ("body",), calc.request_model if calc else None)
        raise RunError(422, "validation", "Invalid request", "", errors, lead="invalid field(s)") from None
    except UnknownId as exc:
        raise RunError(422, "validation", "Invalid request", "", [unknown_id_error(exc, lookup)], lead="") from None
    except CalcInputError as exc:
        field = field_name(exc.loc)
        if exc.status == 422:
            raise RunError(422, "validation", "Invalid request", "", [FieldError(field, exc.message)], lead="") from None
        raise RunError(exc.status, "too-large", "Request too large", "", [FieldError(field, exc.message)],
                       extensions=getattr(exc, "extensions", {}), lead="") from None
    except limits.Overrun as exc:     # the guard stopped it: the estimate was wrong; the worker goes on
        raise RunError(503, "overrun", "Calculation stopped", str(exc), extensions=dict(exc.extensions)) from None
    except MemoryError:               # past the worker's memory cap (limits.cap_memory): refused, the worker lives
        raise RunError(503, "out-of-memory", "Calculation out of memory",
                       f"{name} needed more memory than this server worker may use; send a smaller request",
                       extensions={"limit": {"name": "guard_memory_bytes", "env": limits.ENV_PREFIX + "GUARD_MEMORY_BYTES",
                                             "value": limits.limit("GUARD_MEMORY_BYTES")}}) from None
    except (ArithmeticError, ValueError) as exc:  # a calculator bug on accepted input: say so, never hide it
        raise RunError(500, "calculator-bug", "Calculator error", f"{name} failed on a valid request: {exc}") from None
