"""GET /api/v1/validation and /api/v1/validation/{id} over the suite's store: every stored benchmark point appears
once, compared + not compared = stored, each table counts and summarises exactly the rows it groups, filters keep
exactly the rows they name and recompute the tables over them, bad filters are 422s naming the field, unknown ids
404s; the report is computed once per process (filtered answers and a fresh process read it from memory or from
its persisted copy, never recompute). Structure and invariants only: how accurate the estimate is, the report
itself says.

One report per test session: `api.routes.validation.report` keeps it per store version in the process, so every
test here (and tests/site/test_validation_page.py, tests/test_cli_validate.py) shares the first computation."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from api.routes import validation as V
from knowledge import validation as KV

API = "/api/v1/validation"
METRICS = ("tpot_s", "output_tokens_per_s_per_device", "ttft_s")


@pytest.fixture(scope="module")
def store(client):
    return client.app.state.store


@pytest.fixture(scope="module")
def full(client):
    r = client.get(API)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    return r.json()


@pytest.fixture(scope="module")
def points(store):
    return {p["id"]: p for p in store.all("benchmark")}


def test_every_stored_point_appears_once(full, points):
    ids = [r["id"] for r in full["rows"]]
    assert sorted(ids) == sorted(points) and len(ids) == len(set(ids)) >= 1
    assert full["stored"] == full["points"] == len(points)
    assert full["compared"] + full["not_compared"] == full["stored"]
    assert full["compared"] == sum(r["compared"] for r in full["rows"]) >= 1
    assert set(full["not_compared_reasons"]) == {r["id"] for r in full["rows"] if not r["compared"]}
    for r in full["rows"]:
        p = points[r["id"]]
        assert (r["source"], r["model_hf"], r["hardware_name"]) == (p["source"], p["model_hf"], p["hardware_name"])


def test_a_row_is_compared_with_a_request_or_says_why_not(full):
    for r in full["rows"]:
        if r["compared"]:
            assert r["reason"] is None and r["request"]["model"] == r["model"] and r["basis"], r["id"]
            assert set(r["errors"]) <= set(METRICS), r["id"]
            for m, e in r["errors"].items():
                assert e == pytest.approx(r["predicted"][m] / r["measured"][m] - 1), (r["id"], m)
        else:
            assert r["reason"] and full["not_compared_reasons"][r["id"]] == r["reason"], r["id"]
            assert r["calculator_url"] is None and r["errors"] == {}, r["id"]


def _group_stats(rows: list[dict], metric: str) -> dict:
    """What a table says of `rows`: |error| of each row with one, and infinity for a row whose load the estimate
    could not serve (measured, no prediction); a Poisson row's tokens/s are an input, never compared."""
    errs = []
    for r in rows:
        if metric in r["errors"]:
            errs.append(abs(r["errors"][metric]))
        elif (r["measured"].get(metric) and r["predicted"].get(metric) is None
              and not (r["load"] == "poisson" and metric == "output_tokens_per_s_per_device")):
            errs.append(math.inf)
    med = statistics.median(errs) if errs else None
    return {"n": len(errs), "median_abs_error": med if med is None or math.isfinite(med) else None,
            "within_25_percent": sum(e <= 0.25 for e in errs) / len(errs) if errs else None,
            "unserved": sum(not math.isfinite(e) for e in errs)}


def test_a_poisson_rows_tokens_per_s_are_never_an_error(full):
    rows = [r for r in full["rows"] if r["compared"] and r["load"] == "poisson"]
    assert rows, "the store has MLPerf Server points"
    assert all("output_tokens_per_s_per_device" not in r["errors"] for r in rows)


@pytest.mark.parametrize("table, key", [("by_source", "source"), ("by_hardware", "hardware"),
                                        ("by_model_family", "model_family"), ("by_framework", "framework"),
                                        ("by_load", "load"), ("by_run_date", "run_half")])
def test_each_table_summarises_exactly_the_compared_rows_of_its_groups(full, table, key):
    compared = [r for r in full["rows"] if r["compared"]]
    groups = Counter(r[key] or "?" for r in compared)
    assert {g: e["points"] for g, e in full[table].items()} == dict(groups)
    assert sum(e["points"] for e in full[table].values()) == full["overall"]["points"] == full["compared"]
    for g, e in full[table].items():
        rows = [r for r in compared if (r[key] or "?") == g]
        for m in METRICS:
            got, want = e[m], _group_stats(rows, m)
            assert got["n"] == want["n"], (g, m)
            assert got["median_abs_error"] == pytest.approx(want["median_abs_error"]), (g, m)
            assert got["within_25_percent"] == pytest.approx(want["within_25_percent"]), (g, m)
            assert got["unserved"] == want["unserved"], (g, m)
        checked = [r["bound_below_measured"] for r in rows if r["bound_below_measured"] is not None]
        assert e["bound_below_measured"] == {"n": len(checked), "holds": sum(checked)}, g


