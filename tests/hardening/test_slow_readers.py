"""A client that asks for a large answer and never reads it cannot hold the worker's memory (issue #27, item 6).

The audit's 12 clients that never read a 74 MB answer took the workers from 1.05 to 2.9 GB. serve now writes a
body in parts (each once the one before has drained) and resets a connection whose client has not taken the
buffered part within `write_timeout_s` (CASEBOOK_WRITE_TIMEOUT_S), dropping the rest of its answer; a client
that reads, however slowly, gets every byte. The server here is serve's own uvicorn configuration in a thread,
with a 1 s write deadline, around a small app that answers large bodies; the connection's fate is read from
its TCP state, never from how long anything took (`benchmarks/bench_slow_readers.py` measures the memory).
"""
from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest

BIG = 24 * 2**20           # far more than the kernel buffers of both ends hold (tcp_wmem max is 4 MiB here)
READABLE = 6 * 2**20
TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8


def _body(n: int) -> bytes:
    return bytes(range(256)) * (n // 256)


class BigAnswers:
    """/big: a BIG body with content-length; /readable: a smaller one; /streamed: a chunked body sent as two large
    messages; /small: a few bytes. Records when each large answer's app call has returned (its body released)."""

    def __init__(self):
        self.returned = {"big": threading.Event(), "readable": threading.Event(), "streamed": threading.Event()}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"].strip("/")
        if path == "streamed":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": _body(READABLE // 2), "more_body": True})
            await send({"type": "http.response.body", "body": _body(READABLE // 2), "more_body": False})
        else:
            body = {"big": _body(BIG), "readable": _body(READABLE)}.get(path, b"ok")
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/octet-stream"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        if path in self.returned:
            self.returned[path].set()


@pytest.fixture
def server(monkeypatch):
    """serve's uvicorn configuration (GuardedHttpToolsProtocol) around BigAnswers, in a thread, write deadline 1 s."""
    import uvicorn

    import api.server as srv
    from api.settings import Settings

    monkeypatch.setenv("CASEBOOK_WRITE_TIMEOUT_S", "1")
    monkeypatch.setattr(srv, "_limits", None)             # read the setting above
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = BigAnswers()
    config = srv.uvicorn_config(Settings(), "127.0.0.1", port, 1, log_level="error", access_log=False)
    config.app = app
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started
    yield port, app
    server.should_exit = True
    thread.join(timeout=10)


def tcp_state(s: socket.socket) -> int:
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def wait_for(predicate, limit_s: float = 60.0) -> bool:
    """Poll `predicate` until it holds; False if it never did (a hang guard, not a speed limit)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def small_answer(port: int) -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/small")
    r = c.getresponse()
    assert r.read() == b"ok"
    c.close()
    return r.status


def test_a_client_that_never_reads_is_reset_and_its_answer_dropped(server):
    port, app = server
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    try:
        assert small_answer(port) == 200          # the worker answers others while the slow reader waits
        assert wait_for(lambda: tcp_state(s) == TCP_CLOSE), f"the connection is still open (state {tcp_state(s)})"
        assert app.returned["big"].wait(30)       # the app's sends were dropped: its call returned, the body is free
        got = 0
        s.settimeout(5)
        try:
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        assert got < BIG // 2, f"{got} of {BIG} bytes arrived: the answer was not cut"
        assert small_answer(port) == 200          # and goes on answering after
    finally:
        s.close()


def _read_slowly(port: int, path: str) -> tuple[dict, bytes]:
    """A client that reads its answer in 64 KiB pieces with pauses: slower than the server writes, never stalled
    for long."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    data = bytearray()
    while chunk := s.recv(64 * 1024):
        data += chunk
        time.sleep(0.005)
    s.close()
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    return {k.lower().decode(): v.decode() for k, v in headers.items()}, body


def test_a_client_that_reads_slowly_gets_every_byte(server):
    port, app = server
    headers, body = _read_slowly(port, "readable")
    assert int(headers["content-length"]) == READABLE
    assert body == _body(READABLE)                # the parts, in order, are the body


def test_a_chunked_answer_sent_in_parts_is_whole(server):
    port, _ = server
    headers, raw = _read_slowly(port, "streamed")
    assert headers["transfer-encoding"] == "chunked"
    body, rest = bytearray(), raw
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2:]
    assert bytes(body) == _body(READABLE // 2) * 2


def test_the_write_timeout_is_read_from_the_environment(monkeypatch):
    from api.settings import Settings

    monkeypatch.delenv("CASEBOOK_WRITE_TIMEOUT_S", raising=False)
    assert Settings().write_timeout_s == 30.0
    monkeypatch.setenv("CASEBOOK_WRITE_TIMEOUT_S", "2.5")
    assert Settings().write_timeout_s == 2.5
    monkeypatch.setenv("CASEBOOK_WRITE_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="CASEBOOK_WRITE_TIMEOUT_S='soon' is not a number"):
        Settings()
