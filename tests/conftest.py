"""Shared fixtures: the catalog of data files, a lookup over it, a built store and a test client."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis' per-example deadline and its too-slow health check are wall-clock limits; on shared,
# noisy machines they fail at random, and speed is measured by the benchmarks, not asserted in unit
# tests. Examples are derandomised so a CI run checks the same cases as the run before it.
settings.register_profile("casebook", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("casebook")

from knowledge.loader import catalog_lookup, default_catalog

#: the reference date of the price rule for the whole suite (CASEBOOK_PRICE_AS_OF)
PRICE_AS_OF = "2026-12-03"


def pytest_configure(config):
    """Draw the schema fuzzer's seed once per run (tests/hardening/test_fuzz.py), before xdist starts its
    workers, so they all read the same one from the environment; `CASEBOOK_FUZZ_SEED` replays a run."""
    import os
    import random

    os.environ.setdefault("CASEBOOK_FUZZ_SEED", str(random.SystemRandom().randrange(2**32)))
    # the default-price rule drops offers over 12 months old: a fixed reference date keeps every answer that
    # prices hardware the same whatever day the suite runs (tests of the rule pass their own date)
    os.environ.setdefault("CASEBOOK_PRICE_AS_OF", PRICE_AS_OF)
    # many tests start an app on a store of their own: a background validation report for each would only take CPU
    # from the tests (those that need the report compute it, once per store content)
    os.environ.setdefault("CASEBOOK_WARM_VALIDATION", "0")


def pytest_report_header(config):
    import os

    return f"schema fuzz seed: CASEBOOK_FUZZ_SEED={os.environ.get('CASEBOOK_FUZZ_SEED')}"


def pytest_terminal_summary(terminalreporter):
    """The seed again at the end, where `-q` (which hides the header) still prints it: CI logs name the run."""
    import os

    terminalreporter.write_line(f"schema fuzz seed: CASEBOOK_FUZZ_SEED={os.environ.get('CASEBOOK_FUZZ_SEED')} "
                                "(set it to replay this run's inputs)")


@pytest.fixture(scope="session")
def catalog():
    return default_catalog()


@pytest.fixture(scope="session")
def lookup(catalog):
    return catalog_lookup(catalog)


@pytest.fixture(scope="session")
def built_db(tmp_path_factory) -> Path:
    """The real data files built into a temporary store (once per test session)."""
    from knowledge.build import build

    db = tmp_path_factory.mktemp("store") / "casebook.duckdb"
    build(db)
    return db


@pytest.fixture(scope="session")
def app(built_db):
    from api.app import create_app
    from api.settings import Settings

    return create_app(Settings(db_path=built_db, build_if_stale=False))


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="session")
def live_server(built_db):
    """`casebook`'s app under uvicorn on a free localhost port, for real HTTP clients (MCP, browsers)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CASEBOOK_DB": str(built_db), "CASEBOOK_BUILD": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env, cwd=str(Path(__file__).resolve().parent.parent))
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
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
