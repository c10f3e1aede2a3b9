"""The data, downloadable: every table as CSV and Parquet, the DuckDB file, the index and the /downloads page."""
from __future__ import annotations

import csv
import io
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import orjson
import pytest

from api.routes import export as E
from api.urls import COLLECTIONS, urls
from knowledge import tables as T
from knowledge.measurements import TABLES as MEASURED

#: every kind the store's tables make downloadable (the index must list exactly these)
KINDS = ([COLLECTIONS[k] for k in T.TABLES] + [k.name for k in E.EXTRA]
         + ["measured-" + t.replace("_", "-") for t in MEASURED])
#: the store tables that are not a kind of their own (build bookkeeping; in the DuckDB file)
BOOKKEEPING = {"meta", "schema_migrations"}


@pytest.fixture(scope="module")
def ex_client(client, tmp_path_factory):
    """The shared test client, its downloads cached in a directory of this module."""
    app = client.app
    app.state.export_dir = tmp_path_factory.mktemp("export-cache")
    app.state.exporter = None
    yield client
    app.state.exporter = None
    app.state.export_dir = None


@pytest.fixture(scope="module")
def store(ex_client):
    return ex_client.app.state.store


@pytest.fixture(scope="module")
def index(ex_client):
    r = ex_client.get(urls.api_export())
    assert r.status_code == 200, r.text
    return r.json()


def _kind(index: dict, name: str) -> dict:
    return next(k for k in index["kinds"] if k["kind"] == name)


