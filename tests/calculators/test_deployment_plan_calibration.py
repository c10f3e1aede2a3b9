"""The planner on hardware without measured kernels: with a calibration factor fitted on published runs (lookup kind
serving_calibration, which a store answers), the bound step times are scaled by it, the row says so, and the
second pass re-estimates those rows with serving-estimate (which applies the same factor)."""
from __future__ import annotations

import pytest

from calculators.framework.runner import compute
from knowledge.loader import catalog_lookup, default_catalog

BASE = catalog_lookup(default_catalog())
FACTOR = {"factor": 4.0, "points": 12, "sources": ["source-a", "source-b"], "leave_one_source_out": None}
BODY = {"model": "llama-3.1-8b", "hardware": ["mi300x"], "arrival_rate_per_s": 2, "input_tokens": 1000,
        "output_tokens": 200, "ttft_s": 5.0, "tpot_s": 1.0, "mode": "aggregated",
        "price_per_device_hour_usd": {"mi300x": 2.0}}


def with_factor(kind, ident):
    if kind == "serving_calibration":
        if ident == "mi300x/vllm/bound":
            return FACTOR
        raise KeyError(ident)
    return BASE(kind, ident)


def _rows(out):
    return {(c["tp"], c["batch"]): c for c in out["candidates"] if c["fits"]}


@pytest.fixture(scope="module")
def plans():
    return compute("deployment-plan", BODY, BASE)[2], compute("deployment-plan", BODY, with_factor)[2]


def test_a_fitted_factor_scales_the_bound_and_says_so(plans):
    plain, fitted = plans
    a, b = _rows(plain.outputs), _rows(fitted.outputs)
    assert a.keys() == b.keys() and a
    for key in a:
        sa = a[key].get("screen") or a[key]
        sb = b[key].get("screen") or b[key]
        assert sb["tpot_s"] > sa["tpot_s"]          # the factor makes the optimistic bound slower
    assert all("calibration factor fitted on 12 published runs" in r["step_source"] for r in b.values())
    assert any("× 4" in x and "mi300x has no measured kernels" in x for x in fitted.assumptions)


def test_rows_on_calibrated_hardware_are_re_estimated(plans):
    plain, fitted = plans
    assert not any(c["figures"] == "serving-estimate" for c in plain.outputs["candidates"])
    est = [c for c in fitted.outputs["candidates"] if c["figures"] == "serving-estimate" and c["serving_estimate"]]
    assert est and fitted.outputs["re_estimate"]["re_estimated"] >= 1
    assert fitted.outputs["best"] is None or fitted.outputs["best"]["figures"] == "serving-estimate"