def test_each_row_links_its_point_and_the_calculator_computing_its_request(full):
    for r in full["rows"][:: max(1, len(full["rows"]) // 12)] + [next(r for r in full["rows"] if r["compared"])]:
        assert r["page_url"] == f"/benchmarks/{r['id']}" and r["api_url"] == f"/api/v1/benchmarks/{r['id']}"
        assert r["validation_url"] == f"{API}/{r['id']}"
        if r["compared"]:
            url = urlsplit(r["calculator_url"])
            assert url.path == "/calculators/serving-estimate"
            assert orjson.loads(parse_qs(url.query)["body"][0]) == r["request"], r["id"]


def _filtered(client, query: str) -> dict:
    r = client.get(f"{API}?{query}")
    assert r.status_code == 200, (query, r.text)
    return r.json()


def _ids(body: dict) -> list[str]:
    return [r["id"] for r in body["rows"]]


def test_filters_keep_exactly_the_rows_they_name_and_recompute_the_tables(client, full):
    rows = full["rows"]
    src = Counter(r["source"] for r in rows if r["compared"]).most_common()[-1][0]   # the smallest compared source
    got = _filtered(client, f"source={src.upper()}")
    assert _ids(got) == [r["id"] for r in rows if r["source"] == src]
    assert got["stored"] == full["stored"] and got["points"] == len(_ids(got)) and got["filters"] == {"source": src.upper()}
    assert list(got["by_source"]) == [src] and got["overall"] == full["by_source"][src]

    hw = next(r for r in rows if r["hardware"] and r["hardware_name"])
    for value in (hw["hardware"], hw["hardware_name"]):
        assert _ids(_filtered(client, f"hardware={value}")) == [
            r["id"] for r in rows if value.lower() in {(r["hardware"] or "").lower(), (r["hardware_name"] or "").lower()}]
    model = next(r for r in rows if r["model"])
    for value in (model["model"], model["model_hf"]):
        assert _ids(_filtered(client, f"model={value}")) == [
            r["id"] for r in rows if value.lower() in {(r["model"] or "").lower(), (r["model_hf"] or "").lower()}]
    fam = model["model_family"]
    assert _ids(_filtered(client, f"model_family={fam}")) == [r["id"] for r in rows if r["model_family"] == fam]
    assert _ids(_filtered(client, "framework=trtllm")) == [r["id"] for r in rows if r["framework"] == "trtllm"]

    yes, no = _filtered(client, "compared=true"), _filtered(client, "compared=false")
    assert _ids(yes) == [r["id"] for r in rows if r["compared"]] and yes["overall"] == full["overall"]
    assert _ids(no) == [r["id"] for r in rows if not r["compared"]]
    assert no["compared"] == 0 and no["overall"]["points"] == 0 and no["by_source"] == {}
    assert no["overall"]["tpot_s"] == {"n": 0, "median_abs_error": None, "within_25_percent": None, "unserved": 0}

    none = _filtered(client, "source=no-such-source&compared=")   # a blank filter is no filter
    assert none["rows"] == [] and none["points"] == 0 and none["filters"] == {"source": "no-such-source"}


@pytest.mark.parametrize("query, field", [("compared=maybe", "compared"), ("framework=nope", "framework"),
                                          ("source=" + "x" * 201, "source"), ("model=" + "m" * 300, "model")])
def test_bad_filters_are_422_naming_the_field(client, query, field):
    r = client.get(f"{API}?{query}")
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in r.json()["errors"]] == [field]


def test_one_point_is_its_row_with_the_errors_of_its_basis(client, full):
    compared = [r for r in full["rows"] if r["compared"]]
    row = compared[len(compared) // 2]
    got = client.get(f"{API}/{row['id']}").json()
    same = [r for r in compared if r["basis"] == row["basis"]]
    assert {k: v for k, v in got.items() if k != "same_basis"} == row
    assert got["same_basis"]["points"] == len(same) >= 1
    # n counts every point with a measured TPOT: those with an error, and those whose load the estimate cannot serve
    unserved = sum(1 for r in same if "tpot_s" not in r["errors"] and r["measured"].get("tpot_s")
                   and r["predicted"].get("tpot_s") is None)
    assert got["same_basis"]["tpot_s"]["unserved"] == unserved
    assert got["same_basis"]["tpot_s"]["n"] == sum("tpot_s" in r["errors"] for r in same) + unserved
    other = next(r for r in full["rows"] if not r["compared"])
    assert client.get(f"{API}/{other['id']}").json()["same_basis"] is None


def test_an_unknown_point_is_a_404_with_the_closest_ids(client, full):
    known = full["rows"][0]["id"]
    r = client.get(f"{API}/{known}x")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["see"] == API and known in body["suggestions"]


def test_the_report_is_computed_once_and_filtered_answers_reuse_it(client, store, full, monkeypatch):
    """After the first answer, neither a filtered query nor a fresh process's first request computes again: the
    in-memory cache serves the first, the copy persisted beside the store the second."""
    def refuse(lookup):
        raise AssertionError("the report was computed again")

    monkeypatch.setattr(KV, "report", refuse)
    for q in ("", "compared=true", "source=x", "framework=vllm&compared=false"):
        assert client.get(f"{API}?{q}").status_code == 200, q
    key = V.cache_key(store)
    assert full["cache_key"] == key
    persisted = V.cache_dir(store) / f"{key}.json"
    assert persisted.is_file()
    V.clear_cache()                  # as a restarted worker: nothing in memory, the persisted copy beside the store
    again = client.get(API).json()
    assert again == full


def test_the_cache_key_follows_the_store_and_the_code(store):
    key = V.cache_key(store)
    assert len(key) == 64 and key == V.cache_key(store) and len(V.code_digest()) == 64

    class Other:
        content_hash = "0" * 64

    assert V.cache_key(Other()) != key


def test_both_routes_are_in_openapi_with_response_schemas(client):
    spec = client.get("/openapi.json").json()
    op = spec["paths"][API]["get"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ValidationReport"}
    assert {"source", "hardware", "model", "model_family", "framework", "compared"} <= {p["name"] for p in op["parameters"]}
    one = spec["paths"][API + "/{benchmark_id}"]["get"]
    assert one["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ValidationPoint"}
    assert "404" in one["responses"]
    report = spec["components"]["schemas"]["ValidationReport"]["properties"]
    assert {"overall", "by_source", "by_hardware", "by_model_family", "by_framework", "rows"} <= set(report)
