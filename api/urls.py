"""One place that spells every URL of the service: site pages, their JSON twins, static files.

Python code and templates (as the Jinja global `urls`) both ask this builder, so a path is
written once. The calculator URL is byte-for-byte the `explanation_url` of a calculator envelope
(`body` as compact JSON in the `body` query parameter), so a shared link and a computed one match.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson

API = "/api/v1"

#: record kind -> the path segment of its list (HTML and JSON use the same one)
COLLECTIONS: dict[str, str] = {
    "case": "cases", "derivation": "derivations", "hardware": "hardware", "model": "models", "link": "links",
    "framework": "frameworks", "price": "prices", "source": "sources", "glossary": "glossary", "claim": "claims",
    "calculator": "calculators", "benchmark": "benchmarks",
}

#: kinds without a page of their own on the site: a record is an anchor on its list page
ANCHORED = frozenset({"link", "price", "claim", "glossary"})

Query = Mapping[str, Any] | Iterable[tuple[str, Any]]


#: `urlencode`'s escaping of one byte (quote_plus: letters, digits and `_.-~` kept, space as +, the rest %XX).
_QUERY_ESCAPE = {b: (chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_.-~") else
                     "+" if b == 0x20 else f"%{b:02X}") for b in range(256)}
#: the characters a JSON body of numbers escapes (`%` first, then `+` before space becomes `+`)
_QUERY_COMMON = '%+ ,[]{}:"'
_QUERY_PLAIN = bytes(b for b in range(256) if _QUERY_ESCAPE[b] == chr(b) or chr(b) in _QUERY_COMMON)


def query_escape(data: bytes) -> str:
    """`quote_plus(data)`, the same text in C-speed passes (a sweep's body is tens of kB of digits and commas,
    which `quote_plus` would escape with a Python call per character)."""
    text = data.decode("latin-1")
    if data.translate(None, _QUERY_PLAIN):          # a byte beyond the common ones: one table pass
        return text.translate(_QUERY_ESCAPE)
    for ch in _QUERY_COMMON:
        if ch in text:
            text = text.replace(ch, _QUERY_ESCAPE[ord(ch)])
    return text


def _segment(ident: str) -> str:
    """A record id as a path segment (ids are slugs; anything else is percent-encoded)."""
    return quote(str(ident), safe="/")


def _pairs(query: Query | None) -> list[tuple[str, str]]:
    """Query parameters as (name, text) pairs without empty values; lists repeat their name."""
    items = query.items() if isinstance(query, Mapping) else (query or ())
    out: list[tuple[str, str]] = []
    for key, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if v is None or v == "":
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            out.append((key, str(getattr(v, "value", v))))
    return out


def with_query(path: str, query: Query | None = None) -> str:
    """`path` with the non-empty parameters of `query` appended (none: the bare path)."""
    pairs = _pairs(query)
    return path + ("?" + urlencode(pairs) if pairs else "")


class Urls:
    """The URL builder: one method per kind of page, plus the JSON twin of any page."""

    def __init__(self, api: str = API) -> None:
        self.api = api

    # ------------------------------------------------------------------ site pages
    def home(self) -> str:
        return "/"

    def listing(self, kind: str, /, **query: Any) -> str:
        """The HTML list of a kind (`listing("model", family="qwen")` -> `/models?family=qwen`)."""
        return with_query(f"/{COLLECTIONS[kind]}", query)

    def record(self, kind: str, ident: str) -> str:
        """The HTML page showing one record: its own page, or its row on the list page."""
        if kind in ANCHORED:
            return f"/{COLLECTIONS[kind]}#{quote(str(ident), safe='')}"
        if kind == "derivation":  # id `case/name`: a section of the case page
            case, _, name = str(ident).partition("/")
            return self.derivation(case, name)
        if kind in COLLECTIONS:
            return f"/{COLLECTIONS[kind]}/{_segment(ident)}"
        return self.search(q=ident)

    def cases(self, **query: Any) -> str:
        return self.listing("case", **query)

    def case(self, slug: str) -> str:
        return self.record("case", slug)

    def derivation(self, case: str, name: str) -> str:
        """A worked example: its section on the page of its case."""
        return f"{self.case(case)}#{quote(str(name), safe='')}"

    def hardware_list(self, **query: Any) -> str:
        return self.listing("hardware", **query)

    def hardware(self, ident: str) -> str:
        return self.record("hardware", ident)

    def models(self, **query: Any) -> str:
        return self.listing("model", **query)

    def model(self, ident: str) -> str:
        return self.record("model", ident)

    def links(self, **query: Any) -> str:
        return self.listing("link", **query)

    def link(self, ident: str) -> str:
        return self.record("link", ident)

    def frameworks(self, **query: Any) -> str:
        return self.listing("framework", **query)

    def framework(self, ident: str) -> str:
        return self.record("framework", ident)

    def prices(self, **query: Any) -> str:
        return self.listing("price", **query)

    def price(self, ident: str) -> str:
        return self.record("price", ident)

    def sources(self, **query: Any) -> str:
        return self.listing("source", **query)

    def source(self, ident: str) -> str:
        return self.record("source", ident)

    def claims(self, **query: Any) -> str:
        return self.listing("claim", **query)

    def claim(self, ident: str) -> str:
        return self.record("claim", ident)

    def glossary(self, **query: Any) -> str:
        return self.listing("glossary", **query)

    def glossary_entry(self, ident: str) -> str:
        return self.record("glossary", ident)

    def benchmarks(self, **query: Any) -> str:
        """The published serving measurements (`benchmarks(model="deepseek-r1", hardware="h200-sxm")`)."""
        return self.listing("benchmark", **query)

    def benchmark(self, ident: str) -> str:
        return self.record("benchmark", ident)

    def calculators(self) -> str:
        return self.listing("calculator")

    def calculator(self, name: str, body: Any = None, format: str | None = None) -> str:
        """A calculator page; with `body`, the page computing that request (the envelope's explanation_url). With
        `format="json"` (or "md") the same question answered as the calculator envelope in JSON (or Markdown), the
        page's twin (the `_format` parameter, as Datasette spells it: no request field starts with `_`). `body` may be
        given already encoded as JSON bytes."""
        path = self.record("calculator", name)
        if body is None:
            return with_query(path, {"_format": format})
        body_json = body if isinstance(body, (bytes, bytearray)) else orjson.dumps(body)
        return path + "?body=" + query_escape(bytes(body_json)) + (f"&_format={quote(format, safe='')}" if format else "")

    def calculator_view(self, name: str, body: Any = None, fragment: str | None = None, **view: Any) -> str:
        """A calculator page computing `body`, shown with view parameters that leave the request alone
        (`sort`, `desc`, `all` of the planner's table; None drops one), optionally at a #fragment."""
        url = self.calculator(name, body)
        pairs = _pairs(view)
        if pairs:
            url += ("&" if "?" in url else "?") + urlencode(pairs)
        return url + (f"#{quote(fragment, safe='')}" if fragment else "")

    def coverage(self) -> str:
        return "/coverage"

    def measurements(self, **query: Any) -> str:
        """The list of measured tables (manifest with provenance)."""
        return with_query("/measurements", query)

    def measurement_table(self, table: str, /, **query: Any) -> str:
        """The rows and chart of one measured table (`measurement_table("nccl", system="h100_sxm")`)."""
        return with_query(f"/measurements/{_segment(table)}", query)

    def calibration(self) -> str:
        """The calibration report of the measured step estimate (its JSON twin: `json_twin(calibration())`)."""
        return "/calibration"

    def validation(self, **query: Any) -> str:
        """Serving estimates against the published measurements (`validation(source="mlperf-inference-v5.1")`)."""
        return with_query("/validation", query)

    def search(self, q: str | None = None, **query: Any) -> str:
        return with_query("/search", {"q": q, **query})

    def downloads(self) -> str:
        """Every table as CSV and Parquet, and the DuckDB file (its JSON twin: `api_export()`)."""
        return "/downloads"

    def export_of_page(self, path: str) -> str | None:
        """The download kind of a record list page (`/hardware` -> `hardware`), None for any other page."""
        kind = next((k for k, seg in COLLECTIONS.items() if path == f"/{seg}"), None)
        return COLLECTIONS[kind] if kind and kind != "calculator" else None

    def static(self, name: str) -> str:
        return f"/static/{name}"

    def docs(self) -> str:
        return "/docs"

    def openapi(self) -> str:
        return "/openapi.json"

    def health(self) -> str:
        return "/healthz"

    # ------------------------------------------------------------------ JSON API
    def api_list(self, kind: str, /, **query: Any) -> str:
        """A JSON list (`api_list("hardware", vendor="NVIDIA")`)."""
        return with_query(f"{self.api}/{COLLECTIONS[kind]}", query)

    def api_item(self, kind: str, ident: str) -> str:
        """One record as JSON (derivation ids `case/name` keep their slash)."""
        return f"{self.api}/{COLLECTIONS[kind]}/{_segment(ident)}"

    def api_coverage(self) -> str:
        return f"{self.api}/coverage"

    def api_measurements(self, **query: Any) -> str:
        return with_query(f"{self.api}/measurements", query)

    def api_measurement_table(self, table: str, /, **query: Any) -> str:
        return with_query(f"{self.api}/measurements/{_segment(table)}", query)

    def api_validation(self, **query: Any) -> str:
        """The validation report as JSON (the twin of `validation(**query)`)."""
        return with_query(f"{self.api}/validation", query)

    def api_validation_point(self, ident: str) -> str:
        """One benchmark point's validation row."""
        return f"{self.api}/validation/{_segment(ident)}"

    def api_search(self, q: str | None = None, **query: Any) -> str:
        return with_query(f"{self.api}/search", {"q": q, **query})

    def api_export(self) -> str:
        """The list of downloads (kinds, rows, columns, URLs, content hash)."""
        return f"{self.api}/export"

    def api_export_file(self, kind: str, fmt: str) -> str:
        """One table as a file: `api_export_file("hardware", "csv")` -> `/api/v1/export/hardware.csv`."""
        return f"{self.api}/export/{_segment(kind)}.{fmt}"

    def api_export_database(self) -> str:
        """The built DuckDB store itself."""
        return f"{self.api}/export/casebook.duckdb"

    def json_twin(self, path: str, query: Query | None = None) -> str:
        """The JSON URL answering the same question as the site page at `path` (same parameters)."""
        return with_query(self.api + path, query)

    def page_of(self, api_path: str) -> str:
        """The site page of a JSON URL (the inverse of `json_twin` for paths)."""
        return api_path.removeprefix(self.api) or "/"

    # ------------------------------------------------------------------ editing a page's query
    @staticmethod
    def with_changes(path: str, query: Query | None = None, **changes: Any) -> str:
        """`path` and `query` with some parameters replaced (None removes one). A replaced parameter
        keeps its place; repeated parameters (`kind=a&kind=b`) are kept unless replaced."""
        pairs: list[tuple[str, Any]] = list(_pairs(query))
        for key, value in changes.items():
            at = next((i for i, (k, _) in enumerate(pairs) if k == key), len(pairs))
            pairs = [(k, v) for k, v in pairs if k != key]
            if value is not None:
                pairs.insert(min(at, len(pairs)), (key, value))
        return with_query(path, pairs)


def base_url() -> str:
    """CASEBOOK_BASE_URL without its trailing slash (e.g. `https://casebook.example.org`), "" when unset: links
    the service hands out are then relative to the server that answered."""
    return os.environ.get("CASEBOOK_BASE_URL", "").strip().rstrip("/")


def page_link(path: str, query: Query | None, *, offset: int, limit: int) -> str:
    """The link to another page of a list: the request's path and query with `offset` and `limit` replaced,
    relative, or under CASEBOOK_BASE_URL when configured; never built from the request's Host header."""
    return base_url() + Urls.with_changes(path, query, offset=offset, limit=limit)


#: the builder the site uses (and the templates' `urls`)
urls = Urls()
