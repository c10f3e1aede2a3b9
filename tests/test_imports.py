"""What a worker imports: heavy packages it may never use stay out of a fresh `import api.app`.

Memory per worker is measured by benchmarks/bench_memory.py (RSS is noisy, so no test asserts a figure);
the imports that decide most of it are exact, and checked here in a fresh interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: imported only when needed: the MCP SDK (and what it pulls in) at the first /mcp request; the rest never
#: by the serving path (the ORM and the DuckDB dialect only write stores: `casebook build`); pint at the first unit
#: string a request gives ("80 GiB": calculators.framework.units)
LAZY = ("mcp", "mcp_types", "api.mcp_server", "sse_starlette", "rich", "cryptography", "pyarrow", "pandas",
        "alembic", "schemathesis", "hypothesis", "uvicorn.workers", "pint")
ORM = ("sqlalchemy", "sqlmodel", "duckdb_engine", "knowledge.tables")


def _modules_after(code: str, built_db: Path) -> set[str]:
    """The names in sys.modules after running `code` in a fresh interpreter against the test store."""
    env = {**os.environ, "CASEBOOK_DB": str(built_db), "CASEBOOK_BUILD": "0"}
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_app_leaves_heavy_packages_out(built_db):
    """`import api.app` (what every worker does) imports none of the lazy packages."""
    loaded = _modules_after("import api.app", built_db)
    assert "api.app" in loaded
    assert sorted(m for m in (*LAZY, *ORM) if m in loaded) == []


def test_started_app_still_leaves_mcp_out_until_first_mcp_request(built_db):
    """Start-up (store, search index) and a REST request do not import the MCP SDK; the first /mcp call does."""
    code = (
        "from fastapi.testclient import TestClient\n"
        "import api.app, sys\n"
        "with TestClient(api.app.app) as c:\n"
        "    assert c.get('/api/v1/models/qwen3-8b').status_code == 200\n"
        "    assert 'mcp' not in sys.modules, 'MCP SDK imported by a REST request'\n"
        "    r = c.post('/mcp', json={'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'},\n"
        "               headers={'Accept': 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-06-18'})\n"
        "    assert r.status_code == 200, r.text\n"
        "    assert any(t['name'] == 'kv_cache' for t in r.json()['result']['tools'])\n"
    )
    loaded = _modules_after(code, built_db)
    assert "api.mcp_server" in loaded
    assert "mcp" in loaded


def test_serving_reads_the_store_without_the_orm(built_db):
    """Opening the store and answering lists, filters, sorted lists, facts, measured pages and the downloads
    index speak SQL to DuckDB directly: SQLAlchemy, SQLModel and the DuckDB dialect stay out of a worker."""
    code = (
        "from fastapi.testclient import TestClient\n"
        "import api.app\n"
        "with TestClient(api.app.app) as c:\n"
        "    for url in ('/api/v1/models?limit=3', '/api/v1/hardware?vendor=nvidia&sort=memory_bytes&order=desc',\n"
        "                '/api/v1/cases?q=kv', '/api/v1/sources', '/api/v1/export', '/api/v1/measurements/fits',\n"
        "                '/hardware/h100-sxm', '/'):\n"
        "        assert c.get(url).status_code == 200, url\n"
    )
    loaded = _modules_after(code, built_db)
    assert "knowledge.store" in loaded
    assert sorted(m for m in ORM if m in loaded) == []


def test_start_up_objects_are_frozen_out_of_the_collector(built_db):
    """The records, indexes and modules a worker builds at start live as long as it does: start-up moves them
    to the collector's permanent generation (gc.freeze), so full collections under load walk only what requests
    allocate (the p99 of benchmarks/load.sh). Objects made by a request are still collected."""
    code = (
        "import gc\n"
        "from fastapi.testclient import TestClient\n"
        "import api.app\n"
        "assert gc.get_freeze_count() == 0\n"
        "with TestClient(api.app.app) as c:\n"
        "    frozen = gc.get_freeze_count()\n"
        "    assert frozen > 100_000, frozen\n"
        "    assert c.get('/api/v1/models?limit=3').status_code == 200\n"
        "    assert 0.9 * frozen < gc.get_freeze_count() <= frozen  # no second freeze per request\n"
        "    class Cycle: pass\n"
        "    a = Cycle(); a.self = a; del a\n"
        "    assert gc.collect() >= 1\n"
    )
    assert "api.app" in _modules_after(code, built_db)


def test_request_models_are_built_at_their_first_request(built_db):
    """A started worker has built no calculator's request validator (they defer their build); the first request
    to one builds that one only, and a warning-free one (FastAPI's body alias is expected and silenced)."""
    code = (
        "import warnings\n"
        "from fastapi.testclient import TestClient\n"
        "import api.app\n"
        "from calculators.framework.registry import REGISTRY\n"
        "built = lambda: sorted(n for n, c in REGISTRY.items() if c.request_model.__pydantic_complete__)\n"
        "with TestClient(api.app.app) as c:\n"
        "    assert c.get('/healthz').status_code == 200\n"
        "    assert built() == [], built()\n"
        "    with warnings.catch_warnings(record=True) as seen:      # the filters in force, recorded\n"
        "        r = c.post('/api/v1/calculators/kv-cache', json={'model': 'qwen3-8b', 'tokens': 8192})\n"
        "    assert r.status_code == 200, r.text\n"
        "    assert built() == ['kv-cache'], built()\n"
        "    pydantic_warnings = [str(w.message) for w in seen if issubclass(w.category, UserWarning) and 'pydantic' in w.filename]\n"
        "    assert pydantic_warnings == [], pydantic_warnings\n"
        "    assert c.post('/api/v1/calculators/kv-cache', json={'model': 'qwen3-8b', 'tokens': -1}).status_code == 422\n"
        "    assert c.get('/openapi.json').status_code == 200\n"
    )
    _modules_after(code, built_db)
