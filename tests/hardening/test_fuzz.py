"""Schema fuzzing of every operation in-process: no 5xx, and every response matches its own schema.

Schemathesis generates requests from /openapi.json in all of its phases: the schema's examples, the
coverage phase (boundary and just-invalid values per field), fuzzing (100 examples per operation) and
the stateful phase (sequences that feed one answer's values into the next request, over the links
schemathesis infers). The app is built at import time on a store written to a temporary directory.

The seed rotates: each pytest run draws a new one (`tests/conftest.py`, printed in the report header)
unless `CASEBOOK_FUZZ_SEED` is set, so successive CI runs try different inputs and a failure can be
replayed with `CASEBOOK_FUZZ_SEED=<seed> pytest tests/hardening/test_fuzz.py`.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from api.app import create_app, open_store
from api.settings import Settings
from knowledge.build import build
from knowledge.search import build_index

SEED = int(os.environ["CASEBOOK_FUZZ_SEED"])  # set once per run by tests/conftest.py (pytest_configure)
CHECKS = [not_a_server_error, response_schema_conformance]

_DB = Path(tempfile.mkdtemp(prefix="casebook-fuzz-")) / "casebook.duckdb"
build(_DB)
APP = create_app(Settings(db_path=_DB, build_if_stale=False))
# Open the store once: schemathesis starts the app's lifespan for every call, and a lifespan that
# finds the store open reuses it instead of loading it again.
APP.state.store = open_store(APP.state.settings)
APP.state.search_index = build_index(APP.state.store)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
# An explicit seed wins over the suite's derandomize profile (schemathesis derives one per operation).
schema.config.seed = SEED


@schema.parametrize()
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_responses_match_schema(case):
    response = case.call()
    case.validate_response(response, checks=CHECKS)


class Workflows(schema.as_state_machine()):
    """Stateful phase: chains of calls (e.g. a list answer's ids fed to the item route)."""

    def validate_response(self, response, case, additional_checks=None, **kwargs):
        case.validate_response(response, checks=CHECKS)


TestWorkflows = Workflows.TestCase
TestWorkflows.settings = settings(max_examples=30, stateful_step_count=6, deadline=None, derandomize=False,
                                  database=None, suppress_health_check=list(HealthCheck))
