"""The planner on a GPU without measured kernels (MI300X): its rows are timed on the kernels of the measured device
nearest in bandwidth (H200) × the bandwidth ratio; with a calibration factor fitted on published runs (lookup kind
serving_calibration, which a store answers) those times are scaled by it too, the row says so, and the second pass
re-estimates the rows with serving-estimate (which applies the same factor)."""
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
        if ident == "mi300x/vllm/proxy":
            return FACTOR
        raise KeyError(ident)
    return BASE(kind, ident)


def _rows(out):
    return {(c["tp"], c["batch"]): c for c in out["candidates"] if c["fits"]}


@pytest.fixture(scope="module")
def plans():
    return compute("deployment-plan", BODY, BASE)[2], compute("deployment-plan", BODY, with_factor)[2]


def test_a_fitted_factor_scales_the_proxy_times_and_says_so(plans):
    plain, fitted = plans
    a, b = _rows(plain.outputs), _rows(fitted.outputs)
    assert a.keys() == b.keys() and a
    for key in a:
        sa = a[key].get("screen") or a[key]
        sb = b[key].get("screen") or b[key]
        assert sb["tpot_s"] > sa["tpot_s"]          # the factor makes the proxy's times slower
    assert all(r["step_source"].startswith("proxy (") and "calibration factor fitted on 12 published runs"
               in r["step_source"] for r in b.values())
    assert not any("calibration factor" in r["step_source"] for r in a.values())
    assert any("× 4" in x and "mi300x has no measured kernels" in x for x in fitted.assumptions)


def test_rows_on_proxied_hardware_are_re_estimated(plans):
    for out in (p.outputs for p in plans):
        est = [c for c in out["candidates"] if c["figures"] == "serving-estimate" and c["serving_estimate"]]
        assert est and out["re_estimate"]["re_estimated"] >= 1
        assert out["best"] is None or out["best"]["figures"] == "serving-estimate"


def test_a_device_neither_measured_nor_near_a_measured_one_keeps_its_bound():
    body = {**BODY, "hardware": ["tpu-v6e"], "price_per_device_hour_usd": {"tpu-v6e": 2.0}}
    out = compute("deployment-plan", body, BASE)[2].outputs
    assert out["candidates"] and all(c["step_source"].startswith("bound") for c in out["candidates"])
