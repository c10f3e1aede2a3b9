"""Memory of one serving worker: idle after start-up, warm after measured estimates on every framework, after a
mix of requests, and after the heaviest request the limits accept.

Starts a real server (`casebook serve --workers 1`, so the serving process is the one started here), waits for
/healthz and reads, per worker, RSS (VmRSS), PSS (shared pages divided among the processes mapping them) and
private memory from /proc:

- idle: after start-up;
- warm: after measured estimates (roofline with `framework` vllm, sglang and trtllm, on H100 and H200 models, which
  load the measured kernel tables), then again after a warm-up of every request kind of the mix (lists, gets,
  search, HTML pages, single calculations, a 1,000-point sweep, an MCP tools/call);
- after the mix: N more mixed requests over one keep-alive connection (the growth);
- heaviest: a `calculators:batch` of deployment-plan items, as many as the limits accept (counted in this process
  with the server's own cost model, `limits.check` / `check_total`), its answer read in full; RSS after it and the
  peak (VmHWM) it reached.

With `--workers N > 1` every worker is measured; the warm-up is sent on several connections so that each worker
serves some of it (the kernel decides which worker accepts a connection), which shows the tables' pages shared
(PSS below RSS). Processes the server starts (a calculation pool, if any) are listed on their own line.

Usage: .venv/bin/python benchmarks/bench_memory.py [--requests 10000] [--workers 1] [--no-heavy]
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


#: measured estimates on every framework (the first of each loads that framework's kernel tables of the system)
MEASURED_MODELS = [("deepseek-r1", "h200-sxm", 8, {"kv_format": "fp8"}), ("llama-3.1-70b", "h100-sxm", 4, {}),
                   ("qwen3-8b", "h100-sxm", 1, {})]
MEASURED: list[tuple[str, str, object, dict]] = [
    ("POST", "/api/v1/calculators/roofline",
     {"model": model, "hardware": hw, "devices": n, "batch": 32, "context_tokens": 2048, "phase": phase,
      "framework": fw, **extra}, {})
    for fw in ("vllm", "sglang", "trtllm") for model, hw, n, extra in MEASURED_MODELS for phase in ("decode", "prefill")]
#: one item of the heaviest batch: the planner over its default hardware, TP degrees and batches
PLAN_ITEM = {"calculator": "deployment-plan",
             "request": {"model": "llama-3.1-70b", "requests_per_s": 1, "input_tokens": 2048, "output_tokens": 256,
                         "ttft_s": 2, "tpot_s": 0.05}}


def heaviest_batch(limit_items: int = 1000) -> tuple[dict, int]:
    """The largest batch of PLAN_ITEM the limits accept, counted with the server's own cost model (so that it
    follows the limits as they are tuned), and its item count."""
    sys.path.insert(0, str(ROOT))
    from calculators.framework import limits
    from calculators.framework.registry import REGISTRY

    calc = REGISTRY[PLAN_ITEM["calculator"]]
    cost = limits.check(calc, calc.request_model.model_validate(PLAN_ITEM["request"]))
    lo, hi = 1, limit_items
    while lo < hi:                       # the largest n whose n items fit every limit together
        mid = (lo + hi + 1) // 2
        try:
            limits.check_total([cost] * mid)
            lo = mid
        except limits.LimitExceeded:
            hi = mid - 1
    return {"requests": [PLAN_ITEM] * lo}, lo


def status_mb(pid: int, key: str) -> float:
    """One line of /proc/<pid>/status in MB (VmRSS: resident now, VmHWM: the peak resident)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


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
    """Requests sent in turn over one keep-alive connection, kept open between calls: the warm-up and the mix that
    follows reach the same worker (a new connection may be accepted by another one)."""

    def __init__(self, port: int, requests: list[tuple[str, str, object, dict]] = MIX):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.reconnects = 0
        self.last = b""
        self.bodies = [(m, p, json.dumps(b).encode() if b is not None else None,
                        {**({"Content-Type": "application/json"} if b is not None else {}), **h}) for m, p, b, h in requests]

    def send(self, n: int) -> dict[int, int]:
        """Send `n` requests; count answers by status."""
        statuses: dict[int, int] = {}
        for i in range(n):
            method, path, body, headers = self.bodies[i % len(self.bodies)]
            status, _ = self.request(method, path, body, headers)
            statuses[status] = statuses.get(status, 0) + 1
        return statuses

    def request(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple[int, int]:
        """One request; (status, bytes of the answer read). `self.last` keeps the start of the answer."""
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # the server closed an idle keep-alive connection (its keep-alive timeout): open a new one
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            self.reconnects += 1
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
        answer = resp.read()
        size, self.last = len(answer), answer[:300]
        if resp.getheader("connection", "").lower() == "close":
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            self.reconnects += 1
        return resp.status, size

    def close(self) -> None:
        self.conn.close()


def figures(pid: int) -> str:
    """RSS, its anonymous (heap) and file-backed parts (code, and the memory-mapped measured tables: page cache that
    every worker maps), PSS and private memory."""
    return (f"RSS {rss_mb(pid):.1f} MB (anonymous {status_mb(pid, 'RssAnon'):.1f}, file-backed "
            f"{status_mb(pid, 'RssFile'):.1f}), {memory_line(pid)}")


def wait_healthy(proc: subprocess.Popen, port: int, tries: int, pause_s: float) -> bool:
    """Poll /healthz until it answers 200 (True), or the server exits (False, said on stderr)."""
    for _ in range(tries):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return True
        except OSError:
            time.sleep(pause_s)
        if proc.poll() is not None:
            print("the server exited before answering /healthz", file=sys.stderr)
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1,
                    help="1: the serving process is the one started here; N > 1: every one of its worker processes")
    ap.add_argument("--no-heavy", action="store_true", help="skip the heaviest accepted batch")
    args = ap.parse_args(argv)
    port = args.port or free_port()
    casebook = str(Path(sys.executable).with_name("casebook"))
    proc = subprocess.Popen([casebook, "serve", "--workers", str(args.workers), "--port", str(port), "--log-level", "warning",
                             "--no-access-log"], cwd=ROOT, env={**os.environ})
    try:
        if not wait_healthy(proc, port, tries=600, pause_s=0.1):
            return 1
        time.sleep(1.0)   # let start-up settle
        workers = [proc.pid] if args.workers == 1 else worker_pids(proc.pid)
        while args.workers > 1 and len(workers) < args.workers:     # every worker up before the first reading
            time.sleep(0.2)
            workers = worker_pids(proc.pid)
        idle = {w: rss_mb(w) for w in workers}
        extra = {k: rss_mb(k) for k in children(proc.pid) if k not in idle}
        print(f"casebook serve --workers {args.workers}")
        for w in workers:
            print(f"  idle   worker {w}: {figures(w)}")
        if extra:
            print(f"other processes: {', '.join(f'{k}: {v:.1f} MB' for k, v in extra.items())}")
        # warm: measured estimates on every framework, then every kind of the mix, on workers x 2 connections
        t0 = time.perf_counter()
        warmups = [Mix(port, MEASURED) for _ in range(1 if args.workers == 1 else 2 * args.workers)]
        warm_statuses: dict[int, int] = {}
        for m in warmups:
            for k, v in m.send(len(MEASURED)).items():
                warm_statuses[k] = warm_statuses.get(k, 0) + v
        measured = {w: rss_mb(w) for w in workers}
        print(f"{len(MEASURED)} measured estimates on {len(warmups)} connection(s) ({time.perf_counter() - t0:.1f} s, "
              f"statuses {dict(sorted(warm_statuses.items()))}): roofline, framework vllm/sglang/trtllm, decode and "
              f"prefill, on {', '.join(f'{m} {h}' for m, h, _, _ in MEASURED_MODELS)}")
        for w in workers:
            print(f"  warm (measured estimates)  worker {w}: {figures(w)}")
        t0 = time.perf_counter()
        warm_statuses = {}
        for m in warmups:
            m.bodies = Mix(port).bodies
            for k, v in m.send(len(MIX) * 20).items():
                warm_statuses[k] = warm_statuses.get(k, 0) + v
        for m in warmups[1:]:
            m.close()
        warm = {w: rss_mb(w) for w in workers}
        print(f"then {len(MIX) * 20} requests of every kind of the mix (incl. the first MCP call, which loads the MCP "
              f"SDK) ({time.perf_counter() - t0:.1f} s, statuses {dict(sorted(warm_statuses.items()))}):")
        for w in workers:
            print(f"  warm (+ every kind)        worker {w}: {figures(w)}")
        mix = warmups[0]
        t0 = time.perf_counter()
        statuses = mix.send(args.requests)
        dt = time.perf_counter() - t0
        after = {w: rss_mb(w) for w in workers}
        # one keep-alive connection is served by one worker: the one whose memory the requests moved
        served = max(workers, key=lambda w: after[w] - warm[w])
        print(f"{args.requests} more mixed requests ({dt:.1f} s, statuses {dict(sorted(statuses.items()))}) over one "
              f"connection, served by worker {served}"
              + (f" ({mix.reconnects} reconnections: the server closed the connection)" if mix.reconnects else "") + ":")
        for w in workers:
            print(f"  mix    worker {w}{' (served the mix)' if w == served else ''}: {figures(w)}")
        w = served
        print(f"growth of the serving worker: {after[w] - idle[w]:+.1f} MB vs idle, {after[w] - warm[w]:+.1f} MB "
              f"({(after[w] / warm[w] - 1) * 100:+.1f} %) vs warm")
        heavy_line = ""
        if not args.no_heavy:
            batch, n = heaviest_batch()
            body = json.dumps(batch).encode()
            t0 = time.perf_counter()
            status, size = mix.request("POST", "/api/v1/calculators:batch", body, {"Content-Type": "application/json"})
            dt = time.perf_counter() - t0
            time.sleep(1.0)
            print(f"heaviest accepted request: a batch of {n} deployment-plan items ({len(body) / 1e3:.0f} kB), "
                  f"status {status}, answer {size / 1e6:.1f} MB in {dt:.1f} s"
                  + (f" ({mix.last.decode('utf-8', 'replace')})" if status != 200 else "") + ":")
            for w in workers:
                print(f"  heavy  worker {w}: {figures(w)}, peak (VmHWM) {status_mb(w, 'VmHWM'):.1f} MB")
            heavy_line = (f", after the heaviest {max(rss_mb(w) for w in workers):.1f} MB, peak "
                          f"{max(status_mb(w, 'VmHWM') for w in workers):.1f} MB")
        mix.close()
        kids = [k for k in children(proc.pid) if k not in idle]
        if kids:
            print("other processes now: " + ", ".join(f"{k}: {rss_mb(k):.1f} MB" for k in kids))
        print(f"summary (highest worker RSS): idle {max(idle.values()):.1f} MB, warm after the measured estimates "
              f"{max(measured.values()):.1f} MB, after every kind {max(warm.values()):.1f} MB, "
              f"after the mix {max(after.values()):.1f} MB{heavy_line}")
        print("goal: idle <= 150 MB, warm <= 200 MB, growth <= 10 % vs warm, peak <= 1 GB "
              "(machine shared: RSS figures are not timing-sensitive)")
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    raise SystemExit(main())
