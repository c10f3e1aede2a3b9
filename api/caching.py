"""HTTP caching of read-only answers: ETag from the store's content hash, Cache-Control, 304 on If-None-Match.

Every GET/HEAD answer of a read-only route is a function of the store (its content hash), the code that
renders it, the day prices are aged to (the default-price rule's reference date), the URL (path and query)
and the representation asked for (`Accept`: JSON, Markdown, HTML). The
ETag is a digest of exactly those, so two workers of one server give the same tag and a new store or a new
release gives a new one. A request whose If-None-Match carries that tag is answered 304 without running
the route; other requests run as usual and their 200 answers get ETag, Cache-Control and `Vary: Accept`.

Each worker also keeps a bounded in-memory cache of those answers by ETag (CASEBOOK_RESPONSE_CACHE_MB, default
16; 0 turns it off): the store never changes while open, so an answer once rendered is served again without
running the route, until the least recently used entries make room.

Left alone: other methods (calculator POSTs), answers other than 200, answers that set their own ETag (the
downloads) or cookies, event streams, /healthz and /mcp.
"""
from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

#: the folder holding the packages: the repository in a checkout, site-packages in an installed wheel
ROOT = Path(__file__).resolve().parent.parent
#: paths never cached: liveness must be fresh, MCP is JSON-RPC over POST
UNCACHED_PREFIXES = ("/healthz", "/mcp")
#: packages whose files make up the code that renders answers, templates and static files included (they live in
#: api/); knowledge/data is in the store's content hash instead
CODE_DIRS = ("api", "calculators", "knowledge")
CODE_SUFFIXES = (".py", ".j2", ".html", ".css", ".js", ".svg")


