"""Pure ASGI middleware: a request-body size limit and security headers on HTML pages."""
from __future__ import annotations

import orjson

TOO_LARGE = 413


class BodyLimitMiddleware:
    """Refuse bodies over `max_bytes` with a 413 problem, by Content-Length or while streaming."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length > self.max_bytes or length < 0:
                    return await self._reject(send)
        seen = 0
        started = False

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge()
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send)

    async def _reject(self, send):
        body = orjson.dumps({"type": "https://casebook.invalid/problems/too-large", "title": "Request too large",
                             "status": TOO_LARGE, "detail": f"request body exceeds {self.max_bytes} bytes"})
        await send({"type": "http.response.start", "status": TOO_LARGE,
                    "headers": [(b"content-type", b"application/problem+json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


HTML_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                 b"script-src 'self' 'unsafe-inline'; frame-ancestors 'none'"),
]


def docs_csp(script_hashes: list[str], *, worker_blob: bool = False) -> str:
    """The policy of the API docs pages (/docs, /redoc; api.docs sets it on their responses): scripts only
    from this origin plus the page's own inline scripts by hash (no 'unsafe-inline'); ReDoc's search may
    run a worker from a blob: URL. Styles as on the site (the UIs set inline styles)."""
    return "; ".join([
        "default-src 'self'", "img-src 'self' data:", "style-src 'self' 'unsafe-inline'",
        " ".join(["script-src 'self'", *script_hashes]),
        *(["worker-src 'self' blob:"] if worker_blob else []),
        "object-src 'none'", "base-uri 'self'", "frame-ancestors 'none'"])


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(app, scope) -> list[str]:
    """The methods the app answers at the path of `scope` (for the `Allow` header of a 405): every method some
    route fully matches there; mounted static files take GET and HEAD, plain ASGI endpoints (MCP) GET and POST."""
    from starlette.routing import Match, Mount, Route

    methods: set[str] = set()
    for route in getattr(getattr(app, "router", None), "routes", []) or []:
        try:
            if isinstance(route, Mount) or (isinstance(route, Route) and route.methods is None):
                if route.matches({**scope, "method": "GET"})[0] is not Match.NONE:
                    methods |= {"GET", "HEAD"} if isinstance(route, Mount) else {"GET", "POST"}
                continue
            methods |= {m for m in _METHODS if route.matches({**scope, "method": m})[0] is Match.FULL}
        except Exception:  # noqa: BLE001, S112 - a route that cannot judge this scope does not match it
            continue
    return sorted(methods) or ["GET", "HEAD"]


class SecurityHeadersMiddleware:
    """Add nosniff to every response, the full set of security headers to HTML, and `Allow` to any 405 that
    lacks it (static files and the MCP endpoint answer 405 without one)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                ctype = next((v for k, v in headers if k == b"content-type"), b"")
                names = {k for k, _ in headers}
                extra = HTML_HEADERS if ctype.startswith(b"text/html") else HTML_HEADERS[:1]
                headers.extend(h for h in extra if h[0] not in names)
                if message.get("status") == 405 and b"allow" not in {k.lower() for k in names}:
                    headers.append((b"allow", ", ".join(allowed_methods(scope.get("app"), scope)).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
