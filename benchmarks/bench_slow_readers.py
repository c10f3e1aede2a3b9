"""Memory of a serving worker with clients that ask for a large answer and never read it (issue #27, item 6).

Starts a real server (`casebook serve --workers 1`, so the serving process is the one started here), warms it
with the heaviest accepted request read in full (a `calculators:batch` of deployment-plan items, sized with the
server's own cost model, as in `bench_memory.py`; `--items` makes it smaller), then opens N connections that
each send that request and never read a byte (a small receive buffer, so the kernel holds little of the answer
for them). The worker's RSS and peak (VmHWM) are read from /proc:

- warm: after one heavy answer read in full;
- held: once the worker has computed every slow reader's answer (its CPU time has stopped moving);
- after the write deadline (`CASEBOOK_WRITE_TIMEOUT_S`, `--write-timeout`): once the server has closed the slow
  readers' connections, or, when `--close` is given, once the clients have closed them themselves;
- meanwhile the worker must go on answering others: /healthz and a small calculation on a fresh connection.

Usage: .venv/bin/python benchmarks/bench_slow_readers.py [--slow-readers 12] [--write-timeout 5] [--items N]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_memory import (
    PLAN_ITEM,
    free_port,
    heaviest_batch,
    rss_mb,
    status_mb,
    wait_healthy,
)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, quiet_s: float = 2.0, limit_s: float = 900.0) -> float:
    """Wait until `pid` has used no CPU for `quiet_s` (every answer computed); the seconds waited."""
    t0 = time.monotonic()
    last, since = cpu_s(pid), time.monotonic()
    while time.monotonic() - t0 < limit_s:
        time.sleep(0.25)
        now = cpu_s(pid)
        if now - last > 0.02:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return time.monotonic() - t0


def request_bytes(port: int, body: bytes) -> bytes:
    return (b"POST /api/v1/calculators:batch HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (port, len(body))) + body


def slow_reader(port: int, raw: bytes) -> socket.socket:
    """A connection that sends the request whole and then reads nothing."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(raw)
    return s


def status_of(s: socket.socket) -> str:
    """The status code of the answer waiting on `s`, peeked (MSG_PEEK: nothing is taken from the socket)."""
    s.settimeout(0)
    try:
        head = s.recv(16, socket.MSG_PEEK)
    except (BlockingIOError, ConnectionResetError):
        return "none"
    parts = head.split()
    return parts[1].decode() if len(parts) > 1 else "none"


def closed_by_server(s: socket.socket) -> bool:
    """Whether the server has reset or closed this connection, seen from the socket's TCP state (TCP_INFO), so that
    nothing is read: a reader that checked by reading would be taking its answer."""
    state = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    return state in (7, 8)      # TCP_CLOSE (reset), TCP_CLOSE_WAIT (the server's FIN arrived)


def others_answered(port: int) -> str:
    """/healthz and a small calculation on fresh connections: status and time of each."""
    out = []
    for method, path, body in (("GET", "/healthz", None),
                               ("POST", "/api/v1/calculators/kv-cache", {"model": "qwen3-8b", "tokens": 8192})):
        t0 = time.perf_counter()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request(method, path, body=json.dumps(body).encode() if body else None,
                      headers={"Content-Type": "application/json"} if body else {})
            r = c.getresponse()
            r.read()
            out.append(f"{path} {r.status} in {(time.perf_counter() - t0) * 1e3:.0f} ms")
            c.close()
        except OSError as exc:
            out.append(f"{path} failed ({exc})")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slow-readers", type=int, default=12)
    ap.add_argument("--write-timeout", type=float, default=None,
                    help="CASEBOOK_WRITE_TIMEOUT_S for the server (default: the setting's default)")
    ap.add_argument("--items", type=int, default=0, help="items of the batch (default: as many as the limits accept)")
    ap.add_argument("--close", action="store_true", help="close the slow readers after the held reading")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    port = args.port or free_port()
    batch, n = heaviest_batch()
    if args.items:
        batch, n = {"requests": [PLAN_ITEM] * args.items}, args.items
    body = json.dumps(batch).encode()
    raw = request_bytes(port, body)
    # the CPU guard's limit raised: on a loaded, shared machine a batch the cost model accepts can pass the default
    # guard's CPU seconds; this benchmark is about holding answers, not computing them
    env = {"CASEBOOK_LIMIT_GUARD_CPU_S": "120", **os.environ}
    if args.write_timeout is not None:
        env["CASEBOOK_WRITE_TIMEOUT_S"] = str(args.write_timeout)
    # `python -m api.cli` from this checkout (the `casebook` script would import wherever the package is installed)
    proc = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--workers", "1", "--port", str(port), "--log-level", "warning",
                             "--no-access-log"], cwd=ROOT, env=env)
    readers: list[socket.socket] = []
    try:
        if not wait_healthy(proc, port, tries=900, pause_s=0.2):
            return 1
        pid = proc.pid
        idle = rss_mb(pid)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        t0 = time.perf_counter()
        c.request("POST", "/api/v1/calculators:batch", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        size = len(r.read())
        c.close()
        settle(pid)
        warm = rss_mb(pid)
        print(f"casebook serve --workers 1, write timeout "
              f"{args.write_timeout if args.write_timeout is not None else 'default'} s; a batch of {n} deployment-plan "
              f"items ({len(body) / 1e3:.0f} kB) answers {r.status}, {size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")
        print(f"  idle {idle:.1f} MB, warm (one heavy answer read) {warm:.1f} MB RSS, peak {status_mb(pid, 'VmHWM'):.1f} MB")
        t0 = time.perf_counter()
        for _ in range(args.slow_readers):   # one at a time: each answer computed before the next request
            readers.append(slow_reader(port, raw))
            settle(pid, quiet_s=1.0)
        held = rss_mb(pid)
        statuses: dict[str, int] = {}
        for s in readers:
            statuses[status_of(s)] = statuses.get(status_of(s), 0) + 1
        print(f"  {args.slow_readers} slow readers (answers {dict(sorted(statuses.items()))}), every answer computed "
              f"({time.perf_counter() - t0:.1f} s): RSS "
              f"{held:.1f} MB, peak {status_mb(pid, 'VmHWM'):.1f} MB; others meanwhile: {others_answered(port)}")
        t0 = time.perf_counter()
        if args.close:
            for s in readers:
                s.close()
            readers = []
            time.sleep(2.0)
            how = "the clients closed their connections"
        else:
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline and not all(closed_by_server(s) for s in readers):
                time.sleep(0.25)
            closed = sum(closed_by_server(s) for s in readers)
            how = f"{closed} of {len(readers)} connections closed by the server"
            time.sleep(1.0)
        after = rss_mb(pid)
        print(f"  after {time.perf_counter() - t0:.1f} s ({how}): RSS {after:.1f} MB, peak "
              f"{status_mb(pid, 'VmHWM'):.1f} MB; others: {others_answered(port)}")
        print(f"summary: warm {warm:.1f} MB -> held by {args.slow_readers} slow readers {held:.1f} MB "
              f"(+{held - warm:.1f}) -> after {after:.1f} MB (+{after - warm:.1f}); peak {status_mb(pid, 'VmHWM'):.1f} MB")
        return 0
    finally:
        for s in readers:
            s.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    raise SystemExit(main())
