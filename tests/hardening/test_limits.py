"""Bounded work per request (issue 14, part 2): every amplification found by the independent test is refused
before any work with a 413 problem naming the limit, the request's cost and how to split it; a request just
under a limit still answers; a batch is one request for the limits; the site's forms, MCP and the CLI refuse
the same way (the check sits in the one runner path).

Most tests lower a limit through its environment variable (read at every check) so that the requests stay
small; the amplification findings themselves are reproduced at their full size under the default limits.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calculators.framework import limits
from calculators.framework.registry import REGISTRY
from api.envelope import run
from calculators.framework.runner import RunError

PROBLEM = "application/problem+json"
ROOT = Path(__file__).resolve().parents[2]


def edge_transfer(points: int, variants: int) -> dict:
    """An edge-transfer sweep of `points` upload sizes with `variants` what-if variants (the finding's shape)."""
    return {"upload_bytes": [1e6 + i for i in range(points)], "uplink_bits_per_s": 20e6,
            "downlink_bits_per_s": 100e6, "rtt_s": 0.05,
            "what_if": [{"label": f"rtt {i}", "rtt_s": 0.001 * i} for i in range(variants)]}


def parallel_split(points: int, variants: int) -> dict:
    """The parallel-split example swept over `points` TP degrees with `variants` what-if variants."""
    body = json.loads(json.dumps(REGISTRY["parallel-split"].example))
    body["tp"] = [1 + i % 8 for i in range(points)]
    body["what_if"] = [{"label": f"link {i}", "link_alpha_s": 1e-6 * (i + 1)} for i in range(variants)]
    return body


def assert_refused(r, limit_name: str) -> dict:
    """A 413 problem+json naming the limit, its env var, the request's cost and how to split it."""
    assert r.status_code == 413, r.text[:500]
    assert r.headers["content-type"].startswith(PROBLEM)
    p = r.json()
    assert p["limit"]["name"] == limit_name
    assert p["limit"]["env"] == "CASEBOOK_LIMIT_" + limit_name.upper()
    assert p["cost"]["evaluations"] > 0
    assert p["advice"] and p["advice"] in p["detail"]
    assert "point-evaluations" in p["detail"]
    return p


# --------------------------------------------------------------------------- the findings, at full size

def test_edge_transfer_sweep_times_variants_is_refused(client):
    r = client.post("/api/v1/calculators/edge-transfer", json=edge_transfer(100_000, 50))
    p = assert_refused(r, "evaluations")
    assert p["cost"]["points"] == 100_000 and p["cost"]["variants"] == 51
    assert p["cost"]["evaluations"] == 5_100_000
    assert "100,000 points × 51 variants = 5.1 M point-evaluations" in p["detail"]
    assert "send the variants (what_if) in separate requests" == p["advice"]
    assert p["errors"][0]["field"] == "what_if"


def test_the_amplifying_batch_does_no_work(client):
    """The finding: four such requests in one batch answered 950 MB; now each item is refused, unanswered."""
    body = {"requests": [{"calculator": "edge-transfer", "request": edge_transfer(100_000, 50)}] * 4}
    r = client.post("/api/v1/calculators:batch", json=body)
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["status"] for x in results] == [413] * 4
    assert {x["problem"]["limit"]["name"] for x in results} == {"evaluations"}
    assert len(r.content) < 64_000           # four problems, not 950 MB of sweep


def test_parallel_split_sweep_times_variants_is_refused(client):
    r = client.post("/api/v1/calculators/parallel-split", json=parallel_split(100_000, 20))
    p = assert_refused(r, "evaluations")
    assert p["cost"]["evaluations"] == 2_100_000
    assert p["advice"] == "send the variants (what_if) in separate requests"


def test_the_same_sweep_without_its_variants_answers(client):
    """The advice works: the base sweep alone is under every limit."""
    r = client.post("/api/v1/calculators/parallel-split", json=parallel_split(100_000, 0))
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["outputs"]["step_time_s"]) == 100_000


def test_routing_cost_counts_its_candidate_pairs():
    """routing-cost multiplies each hit-rate point by its candidates and their pairs."""
    calc = REGISTRY["routing-cost"]
    body = json.loads(json.dumps(calc.example))
    body.pop("cascade", None)
    base = body["candidates"][0]
    body["candidates"] = [dict(base, name=f"c{i}", prefix_hit_rate=[0.5] * 1000) for i in range(6)]
    cost = limits.cost_of(calc, calc.request_model.model_validate(body))
    assert (cost.points, cost.series, cost.evaluations) == (1000, 30, 30_000)


