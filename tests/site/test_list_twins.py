"""Every list page and its JSON twin read the query with one parser: for the same query string they
list the same records in the same order, with the same total, and refuse the same bad fields."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from api.queries import LIST_QUERIES, HardwareQuery


class Items(HTMLParser):
    """The records a list page shows (`data-id` in page order), its total and its JSON twin."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.total: int | None = None
        self.twin: str | None = None
        self.next: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if a.get("data-id") is not None and tag != "nav":
            self.ids.append(a["data-id"])
        if tag == "nav" and "data-total" in a and self.total is None:
            self.total = int(a["data-total"])
        if tag == "a" and "twin-link" in (a.get("class") or "") and self.twin is None:
            self.twin = a["href"]
        if tag == "a" and a.get("rel") == "next" and self.next is None:
            self.next = a["href"]


def items_of(html: str) -> Items:
    p = Items()
    p.feed(html)
    return p


def _key(path: str, item: dict) -> str:
    if path == "/search":
        return f"{item['kind']}:{item['id']}"
    return item.get("slug") or item["id"]


@pytest.fixture(scope="module")
def store(client):
    return client.app.state.store


def _some(store, kind: str, field: str) -> str:
    return next((str(r[field]) for r in store.all(kind) if r.get(field)), "none")


def queries(store) -> list[tuple[str, str]]:
    """(list page, query string): filters, sorts both ways, paging, blanks and case-insensitive values."""
    return [
        ("/cases", ""), ("/cases", "chapter=8"), ("/cases", "section=2&q=model"), ("/cases", "limit=10&offset=20"),
        ("/cases", "chapter=&q=+cache+"),
        ("/hardware", ""), ("/hardware", "vendor=NVIDIA"), ("/hardware", "vendor=nvidia&sort=power_w&desc=true&limit=7"),
        ("/hardware", "sort=memory_bytes&offset=3&limit=5"), ("/hardware", "q=h100&sort=name&desc=yes"),
        ("/hardware", f"architecture={_some(store, 'hardware', 'architecture')}&scope=&vendor="),
        ("/models", ""), ("/models", "family=qwen&sort=layers"), ("/models", "kind=moe"),
        ("/models", "sort=params_total&desc=1&limit=4&offset=2"), ("/models", "q=qwen3&attention="),
        ("/frameworks", ""), ("/frameworks", f"kind={_some(store, 'framework', 'kind')}"), ("/frameworks", "limit=3&offset=3"),
        ("/links", ""), ("/links", "kind=nvlink"), ("/links", "limit=2&offset=1"),
        ("/prices", ""), ("/prices", f"provider={_some(store, 'price', 'provider')}"), ("/prices", "limit=3&offset=1"),
        ("/sources", ""), ("/sources", "kind=datasheet"), ("/sources", "limit=10&offset=10"),
        ("/sources", f"publisher={_some(store, 'source', 'publisher')}"),
        ("/claims", ""), ("/claims", f"verdict={_some(store, 'claim', 'verdict').upper()}"), ("/claims", "limit=5&offset=5"),
        ("/glossary", ""), ("/glossary", f"kind={_some(store, 'glossary', 'kind')}"), ("/glossary", "limit=3&offset=2"),
        ("/search", "q=KV+cache"), ("/search", "q=qwen3&kind=model"),
        ("/search", "q=cache&kind=case&kind=glossary&limit=3&offset=2"), ("/search", "q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81"),
    ]


def test_every_list_page_and_its_json_twin_list_the_same_records(client, store):
    for path, qs in queries(store):
        url = path + ("?" + qs if qs else "")
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        page = items_of(r.text)
        assert page.twin is not None and page.twin.startswith("/api/v1" + path), (url, page.twin)
        for twin in {page.twin, "/api/v1" + url}:  # the page's own link, and the same query string by hand
            body = client.get(twin).json()
            assert page.ids == [_key(path, i) for i in body["items"]], (url, twin)
            if page.total is not None:
                assert page.total == body["total"], (url, twin)
        assert page.ids or path in ("/prices", "/search"), f"{url} lists nothing: a weak comparison"


def test_the_next_page_link_and_the_json_next_agree(client):
    page = items_of(client.get("/hardware?vendor=NVIDIA&limit=4&sort=power_w").text)
    body = client.get("/api/v1/hardware?vendor=NVIDIA&limit=4&sort=power_w").json()
    assert page.next is not None and body["next"]
    second = items_of(client.get(page.next).text)
    assert second.ids == [i["id"] for i in client.get(body["next"]).json()["items"]]


@pytest.mark.parametrize("url, fields", [
    ("/hardware?sort=nonsense", ["sort"]), ("/models?limit=0", ["limit"]), ("/sources?offset=-1", ["offset"]),
    ("/cases?chapter=x&section=100", ["chapter", "section"]), ("/claims?limit=ten", ["limit"]),
    ("/glossary?offset=x", ["offset"]), ("/search?q=cache&kind=nonsense", ["kind[0]"]), ("/links?limit=5000", ["limit"]),
    ("/frameworks?kind=" + "k" * 101, ["kind"]),
])
def test_a_bad_query_is_refused_alike_with_the_same_fields(client, url, fields):
    html = client.get(url)
    api = client.get("/api/v1" + url)
    assert html.status_code == api.status_code == 422
    assert html.headers["content-type"].startswith("text/html")
    assert api.headers["content-type"].startswith("application/problem+json")
    api_fields = sorted(e["field"] for e in api.json()["errors"])
    assert api_fields == sorted(fields)
    for f in fields:
        assert f"<code>{f}</code>" in html.text


def test_every_list_query_names_real_store_columns(store):
    """Each filter of each list query maps to a column the store can filter on."""
    for kind, model in LIST_QUERIES.items():
        columns = set(store.columns(kind))
        assert set(model.exact.values()) <= columns, kind
        assert set(model.substring.values()) <= columns, kind


def test_blank_parameters_mean_not_given():
    q = HardwareQuery.model_validate({"vendor": "", "q": "  h100 ", "limit": "", "sort": ""})
    assert (q.vendor, q.q, q.limit, q.sort) == (None, "h100", 50, None)