def max_age_s() -> int:
    """Seconds a client or proxy may reuse an answer without asking again (CASEBOOK_CACHE_MAX_AGE_S, default 300)."""
    try:
        return max(0, int(os.environ.get("CASEBOOK_CACHE_MAX_AGE_S", "300")))
    except ValueError:
        return 300


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of the service's own code and templates (not its data), the same in every worker of a release."""
    h = hashlib.sha256()
    for top in CODE_DIRS:
        base = ROOT / top
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob("*") if p.suffix in CODE_SUFFIXES
                           and "data" not in p.relative_to(base).parts):
            h.update(path.relative_to(ROOT).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_budget_bytes() -> int:
    """Bytes of answers one worker keeps in memory (CASEBOOK_RESPONSE_CACHE_MB, default 16; 0: no cache)."""
    try:
        return max(0, int(float(os.environ.get("CASEBOOK_RESPONSE_CACHE_MB", "16")) * 2**20))
    except ValueError:
        return 16 * 2**20


class AnswerCache:
    """A least-recently-used map ETag -> (headers, body), bounded in total bytes; one entry at most 1/8 of it."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.size = 0
        self.entries: OrderedDict[str, tuple[list[tuple[bytes, bytes]], bytes]] = OrderedDict()

    def get(self, tag: str) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The stored answer of `tag` (now the most recently used), or None."""
        hit = self.entries.get(tag)
        if hit is not None:
            self.entries.move_to_end(tag)
        return hit

    def put(self, tag: str, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """Keep one answer, dropping the least recently used ones beyond the budget."""
        cost = len(body) + sum(len(k) + len(v) for k, v in headers) + 200
        if cost > self.budget // 8 or tag in self.entries:
            return
        self.entries[tag] = (headers, body)
        self.size += cost
        while self.size > self.budget and self.entries:
            _, (h, b) = self.entries.popitem(last=False)
            self.size -= len(b) + sum(len(k) + len(v) for k, v in h) + 200


def _registered() -> bytes:
    """The names of the registered calculators (pages list and link them): part of the code that renders."""
    from calculators.framework.registry import REGISTRY

    return "\0".join(REGISTRY).encode()


def _price_day() -> bytes:
    """The reference date of the default-price rule (today, or CASEBOOK_PRICE_AS_OF): prices age, so answers that
    mark or use a stored price change with it although the store does not."""
    from calculators.domain import PRICE_AS_OF_ENV, price_as_of

    try:
        return price_as_of().isoformat().encode()
    except ValueError:          # serve refuses a malformed setting at start; never fail a request on it
        return os.environ.get(PRICE_AS_OF_ENV, "").encode()


def etag_for(content_hash: str, path: str, query: bytes, accept: bytes) -> str:
    """The weak ETag of one representation: store content, code (and registered calculators), base URL, the price
    rule's reference date, path, query and Accept."""
    h = hashlib.blake2b(digest_size=12)
    for part in (content_hash.encode(), code_fingerprint().encode(), _registered(),
                 os.environ.get("CASEBOOK_BASE_URL", "").encode(), _price_day(), path.encode(), query, accept):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return f'W/"{h.hexdigest()}"'


def _matches(if_none_match: bytes, tag: str) -> bool:
    """Whether an If-None-Match list names `tag` (weak comparison: W/ prefixes ignored)."""
    want = tag.removeprefix("W/")
    return any(t.strip().removeprefix("W/") == want for t in if_none_match.decode("latin-1").split(","))


def _merge_vary(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` with Accept in its Vary (added to an existing Vary, not a second header)."""
    for i, (k, v) in enumerate(headers):
        if k.lower() == b"vary":
            names = [n.strip().lower() for n in v.split(b",")]
            if b"accept" not in names and b"*" not in names:
                headers[i] = (k, v + b", Accept")
            return headers
    return [*headers, (b"vary", b"Accept")]


class CachingMiddleware:
    """Pure ASGI: ETag/Cache-Control on 200 GET/HEAD answers of read-only routes, 304 when the client has it."""

    def __init__(self, app: Any, budget_bytes: int | None = None):
        self.app = app
        code_fingerprint()   # read the code once at start-up, not in the first request
        budget = cache_budget_bytes() if budget_bytes is None else budget_bytes
        self.cache = AnswerCache(budget) if budget > 0 else None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or \
                scope["path"].startswith(UNCACHED_PREFIXES):
            return await self.app(scope, receive, send)
        store = getattr(getattr(scope.get("app"), "state", None), "store", None)
        content_hash = getattr(store, "content_hash", "")
        if not content_hash:
            return await self.app(scope, receive, send)
        accept = inm = b""
        for k, v in scope["headers"]:
            if k == b"accept":
                accept = v
            elif k == b"if-none-match":
                inm = v
        tag = etag_for(content_hash, scope["path"], scope.get("query_string", b""), accept)
        cache_headers = [(b"etag", tag.encode()), (b"cache-control", f"public, max-age={max_age_s()}".encode())]
        star = inm.strip() == b"*"
        hit = self.cache.get(tag) if self.cache is not None else None
        # the client holds this representation (or any, with `*`, of one known to exist): 304
        if inm and (_matches(inm, tag) or (star and hit is not None)):
            await send({"type": "http.response.start", "status": 304, "headers": _merge_vary(list(cache_headers))})
            await send({"type": "http.response.body", "body": b""})
            return
        if hit is not None:
            headers, body = hit
            await send({"type": "http.response.start", "status": 200, "headers": list(headers)})
            await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
            return
        state: dict[str, Any] = {"swallow": False, "keep": None, "chunks": []}

        async def tagging_send(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if message["status"] != 200 or b"etag" in names or b"set-cookie" in names or \
                        ctype.startswith(b"text/event-stream"):
                    return await send(message)
                if star:   # If-None-Match: * and the resource exists: 304, the body is dropped
                    state["swallow"] = True
                    await send({"type": "http.response.start", "status": 304,
                                "headers": _merge_vary(list(cache_headers))})
                    return
                if b"cache-control" in names:
                    headers.append(cache_headers[0])
                else:
                    headers.extend(cache_headers)
                headers = _merge_vary(headers)
                message = {**message, "headers": headers}
                if self.cache is not None and scope["method"] == "GET":
                    state["keep"] = headers
            elif state["swallow"]:
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": b""})
                return
            elif message["type"] == "http.response.body" and state["keep"] is not None:
                state["chunks"].append(message.get("body", b""))
                if not message.get("more_body", False):
                    assert self.cache is not None
                    self.cache.put(tag, state["keep"], b"".join(state["chunks"]))
            await send(message)

        await self.app(scope, receive, tagging_send)