def test_the_planner_counts_its_configurations():
    calc = REGISTRY["deployment-plan"]
    body = dict(calc.example, tp=[1, 2], pp=[1, 2, 4], batch=list(range(1, 11)), ep=[1], hardware=["h100-sxm"], mode="aggregated")
    cost = limits.cost_of(calc, calc.request_model.model_validate(body))
    assert cost.evaluations == 2 * 3 * 10 and cost.field == "batch"


def test_the_planner_cost_uses_the_planners_own_defaults():
    """A raw body that leaves hardware, tp, pp, batch and mode out is costed with what the planner will run: its
    default hardware list, TP degrees, batches and both modes (the cost model once assumed 4 hardware ids, 16
    batches and one mode)."""
    from calculators.families.serving import deployment_plan as plan

    calc = REGISTRY["deployment-plan"]
    body = {k: v for k, v in calc.example.items() if k not in ("hardware", "tp", "pp", "batch", "mode", "ep")}
    validated = calc.request_model.model_validate(body)
    raw, checked = limits.cost_of(calc, body), limits.cost_of(calc, validated)
    tp = len(plan.DEFAULT_TP)
    expected = len(plan.DEFAULT_HARDWARE) * tp * len(plan.DEFAULT_PP) * len(plan.DEFAULT_BATCHES) * (1 + tp) * 2
    assert raw.evaluations == checked.evaluations == expected
    assert validated.hardware == list(plan.DEFAULT_HARDWARE) and validated.batch == list(plan.DEFAULT_BATCHES)


def test_per_calculator_knowledge_is_declared_on_the_calculator():
    """Profiles, series hooks, MCP tools, site previews and page sections are attributes of the entries: no table
    keyed by calculator names is left in the limits, the MCP server or the site."""
    import api.mcp_server as mcp
    import api.site.calculators as site

    assert not hasattr(limits, "PROFILES") and not hasattr(limits, "SERIES")
    assert not hasattr(site, "COMPARE")
    assert set(site.SECTIONS) == {c.page_section for c in REGISTRY.values() if c.page_section}
    assert mcp.DIRECT == tuple(n for n, c in REGISTRY.items() if c.mcp_tool) and len(mcp.DIRECT) >= 8
    assert all(limits.profile_of(c) is c.profile for c in REGISTRY.values() if c.profile)


# --------------------------------------------------------------------------- at and over a limit

def test_just_under_the_limit_answers_and_just_over_is_refused(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "1000")
    ok = client.post("/api/v1/calculators/edge-transfer", json=edge_transfer(100, 9))      # 100 × 10 = 1,000
    assert ok.status_code == 200, ok.text[:300]
    assert len(ok.json()["outputs"]["what_if"]) == 9
    over = client.post("/api/v1/calculators/edge-transfer", json=edge_transfer(100, 10))   # 100 × 11 = 1,100
    p = assert_refused(over, "evaluations")
    assert p["limit"]["value"] == 1000 and p["cost"]["evaluations"] == 1100


def test_a_long_sweep_is_told_how_to_split(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "500")
    r = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": list(range(1, 1201))})
    p = assert_refused(r, "evaluations")
    assert p["advice"] == "split the sweep of `tokens` into requests of at most 500 points"
    assert p["errors"][0]["field"] == "tokens"


def test_the_answer_size_limit_is_named(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_ANSWER_BYTES", "100000")
    points = int(100_000 / limits.profile_of(REGISTRY["kv-cache"]).answer_bytes) + 100
    r = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": list(range(1, points + 1))})
    p = assert_refused(r, "answer_bytes")
    assert "an answer of ~" in p["detail"] and p["cost"]["estimated_answer_bytes"] > 100_000


def test_the_cpu_and_memory_limits_are_named(client, monkeypatch):
    body = {"model": "qwen3-8b", "tokens": list(range(1, 5001))}
    monkeypatch.setenv("CASEBOOK_LIMIT_CPU_S", "0.0001")
    assert_refused(client.post("/api/v1/calculators/kv-cache", json=body), "cpu_s")
    monkeypatch.setenv("CASEBOOK_LIMIT_CPU_S", "2")
    monkeypatch.setenv("CASEBOOK_LIMIT_MEMORY_BYTES", "1000")
    assert_refused(client.post("/api/v1/calculators/kv-cache", json=body), "memory_bytes")


def test_a_bad_limit_setting_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "lots")
    with pytest.raises(ValueError, match="CASEBOOK_LIMIT_EVALUATIONS"):
        limits.limit("EVALUATIONS")


