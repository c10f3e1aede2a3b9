"""Memory of one serving worker: RSS idle after start-up, then after N mixed requests, and the growth.

Starts a real server (`casebook serve --workers 1`, so the serving process is the one started here),
waits for /healthz, reads VmRSS from /proc, sends N requests cycling through a realistic mix (lists,
gets, search, HTML pages, single calculations, a 1,000-point sweep, an MCP tools/call) over one
keep-alive connection, and reads VmRSS again. Processes the server starts (a calculation pool, if any)
are listed on their own line.

Usage: .venv/bin/python benchmarks/bench_memory.py [--requests 10000] [--port 8771]
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
SWEEP = {"model": "qwen3-8b", "tokens": list(range(1024, 1024 + 1000 * 64, 64))}
MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "kv_cache", "arguments": {"model": "qwen3-8b", "tokens": 8192}}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}

#: (method, path, JSON body or None, extra headers): the mix, cycled in order
MIX: list[tuple[str, str, object, dict]] = [
    ("GET", "/api/v1/models?limit=10", None, {}),
    ("GET", "/api/v1/hardware?vendor=NVIDIA&limit=20", None, {}),
    ("GET", "/api/v1/cases?chapter=8", None, {}),
    ("GET", "/api/v1/models/qwen3-8b", None, {}),
    ("GET", "/api/v1/hardware/h100-sxm", None, {}),
    ("GET", "/api/v1/cases/multi-lora-serving", None, {}),
    ("GET", "/api/v1/search?q=kv%20cache", None, {}),
    ("GET", "/api/v1/search?q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81", None, {}),
    ("GET", "/", None, {}),
    ("GET", "/models/qwen3-8b", None, {}),
    ("GET", "/cases/multi-lora-serving", None, {}),
    ("POST", "/api/v1/calculators/kv-cache", {"model": "qwen3-8b", "tokens": 8192}, {}),
    ("POST", "/api/v1/calculators/edge-transfer",
     {"upload_bytes": 30e6, "download_bytes": 5e6, "uplink_bits_per_s": 20e6, "downlink_bits_per_s": 100e6,
      "rtt_s": 0.1, "processing_s": 0.3}, {}),
    ("POST", "/api/v1/calculators/kv-cache", SWEEP, {}),
    ("POST", "/mcp", MCP_CALL, MCP_HEADERS),
]


def rss_mb(pid: int) -> float:
    """Resident set size of one process, MB (VmRSS from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def memory_line(pid: int) -> str:
    """PSS (shared pages divided among the processes mapping them) and private memory of one process, MB:
    the code of the libraries (DuckDB's alone is ~45 MB) is shared by every worker of a server."""
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    fields[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        return "PSS n/a"
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return f"PSS {fields.get('Pss', 0) / 1024:.1f} MB, private {private / 1024:.1f} MB"


def worker_pids(pid: int) -> list[int]:
    """The uvicorn worker processes under `pid` (children running Python, not multiprocessing helpers)."""
    for _ in range(100):
        kids = [k for k in children(pid) if "resource_tracker" not in Path(f"/proc/{k}/cmdline").read_text()]
        if kids:
            return kids
        time.sleep(0.1)
    raise RuntimeError("no worker process found")


def children(pid: int) -> list[int]:
    """Every descendant process of `pid` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
        for k in kids:
            out += [k, *children(k)]
    return out


def free_port() -> int:
    """A free localhost TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mix:
    """The MIX sent in turn over one keep-alive connection, kept open between calls: the warm-up and the mix that
    follows reach the same worker (a new connection may be accepted by another one)."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.reconnects = 0
        self.bodies = [(m, p, json.dumps(b).encode() if b is not None else None,
                        {**({"Content-Type": "application/json"} if b is not None else {}), **h}) for m, p, b, h in MIX]

    def send(self, n: int) -> dict[int, int]:
        """Send `n` requests; count answers by status."""
        statuses: dict[int, int] = {}
        for i in range(n):
            method, path, body, headers = self.bodies[i % len(self.bodies)]
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            resp.read()
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
            if resp.getheader("connection", "").lower() == "close":
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                self.reconnects += 1
        return statuses

    def close(self) -> None:
        self.conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1,
                    help="1: the serving process is the one started here; N > 1: the first of its worker processes")
    args = ap.parse_args(argv)
    port = args.port or free_port()
    casebook = str(Path(sys.executable).with_name("casebook"))
    proc = subprocess.Popen([casebook, "serve", "--workers", str(args.workers), "--port", str(port), "--log-level", "warning",
                             "--no-access-log"], cwd=ROOT, env={**os.environ})
    try:
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
            if proc.poll() is not None:
                print("the server exited before answering /healthz", file=sys.stderr)
                return 1
        time.sleep(1.0)   # let start-up settle
        workers = [proc.pid] if args.workers == 1 else worker_pids(proc.pid)
        while args.workers > 1 and len(workers) < args.workers:     # every worker up before the first reading
            time.sleep(0.2)
            workers = worker_pids(proc.pid)
        idle = {w: rss_mb(w) for w in workers}
        extra = {k: rss_mb(k) for k in children(proc.pid) if k not in idle}
        for w in workers:
            print(f"casebook serve --workers {args.workers}; worker pid {w}: idle RSS {idle[w]:.1f} MB, {memory_line(w)}")
        if extra:
            print(f"other processes: {', '.join(f'{k}: {v:.1f} MB' for k, v in extra.items())}")
        warm_n = len(MIX) * 20
        mix = Mix(port)
        mix.send(warm_n)
        warm = {w: rss_mb(w) for w in workers}
        t0 = time.perf_counter()
        statuses = mix.send(args.requests)
        dt = time.perf_counter() - t0
        mix.close()
        after = {w: rss_mb(w) for w in workers}
        # one keep-alive connection is served by one worker: the one whose memory the requests moved
        served = max(workers, key=lambda w: after[w] - idle[w])
        print(f"{warm_n} warm-up requests (every kind, incl. the first MCP call), then {args.requests} more mixed requests "
              f"({dt:.1f} s, statuses {dict(sorted(statuses.items()))}), over one connection, served by worker {served}"
              + (f" ({mix.reconnects} reconnections: the server closed the connection)" if mix.reconnects else "") + ":")
        for w in workers:
            tag = " (served the requests)" if w == served else " (idle throughout)"
            print(f"  worker {w}{tag}: idle {idle[w]:.1f} MB, after the warm-up {warm[w]:.1f} MB, after the mix "
                  f"{after[w]:.1f} MB, {memory_line(w)}")
        w = served
        print(f"growth of the serving worker: {after[w] - idle[w]:+.1f} MB ({(after[w] / idle[w] - 1) * 100:+.1f} %) vs idle, "
              f"{after[w] - warm[w]:+.1f} MB ({(after[w] / warm[w] - 1) * 100:+.1f} %) vs warm (the warm-up loads what a "
              "worker imports only when first asked: the MCP SDK, ~25 MB, and the request models of the calculators used)")
        kids = [k for k in children(proc.pid) if k not in idle]
        if kids:
            print("other processes now: " + ", ".join(f"{k}: {rss_mb(k):.1f} MB" for k in kids))
        print(f"idle RSS, highest worker: {max(idle.values()):.1f} MB")
        print("goal: idle <= 150 MB, growth <= 10 %  (machine shared: RSS figures are not timing-sensitive)")
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    raise SystemExit(main())
