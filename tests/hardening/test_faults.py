"""Faults around the store and the server process: damaged stores at start, atomic builds, the store deleted
or replaced under a running server, workers killed, ports taken, oversized headers, SIGTERM under load.

Servers are real `casebook serve` subprocesses on free localhost ports, each in its own process group.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import orjson
import pytest

from knowledge.build import build, content_hash, ensure_built, stored_hash
from knowledge.store import StoreInvalid, checksum_path, file_sha256, recorded_checksums, snapshot_store, verify_store
from tests.store.test_build import make_data

ROOT = Path(__file__).resolve().parents[2]
CASEBOOK = [sys.executable, "-m", "api.cli"]


# ---------------------------------------------------------------------------- helpers

def free_port() -> int:
    """A localhost port nobody listens on (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_store(src: Path, dst: Path) -> Path:
    """A copy of a built store with its checksum record (renamed for the copy)."""
    shutil.copy(src, dst)
    checksum_path(dst).write_text(f"{file_sha256(dst)}  {dst.name}\n", encoding="ascii")
    return dst


#: DuckDB's file layout: three 4 KiB headers, then 256 KiB blocks
HEADER_BYTES, BLOCK_BYTES = 3 * 4096, 262144


def damage(path: Path) -> int:
    """Overwrite 4 KiB inside a block that holds table data (a disk or copy error, not a truncation): the middle of
    the first block of `measured_gemm`'s data. Returns the first row (in storage order) whose values that block holds,
    so a test can read exactly the damaged rows whatever the table's size."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        block, group, start = con.execute(
            "SELECT block_id, row_group_id, start FROM pragma_storage_info('measured_gemm') "
            "WHERE persistent AND block_id >= 0 ORDER BY block_id, row_group_id, start LIMIT 1").fetchone()
        before = con.execute(
            "SELECT coalesce(sum(n), 0) FROM (SELECT row_group_id, sum(count) AS n FROM pragma_storage_info('measured_gemm') "
            "WHERE column_id = 0 AND column_path = '[0]' AND row_group_id < ? GROUP BY row_group_id)", [group]).fetchone()[0]
    finally:
        con.close()
    with open(path, "r+b") as f:
        f.seek(HEADER_BYTES + block * BLOCK_BYTES + BLOCK_BYTES // 2)
        f.write(b"\xa5" * 4096)
    return int(before) + int(start)


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    port: int
    log: Path

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def start_serve(db: Path, log: Path, *args: str, env: dict[str, str] | None = None, wait: bool = True,
                port: int | None = None) -> Served:
    """`casebook serve` on `port` (default: a free one) in its own process group; waits for /healthz unless
    `wait` is False."""
    port = free_port() if port is None else port
    out = open(log, "w")
    proc = subprocess.Popen([*CASEBOOK, "serve", "--port", str(port), "--db", str(db), "--no-access-log",
                             "--log-level", "warning", *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    out.close()
    served = Served(proc, f"http://127.0.0.1:{port}", port, log)
    if wait:
        for _ in range(600):
            if proc.poll() is not None:
                raise AssertionError(f"serve exited with {proc.returncode}:\n{served.text()}")
            try:
                if httpx.get(served.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
    return served


def stop(served: Served) -> int:
    """SIGTERM the server's process group (ours) and wait; SIGKILL it if it hangs. Returns serve's exit status."""
    if served.proc.poll() is None:
        os.killpg(served.proc.pid, signal.SIGTERM)
        try:
            served.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(served.proc.pid, signal.SIGKILL)
            served.proc.wait(timeout=10)
    return served.proc.returncode


def worker_pids(parent: int) -> set[int]:
    """The uvicorn worker processes (multiprocessing spawn children) of a serve process, from /proc."""
    found = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in cmdline:
            found.add(int(d.name))
    return found


def wait_for_workers(parent: int, count: int, without: set[int]) -> set[int]:
    """Wait until `parent` has `count` workers none of which is in `without`; returns their pids."""
    for _ in range(300):
        pids = worker_pids(parent)
        if len(pids) == count and not pids & without:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"workers of {parent}: {worker_pids(parent)}, expected {count} new ones")


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (an orphan's zombie may wait for a reaper that never comes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def listening(port: int) -> bool:
    """Whether anything accepts a TCP connection on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def health(url: str) -> httpx.Response:
    """GET /healthz on a fresh connection (so successive calls spread over the workers)."""
    return httpx.get(url + "/healthz", headers={"Connection": "close"}, timeout=10)


def serve_exit(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `casebook serve` expecting it to stop on its own; its status and output."""
    return subprocess.run([*CASEBOOK, "serve", "--db", str(db), "--log-level", "warning", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def private_copy(log: str) -> Path:
    """The private copy of the store a server said it serves."""
    return Path(log.split("from the private copy ", 1)[1].split()[0])


def damage_anywhere(path: Path) -> None:
    """Flip bytes in the middle of a file whatever it holds (caught by the build's checksum record)."""
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 2)
        f.write(b"\x5a" * 64)


# ---------------------------------------------------------------------------- verification at start

def test_verify_reads_every_table_and_names_the_damage(built_db, tmp_path):
    # a private copy: the session's app holds built_db open with its own DuckDB configuration, and DuckDB
    # refuses a second connection to one file with another configuration in the same process
    good_db = copy_store(built_db, tmp_path / "good.duckdb")
    good = verify_store(good_db, accepted=recorded_checksums(good_db))
    assert good.tables >= 20 and good.rows > 1_000_000 and good.content_hash == stored_hash(good_db)

    # bytes that no table read touches (free blocks) are caught by the checksum the build recorded
    with pytest.raises(StoreInvalid, match="checksum sha256:.* does not match"):
        verify_store(good_db, accepted={"0" * 64})

    damaged = copy_store(built_db, tmp_path / "damaged.duckdb")
    damage(damaged)
    for accepted in (recorded_checksums(damaged), None):  # with the record and without it
        with pytest.raises(StoreInvalid, match="table measured_gemm cannot be read: Corrupt database file"):
            verify_store(damaged, accepted=accepted)

    truncated = tmp_path / "truncated.duckdb"
    shutil.copy(built_db, truncated)
    os.truncate(truncated, truncated.stat().st_size // 2)
    with pytest.raises(StoreInvalid, match="not a readable DuckDB store|cannot be read"):
        verify_store(truncated)

    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(StoreInvalid, match="tables missing"):
        verify_store(empty)


@pytest.mark.parametrize("fault", ["truncated", "damaged"])
def test_serve_refuses_a_damaged_store_when_building_is_off(built_db, tmp_path, fault):
    db = copy_store(built_db, tmp_path / "store.duckdb")
    if fault == "truncated":
        os.truncate(db, db.stat().st_size // 3)
    else:
        damage(db)
    r = serve_exit(db, "--no-build", "--port", str(free_port()))
    assert r.returncode == 1, r.stderr
    assert f"refusing to serve {db}" in r.stderr and "casebook build" in r.stderr
    reason = {"truncated": "not a readable DuckDB store", "damaged": "table measured_gemm cannot be read"}[fault]
    assert reason in r.stderr
    assert "Uvicorn running" not in r.stderr            # never served


def test_ensure_built_rebuilds_a_damaged_store(tmp_path):
    data = make_data(tmp_path)
    db = tmp_path / "small.duckdb"
    build(db, data)
    damage_anywhere(db)
    assert ensure_built(db, data) is True                 # damaged: rebuilt
    assert verify_store(db, accepted=recorded_checksums(db)).content_hash == content_hash(data)
    assert ensure_built(db, data) is False                # sound and current: left alone


# ---------------------------------------------------------------------------- atomic build

def test_build_writes_beside_and_swaps_atomically(tmp_path, monkeypatch):
    import knowledge.build as B

    data = make_data(tmp_path)
    db = tmp_path / "store.duckdb"
    build(db, data)
    old_hash, old_sha = stored_hash(db), file_sha256(db)
    reader = duckdb.connect(str(db), read_only=True)     # a server's open connection to the old file
    (data / "cases.yaml").write_text((data / "cases.yaml").read_text().replace("A case.", "A changed case."))
    seen = {}
    real_write_file = B._write_file

    def observing_write_file(validated, tmp, digest, data_dir):
        counts = real_write_file(validated, tmp, digest, data_dir)
        # the new store is complete in a temporary file in the same directory; the old one is untouched
        seen["tmp_dir"] = tmp.parent
        seen["old_still_there"] = (stored_hash(db), file_sha256(db))
        seen["old_verifies"] = verify_store(db, accepted=recorded_checksums(db)).content_hash
        return counts

    monkeypatch.setattr(B, "_write_file", observing_write_file)
    build(db, data)
    assert seen["tmp_dir"] == db.parent
    assert seen["old_still_there"] == (old_hash, old_sha) and seen["old_verifies"] == old_hash
    # the connection opened before the swap still reads the old, whole file
    assert reader.execute("SELECT value FROM meta WHERE key = 'content_hash'").fetchone()[0] == old_hash
    assert "A case." in reader.execute("SELECT doc FROM case_study").fetchone()[0]   # not "A changed case."
    reader.close()  # (DuckDB shares one open instance per path within a process: close it to see the new file)
    assert stored_hash(db) == content_hash(data) != old_hash
    assert recorded_checksums(db) == {file_sha256(db)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "store.duckdb", "store.duckdb.sha256"]


def test_snapshot_is_private_read_only_and_named_by_content(built_db, tmp_path):
    src = copy_store(built_db, tmp_path / "src.duckdb")
    private = tmp_path / "private"
    private.mkdir()
    snap = snapshot_store(src, private)
    assert snap.path.parent == private and snap.content_hash[:16] in snap.path.name
    assert snap.path.stat().st_mode & 0o222 == 0 and snap.sha256 == file_sha256(src)
    expected = stored_hash(src)
    src.unlink()                                          # the original may go; the copy serves on
    assert verify_store(snap.path).content_hash == expected


# ---------------------------------------------------------------------------- slow and idle clients

async def echo_app(scope, receive, send):
    """A minimal ASGI app: reads the whole body and answers with its length."""
    if scope["type"] != "http":
        return
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"%d" % size
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def guarded(monkeypatch):
    """serve's uvicorn configuration around `echo_app`, in a thread, with short head (0.5 s) and body (1 s) deadlines."""
    import uvicorn

    import api.server as srv
    from api.settings import Settings

    monkeypatch.setenv("CASEBOOK_HEADER_TIMEOUT_S", "0.5")
    monkeypatch.setenv("CASEBOOK_BODY_TIMEOUT_S", "1")
    monkeypatch.setenv("CASEBOOK_MAX_HEADER_BYTES", "4096")
    monkeypatch.setattr(srv, "_limits", None)             # read the settings above
    port = free_port()
    config = srv.uvicorn_config(Settings(), "127.0.0.1", port, 1, log_level="error", access_log=False)
    config.app = echo_app
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def exchange(port: int, *parts: bytes) -> bytes:
    """Send `parts` on one connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        for part in parts:
            s.sendall(part)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_idle_and_slow_clients_are_timed_out(guarded):
    assert exchange(guarded) == b""                       # connected, sent nothing: closed, no answer
    slow_head = exchange(guarded, b"GET / HTTP/1.1\r\nHost: x\r\n")
    assert slow_head.startswith(b"HTTP/1.1 408 ") and b"CASEBOOK_HEADER_TIMEOUT_S" in slow_head
    short_body = exchange(guarded, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 40)
    assert short_body.startswith(b"HTTP/1.1 408 ") and b"CASEBOOK_BODY_TIMEOUT_S" in short_body
    head, _, body = short_body.partition(b"\r\n\r\n")
    assert b"application/problem+json" in head and orjson.loads(body)["status"] == 408


def test_well_behaved_requests_pass_the_guards(guarded):
    post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-Fill: " + b"a" * 1500 + b"\r\n\r\nhello"
    last = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Fill: " + b"a" * 3000 + b"\r\n\r\n"
    # pipelined on one connection, the heads together over the 4096-byte limit: each one is counted afresh
    answer = exchange(guarded, post + post + last)
    assert answer.count(b"HTTP/1.1 200 ") == 3 and answer.endswith(b"0")
    # a body split over several reads, with pauses shorter than the deadline
    with socket.create_connection(("127.0.0.1", guarded), timeout=20) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 6\r\n\r\nab")
        time.sleep(0.1)
        s.sendall(b"cdef")
        assert s.recv(4096).endswith(b"\r\n\r\n6")
    too_big = exchange(guarded, b"GET / HTTP/1.1\r\nHost: x\r\nX-Fill: " + b"a" * 5000 + b"\r\n\r\n")
    assert too_big.startswith(b"HTTP/1.1 431 ") and b"4096 bytes" in too_big


# ---------------------------------------------------------------------------- start-up: rebuild and exit status

def test_serve_rebuilds_a_damaged_store_before_serving_it(tmp_path, monkeypatch, capsys):
    """serve's start-up path with building allowed, on a small data set (the real one takes seconds to build)."""
    import knowledge.build as B
    from api.cli import _serving_snapshot

    data = make_data(tmp_path)
    real_build, real_hash = B.build, B.content_hash
    monkeypatch.setattr(B, "build", lambda db: real_build(db, data))
    monkeypatch.setattr(B, "content_hash", lambda data_dir=data: real_hash(data_dir))
    db = tmp_path / "store.duckdb"
    real_build(db, data)
    damage_anywhere(db)
    with pytest.raises(StoreInvalid) as bad:
        verify_store(db, accepted=recorded_checksums(db))
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    snap = _serving_snapshot(db, runtime, may_build=True)
    err = capsys.readouterr().err
    assert f"building {db}: {bad.value.reason}" in err
    assert snap.content_hash == real_hash(data) and snap.path.parent == runtime
    assert verify_store(db, accepted=recorded_checksums(db)).content_hash == snap.content_hash  # repaired in place
    db.unlink()
    assert _serving_snapshot(db, runtime, may_build=False) is None
    assert "refusing to serve" in capsys.readouterr().err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_exits_non_zero_when_the_port_is_taken(built_db, tmp_path, workers):
    db = copy_store(built_db, tmp_path / "store.duckdb")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = serve_exit(db, "--no-build", "--port", str(port), "--workers", workers,
                       env={"CASEBOOK_RUNTIME_DIR": str(tmp_path)})
    assert r.returncode == 3, r.stderr
    assert "address already in use" in r.stderr.lower() and "could not start" in r.stderr
    assert private_copy(r.stderr).parent.parent == tmp_path
    assert not list(tmp_path.glob("casebook-serve-*"))     # removed on the way out


@pytest.mark.parametrize("workers", [1, 2])
def test_server_exits_non_zero_when_workers_cannot_boot(tmp_path, workers):
    """The app's workers cannot open their store (the old outage: a replacement worker after the file went)."""
    code = ("import sys; from api.server import run, uvicorn_config; from api.settings import Settings; "
            f"sys.exit(run(uvicorn_config(Settings(), '127.0.0.1', {free_port()}, {workers}, log_level='warning')))")
    env = {**os.environ, "CASEBOOK_DB": str(tmp_path / "gone.duckdb"), "CASEBOOK_BUILD": "0"}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 3, r.stderr
    assert "gone.duckdb" in r.stderr and "Application startup failed" in r.stderr


def test_serve_exits_non_zero_on_a_bad_setting(built_db):
    r = subprocess.run([*CASEBOOK, "serve", "--db", str(built_db)], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "CASEBOOK_MAX_HEADER_BYTES": "lots"})
    assert r.returncode == 2 and "CASEBOOK_MAX_HEADER_BYTES='lots' is not an integer" in r.stderr


# ---------------------------------------------------------------------------- a running 2-worker server
# One server for the tests below, in file order; the last one stops it with SIGTERM.

@pytest.fixture(scope="module")
def served(built_db, tmp_path_factory):
    """A 2-worker `casebook serve` on a copy of the built store (log level info: its shutdown is watched)."""
    tmp = tmp_path_factory.mktemp("served")
    db = copy_store(built_db, tmp / "store.duckdb")
    # a long body deadline: the SIGTERM test holds a request's body until both workers are shutting down
    s = start_serve(db, tmp / "serve.log", "--workers", "2", "--no-build", "--log-level", "info",
                    env={"CASEBOOK_BODY_TIMEOUT_S": "120"})
    s.db, s.built_hash = db, stored_hash(db)  # type: ignore[attr-defined]
    assert private_copy(s.text()).exists()
    yield s
    assert stop(s) == 0, s.text()
    assert not private_copy(s.text()).parent.exists()     # the private copy goes with the server


def test_store_deleted_and_replaced_under_the_server_then_workers_killed(served, tmp_path):
    before = health(served.url).json()["content_hash"]
    assert before == served.built_hash
    # delete the store, then put another store (other content) at its path, as a rebuild would
    served.db.unlink()
    checksum_path(served.db).unlink()
    build(served.db, make_data(tmp_path))
    assert stored_hash(served.db) != before
    parent = served.proc.pid
    first = worker_pids(parent)
    assert len(first) == 2
    one, other = sorted(first)
    os.kill(one, signal.SIGKILL)
    # meanwhile the other worker answers: no outage
    assert {health(served.url).status_code for _ in range(10)} == {200}
    os.kill(other, signal.SIGKILL)
    wait_for_workers(parent, 2, without=first)
    for _ in range(600):                                  # until the replacements answer
        try:
            if health(served.url).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    hashes, statuses = set(), []
    for _ in range(20):                                   # fresh connections: only replacements are left to answer
        r = health(served.url)
        statuses.append(r.status_code)
        hashes.add(r.json()["content_hash"])
        statuses.append(httpx.get(served.url + "/api/v1/models/qwen3-8b", headers={"Connection": "close"},
                                  timeout=30).status_code)
    assert set(statuses) == {200} and hashes == {before}
    assert served.proc.poll() is None


def test_an_oversized_request_head_is_refused_before_it_ends(served):
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as s:
        # 150 KB of header and no blank line: the server answers without waiting for the head to end
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 150_000)
        answer = b""
        while chunk := s.recv(65536):                     # the server half-closes after its answer
            answer += chunk
    print(f"431 after {1000 * (time.perf_counter() - t0):.1f} ms")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"content-type: application/problem+json" in head.lower()
    problem = orjson.loads(body)
    assert problem["status"] == 431 and "65536 bytes" in problem["detail"]
    ok = health(served.url)
    assert ok.status_code == 200 and "server" not in ok.headers


def test_sigterm_under_load_drains_without_5xx(served):
    statuses: list[int] = []
    errors: list[str] = []
    stop_load = threading.Event()

    def load() -> None:
        with httpx.Client(base_url=served.url, timeout=30) as c:
            while not stop_load.is_set():
                try:
                    statuses.append(c.post("/api/v1/calculators/kv-cache",
                                           json={"model": "qwen3-8b", "tokens": [1024, 8192, 32768]}).status_code)
                except httpx.HTTPError as exc:     # refused or closed once the listeners are gone: not a 5xx
                    errors.append(type(exc).__name__)
                    time.sleep(0.05)

    body = orjson.dumps({"model": "qwen3-8b", "tokens": 8192})
    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        # an in-flight request: its head is read and the app waits for its body (100-continue proves it)
        with socket.create_connection(("127.0.0.1", served.port), timeout=60) as inflight:
            inflight.sendall(b"POST /api/v1/calculators/kv-cache HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body))
            assert inflight.recv(1024).startswith(b"HTTP/1.1 100 ")
            while len(statuses) < 20:
                time.sleep(0.05)
            os.kill(served.proc.pid, signal.SIGTERM)     # to the supervisor, as a container runtime does
            for _ in range(600):                         # until both workers have begun their shutdown
                if served.text().count("Shutting down") == 2:
                    break
                time.sleep(0.1)
            assert served.text().count("Shutting down") == 2
            inflight.sendall(body)
            answer = b""
            while chunk := inflight.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 ") and b"connection: close" in answer.lower()
        assert served.proc.wait(timeout=60) == 0, served.text()
    finally:
        stop_load.set()
        for t in threads:
            t.join(timeout=60)
    print(f"{len(statuses)} answers, {len(errors)} connection errors after SIGTERM: {sorted(set(errors))}")
    assert len(statuses) >= 20 and set(statuses) == {200}      # no 5xx, nor any other failure


# ---------------------------------------------------------------------------- the supervisor killed (audit 27, 7)

def test_a_killed_supervisor_takes_its_workers_and_its_copy_along(built_db, tmp_path):
    """SIGKILL of a 2-worker serve: its workers stop serving and exit (they die with their parent), and the
    next serve on the same port starts and removes the private copy the dead one left behind."""
    db = copy_store(built_db, tmp_path / "store.duckdb")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = {"CASEBOOK_RUNTIME_DIR": str(runtime)}
    first = start_serve(db, tmp_path / "first.log", "--workers", "2", "--no-build", env=env)
    try:
        copy = private_copy(first.text())
        assert copy.parent.parent == runtime
        workers = wait_for_workers(first.proc.pid, 2, without=set())
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
        for _ in range(300):
            if not any(alive(p) for p in workers) and not listening(first.port):
                break
            time.sleep(0.1)
        assert not [p for p in workers if alive(p)], "workers outlived their supervisor"
        assert not listening(first.port), "the port is still served without a supervisor"
        assert copy.exists()                               # nobody was left to remove it

        second = start_serve(db, tmp_path / "second.log", "--workers", "2", "--no-build", env=env, port=first.port)
        try:
            assert health(second.url).status_code == 200
            assert not copy.parent.exists(), "the dead server's private copy is still there"
            mine = private_copy(second.text())
            assert mine.exists() and [p.name for p in runtime.iterdir()] == [mine.parent.name]
            # a running server's copy is never taken for a stale one: a third start (port taken) leaves it
            r = serve_exit(db, "--no-build", "--port", str(first.port), env=env)
            assert r.returncode == 3, r.stderr
            assert mine.exists() and health(second.url).status_code == 200
        finally:
            assert stop(second) == 0, second.text()
        assert not list(runtime.iterdir())
    finally:
        try:
            os.killpg(first.proc.pid, signal.SIGKILL)       # whatever of the first server is left
        except ProcessLookupError:
            pass


def test_a_worker_whose_parent_is_not_its_supervisor_stops_itself():
    """The parent watch behind PR_SET_PDEATHSIG (other systems, or a parent gone before the worker asked):
    a process told its supervisor is a pid that is not its parent sends itself SIGTERM."""
    code = ("import os, time; from api.server import die_with_parent; die_with_parent(os.getppid() + 1); "
            "time.sleep(60)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=50)
    assert r.returncode == -signal.SIGTERM, r.stderr
