"""queueing, backlog, capacity, remaining-time: the book's examples, queueing identities and validation."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

GIB, MIB = 2**30, 2**20


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


# --------------------------------------------------------------------------- queueing

def test_tp_vs_pp_prefill_md1_book_values():
    o = calc("queueing", {"arrival_rate_per_s": [1, 7, 1, 7], "service_s": [0.125, 0.125, 0.1, 0.1],
                          "extra_s": [0, 0, 0.1, 0.1]})
    assert o["model"] == "M/D/1"
    assert o["capacity_per_s"] == pytest.approx([8, 8, 10, 10])
    assert o["response_s"] == pytest.approx([0.13392857142857142, 0.5625, 0.20555555555555557, 0.3166666666666667])
    assert [round(v * 1000) for v in o["response_s"]] == [134, 562, 206, 317]   # book prints 约 563 for 562.5


@settings(max_examples=80, deadline=None)
@given(rho=st.floats(0.001, 0.998), s=st.floats(1e-4, 10))
def test_mm1_and_md1_closed_forms(rho, s):
    lam = rho / s          # drawn through the load so that every example is a stable queue (no filtering)
    rho = lam * s
    mm1 = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s, "service": "exponential"})
    md1 = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s})
    assert mm1["response_s"] == pytest.approx(s / (1 - rho), rel=1e-9)          # M/M/1: 1/(μ − λ)
    assert md1["wait_s"] == pytest.approx(mm1["wait_s"] / 2, rel=1e-9)           # P-K with cv = 0
    assert mm1["in_system"] == pytest.approx(rho / (1 - rho), rel=1e-9)           # Little: L = λT
    g = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s, "service": "general", "service_cv": 1})
    assert g["wait_s"] == pytest.approx(mm1["wait_s"], rel=1e-12)


def test_erlang_c_known_value_and_unstable_queue():
    o = calc("queueing", {"arrival_rate_per_s": 1, "service_s": 1, "servers": 2, "service": "exponential"})
    assert o["prob_wait"] == pytest.approx(1 / 3)
    assert o["wait_s"] == pytest.approx(1 / 3)
    u = calc("queueing", {"arrival_rate_per_s": 10, "service_s": 0.1})
    assert u["stable"] is False and u["wait_s"] is None and u["response_s"] is None


@settings(max_examples=40, deadline=None)
@given(lam=st.floats(0.1, 200), s=st.floats(0.001, 1), target=st.floats(0.0001, 1))
def test_servers_needed_is_the_fewest_that_meets_the_target(lam, s, target):
    o = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s, "service": "exponential", "target_wait_s": target})
    c = o["servers_needed"]
    assert c is not None
    ok = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s, "service": "exponential", "servers": c})
    assert ok["wait_s"] is not None and ok["wait_s"] <= target + 1e-12
    if c > 1:
        less = calc("queueing", {"arrival_rate_per_s": lam, "service_s": s, "service": "exponential", "servers": c - 1})
        assert less["wait_s"] is None or less["wait_s"] > target


def test_servers_for_a_target_utilisation():
    o = calc("queueing", {"arrival_rate_per_s": [5, 50], "service_s": 0.1, "target_utilization": 0.8})
    assert o["servers_needed"] == [1, 7]


@settings(max_examples=30, deadline=None)
@given(lams=st.lists(st.floats(0, 9.9), min_size=1, max_size=10))
def test_queueing_sweep_matches_scalar_calls(lams):
    swept = calc("queueing", {"arrival_rate_per_s": lams, "service_s": 0.1, "servers": 2})
    for i, lam in enumerate(lams):
        assert swept["response_s"][i] == pytest.approx(
            calc("queueing", {"arrival_rate_per_s": lam, "service_s": 0.1, "servers": 2})["response_s"])


@pytest.mark.parametrize("body, loc", [
    ({"arrival_rate_per_s": 1, "service_s": 0.1, "service": "general"}, ("service_cv",)),
    ({"arrival_rate_per_s": 1, "service_s": 0.1, "service": "exponential", "service_cv": 0.5}, ("service_cv",)),
    ({"arrival_rate_per_s": [1, 2], "service_s": [0.1, 0.2, 0.3]}, ("service_s",)),
])
def test_queueing_semantic_errors(body, loc):
    with pytest.raises(CalcInputError) as e:
        calc("queueing", body)
    assert e.value.loc == loc


@pytest.mark.parametrize("body", [{"arrival_rate_per_s": -1, "service_s": 1}, {"arrival_rate_per_s": 1, "service_s": 0},
                                  {"arrival_rate_per_s": 1, "service_s": 1, "servers": 0},
                                  {"arrival_rate_per_s": 1, "service_s": 1, "service": "weibull"},
                                  {"arrival_rate_per_s": 1, "service_s": 1, "target_utilization": 1.5}])
def test_queueing_bad_values(body):
    with pytest.raises(ValidationError):
        calc("queueing", body)


# --------------------------------------------------------------------------- backlog

def test_decode_backlog_of_three_instances():
    o = calc("backlog", {"arrival_rate_per_s": 7471.2, "service_rate_per_s": 2048, "servers": 3, "duration_s": 60,
                         "after_arrival_rate_per_s": 0})
    assert o["excess_rate_per_s"] == pytest.approx(1327.2)
    assert o["backlog_items"] == pytest.approx(79632)
    assert o["drain_s"] == pytest.approx(12.9609375)


def test_agent_event_outage_backlog_and_drain():
    o = calc("backlog", {"arrival_rate_per_s": 200, "service_rate_per_s": 0, "duration_s": 120,
                         "after_service_rate_per_s": 512, "item_bytes": 2048, "buffer_bytes": [32 * MIB, 64 * MIB]})
    assert o["arrival_bytes_per_s"] == [409600, 409600]
    assert o["backlog_items"][0] == 24000 and o["backlog_bytes"][0] / MIB == 46.875
    assert o["fill_s"] == pytest.approx([81.92, 163.84])
    assert o["buffer_holds_backlog"] == [False, True]
    assert o["drain_bytes_per_s"][0] == 638976
    assert o["drain_s"][0] == pytest.approx(76.92307692307692)
    assert o["drain_s_no_arrivals"][0] == pytest.approx(46.875)


def test_replay_window_and_no_backlog_cases():
    assert calc("backlog", {"arrival_rate_per_s": 2000, "buffer_items": 10000})["fill_s"] == pytest.approx(5)
    o = calc("backlog", {"arrival_rate_per_s": 1, "service_rate_per_s": 2, "duration_s": 10, "buffer_items": 5})
    assert o["backlog_items"] == 0 and o["drain_s"] == 0 and o["fill_s"] is None
    never = calc("backlog", {"arrival_rate_per_s": 3, "service_rate_per_s": 2, "duration_s": 10})
    assert never["drain_s"] is None and never["drain_s_no_arrivals"] == pytest.approx(5)


@settings(max_examples=60, deadline=None)
@given(lam=st.floats(0, 1e6), mu=st.floats(0, 1e6), d=st.floats(0, 1e4), k=st.floats(1, 10))
def test_backlog_grows_linearly_with_duration(lam, mu, d, k):
    a = calc("backlog", {"arrival_rate_per_s": lam, "service_rate_per_s": mu, "duration_s": d})["backlog_items"]
    b = calc("backlog", {"arrival_rate_per_s": lam, "service_rate_per_s": mu, "duration_s": d * k})["backlog_items"]
    assert b == pytest.approx(a * k, rel=1e-9, abs=1e-9)
    assert a >= 0


@pytest.mark.parametrize("body, loc", [
    ({"arrival_rate_per_s": 1, "buffer_bytes": 10}, ("item_bytes",)),
    ({"arrival_rate_per_s": 1, "buffer_bytes": 10, "buffer_items": 1, "item_bytes": 1}, ("buffer_bytes",)),
    ({"arrival_rate_per_s": [1, 2], "duration_s": [1, 2, 3]}, ("duration_s",)),
])
def test_backlog_semantic_errors(body, loc):
    with pytest.raises(CalcInputError) as e:
        calc("backlog", body)
    assert e.value.loc == loc


# --------------------------------------------------------------------------- capacity

def test_epd_split_bounds_and_bottlenecks():
    o = calc("capacity", {"resources": [
        {"name": "encode", "units": [1, 1, 2, 2], "capacity": 12, "per_request": [4, 1, 4, 1]},
        {"name": "pd", "units": [3, 3, 2, 2], "capacity": 4},
        {"name": "link", "capacity": 300e6, "per_request": 32768000}]})
    assert o["max_rate_per_s"] == pytest.approx([3, 9.1552734375, 6, 8])
    assert o["bottleneck"] == ["encode", "link", "encode", "pd"]


def test_littles_law_for_dma_tags_and_pool_sizing():
    o = calc("capacity", {"resources": [{"name": "tags", "units": 64, "hold_s": 1.05e-6}], "arrival_rate_per_s": 87e6})
    assert o["resources"][0]["units_needed"] == pytest.approx(91.35)
    assert o["resources"][0]["whole_units_needed"] == 92
    assert o["max_rate_per_s"] == pytest.approx(64 / 1.05e-6)
    assert o["fits"] is False
    p = calc("capacity", {"resources": [{"name": "P", "capacity": 16384, "per_request": 4608},
                                        {"name": "D", "capacity": 2048, "per_request": 1151}], "arrival_rate_per_s": 4})
    assert [r["units_needed"] for r in p["resources"]] == pytest.approx([1.125, 2.248046875])
    assert [r["whole_units_needed"] for r in p["resources"]] == [2, 3]


def test_agent_platform_cpu_and_environment():
    o = calc("capacity", {"resources": [
        {"name": "cpu", "units": [30, 32], "efficiency": [1, 0.98], "per_request": 3},
        {"name": "env", "capacity": 600 * GIB, "per_request": 2 * GIB, "hold_s": 30}], "arrival_rate_per_s": 10})
    assert o["resources"][0]["max_rate_per_s"] == pytest.approx([10, 10.453333333])
    assert o["max_rate_per_s"] == pytest.approx([10, 10])
    assert o["bottleneck"] == ["cpu", "env"]


def test_smartnic_threshold_and_output_rate():
    o = calc("capacity", {"resources": [{"name": "cores", "units": 32, "efficiency": [0.98, 0.92]}],
                          "arrival_rate_per_s": 30})
    assert o["resources"][0]["efficiency_loss_allowed"] == pytest.approx([0.0625, 0.0625])
    assert o["headroom"] == pytest.approx([0.0453333, -0.0186667], abs=1e-6)
    s = calc("capacity", {"resources": [{"name": "serial", "hold_s": 1e-7}], "output_per_request": 256})
    assert s["max_output_per_s"] == pytest.approx(2.56e9)


@settings(max_examples=60, deadline=None)
@given(caps=st.lists(st.tuples(st.floats(0.1, 1e9), st.floats(0.001, 1e6), st.one_of(st.none(), st.floats(1e-6, 10))),
                     min_size=1, max_size=5), lam=st.floats(0.001, 1e6))
def test_bound_is_the_minimum_and_utilisation_consistent(caps, lam):
    res = [{"name": f"r{i}", "capacity": c, "per_request": p, **({"hold_s": h} if h is not None else {})}
           for i, (c, p, h) in enumerate(caps)]
    o = calc("capacity", {"resources": res, "arrival_rate_per_s": lam})
    bounds = [r["max_rate_per_s"] for r in o["resources"]]
    assert o["max_rate_per_s"] == pytest.approx(min(bounds))
    assert o["bottleneck"] == f"r{bounds.index(min(bounds))}"
    for r in o["resources"]:
        assert r["utilisation"] * r["max_rate_per_s"] == pytest.approx(lam, rel=1e-9)


def test_capacity_errors_name_the_field():
    with pytest.raises(CalcInputError) as e:
        calc("capacity", {"resources": [{"name": "a"}, {"name": "a"}]})
    assert e.value.loc == ("resources", 1, "name")
    with pytest.raises(CalcInputError) as e:
        calc("capacity", {"resources": [{"name": "a", "capacity": [1, 2]}, {"name": "b", "per_request": [1, 2, 3]}]})
    assert e.value.loc == ("resources", 1, "per_request")
    with pytest.raises(ValidationError):
        calc("capacity", {"resources": []})
    with pytest.raises(ValidationError):
        calc("capacity", {"resources": [{"name": "a", "efficiency": 1.2}]})


def test_zero_use_and_zero_efficiency_do_not_crash():
    o = calc("capacity", {"resources": [{"name": "unused", "per_request": 0}, {"name": "dead", "efficiency": 0}],
                          "arrival_rate_per_s": 1})
    assert o["resources"][0]["max_rate_per_s"] is None            # infinite bound
    assert o["resources"][1]["max_rate_per_s"] == 0 and o["bottleneck"] == "dead"
    assert o["resources"][1]["units_needed"] is None


# --------------------------------------------------------------------------- remaining time

def test_conditional_remaining_time_book_example():
    o = calc("remaining-time", {"history_s": [1] * 9 + [100], "elapsed_s": 10})
    assert o["mean_s"] == pytest.approx(10.9)
    assert o["naive_remaining_s"] == pytest.approx(0.9)
    assert o["conditional_remaining_s"] == pytest.approx(90)
    assert calc("remaining-time", {"history_s": [1, 2], "elapsed_s": 5})["conditional_remaining_s"] is None


@settings(max_examples=60, deadline=None)
@given(hist=st.lists(st.floats(0, 1e4), min_size=1, max_size=50), es=st.lists(st.floats(0, 1e4), min_size=1, max_size=8))
def test_remaining_time_sweep_matches_direct_conditional_mean(hist, es):
    o = calc("remaining-time", {"history_s": hist, "elapsed_s": es})
    for i, e in enumerate(es):
        longer = [h - e for h in hist if h > e]
        want = sum(longer) / len(longer) if longer else None
        got = o["conditional_remaining_s"][i]
        assert (got is None) if want is None else (got == pytest.approx(want, rel=1e-9, abs=1e-9) and got > -1e-9)
        assert not math.isnan(o["survivor_fraction"][i])


# --------------------------------------------------------------------------- schema-fuzzing regressions

def as_json(name, body):
    """What the API does with a request: validate, compute, serialise with orjson (which refuses integers
    beyond 64 bits and would turn such an answer into a 500)."""
    import orjson
    _, _, r = run(name, body, no_lookup)
    return orjson.loads(orjson.dumps({"outputs": r.outputs, "steps": [s.as_dict() for s in r.steps]},
                                     option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))["outputs"]


def test_capacity_whole_units_beyond_64_bits_stay_floats():
    # The fuzzed request: an offered rate of 1e30 needs ~1e29 whole units; int(1e29) is not a 64-bit integer.
    o = as_json("capacity", {"arrival_rate_per_s": [1e30], "output_per_request": 5e-324,
                             "resources": [{"capacity": 12, "name": "encode", "per_request": 4, "units": 1},
                                           {"capacity": 4, "name": "prefill+decode", "per_request": 1, "units": 3},
                                           {"capacity": 300e6, "name": "link", "per_request": 32768000}]})
    encode = o["resources"][0]
    assert encode["whole_units_needed"] == [pytest.approx(1e30 * 4 / 12)]
    assert isinstance(encode["whole_units_needed"][0], float)
    # small counts stay JSON integers
    small = calc("capacity", {"arrival_rate_per_s": 3, "resources": [{"name": "a", "capacity": 12, "per_request": 4}]})
    assert small["resources"][0]["whole_units_needed"] == 1 and isinstance(small["resources"][0]["whole_units_needed"], int)


def test_queueing_servers_bound_is_enforced_and_work_is_capped():
    # The fuzzed request asked for 1,282,775 servers (the documented limit 10,000 was written as Field(le=...)
    # next to PosInt and ignored); the Erlang recursion then looped 1.28 million times and timed out.
    with pytest.raises(ValidationError) as e:
        calc("queueing", {"arrival_rate_per_s": 0.0, "service_s": 1.24e16, "extra_s": 0.0, "servers": 1282775})
    assert e.value.errors()[0]["loc"] == ("servers",)
    assert calc("queueing", {"arrival_rate_per_s": 0.0, "service_s": 1.24e16, "servers": 10_000})["wait_s"] == 0.0
    with pytest.raises(CalcInputError) as ce:
        calc("queueing", {"arrival_rate_per_s": [1.0] * 2000, "service_s": 1.0, "servers": 10_000})
    assert ce.value.loc == ("servers",) and ce.value.status == 413
    with pytest.raises(CalcInputError) as ce:
        calc("queueing", {"arrival_rate_per_s": [1.0] * 1001, "service_s": 1.0, "target_wait_s": 0.1})
    assert ce.value.loc == ("target_wait_s",) and ce.value.status == 413
    with pytest.raises(ValidationError):
        calc("queueing", {"arrival_rate_per_s": 1, "service_s": 1, "target_utilization": 1.5})
    with pytest.raises(ValidationError):
        calc("queueing", {"arrival_rate_per_s": 1, "service_s": 1, "service": "general", "service_cv": 1e4})
    with pytest.raises(ValidationError):
        calc("backlog", {"arrival_rate_per_s": 1, "servers": 10**9 + 1})
