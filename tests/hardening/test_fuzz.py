"""Schema fuzzing of every operation in-process: no 5xx, and every response matches its own schema.

Schemathesis generates requests from /openapi.json (fixed seed, 100 examples per operation).
The app is built at import time on a store written to a temporary directory.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from api.app import create_app, open_store
from api.settings import Settings
from knowledge.build import build
from knowledge.search import build_index

_DB = Path(tempfile.mkdtemp(prefix="casebook-fuzz-")) / "casebook.duckdb"
build(_DB)
APP = create_app(Settings(db_path=_DB, build_if_stale=False))
# Open the store once: schemathesis starts the app's lifespan for every call, and a lifespan that
# finds the store open reuses it instead of loading it again.
APP.state.store = open_store(APP.state.settings)
APP.state.search_index = build_index(APP.state.store)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_responses_match_schema(case):
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
