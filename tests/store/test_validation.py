"""knowledge/validation.py: every stored benchmark point is either compared with serving-estimate or listed with the
reason it is not, and the error tables are computed from the rows (no accuracy is asserted here: the figures are
the validation's output, reported in /validation and the closing notes)."""
from __future__ import annotations

import pytest

from knowledge.validation import family_of, report, request_of, summary


@pytest.fixture(scope="module")
def rep(lookup):
    return report(lookup)


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


def test_error_tables_are_the_rows_medians(rep):
    rows = [r for r in rep["rows"] if r["compared"]]
    errs = sorted(abs(r["errors"]["tpot_s"]) for r in rows if "tpot_s" in r["errors"])
    n = len(errs)
    median = (errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2) if n else None
    assert rep["overall"]["tpot_s"]["median_abs_error"] == pytest.approx(median)
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
