"""overlap-timeline: the book's pipelines, buffers, bounds and exposed times; closed form vs walk."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import GIB, MIB, CalcInputError, no_lookup
from calculators.framework.runner import compute as run

US, MS = 1e-6, 1e-3


def tl(body):
    return run("overlap-timeline", body, no_lookup)[2].outputs


TILE = {"stages": [{"name": "read", "duration_s": 2 * US, "resource": "memory"}, {"name": "compute", "duration_s": 1 * US},
                   {"name": "write", "duration_s": 2 * US, "resource": "memory"}], "items": 8}


def test_three_stage_tile_pipeline():
    o = tl({**TILE, "what_if": [{"stages": {"compute": {"duration_s": 0.5 * US}}}]})
    assert o["serial_s"] == pytest.approx(40 * US)
    assert o["total_s"] == pytest.approx(19 * US)
    assert o["resources"]["memory"] == pytest.approx(32 * US)
    assert o["lower_bound_s"] == pytest.approx(32 * US) and o["lower_bound_s"] > o["total_s"]  # shared port: 19 µs is not reachable
    assert o["what_if"][0]["total_s"] == pytest.approx(18.5 * US)


def test_configuration_overlap():
    o = tl({"stages": [{"name": "config", "duration_s": 20 * US}, {"name": "device", "duration_s": 20 * US}], "items": 100,
            "what_if": [{"stages": {"device": {"duration_s": 5 * US}}},
                        {"stages": {"device": {"duration_s": 5 * US}, "config": {"duration_s": 5 * US}}}]})
    assert (o["serial_s"], o["total_s"]) == (pytest.approx(4000 * US), pytest.approx(2020 * US))
    assert [w["total_s"] for w in o["what_if"]] == pytest.approx([2005 * US, 505 * US])


def test_three_lane_double_buffer():
    body = {"stages": [{"name": "prepare", "duration_s": 1 * MS, "slots": 2, "slot_bytes": 64 * MIB},
                       {"name": "copy", "bytes": 64 * MIB, "bytes_per_s": 24 * GIB, "slots": 2, "slot_bytes": 64 * MIB},
                       {"name": "compute", "duration_s": 4 * MS}], "items": 8,
            "what_if": [{"stages": {"copy": {"slots": 1}}}, {"stages": {"copy": {"bytes_per_s": 12 * GIB}}}]}
    o = tl(body)
    assert o["serial_s"] == pytest.approx(60.833e-3, abs=5e-7)
    assert o["total_s"] == pytest.approx(35.604e-3, abs=5e-7)
    assert o["staging_bytes"] == 256 * MIB
    assert [w["total_s"] for w in o["what_if"]] == pytest.approx([53.833e-3, 46.667e-3], abs=5e-7)
    # 2 device slots are what the steady state needs; 1 is too few
    copy = next(s for s in o["stages"] if s["name"] == "copy")
    assert copy["slots_needed"] == 2


def test_pipellm_prepared_vs_on_demand():
    st_ = [{"name": n, "duration_s": d * MS, "slots": 2, "slot_bytes": 64 * MIB} for n, d in (("prepare", 8), ("host_copy", 2), ("h2d", 2))]
    o = tl({"stages": st_ + [{"name": "consume", "duration_s": 10 * MS}], "items": 8,
            "what_if": [{"mode": "serial", "stages": {"host_copy": {"duration_s": 0}}}]})
    assert o["total_s"] == pytest.approx(92e-3)
    assert o["what_if"][0]["total_s"] == pytest.approx(160e-3)
    assert o["staging_bytes"] == 384 * MIB
    assert next(s for s in o["stages"] if s["name"] == "host_copy")["busy_s"] == pytest.approx(16e-3)


def test_grouped_submission_with_arrivals():
    base = {"stages": [{"name": "cpu", "duration_s": 8 * US}, {"name": "device", "duration_s": 4 * US}],
            "items": 4, "first_release_s": 4 * US, "release_interval_s": 4 * US}
    g2 = {"first_release_s": 8 * US, "release_interval_s": 8 * US, "stages": {"cpu": {"duration_s": 9 * US}, "device": {"duration_s": 8 * US}}}
    g4 = {"first_release_s": 16 * US, "release_interval_s": 16 * US, "stages": {"cpu": {"duration_s": 11 * US}, "device": {"duration_s": 16 * US}}}
    o = tl({**base, "what_if": [{**g2, "items": 2}, {**g4, "items": 1}, {"items": 40}, {**g2, "items": 20}, {**g4, "items": 10}]})
    assert o["total_s"] == pytest.approx(40 * US)
    assert [w["total_s"] / US for w in o["what_if"]] == pytest.approx([34, 43, 328, 196, 187])
    assert o["what_if"][0]["busy_s"]["cpu"] == pytest.approx(18 * US)


def test_k_slicing_sweep_is_closed_form():
    o = tl({"stages": [{"name": "comm", "duration_s": 8 * US, "total_bytes": 18 * MIB, "bytes_per_s": 50e9},
                       {"name": "matmul", "total_flops": 51539607552, "flop_per_s": 100e12}], "items": [1, 4, 16, 64]})
    assert o["method"] == "closed form"
    assert [t * 1e3 for t in o["total_s"]] == pytest.approx([0.901, 0.618, 0.547, 0.898], abs=5e-4)
    assert [t * 1e3 for t in o["serial_s"]] == pytest.approx([0.901, 0.925, 1.021, 1.405], abs=5e-4)


def test_dag_barrier_and_exposed_time():
    ranks = [{"name": f"r{i}", "duration_s": d, "after": []} for i, d in enumerate([0, 0, 0, 2 * MS])]
    o = tl({"stages": ranks + [{"name": "exchange", "duration_s": 0.4 * MS, "after": ["r0", "r1", "r2", "r3"]}],
            "what_if": [{"stages": {"exchange": {"scale": 0.5}}}, {"stages": {"r3": {"duration_s": 0}}}]})
    assert o["total_s"] == pytest.approx(2.4e-3)
    assert [w["total_s"] for w in o["what_if"]] == pytest.approx([2.2e-3, 0.4e-3])
    assert o["exposed_s"]["r0"] == 0 and o["exposed_s"]["r3"] == pytest.approx(2e-3)


def test_prefetch_lead_hides_or_exposes_the_transfer():
    body = {"stages": [{"name": "lead", "duration_s": 16 * MS, "after": []},
                       {"name": "transfer", "total_bytes": 288 * MIB, "bytes_per_s": 40 * GIB, "after": []},
                       {"name": "use", "duration_s": 0, "after": ["lead", "transfer"]}],
            "what_if": [{"stages": {"transfer": {"bytes_per_s": 8 * GIB}}}]}
    o = tl(body)
    assert o["exposed_s"]["transfer"] == 0
    assert o["what_if"][0]["exposed_s"]["transfer"] == pytest.approx(19.15625e-3)


def test_streaming_vs_batch_verification():
    o = tl({"stages": [{"name": "verify", "duration_s": 10}], "release_times_s": [0, 10, 20],
            "what_if": [{"release_times_s": [20, 20, 20]}]})
    assert o["total_s"] == 30 and o["what_if"][0]["total_s"] == 50
    assert o["stages"][0]["busy_s"] == 30


def test_efficiency_and_budget():
    o = tl({"stages": [{"name": "a", "duration_s": 9e-6, "after": []}, {"name": "b", "duration_s": 1e-6, "after": ["a"]}],
            "efficiency": 0.5, "budget_s": 15e-6})
    assert o["total_s"] == pytest.approx(20e-6) and o["fits_budget"] is False
    assert o["budget_margin_s"] == pytest.approx(-5e-6)


def test_gemm_prefetch_buffers():
    o = tl({"stages": [{"name": "load", "duration_s": 6 * US, "unlimited_lanes": True, "slot_bytes": 32 * 1024},
                       {"name": "compute", "duration_s": 2 * US}], "items": 64,
            "what_if": [{"stages": {"compute": {"duration_s": 1 * US}}}]})
    assert o["staging_bytes_needed"] == 128 * 1024
    assert o["what_if"][0]["staging_bytes_needed"] == 224 * 1024


stage_st = st.fixed_dictionaries({"d": st.floats(0, 10), "lanes": st.sampled_from([1, 1, 1, None])})


@settings(max_examples=60, deadline=None)
@given(stages=st.lists(stage_st, min_size=1, max_size=5), n=st.integers(1, 40), indep=st.booleans())
def test_closed_form_equals_walk_and_respects_bounds(stages, n, indep):
    body = {"stages": [{"name": f"s{i}", "duration_s": s["d"], **({"unlimited_lanes": True} if s["lanes"] is None else {}),
                        **({"after": []} if indep else {})} for i, s in enumerate(stages)], "items": n}
    closed = tl(body)
    # huge slot counts never bind, but force the item-by-item walk
    walked = tl({**body, "stages": [{**s, "slots": 10**6} for s in body["stages"]]})
    assert closed["method"] == "closed form" and walked["method"] != "closed form"
    assert walked["total_s"] == pytest.approx(closed["total_s"], rel=1e-9, abs=1e-12)
    assert closed["lower_bound_s"] <= closed["total_s"] + 1e-9
    assert closed["total_s"] <= closed["serial_s"] + 1e-9


@settings(max_examples=40, deadline=None)
@given(d=st.lists(st.floats(0.01, 5), min_size=2, max_size=4), n=st.integers(2, 30), slots=st.integers(1, 4))
def test_fewer_slots_never_faster(d, n, slots):
    stages = [{"name": f"s{i}", "duration_s": x, "slots": slots} for i, x in enumerate(d)]
    a = tl({"stages": stages, "items": n})["total_s"]
    b = tl({"stages": [{**s, "slots": slots + 1} for s in stages], "items": n})["total_s"]
    assert b <= a + 1e-9


def test_sweep_matches_scalar_calls():
    ns = [1, 2, 7, 30]
    sw = tl({**TILE, "items": ns, "release_interval_s": 1e-6})
    for i, n in enumerate(ns):
        assert sw["total_s"][i] == pytest.approx(tl({**TILE, "items": n, "release_interval_s": 1e-6})["total_s"])


def test_validation():
    with pytest.raises(ValidationError):
        tl({"stages": [{"name": "a", "duration_s": 1}, {"name": "a", "duration_s": 1}]})
    with pytest.raises(ValidationError):
        tl({"stages": [{"name": "a", "duration_s": -1}]})
    with pytest.raises(ValidationError):
        tl({"stages": []})
    with pytest.raises(CalcInputError):
        tl({"stages": [{"name": "a", "duration_s": 1, "after": ["b"]}, {"name": "b", "duration_s": 1}]})
    with pytest.raises(CalcInputError):
        tl({"stages": [{"name": "a", "bytes": 10}]})
    with pytest.raises(CalcInputError):
        tl({"stages": [{"name": "a", "duration_s": [1, 2]}], "items": 3})
    with pytest.raises(CalcInputError):
        tl({"stages": [{"name": "a", "duration_s": 1}], "what_if": [{"stages": {"zzz": {"scale": 2}}}]})
    with pytest.raises(ValidationError):
        tl({"stages": [{"name": "a", "duration_s": [1.0] * 100_001}]})
    with pytest.raises(ValidationError):
        tl({"stages": [{"name": "a", "duration_s": 1}], "what_if": [{"stages": {f"s{i}": {"scale": 2} for i in range(40)}}]})
    with pytest.raises(CalcInputError) as e:
        tl({"stages": [{"name": "a", "duration_s": 1, "slots": 1}], "items": 10**6})
    assert e.value.status == 413


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_empty_release_times_and_out_of_range_bounds_are_refused():
    # The fuzzed request: `release_times_s: []` with no items gave zero items and an axis error (a 500).
    body = {"stages": TILE["stages"], "release_times_s": [], "budget_s": 5e-324, "memory_budget_bytes": 5e-324}
    with pytest.raises(ValidationError) as e:
        tl(body)
    assert e.value.errors()[0]["loc"][0] == "release_times_s"
    with pytest.raises(ValidationError):
        tl({**TILE, "what_if": [{"release_times_s": []}]})
    # bounds that were written as Field(le=...) next to core aliases (and ignored) are enforced now
    for bad in ({"efficiency": 1.5}, {"what_if": [{"efficiency": 2.0}]},
                {"stages": [{"name": "a", "duration_s": 1.0, "lanes": 10**6 + 1}]},
                {"stages": [{"name": "a", "duration_s": 1.0, "slots": 10**6 + 1}]},
                {"what_if": [{"stages": {"read": {"scale": 1e10}}}]}):
        with pytest.raises(ValidationError):
            tl({**TILE, **bad})
    assert tl({**TILE, "release_times_s": [0.0] * 8})["total_s"] == pytest.approx(tl(TILE)["total_s"])


# --------------------------------------------------------------------------- when the first item starts at each stage

GROUPED = {"stages": [{"name": "cpu", "duration_s": 8 * US}, {"name": "device", "duration_s": 4 * US}], "items": 4,
           "first_release_s": 4 * US, "release_interval_s": 4 * US,
           "what_if": [{"label": "groups of 2", "items": 2, "first_release_s": 8 * US, "release_interval_s": 8 * US,
                        "stages": {"cpu": {"duration_s": 9 * US}, "device": {"duration_s": 8 * US}}},
                       {"label": "one group of 4", "items": 1, "first_release_s": 16 * US,
                        "stages": {"cpu": {"duration_s": 11 * US}, "device": {"duration_s": 16 * US}}}]}


def test_first_issue_times_of_grouped_submission():
    """The book's grouped submission: the device first receives work at 12, 17 and 27 µs."""
    o = tl(GROUPED)
    assert o["first_start_s"]["cpu"] == pytest.approx(4 * US) and o["first_start_s"]["device"] == pytest.approx(12 * US)
    assert [w["first_start_s"]["device"] for w in o["what_if"]] == pytest.approx([17 * US, 27 * US])


