"""Storage faults (issue #27 item 9): a full export cache, a store copy damaged under a running server, a full
runtime directory at start, and data files that no longer build while the older store is sound.

Faults are real but made without root tricks: a full disk is a write that lands on /dev/full (the kernel answers
ENOSPC, DuckDB raises its own IO error), damage is bytes overwritten in the middle of a DuckDB block.
"""
from __future__ import annotations

import os
import re
import shutil
from functools import partial
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from knowledge.build import build, content_hash
from knowledge.store import Store, checksum_path
from tests.hardening.test_faults import copy_store, damage
from tests.store.test_build import make_data

FULL = Path("/dev/full")


def app_on(db: Path, export_dir: Path | None = None):
    from api.app import create_app
    from api.settings import Settings

    app = create_app(Settings(db_path=db, build_if_stale=False))
    if export_dir is not None:
        app.state.export_dir = export_dir
    return app


def problem_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    return r.json()


# ---------------------------------------------------------------------------- a full disk under DuckDB's COPY

class _FullCursor:
    """A DuckDB cursor whose `COPY … TO '<file>'` into `under` (anywhere: None) writes to a link to /dev/full beside
    the file instead, so the write fails as on a full disk."""

    def __init__(self, cur, under: Path | None):
        self._cur, self._under = cur, under

    def execute(self, sql: str, params=None):
        found = re.search(r"\) TO '([^']+)' \(", sql)
        if found and (self._under is None or found.group(1).startswith(str(self._under))):
            link = found.group(1) + ".full"
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(FULL, link)
            sql = sql.replace(f"TO '{found.group(1)}'", f"TO '{link}'")
        return self._cur.execute(sql, params or [])

    def __getattr__(self, name):
        return getattr(self._cur, name)


class _FullConnection:
    def __init__(self, con, under: Path | None):
        self._con, self._under = con, under

    def cursor(self):
        return _FullCursor(self._con.cursor(), self._under)

    def __getattr__(self, name):
        return getattr(self._con, name)


def fill_disk(store: Store, under: Path | None) -> None:
    """From now on every file DuckDB writes for `store` below `under` (None: anywhere) hits a full disk."""
    while not store._cursors.empty():
        store._cursors.get_nowait().close()
    con = store._con
    store._con = _FullConnection(con._con if isinstance(con, _FullConnection) else con, under)


@pytest.fixture(scope="module")
def export_app(built_db, tmp_path_factory):
    """An app on a private copy of the store, with its own export cache directory."""
    assert FULL.exists(), "/dev/full simulates the full disk"
    tmp = tmp_path_factory.mktemp("export-faults")
    app = app_on(copy_store(built_db, tmp / "store.duckdb"), tmp / "sound")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client, tmp
    drop_exporter(app)


def drop_exporter(app, export_dir: Path | None = None) -> None:
    """Forget the app's exporter (and remove the private temporary directory it made); the next one writes to
    `export_dir`."""
    ex = getattr(app.state, "exporter", None)
    if ex is not None and getattr(ex, "_private", None) is not None:
        shutil.rmtree(ex._private, ignore_errors=True)
    app.state.exporter = None
    app.state.export_dir = export_dir


KINDS = ("sources", "gpu-prices", "measured-nccl")   # text that needs quoting, NULLs and numbers, a measured table


def test_a_full_export_cache_serves_csv_from_the_store_and_says_why_parquet_cannot(export_app):
    app, client, tmp = export_app
    sound = {k: client.get(f"/api/v1/export/{k}.csv") for k in KINDS}
    for k, r in sound.items():
        assert r.status_code == 200 and len(r.content) > 1000, (k, r.status_code, r.text[:300])

    drop_exporter(app, tmp / "full")                # a fresh exporter on a cache whose disk is full, and so is /tmp's
    fill_disk(app.state.store, None)
    for k, want in sound.items():
        r = client.get(f"/api/v1/export/{k}.csv")
        assert r.status_code == 200, (k, r.status_code, r.text[:500])
        assert r.headers.get("x-export-source") == "store"
        assert r.content == want.content, k         # the bytes DuckDB's own CSV writer made
        assert r.headers["etag"] == want.headers["etag"]
        assert f'filename="casebook-{k}-' in r.headers["content-disposition"]
    body = problem_of(client.get("/api/v1/export/measured-nccl.parquet"), 503)
    assert "No space left on device" in body["detail"] and str(tmp / "full") in body["detail"]
    assert body["csv_url"] == "/api/v1/export/measured-nccl.csv"
    r = client.get("/api/v1/export/gpu-prices.parquet")
    assert r.status_code == 503 and int(r.headers["retry-after"]) > 0
    assert app.state.store.health() is None         # a full disk is not a damaged store
    assert client.get("/healthz").status_code == 200


def test_a_full_or_blocked_export_cache_falls_back_to_a_private_directory(export_app):
    app, client, tmp = export_app
    drop_exporter(app, tmp / "only-this-one-full")  # only the configured cache is full: a private temporary one is not
    fill_disk(app.state.store, tmp / "only-this-one-full")
    r = client.get("/api/v1/export/gpu-prices.parquet")
    assert r.status_code == 200 and r.content.startswith(b"PAR1") and "x-export-source" not in r.headers
    written = app.state.exporter._files["gpu-prices.parquet"]
    assert not written.is_relative_to(tmp) and written.exists()

    blocked = tmp / "a-file"                        # a file where the cache directory should be
    blocked.write_text("not a directory")
    drop_exporter(app, blocked)
    assert client.get("/api/v1/export/sources.csv").status_code == 200


