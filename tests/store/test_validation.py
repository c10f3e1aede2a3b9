"""knowledge/validation.py: every stored benchmark point is either compared with serving-estimate or listed with the
reason it is not, and the error tables are computed from the rows (no accuracy is asserted here: the figures are
the validation's output, reported in /validation and the closing notes)."""
from __future__ import annotations

import math

import pytest

from knowledge.validation import family_of, request_of, summary


@pytest.fixture(scope="module")
def rep(client):
    """The suite's one report (computed once per session over its store, shared with tests/api and the CLI test)."""
    from api.routes.validation import report as cached

    return cached(client.app.state.store)


def test_every_point_is_compared_or_says_why(rep):
    assert rep["points"] == len(rep["rows"]) > 0
    for row in rep["rows"]:
        assert row["compared"] or row["reason"], row["id"]
        if row["compared"]:
            assert row["request"]["model"] == row["model"] and row["predicted"]
    assert rep["compared"] == sum(r["compared"] for r in rep["rows"])
    assert set(rep["not_compared"]) == {r["id"] for r in rep["rows"] if not r["compared"]}


def test_the_floor_is_below_every_measured_tpot(rep):
    checked = [r for r in rep["rows"] if r["bound_below_measured"] is not None]
    assert checked, "no compared point with a measured TPOT"
    assert all(r["bound_below_measured"] for r in checked), [r["id"] for r in checked if not r["bound_below_measured"]]


def _abs_errors(rows, errors=lambda r: r["errors"], predicted=lambda r: r["predicted"], metric="tpot_s"):
    """|error| of each row with one, infinity where the estimate could not serve the measured load."""
    return sorted([abs(errors(r)[metric]) for r in rows if metric in errors(r)]
                  + [math.inf for r in rows if metric not in errors(r) and r["measured"].get(metric)
                     and predicted(r).get(metric) is None])


def test_error_tables_are_the_rows_medians(rep):
    rows = [r for r in rep["rows"] if r["compared"]]
    errs = _abs_errors(rows)
    n = len(errs)
    median = (errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2) if n else None
    assert rep["overall"]["tpot_s"]["median_abs_error"] == pytest.approx(median)
    assert rep["overall"]["tpot_s"]["unserved"] == sum(not math.isfinite(e) for e in errs)
    assert sum(e["points"] for e in rep["by_source"].values()) == len(rows)


def test_a_point_maps_to_a_request_with_its_rules_stated(lookup):
    point = {"id": "x", "model": "deepseek-r1", "hardware": "b200-sxm", "framework": "sglang", "tp": 8, "ep": None,
             "weight_format": "fp4", "input_tokens": 1024, "output_tokens": 1024, "dataset": "random",
             "load": {"concurrency": 16}, "config": {"random_range_ratio": 0.8}}
    body, kind, mapping = request_of(point, lookup)
    assert kind == "concurrency" and body["weight_format"] == "nvfp4" and body["input_tokens"] == 922
    assert any("range ratio" in m for m in mapping) and any("NVFP4" in m for m in mapping)
    body, reason, _ = request_of({**point, "model": None, "model_hf": "a/b"}, lookup)
    assert body is None and "not in the catalogue" in reason
    body, reason, _ = request_of({**point, "framework": "other", "framework_name": "ATOM"}, lookup)
    assert body is None and "ATOM" in reason


def test_a_speculative_run_is_compared_only_with_its_published_acceptance(lookup):
    point = {"id": "x", "model": "deepseek-r1", "hardware": "b200-sxm", "framework": "sglang", "tp": 8, "ep": 1,
             "weight_format": "fp8", "input_tokens": 1024, "output_tokens": 1024, "dataset": "random",
             "load": {"concurrency": 16}, "config": {"spec_decoding": "mtp"}}
    body, reason, _ = request_of(point, lookup)
    assert body is None and "acceptance" in reason and "mtp" in reason
    spec = {"method": "mtp", "draft_tokens": 3, "mean_accepted_tokens": 2.1}
    body, kind, mapping = request_of({**point, "config": {"spec_decoding": spec}}, lookup)
    assert kind == "concurrency" and body["speculative"] == spec
    assert any("acceptance" in m for m in mapping)


def test_each_point_is_estimated_without_its_own_source(rep):
    """Leaving each source out: a row's factor was fitted on other sources only, and the calibrated tables are the
    medians of those rows' errors."""
    compared = [r for r in rep["rows"] if r["compared"]]
    for r in compared:
        loso = r["loso"]
        assert loso["fold"] == f"fitted without {r['source']}" and r["source"] not in loso["fitted_on"]["sources"]
        assert (loso["factor"] is None) == (loso["note"] is not None), r["id"]
        for m, e in loso["errors"].items():
            assert e == pytest.approx(loso["predicted"][m] / r["measured"][m] - 1), (r["id"], m)
    errs = _abs_errors(compared, lambda r: r["loso"]["errors"], lambda r: r["loso"]["predicted"])
    if errs:
        import statistics
        med = statistics.median(errs)
        want = med if math.isfinite(med) else None
        assert rep["leave_one_source_out"]["overall"]["tpot_s"]["median_abs_error"] == pytest.approx(want)
    assert {t["id"] for t in rep["targets"]} == {"tpot_median", "tpot_within", "tokens_median", "bound"}


def test_the_store_answers_the_applied_factors_and_the_estimate_uses_them(rep, client):
    store = client.app.state.store
    applied = rep["calibration"]["applied"]
    assert set(store.serving_calibration) == set(applied)
    for key in applied:
        assert store.lookup("serving_calibration", key)["factor"] == rep["calibration"]["factors"][key]["factor"]
    with pytest.raises(KeyError):
        store.lookup("serving_calibration", "no-such/vllm/bound")
    if applied:
        f = rep["calibration"]["factors"][applied[0]]
        point = next(r for r in rep["rows"] if r["id"] in f["point_ids"])
        body = {**point["request"], "calibration": "auto"}
        got = client.post("/api/v1/calculators/serving-estimate", json=body).json()["outputs"]["calibration"]
        assert got["applied"] and got["sources"]
        assert got["factor"] in {rep["calibration"]["factors"][k]["factor"] for k in applied}


@pytest.mark.parametrize("date, half", [("2025-03-18", "2025-H1"), ("2025-06", "2025-H1"), ("2025-07-01", "2025-H2"),
                                        ("2026-12", "2026-H2"), ("2025", "2025"), (None, "?"), ("soon", "?")])
def test_a_point_is_grouped_by_the_half_year_it_was_run(date, half):
    from knowledge.validation import Row, run_half_of

    assert run_half_of(Row(id="x", source="s", model=None, hardware=None, framework="vllm", load="concurrency",
                           compared=True, date=date)) == half
