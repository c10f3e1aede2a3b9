"""Error answers are bounded (issue 27, finding A): a request with thousands of invalid values answers a small
problem that still names the field and counts what it left out, and so does a batch of many invalid items."""
from __future__ import annotations

import json

from calculators.framework.runner import MAX_ERRORS, MAX_ERRORS_PER_FIELD, RunError, solve

N = 20_000                     # invalid list elements: before the bound, a 3.6 MB 422 body
KV = {"model": "qwen3-8b", "tokens": [-1] * N}


def _fields(problem: dict) -> list[str]:
    return [e["field"] for e in problem["errors"]]


def test_a_sweep_of_invalid_values_answers_a_small_422_naming_the_field_and_the_count(client):
    r = client.post("/api/v1/calculators/kv-cache", json=KV)
    assert r.status_code == 422
    assert len(r.content) < 100_000, len(r.content)
    problem = r.json()
    fields = _fields(problem)
    assert 0 < len(fields) <= MAX_ERRORS_PER_FIELD
    assert all(f.split("[")[0] == "tokens" for f in fields)
    # every element fails, and the scalar member of the union once: N + 1 distinct errors on `tokens`
    assert problem["errors_omitted"] == {"tokens": N + 1 - len(fields)}
    assert f"{N + 1 - len(fields)} more" in problem["detail"] and "tokens" in problem["detail"]


def test_the_bound_is_per_field_and_a_total(client):
    body = {**KV, "requests": [-1] * 500, "tp": -1}
    problem = client.post("/api/v1/calculators/kv-cache", json=body).json()
    fields = _fields(problem)
    assert "tp" in fields                       # a field with one error is never crowded out
    assert sum(f.startswith("requests") for f in fields) == MAX_ERRORS_PER_FIELD
    assert len(fields) <= MAX_ERRORS
    shown = {k: sum(f.split("[")[0] == k for f in fields) for k in ("tokens", "requests")}
    assert problem["errors_omitted"] == {"tokens": N + 1 - shown["tokens"], "requests": 501 - shown["requests"]}


def test_many_unknown_fields_are_bounded_too(client):
    body = {"model": "qwen3-8b", "tokens": 8, **{f"x{i}": 1 for i in range(5000)}}
    r = client.post("/api/v1/calculators/kv-cache", json=body)
    assert r.status_code == 422 and len(r.content) < 100_000
    problem = r.json()
    assert len(problem["errors"]) <= MAX_ERRORS
    assert sum(problem["errors_omitted"].values()) + len(problem["errors"]) == 5000


def test_the_runner_bounds_its_run_error_the_same_way():
    try:
        solve("kv-cache", KV)
    except RunError as err:
        assert len(err.errors) <= MAX_ERRORS_PER_FIELD
        assert err.omitted == {"tokens": N + 1 - len(err.errors)}
        assert len(err.describe()) < 20_000
    else:
        raise AssertionError("an invalid request was answered")


def test_a_batch_of_many_invalid_items_answers_a_bounded_body(client):
    items = [{"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": [-1] * 200}}] * 1000
    r = client.post("/api/v1/calculators:batch", json={"requests": items})
    assert r.status_code == 200
    assert len(r.content) < 1_000_000, len(r.content)
    results = r.json()["results"]
    assert len(results) == 1000 and all(x["status"] == 422 for x in results)
    first, last = results[0]["problem"], results[-1]["problem"]
    assert len(first["errors"]) <= MAX_ERRORS_PER_FIELD and first["errors_omitted"]["tokens"] > 0
    # the items after the first detailed failures still say what failed and how many errors they had
    assert last["title"] == "Invalid request" and last["status"] == 422 and last["errors_count"] == 201
    assert "errors" not in last
    assert len(json.dumps(last)) < 1000


def test_a_batch_keeps_successes_and_details_its_first_failures(client):
    good = {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": 8}}
    bad = {"calculator": "kv-cache", "request": {"model": "qwen3-8", "tokens": 8}}
    results = client.post("/api/v1/calculators:batch", json={"requests": [good, bad, good]}).json()["results"]
    assert [x["status"] for x in results] == [200, 422, 200]
    assert "qwen3-8b" in results[1]["problem"]["errors"][0]["suggestions"]
    assert "errors_omitted" not in results[1]["problem"]


def test_the_mcp_tool_error_says_how_many_errors_it_left_out():
    from api.mcp_server import _problem_text
    from api.service import CalculationFailed

    try:
        solve("kv-cache", KV)
    except RunError as err:
        problem = CalculationFailed.from_run_error(err).body
    text = _problem_text("kv-cache", problem, KV, None, None)
    assert f"{N + 1} fields to fix" in text and f"and {N + 1 - len(problem['errors'])} more on tokens" in text
    assert len(text) < 20_000
