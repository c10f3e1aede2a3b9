"""Pure ASGI middleware: request-body size and read-time limits, HEAD on GET routes, problem+json for plain-text
errors, the MCP endpoint's guard (Host/Origin, POST only) and security headers on HTML pages."""
from __future__ import annotations

import asyncio
import ipaddress
import os
import re
from http import HTTPStatus
from typing import Any

import anyio
import orjson

TOO_LARGE = 413
TIMEOUT = 408
PROBLEM_TYPE = "https://casebook.invalid/problems/"

#: seconds a client has to send its whole request body (slow senders, bodies shorter than their Content-Length)
DEFAULT_BODY_TIMEOUT_S = 10.0  # the default of api.settings.Settings.body_timeout_s, which the app passes in


def body_timeout_s() -> float:
    """The body-read timeout from CASEBOOK_BODY_TIMEOUT_S (seconds, > 0), default 10 s (used when no timeout is passed)."""
    raw = os.environ.get("CASEBOOK_BODY_TIMEOUT_S", "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_BODY_TIMEOUT_S
    except ValueError as exc:
        raise ValueError(f"CASEBOOK_BODY_TIMEOUT_S must be a number of seconds, not {raw!r}") from exc
    if not value > 0:
        raise ValueError(f"CASEBOOK_BODY_TIMEOUT_S must be > 0, not {raw!r}")
    return value


def _problem_bytes(status: int, title: str, detail: str, kind: str | None = None, **extra: Any) -> bytes:
    """An RFC 9457 problem body (the same shape as api.problems, without importing the app's modules)."""
    body = {"type": PROBLEM_TYPE + (kind or str(status)), "title": title, "status": status, "detail": detail}
    body.update({k: v for k, v in extra.items() if v is not None})
    return orjson.dumps(body)


async def send_problem(send, status: int, title: str, detail: str, *, kind: str | None = None,
                       headers: list[tuple[bytes, bytes]] | None = None, **extra: Any) -> None:
    """Answer with a problem+json response straight from ASGI middleware."""
    body = _problem_bytes(status, title, detail, kind, **extra)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/problem+json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class _BodyRefused(Exception):
    """Raised from `receive` when the body goes over the size limit or its read time: the middleware answers
    with its own problem whatever the application made of the exception (FastAPI turns unknown errors while
    reading a body into a 400, the MCP SDK into a 500)."""

    def __init__(self, status: int, title: str, detail: str, kind: str):
        super().__init__(detail)
        self.status, self.title, self.detail, self.kind = status, title, detail, kind


async def _receive_before(receive, deadline: float):
    """`await receive()`, or None once `deadline` (anyio's clock) passes. On asyncio one timer handle cancels the
    waiting task at the deadline (a few µs per read, against tens for a cancel scope); elsewhere a cancel scope."""
    try:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
    except RuntimeError:  # not asyncio (trio)
        task = None
    if task is None:
        with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
            return await receive()
        return None
    expired = False
    cancelling = task.cancelling()

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    handle = loop.call_at(deadline, expire)   # anyio's clock on asyncio is loop.time()
    try:
        return await receive()
    except asyncio.CancelledError:
        if expired and task.uncancel() <= cancelling:   # our timer, not a cancellation from outside
            return None
        raise
    finally:
        handle.cancel()


class BodyLimitMiddleware:
    """Refuse bodies over `max_bytes` with a 413 problem (by Content-Length, or while streaming a chunked body),
    and bodies not fully received `timeout_s` seconds after the request arrived with a 408 problem (slow senders,
    bodies shorter than their Content-Length). Both answers close the connection, so an unread rest of a body
    does not keep it open."""

    def __init__(self, app, max_bytes: int, timeout_s: float | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = body_timeout_s() if timeout_s is None else timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        expects_body = False
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length > self.max_bytes or length < 0:
                    return await self._refuse(send, self._too_large())
                expects_body = expects_body or length > 0
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                expects_body = True
        deadline = anyio.current_time() + self.timeout_s
        seen = 0
        body_done = not expects_body
        started = False
        replaced = False
        refused: _BodyRefused | None = None

        async def guarded_receive():
            nonlocal seen, body_done, refused
            if refused is not None:  # the application reads on after a refusal: refuse again
                raise refused
            if body_done or started:  # after the body (waiting for a disconnect, streaming): no limit applies
                return await receive()
            message = await _receive_before(receive, deadline)
            if message is None:
                refused = _BodyRefused(TIMEOUT, "Request body timeout",
                                       f"the request body was not received within {self.timeout_s:g} s "
                                       "(CASEBOOK_BODY_TIMEOUT_S); send the whole body at once, and no fewer bytes "
                                       "than Content-Length says", "body-timeout")
                raise refused
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    refused = self._too_large()
                    raise refused
                body_done = not message.get("more_body", False)
            else:  # http.disconnect
                body_done = True
            return message

        async def guarded_send(message):
            nonlocal started, replaced
            if message["type"] == "http.response.start":
                if refused is not None:  # the application's own answer to the refusal: ours replaces it
                    replaced = True
                    return await self._refuse(send, refused)
                started = True
                if not body_done:  # the rest of an unread body must not hold the connection
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            elif replaced:
                return None
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except _BodyRefused as exc:
            if not started and not replaced:
                await self._refuse(send, exc)
        else:
            if refused is not None and not started and not replaced:
                await self._refuse(send, refused)

    def _too_large(self) -> _BodyRefused:
        return _BodyRefused(TOO_LARGE, "Request too large", f"request body exceeds {self.max_bytes} bytes",
                            "too-large")

    async def _refuse(self, send, exc: _BodyRefused) -> None:
        await send_problem(send, exc.status, exc.title, exc.detail, kind=exc.kind, limit_bytes=(
            self.max_bytes if exc.status == TOO_LARGE else None),
            limit_s=(self.timeout_s if exc.status == TIMEOUT else None), headers=[(b"connection", b"close")])


class HeadMiddleware:
    """HEAD works wherever GET does: a HEAD the application refuses with 405 is answered as the GET would be
    (same status and headers, Content-Length included), without the body. Routes that handle HEAD themselves
    (static files, downloads) keep doing so."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)
        refused = False

        async def first(message):
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 405:
                refused = True
            if not refused:
                await send(message)

        await self.app(scope, receive, first)
        if not refused:
            return
        ended = False

        async def bodiless(message):
            nonlocal ended
            if message["type"] != "http.response.body":
                return await send(message)
            if not ended and not message.get("more_body", False):
                ended = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            return None

        await self.app({**scope, "method": "GET"}, receive, bodiless)


class PlainErrorsMiddleware:
    """Error answers that a framework wrote as plain text (Starlette's malformed Range 400 and 416, the MCP
    SDK's Content-Type 400, ...) become problem+json with the text as `detail`; HTML error pages stay HTML."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] == "HEAD":
            return await self.app(scope, receive, send)
        held: dict | None = None
        chunks: list[bytes] = []

        async def rewriting_send(message):
            nonlocal held
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if message["status"] >= 400 and (not ctype or ctype.startswith(b"text/plain")):
                    held = message
                    return None
            elif message["type"] == "http.response.body" and held is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return None
                status = held["status"]
                text = b"".join(chunks).decode("utf-8", "replace").strip()
                try:
                    title = HTTPStatus(status).phrase.capitalize()
                except ValueError:
                    title = "Error"
                keep = [(k, v) for k, v in held.get("headers", [])
                        if k.lower() not in (b"content-type", b"content-length")]
                return await send_problem(send, status, title, text or title, headers=keep)
            await send(message)

        await self.app(scope, receive, rewriting_send)


def _env_list(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list from the environment (blank or unset: `default`)."""
    raw = os.environ.get(name, "")
    items = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    return items or default


#: Host header values MCP answers by default: this machine under any port, and the test client's host
DEFAULT_MCP_HOSTS = ("localhost", "127.0.0.1", "[::1]", "testserver")
#: Origin header values MCP answers by default (requests without Origin, i.e. not from a browser page, pass)
DEFAULT_MCP_ORIGINS = ("http://localhost:*", "https://localhost:*", "http://127.0.0.1:*", "https://127.0.0.1:*",
                       "http://[::1]:*", "https://[::1]:*", "http://testserver")


def mcp_allowed_hosts() -> tuple[str, ...]:
    """CASEBOOK_MCP_ALLOWED_HOSTS: comma-separated host names (any port), `host:port` pairs or `*`."""
    return _env_list("CASEBOOK_MCP_ALLOWED_HOSTS", DEFAULT_MCP_HOSTS)


def mcp_allowed_origins() -> tuple[str, ...]:
    """CASEBOOK_MCP_ALLOWED_ORIGINS: comma-separated origins (`scheme://host[:port]`, `:*` for any port) or `*`."""
    return _env_list("CASEBOOK_MCP_ALLOWED_ORIGINS", DEFAULT_MCP_ORIGINS)


def _split_port(value: str) -> tuple[str, str | None]:
    """`host[:port]` (IPv6 in brackets) as (host, port or None)."""
    if value.startswith("["):
        host, _, rest = value.partition("]")
        return host + "]", (rest[1:] if rest.startswith(":") else None)
    host, sep, port = value.rpartition(":")
    return (host, port) if sep else (value, None)


_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]{1,5}))?")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def parse_host(value: str) -> tuple[str, str | None] | None:
    """A Host value `host[:port]` as (host, port or None), lower case: the host a DNS name, an IPv4 literal or a
    bracketed IPv6 literal, the port digits up to 65535. None for anything else (userinfo such as
    `127.0.0.1:8000@evil`, a path, spaces, two ports, an empty port, a bad literal)."""
    m = _HOST.fullmatch(value.lower())
    if m is None:
        return None
    host, port = m.group(1), m.group(2)
    if port is not None and int(port) > 65535:
        return None
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
        return host, port
    name = host.removesuffix(".")
    labels = name.split(".")
    if not name or len(name) > 253:
        return None
    if all(label.isdigit() for label in labels):      # all digits: an IPv4 literal or nothing
        try:
            ipaddress.IPv4Address(name)
        except ValueError:
            return None
    elif not all(_LABEL.fullmatch(label) for label in labels):
        return None
    return host, port


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a Host header matches one entry: `*`, a bare host name (any port), `host:*` or `host:port`.
    A malformed value (see parse_host) matches none, not even `*`."""
    parsed = parse_host(host.strip())
    if parsed is None:
        return False
    if "*" in allowed:
        return True
    name, port = parsed
    for entry in allowed:
        e_name, e_port = _split_port(entry)
        if e_name == name and (e_port in (None, "*") or e_port == port):
            return True
    return False


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """Whether an Origin header matches one entry: `*`, an exact origin, or `scheme://host:*` (any port)."""
    origin = origin.strip().lower().rstrip("/")
    if "*" in allowed or origin in allowed:
        return True
    scheme, sep, rest = origin.partition("://")
    parsed = parse_host(rest) if sep and scheme in ("http", "https") else None
    if parsed is None:
        return False
    name, _ = parsed
    return any(entry == f"{scheme}://{name}:*" for entry in allowed)


class McpGuard:
    """Wraps the stateless MCP endpoint: a Host or Origin not on the allowed lists is refused (421 / 403 problem;
    DNS-rebinding protection), and every method but POST gets a 405 with `Allow: POST` (a stateless server has no
    stream to offer on GET, and an SSE stream that never ends would only hold the connection). A request with
    no Host, a malformed one (`parse_host`) or more than one is refused first (400, as RFC 9112 asks): a
    value like `127.0.0.1:8000@evil` must not pass for 127.0.0.1, nor a second Host hide behind an allowed one."""

    allowed_methods = ("POST",)

    def __init__(self, app, hosts: tuple[str, ...] | None = None, origins: tuple[str, ...] | None = None):
        self.app = app
        self.hosts = mcp_allowed_hosts() if hosts is None else hosts
        self.origins = mcp_allowed_origins() if origins is None else origins

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        raw = [(k.lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        headers = dict(raw)
        hosts = [v for k, v in raw if k == b"host"]
        if len(hosts) != 1:
            return await send_problem(
                send, 400, "Bad Host header",
                f"a request to MCP needs exactly one Host header, not {len(hosts)}", kind="bad-host")
        host = hosts[0]
        if parse_host(host.strip()) is None:
            return await send_problem(
                send, 400, "Bad Host header",
                f"the Host header {host!r} is not host[:port] (a host name or an IP literal, then an optional "
                "port)", kind="bad-host")
        if not host_allowed(host, self.hosts):
            return await send_problem(
                send, 421, "Host not allowed",
                f"MCP does not answer for Host {host!r} (DNS-rebinding protection); allowed: {', '.join(self.hosts)} "
                "(set CASEBOOK_MCP_ALLOWED_HOSTS)", kind="host-not-allowed")
        origin = headers.get(b"origin")
        if origin is not None and not origin_allowed(origin, self.origins):
            return await send_problem(
                send, 403, "Origin not allowed",
                f"MCP does not answer pages from Origin {origin!r} (DNS-rebinding protection); allowed: "
                f"{', '.join(self.origins)} (set CASEBOOK_MCP_ALLOWED_ORIGINS)", kind="origin-not-allowed")
        if scope["method"] not in self.allowed_methods:
            allow = ", ".join(self.allowed_methods)
            return await send_problem(
                send, 405, "Method not allowed",
                f"{scope['method']} is not allowed on {scope.get('path', '/mcp')}: the MCP server is stateless and "
                f"offers no event stream; send JSON-RPC messages with POST", headers=[(b"allow", allow.encode())])
        await self.app(scope, receive, send)


def relative_slash_redirects(app) -> None:
    """Answer `/path/` with a redirect to `/path` (and the reverse) as Starlette's `redirect_slashes` does (307,
    query kept), but with a relative Location: Starlette builds an absolute URL from the Host header, so a
    forged Host was echoed (`Location: http://evil.example/...`). Turns the router's own redirects off."""
    from starlette._utils import get_route_path
    from starlette.responses import RedirectResponse
    from starlette.routing import Match

    router = app.router
    router.redirect_slashes = False
    fallback = router.default

    async def default(scope, receive, send):
        if scope["type"] == "http" and get_route_path(scope) != "/":
            path = scope["path"]
            other = {**scope, "path": path.rstrip("/") if path.endswith("/") else path + "/"}
            if any(route.matches(other)[0] is not Match.NONE for route in router.routes):
                target = "/" + other["path"].lstrip("/")      # never `//host`: that would leave the site
                target = target.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C")
                query = scope.get("query_string", b"")
                if query:
                    target += "?" + query.decode("latin-1")
                return await RedirectResponse(target)(scope, receive, send)
        await fallback(scope, receive, send)

    router.default = default


HTML_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    # The site runs no script and sets no inline style (tests/site/test_csp.py keeps it so): scripts and styles
    # only from files of this origin (/static/...), never inline. /docs and /redoc set their own (docs_csp).
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                 b"object-src 'none'; base-uri 'self'; frame-ancestors 'none'"),
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
    route fully matches there, and HEAD wherever GET (HeadMiddleware answers it);
    mounted static files take GET and HEAD, plain ASGI endpoints the methods they declare (`allowed_methods`, the
    MCP guard: POST) or else GET and POST."""
    from starlette.routing import Match, Mount, Route

    methods: set[str] = set()
    for route in getattr(getattr(app, "router", None), "routes", []) or []:
        try:
            if isinstance(route, Mount) or (isinstance(route, Route) and route.methods is None):
                if route.matches({**scope, "method": "GET"})[0] is not Match.NONE:
                    methods |= {"GET", "HEAD"} if isinstance(route, Mount) else \
                        set(getattr(route.app, "allowed_methods", ("GET", "POST")))
                continue
            methods |= {m for m in _METHODS if route.matches({**scope, "method": m})[0] is Match.FULL}
        except Exception:  # noqa: BLE001, S112 - a route that cannot judge this scope does not match it
            continue
    if "GET" in methods:
        methods.add("HEAD")
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
