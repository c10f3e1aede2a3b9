"""HTTP caching of read-only answers (api/caching.py): ETag from the content hash, Cache-Control, 304."""
from __future__ import annotations

from api.caching import _matches, etag_for

READS = ["/api/v1/models?limit=5", "/api/v1/models/qwen3-8b", "/api/v1/search?q=kv%20cache", "/", "/models/qwen3-8b"]


def test_read_only_answers_carry_etag_and_cache_control(client):
    """Lists, gets, search and HTML pages answer 200 with a weak ETag, Cache-Control and Vary: Accept."""
    for url in READS:
        r = client.get(url)
        assert r.status_code == 200, url
        assert r.headers["etag"].startswith('W/"'), url
        assert "max-age=" in r.headers["cache-control"], url
        assert "accept" in r.headers["vary"].lower(), url


def test_if_none_match_gives_304_without_body(client):
    """The tag sent back answers 304 with no body and the same ETag; HEAD behaves the same."""
    for url in READS:
        tag = client.get(url).headers["etag"]
        r = client.get(url, headers={"If-None-Match": tag})
        assert r.status_code == 304, url
        assert r.content == b"", url
        assert r.headers["etag"] == tag, url
        assert client.head(url, headers={"If-None-Match": tag}).status_code == 304, url


def test_if_none_match_list_and_star(client):
    """A list of tags containing ours is a match; `*` matches an existing resource but not a missing one."""
    tag = client.get("/api/v1/models/qwen3-8b").headers["etag"]
    assert client.get("/api/v1/models/qwen3-8b", headers={"If-None-Match": f'"other", {tag}'}).status_code == 304
    assert client.get("/api/v1/models/qwen3-8b", headers={"If-None-Match": "*"}).status_code == 304
    assert client.get("/api/v1/models/no-such-model", headers={"If-None-Match": "*"}).status_code == 404


def test_stale_tag_gets_the_full_answer(client):
    """A tag that is not the current one gets a 200 with the body."""
    r = client.get("/api/v1/models/qwen3-8b", headers={"If-None-Match": 'W/"0123456789abcdef"'})
    assert r.status_code == 200
    assert r.json()["id"] == "qwen3-8b"


def test_different_query_or_representation_different_etag(client):
    """Another query string, another path or another Accept (Markdown vs JSON) is another representation."""
    a = client.get("/api/v1/models?limit=5").headers["etag"]
    b = client.get("/api/v1/models?limit=6").headers["etag"]
    c = client.get("/api/v1/models/qwen3-8b").headers["etag"]
    json_tag = client.get("/api/v1/calculators/kv-cache").headers["etag"]
    md = client.get("/api/v1/calculators/kv-cache", headers={"Accept": "text/markdown"})
    assert len({a, b, c}) == 3
    assert md.status_code == 200
    assert md.headers["etag"] != json_tag
    # the JSON tag does not validate the Markdown representation
    assert client.get("/api/v1/calculators/kv-cache", headers={"Accept": "text/markdown",
                                                                "If-None-Match": json_tag}).status_code == 200


def test_no_etag_on_errors_posts_or_health(client):
    """404s, calculator POSTs, /healthz and 422s are never tagged, and If-None-Match does not turn them into 304."""
    missing = client.get("/api/v1/models/no-such-model")
    assert missing.status_code == 404
    assert "etag" not in missing.headers
    post = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": 8192})
    assert post.status_code == 200
    assert "etag" not in post.headers
    tag = client.get("/api/v1/models/qwen3-8b").headers["etag"]
    again = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": 8192},
                        headers={"If-None-Match": tag})
    assert again.status_code == 200
    assert "etag" not in client.get("/healthz").headers
    bad = client.get("/api/v1/models?limit=-1")
    assert bad.status_code == 422
    assert "etag" not in bad.headers


def test_etag_depends_on_content_hash():
    """A new store (another content hash) gives every URL a new tag; the same inputs give the same tag."""
    one = etag_for("aaaa", "/api/v1/models", b"limit=5", b"")
    assert one == etag_for("aaaa", "/api/v1/models", b"limit=5", b"")
    assert one != etag_for("bbbb", "/api/v1/models", b"limit=5", b"")
    assert _matches(b'W/"x", ' + one.encode(), one)
    assert not _matches(b'"y"', one)


def test_cached_answer_is_the_same_answer(client):
    """A repeated GET (served from the worker's answer cache) has the same status, body and headers."""
    first = client.get("/api/v1/models?limit=7")
    second = client.get("/api/v1/models?limit=7")
    assert second.status_code == 200
    assert second.content == first.content
    for name in ("etag", "content-type", "content-length", "cache-control", "vary"):
        assert second.headers[name] == first.headers[name], name
    head = client.head("/api/v1/models?limit=7")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == first.headers["etag"]


def test_answer_cache_is_bounded_and_least_recently_used():
    """The cache never holds more than its budget, drops the least recently used first, and skips big answers."""
    from api.caching import AnswerCache

    cache = AnswerCache(8000)
    entry = ([(b"content-type", b"application/json")], b"x" * 500)   # ~730 bytes with its overhead
    for name in "abcde":
        cache.put(name, *entry)
    assert cache.get("a") is not None          # a is now the most recently used
    for name in "fghijk":
        cache.put(name, *entry)
    assert cache.size <= 8000
    assert cache.get("a") is not None
    assert cache.get("b") is None              # the least recently used went first
    assert cache.get("k") is not None
    cache.put("big", [], b"x" * 1500)   # more than 1/8 of the budget
    assert cache.get("big") is None
