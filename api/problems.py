"""RFC 9457 problem details for every error, with field-level `errors` naming what was wrong."""
from __future__ import annotations

from typing import Any, Sequence

import orjson
from starlette.responses import Response

# The field naming rule is the runner's, so REST, batch and MCP name fields the same way.
from calculators.runner import field_errors, field_name  # noqa: F401

PROBLEM_TYPE = "https://casebook.invalid/problems/"


class ProblemResponse(Response):
    media_type = "application/problem+json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


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
    """Pydantic/FastAPI errors as `{field, in, message, type}` items (the runner's field errors)."""
    return [e.as_dict() for e in field_errors(errors, prefix)]
