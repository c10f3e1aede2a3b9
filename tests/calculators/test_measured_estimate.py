"""The `estimate` contract: bound and measured estimates side by side in roofline, parallel-split and serving-cost."""
from __future__ import annotations

import pytest

from calculators.domain.architecture import arch_from_record
from calculators.framework import CalcInputError
from calculators.perf.measured_step import decode_step
from calculators.perf.measured_tables import load_system
from calculators.framework.runner import compute
from calculators.domain.hardware import hardware_spec
from knowledge.loader import catalog_lookup, default_catalog

LOOKUP = catalog_lookup(default_catalog())
STEP = {"model": "qwen3-8b", "phase": "decode", "tokens": 1, "context_tokens": 1024, "batch": 1, "hardware": "h100-sxm"}


def run(name: str, body: dict):
    return compute(name, body, LOOKUP)[2]


def test_roofline_reports_both_by_default():
    r = run("roofline", STEP)
    o = r.outputs
    system = load_system(LOOKUP, "h100_sxm", hardware_spec(LOOKUP, "h100-sxm"))
    direct = decode_step(arch_from_record(LOOKUP("model", "qwen3-8b"), None), system, batch=1, context_tokens=1024)
    assert o["measured_time_s"] == pytest.approx(float(direct.total_s))
    assert o["measured_to_bound_ratio"] == pytest.approx(o["measured_time_s"] / o["time_s"])
    assert 1.0 < o["measured_to_bound_ratio"] < 2.5                 # kernels are slower than peak rates
    assert o["measured_kernels"]["system"] == "h100_sxm" and o["measured_kernels"]["framework"].lower() == "vllm"
    assert sum(o["measured_parts_s"].values()) == pytest.approx(o["measured_time_s"])
    assert any(s["label"] == "measured estimate" for s in [st.as_dict() for st in r.steps])


def test_bound_only_when_asked():
    o = run("roofline", {**STEP, "estimate": "bound"}).outputs
    assert "time_s" in o and not any(k.startswith("measured") for k in o)


def test_measured_where_none_exists_is_a_422_naming_estimate():
    with pytest.raises(CalcInputError) as e:
        run("roofline", {**STEP, "hardware": "mi300x", "estimate": "measured"})
    assert e.value.loc == ("estimate",)
    quiet = run("roofline", {**STEP, "hardware": "mi300x"})
    assert "measured_time_s" not in quiet.outputs
    assert any(a.startswith("No measured estimate") for a in quiet.assumptions)


def test_parallel_split_reports_measured_step_times_per_candidate():
    o = run("parallel-split", {"model": "qwen3-8b", "hardware": "h100-sxm", "link": "nvlink4", "tp": [1, 2, 4, 8],
                               "context_tokens": 1024}).outputs
    measured = [c["measured_step_time_s"] for c in o["candidates"]]
    assert all(m > b for m, b in zip(measured, o["step_time_s"]))
    assert o["measured_best"]["tp"] in (1, 2, 4, 8)
    assert o["measured_to_bound_ratio"] == pytest.approx([m / b for m, b in zip(measured, o["step_time_s"])])


def test_serving_cost_prices_the_measured_step():
    o = run("serving-cost", {"model": "qwen3-8b", "hardware": "h100-sxm", "price_per_device_hour_usd": 2.5,
                             "target_tokens_per_s": 1000, "batch": [1, 16, 64], "context_tokens": 2048}).outputs
    assert all(m > b for m, b in zip(o["measured_cost_per_mtok_usd"], o["cost_per_mtok_usd"]))
    assert o["measured_tokens_per_s_per_replica"] == pytest.approx([b / t for b, t in zip([1, 16, 64], o["measured_time_s"])])


@pytest.mark.parametrize("device, system, proxy", [
    ("mi300x", "h200_sxm", "h200-sxm"),            # CDNA 3, FP8: the measured FP8 device nearest in bandwidth
    ("h100-pcie-80gb", "h100_sxm", "h100-sxm"),    # Hopper first (the A100 is nearer in bandwidth but has no FP8)
    ("h200-nvl", "h200_sxm", "h200-sxm"),          # the same bandwidth: scale 1
])
def test_an_unmeasured_gpu_borrows_a_measured_device_by_rule(device, system, proxy):
    from calculators.domain import hardware_spec
    from calculators.perf import PROXY_MAX_RATIO, proxy_system_of
    from knowledge.loader import catalog_lookup, default_catalog

    lookup = catalog_lookup(default_catalog())
    hw = hardware_spec(lookup, device)
    p = proxy_system_of(lookup, hw)
    assert (p.system, p.hardware) == (system, proxy)
    cand = hardware_spec(lookup, proxy)
    assert p.scale == pytest.approx(cand.memory_bandwidth_bytes_per_s / hw.memory_bandwidth_bytes_per_s)
    assert 1 / PROXY_MAX_RATIO <= p.scale <= PROXY_MAX_RATIO
    assert proxy in p.reason and device in p.reason


@pytest.mark.parametrize("device", ["h100-sxm", "l4", "tpu-v6e"])
def test_a_measured_device_a_far_one_and_a_non_gpu_borrow_nothing(device):
    from calculators.domain import hardware_spec
    from calculators.perf import proxy_system_of
    from knowledge.loader import catalog_lookup, default_catalog

    lookup = catalog_lookup(default_catalog())
    assert proxy_system_of(lookup, hardware_spec(lookup, device)) is None
