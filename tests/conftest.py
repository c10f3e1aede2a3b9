"""Shared fixtures: the catalog of data files and a lookup over it (no built store needed)."""
from __future__ import annotations

import pytest

from knowledge.loader import catalog_lookup, default_catalog


@pytest.fixture(scope="session")
def catalog():
    return default_catalog()


@pytest.fixture(scope="session")
def lookup(catalog):
    return catalog_lookup(catalog)