def test_first_start_closed_form_serial_and_walk_agree():
    stages = [{"name": "load", "duration_s": 2.0}, {"name": "compute", "duration_s": 3.0},
              {"name": "store", "duration_s": 1.0, "after": ["load"]}]
    closed = tl({"stages": stages, "items": [1, 5]})
    assert closed["method"] == "closed form"
    assert closed["first_start_s"] == {"load": [0.0, 0.0], "compute": [2.0, 2.0], "store": [2.0, 2.0]}
    walked = tl({"stages": stages, "items": 5, "release_times_s": [0, 0, 0, 0, 0]})
    assert walked["method"] == "item-by-item timeline"
    assert walked["first_start_s"] == pytest.approx({"load": 0.0, "compute": 2.0, "store": 2.0})
    serial = tl({"stages": stages, "items": 3, "mode": "serial"})
    assert serial["first_start_s"] == pytest.approx({"load": 0.0, "compute": 2.0, "store": 5.0})


@settings(max_examples=40, deadline=None)
@given(d=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=4), release=st.floats(0.0, 3.0))
def test_first_start_is_the_arrival_plus_the_chain_before_it(d, release):
    stages = [{"name": f"s{i}", "duration_s": x} for i, x in enumerate(d)]
    o = tl({"stages": stages, "items": 3, "first_release_s": release})
    starts = [o["first_start_s"][f"s{i}"] for i in range(len(d))]
    assert starts == pytest.approx([release + sum(d[:i]) for i in range(len(d))], abs=1e-12)
