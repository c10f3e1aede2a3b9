"""JSON request bodies read with orjson (about 4× faster than the standard library on a large sweep or batch).

What is accepted and how a bad body is answered stay exactly as before. A body orjson refuses is read again by
the standard library, which also takes what orjson does not (`NaN`, `1e400`, lone surrogate escapes) and whose
error is the `json.JSONDecodeError` that FastAPI answers with a 422 naming the position; a body with a run of 19 or
more digits goes to the standard library at once, because orjson reads integers beyond 64 bits as floats where the
standard library keeps them exact. Used as the `route_class` of the routers that take JSON bodies.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

#: a digit run that may be an integer beyond 64 bits (2^63 has 19 digits)
_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(body: bytes) -> Any:
    """JSON text to Python exactly as `json.loads` reads it, by orjson where that gives the same result."""
    if _LONG_DIGITS.search(body):
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


class OrjsonRequest(Request):
    """A request whose `json()` parses with orjson, falling back to the standard library's reading."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    """An API route whose handler sees an OrjsonRequest (FastAPI reads JSON bodies through `request.json()`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return route_handler
