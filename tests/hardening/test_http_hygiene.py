"""HTTP hygiene inside the app (issue 14, part 7): one test per finding, each reproducing what was wrong and
checking the answer now.

What the test client cannot show (an SSE stream that never ends, slow or short bodies, chunked uploads) is
sent to a real uvicorn server in a subprocess, started once for the module with a 1 s body-read timeout.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from api.middleware import McpGuard, host_allowed, origin_allowed
from knowledge.build import check
from knowledge.loader import DATA_DIR, DuplicateKeys, load_catalog, load_yaml

ROOT = Path(__file__).resolve().parents[2]
#: the body-read timeout of the module's server, seconds (short, so that the timeout tests stay fast)
BODY_TIMEOUT_S = 1
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def problem(r: httpx.Response, status: int) -> dict:
    """The problem+json body of `r`, after checking its status and media type."""
    assert r.status_code == status, r.text[:500]
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


@pytest.fixture(scope="module")
def server(built_db) -> Iterator[str]:
    """The app under uvicorn on a free localhost port, with a 1 s body-read timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CASEBOOK_DB": str(built_db), "CASEBOOK_BUILD": "0",
           "CASEBOOK_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S)}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env, cwd=str(ROOT))
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError("uvicorn exited early")
            time.sleep(0.1)
        else:
            raise RuntimeError("server did not become healthy")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def raw_exchange(url: str, head: bytes, parts: list[bytes], pause_s: float = 0.0) -> bytes:
    """Send a request head and body parts over a plain socket (pausing between parts), then read until the
    server closes the connection. The socket timeout makes a held connection fail the test instead of hanging."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(head)
        for part in parts:
            try:
                s.sendall(part)
            except OSError:  # the server answered and closed while we were still sending
                break
            time.sleep(pause_s)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def status_and_body(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of a raw HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


# --------------------------------------------------------------------------- GET /mcp

def test_get_mcp_answers_at_once_instead_of_an_endless_stream(server):
    """A stateless server has no stream to offer: GET (as an SSE client sends it) is a complete 405 with Allow."""
    r = httpx.get(server + "/mcp", headers={"accept": "text/event-stream"}, timeout=10)  # a stream would time out
    body = problem(r, 405)
    assert r.headers["allow"] == "POST" and "stateless" in body["detail"]
    for method in ("HEAD", "DELETE", "PUT"):
        refused = httpx.request(method, server + "/mcp", timeout=10)
        assert (refused.status_code, refused.headers["allow"]) == (405, "POST")
    started = httpx.post(server + "/mcp", headers=MCP_HEADERS, json=INITIALIZE, timeout=10)   # POST still works
    assert started.status_code == 200 and started.json()["result"]["serverInfo"]["name"] == "ai-infra-casebook"


# --------------------------------------------------------------------------- DNS rebinding

def test_mcp_refuses_foreign_hosts_and_origins(client):
    """MCP checks Host (421) and Origin (403) against allowed lists that cover localhost and the test client."""
    body = problem(client.post("/mcp", headers={**MCP_HEADERS, "host": "evil.example"}, json=INITIALIZE), 421)
    assert "evil.example" in body["detail"] and "CASEBOOK_MCP_ALLOWED_HOSTS" in body["detail"]
    body = problem(client.post("/mcp", headers={**MCP_HEADERS, "origin": "http://evil.example"}, json=INITIALIZE), 403)
    assert "http://evil.example" in body["detail"] and "CASEBOOK_MCP_ALLOWED_ORIGINS" in body["detail"]
    local = client.post("/mcp", headers={**MCP_HEADERS, "host": "localhost:8000", "origin": "http://localhost:8000"},
                        json=INITIALIZE)
    assert local.status_code == 200 and local.json()["result"]["protocolVersion"]
    assert client.post("/mcp", headers=MCP_HEADERS, json=INITIALIZE).status_code == 200   # host testserver, no Origin


def test_mcp_allowed_hosts_and_origins_come_from_the_environment(monkeypatch):
    """CASEBOOK_MCP_ALLOWED_HOSTS / _ORIGINS replace the defaults (so localhost is then refused)."""
    monkeypatch.setenv("CASEBOOK_MCP_ALLOWED_HOSTS", "casebook.example.org, 10.0.0.5:8000")
    monkeypatch.setenv("CASEBOOK_MCP_ALLOWED_ORIGINS", "https://casebook.example.org")
    guard = McpGuard(PlainTextResponse("reached"))
    tc = TestClient(guard, base_url="https://casebook.example.org")
    assert tc.post("/mcp", headers={"origin": "https://casebook.example.org"}).text == "reached"
    assert tc.post("/mcp", headers={"host": "10.0.0.5:8000"}).text == "reached"
    assert problem(tc.post("/mcp", headers={"host": "10.0.0.5:9000"}), 421)
    assert problem(tc.post("/mcp", headers={"host": "localhost:8000"}), 421)
    assert problem(tc.post("/mcp", headers={"origin": "http://casebook.example.org"}), 403)
    assert host_allowed("[::1]:8000", ("[::1]",)) and not host_allowed("[::2]:8000", ("[::1]",))
    assert origin_allowed("http://127.0.0.1:5173", ("http://127.0.0.1:*",))
    assert not origin_allowed("http://127.0.0.1.evil.example:80", ("http://127.0.0.1:*",))


# --------------------------------------------------------------------------- Host (audit 27, 8)

def test_slash_redirects_are_relative_whatever_the_host(client):
    """A trailing-slash redirect names the path only: never the request's Host (nor its scheme)."""
    for host in ("evil.example", "127.0.0.1:8000@evil.example", "testserver"):
        r = client.get("/api/v1/models/", headers={"host": host}, follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/api/v1/models", (host, r.headers)
    r = client.get("/api/v1/models/?limit=2&q=qwen", headers={"host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/api/v1/models?limit=2&q=qwen"
    r = client.post("/api/v1/calculators/kv-cache/", headers={"host": "evil.example"}, follow_redirects=False,
                    json={"model": "qwen3-8b", "tokens": 8192})
    assert r.status_code == 307 and r.headers["location"] == "/api/v1/calculators/kv-cache"   # 307 keeps the POST
    r = client.get("/api/v1/models/", follow_redirects=True)
    assert r.status_code == 200 and r.json()["items"]                # the redirect still leads there
    assert client.get("/no-such-page/", follow_redirects=False).status_code == 404
    assert client.get("/", follow_redirects=False).status_code == 200


def test_slash_redirects_of_a_live_server_are_relative(server):
    """The audit's request, over a socket: `Host: evil.example` is not echoed in Location."""
    status, headers, _ = status_and_body(raw_exchange(
        server, b"GET /api/v1/models/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n", []))
    assert status == 307 and headers["location"] == "/api/v1/models", headers


@pytest.mark.parametrize("host", ["127.0.0.1:8000@evil.example", "localhost@evil.example", "127.0.0.1:80:80",
                                  "127.0.0.1:99999", "127.0.0.1:", "127.0.0.1 :80", "[::1", "[::1]x", "[evil]:80",
                                  "local_host", "a..b", "-localhost", "evil.example/x", "1.2.3", "999.0.0.1", ""])
def test_mcp_refuses_a_malformed_host(host):
    """The MCP guard parses Host as host[:port] (a host name, an IPv4 literal or a bracketed IPv6 literal, a port
    of digits up to 65535) and refuses anything else with 400, even when a prefix of it is allowed."""
    tc = TestClient(McpGuard(PlainTextResponse("reached"), hosts=("localhost", "127.0.0.1", "[::1]"), origins=()))
    body = problem(tc.post("/mcp", headers={"host": host}), 400)
    assert "Host" in body["detail"]


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000", "[::1]"])
def test_mcp_still_answers_well_formed_allowed_hosts(host):
    tc = TestClient(McpGuard(PlainTextResponse("reached"), hosts=("localhost", "127.0.0.1", "[::1]"), origins=()))
    assert tc.post("/mcp", headers={"host": host}).text == "reached"


@pytest.mark.parametrize("hosts", [(b"evil.example", b"127.0.0.1"), (b"127.0.0.1", b"evil.example"),
                                   (b"127.0.0.1", b"127.0.0.1")])
def test_mcp_refuses_duplicate_host_headers(server, hosts):
    """Two Host headers (RFC 9112: 400), whichever comes last, even when both are allowed. No body: the server
    refuses on the headers, and a body it never reads would make its close a TCP reset that can reach this socket
    before the answer is read (ConnectionResetError, seen once in CI)."""
    head = (b"POST /mcp HTTP/1.1\r\nHost: %s\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\n"
            b"Content-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % hosts)
    status, headers, answer = status_and_body(raw_exchange(server, head, []))
    assert status == 400 and headers["content-type"].startswith("application/problem+json"), answer[:300]
    assert b"Host" in answer


# --------------------------------------------------------------------------- slow and short bodies

def test_a_body_shorter_than_its_content_length_times_out(server):
    """Ten bytes of a declared hundred, then silence: a 408 problem and a closed connection, not a held one."""
    head = (b"POST /api/v1/calculators/kv-cache HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n")
    status, headers, body = status_and_body(raw_exchange(server, head, [b'{"model":1']))
    assert status == 408 and headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close" and b"CASEBOOK_BODY_TIMEOUT_S" in body


def test_a_slow_sender_times_out_however_steadily_it_trickles(server):
    """One byte every 0.2 s never lets a per-read timeout fire; the whole body has BODY_TIMEOUT_S to arrive."""
    head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 60\r\n\r\n")
    status, headers, body = status_and_body(raw_exchange(server, head, [b" "] * 60, pause_s=0.2))
    assert status == 408 and headers["content-type"] == "application/problem+json"
    assert b'"limit_s":1' in body


# --------------------------------------------------------------------------- chunked bodies and parser-level 400s

def test_a_chunked_body_over_the_limit_is_413_not_400(server):
    """5 MiB sent chunked (no Content-Length) to a calculator and to MCP: a 413 problem naming the limit."""
    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b" " * 2**20

    for path, headers in (("/api/v1/calculators/kv-cache", {"content-type": "application/json"}), ("/mcp", MCP_HEADERS)):
        r = httpx.post(server + path, content=chunks(), headers=headers, timeout=30)
        assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
        assert problem(r, 413)["limit_bytes"] == 4 * 2**20


def test_parser_level_errors_are_problem_json(client):
    """The 400s and 416s the frameworks write as plain text (a malformed Range, MCP's Content-Type check) and
    FastAPI's "error parsing the body" come as problem+json, keeping their headers."""
    assert "Range" in problem(client.get("/static/site.css", headers={"range": "bytes=zz"}), 400)["detail"]
    unsatisfiable = client.get("/static/site.css", headers={"range": "bytes=99999999-"})
    assert problem(unsatisfiable, 416) and unsatisfiable.headers["content-range"].startswith("bytes */")
    assert "Content-Type" in problem(client.post("/mcp", headers={**MCP_HEADERS, "content-type": "text/plain"},
                                                 content=b"{}"), 400)["detail"]


# --------------------------------------------------------------------------- pagination links

def test_next_links_never_come_from_the_host_header(client, monkeypatch):
    """`next` is relative, or under CASEBOOK_BASE_URL when set; a forged Host header never shows up in it."""
    forged = {"host": "evil.example"}
    for path in ("/api/v1/models?limit=2&family=qwen", "/api/v1/measurements/nccl?limit=2"):
        nxt = client.get(path, headers=forged).json()["next"]
        assert nxt.startswith(path.split("?")[0] + "?") and "evil" not in nxt and "offset=2" in nxt
        assert client.get(nxt).status_code == 200
    monkeypatch.setenv("CASEBOOK_BASE_URL", "https://casebook.example.org/")
    nxt = client.get("/api/v1/models?limit=2", headers=forged).json()["next"]
    assert nxt == "https://casebook.example.org/api/v1/models?limit=2&offset=2"


# --------------------------------------------------------------------------- LIKE wildcards

@pytest.mark.parametrize("q", ["%", "_", "%%", "q_en", "qwen%", "/%"])
def test_like_wildcards_in_q_match_literally(client, q):
    """`q=%` used to match every record; wildcards and the escape character now match only themselves."""
    for path in ("/api/v1/models", "/api/v1/hardware", "/api/v1/cases"):
        assert client.get(path, params={"q": q}).json()["total"] == 0, path


def test_substring_filters_still_match(client):
    """Escaping leaves ordinary substrings alone (including '-' and the escape character '/' itself)."""
    names = [m["name"] for m in client.get("/api/v1/models", params={"q": "qwen3-8", "limit": 100}).json()["items"]]
    assert names and all("qwen3-8" in n.lower() for n in names)
    assert client.get("/api/v1/hardware", params={"q": "H100"}).json()["total"] >= 1
    slashed = client.get("/api/v1/hardware", params={"q": "/", "limit": 1000}).json()
    assert slashed["total"] >= 1 and all("/" in h["name"] for h in slashed["items"])


# --------------------------------------------------------------------------- duplicate YAML keys

def test_the_build_refuses_duplicate_keys_in_every_file_it_reads(tmp_path):
    """A repeated key (YAML keeps the last silently) is a build problem naming file, key and line, in the record
    files and in the measured tables' manifest and system map alike."""
    (tmp_path / "measured").mkdir()
    (tmp_path / "measured" / "systems.yaml").write_text("h100-sxm: h100_sxm\nb200: b200_sxm\nh100-sxm: h200_sxm\n",
                                                         encoding="utf-8")
    with pytest.raises(DuplicateKeys) as err:
        load_catalog(tmp_path)
    assert err.value.found == [("-", "h100-sxm", 3)] and err.value.filename == "measured/systems.yaml"
    _, problems = check(tmp_path)
    assert [(p.file, p.field) for p in problems] == [("measured/systems.yaml", "h100-sxm")]
    assert "line 3" in problems[0].message


def test_no_data_file_repeats_a_key():
    """Every YAML file under knowledge/data (records, manifests, collection metadata) loads without a repeat."""
    files = sorted(DATA_DIR.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        load_yaml(path, str(path.relative_to(DATA_DIR)))   # raises DuplicateKeys naming file, key and line


# --------------------------------------------------------------------------- HEAD

@pytest.mark.parametrize("path", ["/api/v1/models?limit=3", "/api/v1/models/qwen3-8b", "/healthz", "/llms.txt", "/",
                                  "/calculators/kv-cache", "/api/v1/calculators/kv-cache", "/openapi.json"])
def test_head_works_on_every_get_route(client, path):
    """HEAD answers as GET would, with the same status and headers, and no body."""
    get, head = client.get(path), client.head(path)
    assert get.status_code == 200 and head.status_code == 200, head.text[:300]
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == get.headers["content-length"]


def test_head_is_still_refused_where_get_is(client):
    """A POST-only route answers HEAD with the GET's 405 (Allow: POST); an unknown route with a 404."""
    r = client.head("/api/v1/calculators:batch")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.content == b""
    assert client.head("/api/v1/nothing-here").status_code == 404
