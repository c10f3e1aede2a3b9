"""`casebook validate [--json] [--source S] --db DB`: the validation answer of /api/v1/validation, as tables or JSON.

The subprocess reads the report the session computed for the suite's store (persisted beside it by
api.routes.validation), so it costs a process start, not a recomputation."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "api.cli", "validate", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def answer(client):
    r = client.get("/api/v1/validation")      # computes (or reuses) the session's report and persists it
    assert r.status_code == 200
    return r.json()


def test_json_is_the_answer_of_the_api(built_db, answer):
    r = run("--json", "--db", str(built_db))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == answer


def test_source_filters_and_the_text_prints_each_table(built_db, answer):
    src = next(x["source"] for x in answer["rows"] if x["compared"])
    r = run("--source", src, "--db", str(built_db))
    assert r.returncode == 0, r.stderr
    kept = [x for x in answer["rows"] if x["source"] == src]
    compared = sum(x["compared"] for x in kept)
    assert f"{compared} of {len(kept)} points compared ({answer['stored']} stored" in r.stdout
    for heading in ("by source", "by hardware", "by model family", "by framework", "by load"):
        assert f"\n{heading}\n" in r.stdout, heading
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line and not line.startswith(" ")}
    assert src in lines and lines[src].split()[1] == str(compared)
    other = {x["source"] for x in answer["rows"]} - {src}
    assert not other & set(lines)
