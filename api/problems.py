"""RFC 9457 problem details for every error, with field-level `errors` naming what was wrong."""
from __future__ import annotations

import re
from typing import Any, Sequence

import orjson
from starlette.responses import Response

PROBLEM_TYPE = "https://casebook.invalid/problems/"


class ProblemResponse(Response):
    media_type = "application/problem+json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


_TYPE_TAG = re.compile(r"^(constrained-\w+|float|int|str|bool|none|list\[.*\]|dict\[.*\]|[\w-]+\[.*\])$")


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


def problem(status: int, title: str, detail: str, *, kind: str | None = None,
            errors: list[dict] | None = None, instance: str | None = None, **extra: Any) -> ProblemResponse:
    body: dict[str, Any] = {"type": PROBLEM_TYPE + (kind or str(status)), "title": title, "status": status,
                            "detail": detail}
    if instance:
        body["instance"] = instance
    if errors is not None:
        body["errors"] = errors
    body.update(extra)
    return ProblemResponse(body, status_code=status)


def problem_body(status: int, title: str, detail: str, errors: list[dict] | None = None, kind: str | None = None) -> dict:
    body = {"type": PROBLEM_TYPE + (kind or str(status)), "title": title, "status": status, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    return body


def pydantic_errors(errors: Sequence[dict], prefix: Sequence[Any] = ()) -> list[dict]:
    """Pydantic/FastAPI errors as `{field, message, type, location}` items."""
    out, seen = [], set()
    for e in errors:
        loc = tuple(prefix) + tuple(e.get("loc", ()))
        where = loc[0] if loc and loc[0] in ("body", "query", "path", "header") else "body"
        name = field_name(loc[1:] if loc and loc[0] in ("query", "path", "header") else loc)
        if name in seen:  # a scalar-or-list field fails once per union member: keep the first reason
            continue
        seen.add(name)
        out.append({"field": name, "in": where, "message": e.get("msg", "invalid"), "type": e.get("type", "value_error")})
    return out
