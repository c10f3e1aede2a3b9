"""Shared fixtures: the catalog of data files, a lookup over it, a built store and a test client."""
from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.loader import catalog_lookup, default_catalog


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