def _stored_columns(store, table: str) -> list[str]:
    return [r[0] for r in store._sql("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                                     "ORDER BY ordinal_position", [table])]


def _gpu_price_ids(store) -> list[str]:
    return sorted(p["id"] for p in store.all("price") if isinstance(p.get("device_usd_per_hour"), dict))


def _store_rows(store, index: dict, name: str) -> int:
    """The row count of a kind, read from the store itself (not from the index)."""
    if name == "gpu-prices":
        return len(_gpu_price_ids(store))
    return store._sql(f'SELECT count(*) FROM "{_kind(index, name)["table"]}"')[0][0]


def _identity_ok(r, store) -> None:
    h = store.content_hash
    assert h and r.headers["etag"] == f'"{h}"'
    assert r.headers["x-content-hash"] == h


# --------------------------------------------------------------------------- the index

def test_index_lists_every_table_of_the_store(index, store):
    assert [k["kind"] for k in index["kinds"]] == KINDS
    assert index["content_hash"] == store.content_hash
    assert index["short_hash"] == store.content_hash[:12]
    tables = {r[0] for r in store._sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")}
    assert tables - BOOKKEEPING == {k["table"] for k in index["kinds"]}, "a store table has no download"
    for k in index["kinds"]:
        assert k["rows"] == _store_rows(store, index, k["kind"]) > 0, k["kind"]
        assert k["csv_url"] == urls.api_export_file(k["kind"], "csv")
        assert k["parquet_url"] == urls.api_export_file(k["kind"], "parquet")
        assert k["content_hash"] == store.content_hash and k["licence"] and k["description"]
        names = [c["name"] for c in k["columns"]]
        if k["kind"] != "gpu-prices":
            assert sorted(names) == sorted(_stored_columns(store, k["table"])), k["kind"]
    db = index["database"]
    assert db["url"] == urls.api_export_database() and db["content_hash"] == store.content_hash
    assert {t["table"] for t in db["tables"]} == tables
    assert "Apache-2.0" in _kind(index, "measured-gemm")["licence"]
    assert "ai-infra-book" in _kind(index, "cases")["licence"]


def test_index_answers_if_none_match(ex_client, store):
    r = ex_client.get(urls.api_export(), headers={"If-None-Match": f'"{store.content_hash}"'})
    assert r.status_code == 304 and not r.content
    _identity_ok(r, store)


# --------------------------------------------------------------------------- one table per kind

@pytest.mark.parametrize("kind", KINDS)
def test_csv_parses_with_the_store_row_count(ex_client, store, index, kind):
    r = ex_client.get(urls.api_export_file(kind, "csv"))
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"] == "text/csv; charset=utf-8"
    _identity_ok(r, store)
    disposition = r.headers["content-disposition"]
    assert disposition.startswith("attachment;") and f"casebook-{kind}-{store.content_hash[:12]}.csv" in disposition
    rows = list(csv.reader(io.StringIO(r.content.decode("utf-8"), newline="")))
    header, body = rows[0], rows[1:]
    assert header == [c["name"] for c in _kind(index, kind)["columns"]]
    assert len(body) == _store_rows(store, index, kind)
    assert all(len(row) == len(header) for row in body)
    if "doc" in header:  # nested values are JSON text: each `doc` is the record as stored
        at, key = header.index("doc"), header[0]
        record_kind = next((k for k, seg in COLLECTIONS.items() if seg == kind), None)
        for row in body[:500]:
            doc = orjson.loads(row[at])
            assert isinstance(doc, dict)
            if record_kind:
                assert doc == store.get(record_kind, row[header.index(key)])


@pytest.mark.parametrize("kind", KINDS)
def test_parquet_reads_back_with_the_store_rows_and_columns(ex_client, store, index, kind, tmp_path):
    r = ex_client.get(urls.api_export_file(kind, "parquet"))
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"] == "application/vnd.apache.parquet"
    _identity_ok(r, store)
    assert f"casebook-{kind}-{store.content_hash[:12]}.parquet" in r.headers["content-disposition"]
    path = tmp_path / f"{kind}.parquet"
    path.write_bytes(r.content)
    con = duckdb.connect()
    try:
        n = con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0]
        described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    finally:
        con.close()
    assert n == _store_rows(store, index, kind)
    assert [(c[0], c[1]) for c in described] == [(c["name"], c["type"]) for c in _kind(index, kind)["columns"]]
    if kind != "gpu-prices":
        table = _kind(index, kind)["table"]
        assert sorted(c[0] for c in described) == sorted(_stored_columns(store, table))
        stored_types = dict(store._sql("SELECT column_name, data_type FROM information_schema.columns "
                                       "WHERE table_name = ?", [table]))
        assert {c[0]: c[1] for c in described} == stored_types


def test_gpu_prices_are_the_price_records_with_a_device_price(ex_client, store):
    r = ex_client.get(urls.api_export_file("gpu-prices", "csv"))
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8"), newline="")))
    assert sorted(row["id"] for row in rows) == _gpu_price_ids(store)
    for row in rows:
        rec = store.get("price", row["id"])
        assert float(row["device_usd_per_hour"]) == rec["device_usd_per_hour"]["value"]
        assert row["device_usd_per_hour_source"] == rec["device_usd_per_hour"]["source"]
        assert row["pricing"] == rec["pricing"]


# --------------------------------------------------------------------------- the DuckDB file

def test_duckdb_file_opens_read_only_and_holds_the_tables(ex_client, store, index, tmp_path):
    r = ex_client.get(urls.api_export_database())
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    _identity_ok(r, store)
    assert f"casebook-{store.content_hash[:12]}.duckdb" in r.headers["content-disposition"]
    path = tmp_path / "copy.duckdb"
    path.write_bytes(r.content)
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                  for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        stored_hash = con.execute("SELECT value FROM meta WHERE key = 'content_hash'").fetchone()[0]
    finally:
        con.close()
    assert stored_hash == store.content_hash
    assert tables == {t["table"]: t["rows"] for t in index["database"]["tables"]}
    for k in index["kinds"]:
        if k["kind"] != "gpu-prices":
            assert tables[k["table"]] == k["rows"]


# --------------------------------------------------------------------------- caching, HEAD, 304

@pytest.mark.parametrize("url", [urls.api_export_file("hardware", "csv"), urls.api_export_file("models", "parquet"),
                                 urls.api_export_database()])
def test_if_none_match_is_304(ex_client, store, url):
    for tag in (f'"{store.content_hash}"', f'W/"{store.content_hash}"', f'"other", "{store.content_hash}"', "*"):
        r = ex_client.get(url, headers={"If-None-Match": tag})
        assert r.status_code == 304 and not r.content, tag
        _identity_ok(r, store)
    assert ex_client.get(url, headers={"If-None-Match": '"something-else"'}).status_code == 200


@pytest.mark.parametrize("url", [urls.api_export_file("links", "csv"), urls.api_export_file("links", "parquet"),
                                 urls.api_export_database()])
def test_head_answers_the_headers_without_the_body(ex_client, store, url):
    full = ex_client.get(url)
    head = ex_client.head(url)
    assert head.status_code == 200 and not head.content
    _identity_ok(head, store)
    assert int(head.headers["content-length"]) == len(full.content)
    assert head.headers["content-type"] == full.headers["content-type"]


def test_files_are_written_once_per_content_hash_and_never_beside_the_store(ex_client, store, monkeypatch):
    beside = set(store.path.parent.iterdir())
    url = urls.api_export_file("claims", "csv")
    first = ex_client.get(url).content
    cached = E.exporter_of_app(ex_client.app).file(E.exporter_of_app(ex_client.app).kinds["claims"], "csv")
    assert store.content_hash in str(cached.parent) and cached.parent != store.path.parent
    stat = cached.stat()

    def refuse(*args, **kwargs):
        raise AssertionError("regenerated")

    monkeypatch.setattr(E.Exporter, "_write", refuse)
    assert ex_client.get(url).content == first
    ex_client.app.state.exporter = None  # a new process on the same cache: the file on disk is reused
    assert ex_client.get(url).content == first
    assert cached.stat().st_mtime_ns == stat.st_mtime_ns
    assert set(store.path.parent.iterdir()) == beside


# --------------------------------------------------------------------------- unknown kinds

@pytest.mark.parametrize("url, near", [("/api/v1/export/hardwar.csv", "hardware"),
                                       ("/api/v1/export/model.parquet", "models"),
                                       ("/api/v1/export/hardware.json", "hardware"),
                                       ("/api/v1/export/nothing-like-it.csv", None)])
def test_unknown_kind_is_a_404_problem_listing_the_kinds(ex_client, url, near):
    r = ex_client.get(url)
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["status"] == 404 and body["kinds"] == KINDS
    assert body["see"] == urls.api_export() and "duckdb" in body["formats"]
    if near:
        assert body["suggestions"][0] == near and repr(near) in body["detail"]
    else:
        assert body["suggestions"] == []


# --------------------------------------------------------------------------- the site

class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def _hrefs(html: str) -> list[str]:
    p = _Links()
    p.feed(html)
    return p.hrefs


def test_downloads_page_lists_every_kind_and_its_links_resolve(ex_client, index):
    r = ex_client.get(urls.downloads())
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    hrefs = _hrefs(r.text)
    assert urls.api_export() in hrefs  # its JSON twin
    assert urls.api_export_database() in hrefs
    for k in index["kinds"]:
        assert f'data-kind="{k["kind"]}"' in r.text
        assert k["csv_url"] in hrefs and k["parquet_url"] in hrefs
    for href in sorted({h.split("#")[0] for h in hrefs if h.startswith("/")}):
        answer = ex_client.head(href) if href.startswith(urls.api_export() + "/") else ex_client.get(href)
        assert answer.status_code == 200, href


def test_footer_and_list_pages_link_the_downloads(ex_client):
    assert urls.downloads() in _hrefs(ex_client.get(urls.home()).text)
    for kind in ("hardware", "model", "link", "framework", "price", "source", "case", "claim", "glossary"):
        hrefs = _hrefs(ex_client.get(urls.listing(kind)).text)
        name = COLLECTIONS[kind]
        assert urls.api_export_file(name, "csv") in hrefs and urls.api_export_file(name, "parquet") in hrefs, kind
    detail = _hrefs(ex_client.get(urls.model("qwen3-8b")).text)
    assert not any(h.startswith(urls.api_export() + "/") for h in detail)


def test_export_urls():
    assert urls.api_export() == "/api/v1/export"
    assert urls.api_export_file("gpu-prices", "parquet") == "/api/v1/export/gpu-prices.parquet"
    assert urls.api_export_database() == "/api/v1/export/casebook.duckdb"
    assert urls.downloads() == "/downloads"
    assert urls.export_of_page("/hardware") == "hardware" and urls.export_of_page("/hardware/h100-sxm") is None
    assert urls.export_of_page("/calculators") is None and urls.export_of_page("/") is None


def test_cache_dir_default_is_outside_the_store_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("CASEBOOK_EXPORT_DIR", str(tmp_path / "x"))
    assert E.default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("CASEBOOK_EXPORT_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert E.default_cache_dir() == Path(tmp_path) / "casebook" / "export"