def test_every_default_fits_the_issue_budget():
    """The limits keep a request under ~2 s of CPU, ~256 MB of memory and ~64 MB of answer by the calibration."""
    assert limits.limit("CPU_S") <= 2 and limits.limit("MEMORY_BYTES") <= 256 * 2**20
    assert limits.limit("ANSWER_BYTES") <= 64 * 2**20
    profiles = [c.profile for c in REGISTRY.values() if c.profile]
    assert len(profiles) >= 30
    for p in (*profiles, limits.DEFAULT_PROFILE):
        assert p.cpu_s > 0 and p.memory_bytes > 0 and p.answer_bytes > 0


# --------------------------------------------------------------------------- batches

def test_a_batch_is_one_request_for_the_limits(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "1000")
    item = {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": list(range(1, 401))}}
    ok = client.post("/api/v1/calculators:batch", json={"requests": [item] * 2})            # 800
    assert ok.status_code == 200 and [x["status"] for x in ok.json()["results"]] == [200, 200]
    r = client.post("/api/v1/calculators:batch", json={"requests": [item] * 3})             # 1,200
    assert r.status_code == 413 and r.headers["content-type"].startswith(PROBLEM)
    p = r.json()
    assert p["limit"]["name"] == "evaluations" and p["cost"]["evaluations"] == 1200 and p["cost"]["items"] == 3
    assert p["advice"] == "split the batch into at least 2 batches"
    assert p["errors"][0]["field"] == "requests"


def test_an_item_over_the_limit_fails_alone(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "1000")
    big = {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": list(range(1, 2001))}}
    small = {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": 4096}}
    r = client.post("/api/v1/calculators:batch", json={"requests": [small, big, small]})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["status"] for x in results] == [200, 413, 200]
    assert results[1]["problem"]["limit"]["name"] == "evaluations"


# --------------------------------------------------------------------------- every front end

def test_the_runner_refuses_before_computing(monkeypatch):
    """CLI, derivation checks and every front end share this path."""
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "10")
    with pytest.raises(RunError) as info:
        run("edge-transfer", edge_transfer(11, 0))
    assert info.value.status == 413 and info.value.extensions["limit"]["name"] == "evaluations"


def test_the_site_form_refuses_the_same_way(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_EVALUATIONS", "1000")
    body = json.dumps(edge_transfer(100, 10))
    r = client.get("/calculators/edge-transfer", params={"body": body})
    assert r.status_code == 413
    assert "1,100 point-evaluations" in r.text and "send the variants (what_if) in separate requests" in r.text


def test_mcp_refuses_the_finding_the_same_way(live_server):
    """The finding: one MCP call of ~300 KB held the GIL for seconds and got its worker killed; now it is a
    tool error naming the limit, returned before any work."""
    from tests.api.test_mcp import error_text
    from tests.api.test_mcp import run as mcp_run

    request = edge_transfer(30_000, 50)                      # 30,000 × 51 = 1.53 M point-evaluations
    assert len(json.dumps(request)) > 250_000
    for tool, args in (("edge_transfer", request), ("calculate", {"name": "edge-transfer", "request": request})):
        result = mcp_run(live_server, lambda s, t=tool, a=args: s.call_tool(t, a))
        text = error_text(result)
        assert "Request too large" in text and "= 1.53 M point-evaluations: limit 1 M point-evaluations" in text
        assert "send the variants (what_if) in separate requests" in text


def test_the_cli_refuses_the_same_way(built_db):
    env = {"CASEBOOK_LIMIT_EVALUATIONS": "100", "CASEBOOK_BUILD": "0", "PATH": "/usr/bin:/bin"}
    body = json.dumps({"model": "qwen3-8b", "tokens": list(range(1, 201))})
    r = subprocess.run([sys.executable, "-m", "api.cli", "calc", "kv-cache", "--json", body, "--db", str(built_db)],
                       check=False, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert r.returncode == 1, r.stderr[-500:]
    assert "CASEBOOK_LIMIT_EVALUATIONS" in r.stderr and "200 point-evaluations" in r.stderr


def test_the_limits_are_documented_in_the_openapi_description(client):
    ops = client.get("/openapi.json").json()["paths"]
    for path in ("/api/v1/calculators/kv-cache", "/api/v1/calculators:batch"):
        op = ops[path]["post"]
        assert "CASEBOOK_LIMIT_EVALUATIONS" in op["description"] and "CASEBOOK_LIMIT_ANSWER_BYTES" in op["description"]
        assert {"413", "503"} <= set(op["responses"])
        assert "Retry-After" in op["responses"]["503"]["headers"]