# ---------------------------------------------------------------------------- a store copy damaged while served

def test_a_damaged_store_answers_503_and_health_reads_the_store(built_db, tmp_path):
    db = copy_store(built_db, tmp_path / "store.duckdb")
    # its own export cache: the suite's shared one may already hold this store's export (same content hash), which
    # is sound data and is served without reading the damaged file
    with TestClient(app_on(db, tmp_path / "export"), raise_server_exceptions=False) as client:
        assert client.get("/healthz").status_code == 200
        st = db.stat()
        row = damage(db)
        os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns))   # damage the file system does not see (a bad disk)
        assert client.get("/healthz").status_code == 200    # nothing read the damaged block yet
        for url in (f"/api/v1/measurements/gemm?limit=5&offset={row + 10}", "/api/v1/export/measured-gemm.csv"):
            body = problem_of(client.get(url), 503)
            assert "Corrupt database file" in body["detail"] and body["type"].endswith("/store-unavailable"), body
        body = problem_of(client.get("/healthz"), 503)      # what a read found, health reports from then on
        assert "Corrupt database file" in body["detail"]
        assert client.get("/api/v1/hardware/h100-sxm").status_code == 200   # records held in memory still answer


def test_health_sees_a_store_file_written_to_after_it_was_opened(tmp_path):
    data = make_data(tmp_path)
    db = tmp_path / "small.duckdb"
    build(db, data)
    store = Store(db)
    try:
        assert store.health() is None
        with open(db, "r+b") as f:                 # overwrite bytes in place (same size, same inode)
            f.seek(db.stat().st_size // 2)
            f.write(b"\x5a" * 64)
        reason = store.health()
        assert reason and "written to after it was opened" in reason
        assert store.health() == reason             # and stays so
    finally:
        store.close()


# ---------------------------------------------------------------------------- start-up: a full runtime dir, bad data

@pytest.fixture
def small(tmp_path, monkeypatch):
    """serve's start-up path on a small data set: `build` and `content_hash` read it, a store built from it."""
    import knowledge.build as B

    data = make_data(tmp_path)
    real_build, real_hash = B.build, B.content_hash
    monkeypatch.setattr(B, "build", lambda db, data_dir=data: real_build(db, data_dir))
    monkeypatch.setattr(B, "content_hash", lambda data_dir=data: real_hash(data_dir))
    db = tmp_path / "store.duckdb"
    real_build(db, data)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.delenv("CASEBOOK_STORE_STALE_REASON", raising=False)
    return data, db, runtime


def identity(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, checksum_path(path).read_text()


@pytest.mark.parametrize("may_build", [True, False])
def test_a_full_runtime_dir_is_said_so_and_rebuilds_nothing(small, capsys, may_build):
    from api.cli import _serving_snapshot

    _, db, runtime = small
    before = identity(db)
    (runtime / "incoming.duckdb").symlink_to(FULL)      # the copy's writes hit a full disk
    assert _serving_snapshot(db, runtime, may_build=may_build) is None
    err = capsys.readouterr().err
    assert "cannot write the private copy" in err and "No space left on device" in err, err
    assert "CASEBOOK_RUNTIME_DIR" in err and "not rebuilt" in err
    assert "cannot be read" not in err and "building" not in err, err
    assert identity(db) == before                       # the sound store was left alone
    assert not list(runtime.iterdir())                  # nothing half-written left behind


def test_bad_data_files_serve_the_older_store_and_say_why(small, capsys, monkeypatch):
    from api.cli import _serving_snapshot

    data, db, runtime = small
    before = identity(db)
    old_hash = content_hash(data)
    hardware = data / "hardware.yaml"
    hardware.write_text(hardware.read_text().replace("3.35e12", "-1.0"))   # an impossible bandwidth
    assert content_hash(data) != old_hash
    snap = _serving_snapshot(db, runtime, may_build=True)
    err = capsys.readouterr().err
    assert snap is not None and snap.content_hash == old_hash, err
    assert "the data files do not build" in err and f"serving the older store {db}" in err
    reason = os.environ["CASEBOOK_STORE_STALE_REASON"]
    assert "hardware.yaml: gpu-x: memory_bandwidth_bytes_per_s: impossible value" in reason
    assert identity(db) == before

    with TestClient(app_on(snap.path)) as client:       # a worker of that serve: the reason in /healthz
        h = client.get("/healthz").json()
        assert h["store_stale_reason"] == reason and h["content_hash"] == old_hash
    monkeypatch.delenv("CASEBOOK_STORE_STALE_REASON")
    with TestClient(app_on(snap.path)) as client:
        assert client.get("/healthz").json()["store_stale_reason"] is None


def test_the_app_serves_the_older_store_when_the_data_files_do_not_build(small, monkeypatch):
    """The app's own start-up (build_if_stale, as under plain uvicorn): the same fallback, and none for a store
    that is damaged or missing."""
    import api.app as A
    from api.settings import Settings
    from knowledge.build import BuildError, ensure_servable

    data, db, _ = small
    monkeypatch.setattr(A, "ensure_servable", partial(ensure_servable, data_dir=data))
    assert ensure_servable(db, data) is None
    hardware = data / "hardware.yaml"
    hardware.write_text(hardware.read_text().replace("3.35e12", "-1.0"))
    store = A.open_store(Settings(db_path=db, build_if_stale=True))
    try:
        assert "impossible value" in store.stale_reason and store.content_hash != content_hash(data)
    finally:
        store.close()
    db.unlink()
    with pytest.raises(BuildError):                     # nothing sound to fall back on
        A.open_store(Settings(db_path=db, build_if_stale=True))
