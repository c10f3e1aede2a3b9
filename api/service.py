"""Front-end glue for running calculators: the store as the lookup, runner errors as problem bodies.

The work itself is `calculators.runner.run`; this module only maps its typed errors to RFC 9457
problem details (`CalculationFailed`) for the HTTP routes, the batch endpoint, the site and MCP.
"""
from __future__ import annotations

from typing import Any

from api.problems import problem_body
from calculators.core import no_lookup
from api.urls import urls
from calculators.runner import RunError, run
from calculators.runner import case_refs as _case_refs


class CalculationFailed(Exception):
    """A request that cannot be answered: carries its problem body and HTTP status."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        super().__init__(body.get("detail"))

    @classmethod
    def from_run_error(cls, err: RunError) -> "CalculationFailed":
        errors = [e.as_dict() for e in err.errors] if err.errors or err.status in (413, 422) else None
        body = problem_body(err.status, err.title, err.detail, errors, err.kind)
        if err.see:
            body["see"] = err.see
        if err.suggestions:
            body["suggestions"] = list(err.suggestions)
        return cls(err.status, body)


def lookup_of(store):
    """The store's lookup (which also lists the ids of a kind, `lookup("ids", kind)`, so that an unknown id
    in a request is answered with the closest ones), or one that knows no ids when there is no store."""
    return no_lookup if store is None else store.lookup


def case_refs(store, slugs) -> list[dict]:
    return _case_refs(lookup_of(store), slugs)


def explanation_url(name: str, body: dict) -> str:
    """The calculator page computing `body` (spelled by the site's URL builder)."""
    return urls.calculator(name, body)


def calculate(name: str, body: Any, store) -> dict:
    """The envelope for `body` (a dict or an already validated request model), or CalculationFailed."""
    try:
        return run(name, body, lookup_of(store))
    except RunError as err:
        raise CalculationFailed.from_run_error(err) from None
