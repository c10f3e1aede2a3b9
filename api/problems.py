"""RFC 9457 problem details for every error, with field-level `errors` naming what was wrong."""
from __future__ import annotations

from typing import Any, Sequence

from starlette.responses import Response

from api.responses import dumps

from api.urls import COLLECTIONS, urls
# The field naming rule is the runner's, so REST, batch and MCP name fields the same way.
from calculators.framework.runner import (  # noqa: F401
    FieldErrors, MAX_ERRORS, MAX_ERRORS_PER_FIELD, RunError, field_errors, field_name, json_syntax_message, omitted_text,
)

PROBLEM_TYPE = "https://casebook.invalid/problems/"


class ProblemResponse(Response):
    media_type = "application/problem+json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def problem(status: int, title: str, detail: str, *, kind: str | None = None,
            errors: list[dict] | None = None, instance: str | None = None, headers: dict[str, str] | None = None,
            **extra: Any) -> ProblemResponse:
    body: dict[str, Any] = {"type": PROBLEM_TYPE + (kind or str(status)), "title": title, "status": status,
                            "detail": detail}
    if instance:
        body["instance"] = instance
    if errors is not None:
        body["errors"] = errors
    body.update({k: v for k, v in extra.items() if v is not None})
    return ProblemResponse(body, status_code=status, headers=headers)


def problem_body(status: int, title: str, detail: str, errors: list[dict] | None = None, kind: str | None = None) -> dict:
    body = {"type": PROBLEM_TYPE + (kind or str(status)), "title": title, "status": status, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    return body


def list_url(kind: str) -> str | None:
    """Where the ids of a record kind are listed (`model` -> /api/v1/models): the pointer REST and the site give."""
    return urls.api_list(kind) if kind in COLLECTIONS else None


def run_error_body(err: RunError) -> dict:
    """The one translation of a calculation's typed error into a problem body, for REST, batch, the site and MCP
    (which reads the structured field errors: `reason`, `kind`, `value`, `suggestions`)."""
    errors = [e.as_dict(list_url) for e in err.errors] if err.errors or err.status in (413, 422) else None
    body = problem_body(err.status, err.title, err.describe(list_url), errors, err.kind)
    see = list_url(err.see) if err.see else None
    if see:
        body["see"] = see
    if err.suggestions:
        body["suggestions"] = list(err.suggestions)
    if err.omitted:
        body["errors_omitted"] = dict(err.omitted)
    body.update(err.extensions)
    return body


def pydantic_errors(errors: Sequence[dict], prefix: Sequence[Any] = (), model: type | None = None,
                    text: str | bytes | None = None) -> FieldErrors:
    """Pydantic/FastAPI errors as `{field, in, message, type, suggestions?}` items (the runner's field errors).
    `model` is the body's model (unknown fields then name the nearest real one); `text` the body as sent
    (a JSON syntax error then says at which line and column). Bounded like the runner's: a list of at most
    MAX_ERRORS items whose `omitted` counts, per field, the errors left out (a problem's `errors_omitted`)."""
    found = field_errors(errors, prefix, model, text)
    return FieldErrors([e.as_dict() for e in found], found.omitted)


#: a batch answers the full problem of its first failed items only; later failed items say title, status and
#: how many errors they had (`errors_count`), so that 1,000 invalid items answer a bounded body
MAX_DETAILED_FAILURES = 20


def brief_problem(body: dict) -> dict:
    """A failed batch item's problem without its field errors: type, title, status, a short detail and the count."""
    count = len(body.get("errors") or []) + sum((body.get("errors_omitted") or {}).values())
    brief = {k: body[k] for k in ("type", "title", "status") if k in body}
    brief["detail"] = (f"{count} error{'s' if count != 1 else ''}; a batch gives the field errors of its first "
                       f"{MAX_DETAILED_FAILURES} failed items only: send this item alone to see them")
    brief["errors_count"] = count
    return brief


#: What every operation may answer besides its success: one RFC 9457 `Problem` schema for each status, so
#: that generated clients parse errors into a typed model (FastAPI's app-level `responses`).
PROBLEM_STATUSES = {
    400: "Malformed request (e.g. a body nested too deeply to parse): a problem saying what to fix.",
    404: "Unknown id, name or route: a problem naming the list to choose from (`see`) and the closest known "
         "ones (`suggestions`).",
    413: "Request body over the size limit.",
    422: "Invalid input: `errors` names each field, why it is wrong and, where it can, what was meant "
         "(`suggestions`); a JSON syntax error is reported on the field `body` with its line and column. At most "
         f"{MAX_ERRORS_PER_FIELD} errors per field and {MAX_ERRORS} in all are listed; `errors_omitted` counts the "
         "others per field.",
}


def problem_responses() -> dict[int, dict[str, Any]]:
    from api.schemas import Problem  # the schemas import the records; kept out of this module's import time

    return {status: {"model": Problem, "description": text} for status, text in PROBLEM_STATUSES.items()}
