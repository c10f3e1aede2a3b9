"""What the resource routes share: the page envelope with its next-page link, and not-found errors.

The list parameters themselves (limit, offset, sort, filters) are parsed by the query models of
`api.queries`, which the site's list pages use too.
"""
from __future__ import annotations

from fastapi import Request

from api.queries import Limit, Offset  # noqa: F401  (kept importable from here)
from api.responses import FastJSONResponse
from knowledge.store import Page as StorePage


class NotFound(Exception):
    """An unknown id: answered as a 404 problem naming the list endpoint (HTML on site pages)."""

    def __init__(self, kind: str, ident: str, list_endpoint: str):
        self.kind = kind
        self.ident = ident
        self.list_endpoint = list_endpoint
        super().__init__(f"no {kind} with id {ident!r}; see {list_endpoint}")


def page(request: Request, result: StorePage) -> FastJSONResponse:
    """A page of records. Records come from the validated store as they are, so the response is
    encoded directly (the route's response_model documents it; re-validating every record on every
    request would cost more than the query)."""
    nxt = None
    if result.offset + result.limit < result.total:
        nxt = str(request.url.include_query_params(offset=result.offset + result.limit, limit=result.limit))
    return FastJSONResponse({"items": result.items, "total": result.total, "limit": result.limit,
                             "offset": result.offset, "next": nxt})
