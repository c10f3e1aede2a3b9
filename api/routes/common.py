"""What the resource routes share: the page envelope with its next-page link, and not-found errors.

The list parameters themselves (limit, offset, sort, filters) are parsed by the query models of
`api.queries`, which the site's list pages use too.
"""
from __future__ import annotations

from collections.abc import Iterable

from fastapi import Request

from api.queries import Limit, Offset  # noqa: F401  (kept importable from here)
from api.responses import FastJSONResponse
from api.urls import page_link
from calculators.framework.suggest import close_matches, phrase
from knowledge.store import Page as StorePage


class NotFound(Exception):
    """An unknown id: answered as a 404 problem naming the list endpoint and the closest ids (HTML on site
    pages). `choices` are the known ids; without them the error handler takes the store's ids of `kind`."""

    def __init__(self, kind: str, ident: str, list_endpoint: str, choices: Iterable[str] | None = None):
        self.kind = kind
        self.ident = ident
        self.list_endpoint = list_endpoint
        self.choices = list(choices) if choices is not None else None
        super().__init__(f"no {kind} with id {ident!r}; see {list_endpoint}")

    def suggestions(self, store=None) -> list[str]:
        """The known ids closest to the one asked for."""
        return close_matches(self.ident, self.known_ids(store))

    def known_ids(self, store=None) -> list[str]:
        if self.choices is not None:
            return self.choices
        if self.kind == "calculator":
            from calculators.framework.registry import REGISTRY
            return list(REGISTRY)
        records = getattr(store, "records", None) or {}
        return list(records.get(self.kind, {}))

    def message(self, store=None, found: list[str] | None = None) -> str:
        """`no hardware with id 'h100'; see /api/v1/hardware. Did you mean 'h100-sxm'?` (`found`: the
        suggestions when already computed)."""
        hint = phrase(self.suggestions(store) if found is None else found)
        return f"{self}.{hint}" if hint else str(self)


def page(request: Request, result: StorePage) -> FastJSONResponse:
    """A page of records. Records come from the validated store as they are, so the response is
    encoded directly (the route's response_model documents it; re-validating every record on every
    request would cost more than the query)."""
    nxt = None
    if result.offset + result.limit < result.total:
        nxt = page_link(request.url.path, request.query_params.multi_items(), offset=result.offset + result.limit,
                        limit=result.limit)
    return FastJSONResponse({"items": result.items, "total": result.total, "limit": result.limit,
                             "offset": result.offset, "next": nxt})
