"""Request-scoped access to the store and the search index kept on the app."""
from __future__ import annotations

from fastapi import Request

from knowledge.store import Store


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_index(request: Request):
    return request.app.state.search_index
