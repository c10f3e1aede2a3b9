"""collective, transfer-path and inflight-window: the book's α–β examples, byte counts and invariants."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from tests.calculators.plain import compute as run  # first: loads every calculator family (outputs as plain values)
from calculators.perf.collective import collective_cost  # noqa: E402
from calculators.framework import CalcInputError, UnknownId, no_lookup

MiB, KiB, GiB = 2**20, 2**10, 2**30
OPS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "point_to_point"]
ALGS = ["ring", "tree", "direct"]


def calc(body, name="collective", lookup=no_lookup):
    return run(name, body, lookup)[2].outputs


def fake_links(kind, ident):
    if kind == "link" and ident == "testlink":
        return {"id": "testlink", "one_way_bytes_per_s": {"value": 50e9, "source": "s", "locator": "l"},
                "latency_s": {"value": 2e-6, "source": "s", "locator": "l2"}}
    if kind == "link" and ident == "nolatency":
        return {"id": "nolatency", "one_way_bytes_per_s": {"value": 25e9, "source": "s", "locator": "l"}}
    raise KeyError(ident)


# ------------------------------------------------------------------ book examples

def test_ring_allreduce_small_message_collective_paths():
    o = calc({"ranks": 8, "message_bytes": 8 * KiB, "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 50e9})
    assert o["time_s"] == pytest.approx(28.28672e-6, rel=1e-12)
    assert o["rounds"] == 14
    assert o["dominant"] == "latency"


def test_ring_allreduce_bandwidth_upgrade_prefill_and_decode():
    o = calc({"ranks": 8, "message_bytes": [8 * MiB, 8 * MiB, 8 * KiB, 8 * KiB], "link_alpha_s": 5e-6,
              "link_bandwidth_bytes_per_s": [25e9, 75e9, 25e9, 75e9]})
    assert o["time_s"] == pytest.approx([657.20256e-6, 265.7341866666667e-6, 70.57344e-6, 70.19114666666667e-6], rel=1e-12)
    assert o["sent_bytes_per_rank"] == [14 * MiB, 14 * MiB, 14 * KiB, 14 * KiB]
    assert o["time_s"][0] / o["time_s"][1] == pytest.approx(2.473157737978162)


def test_ring_allreduce_logical_volume_four_gpus():
    o = calc({"ranks": 4, "message_bytes": 8 * MiB})
    assert o["chunk_bytes"] == 2 * MiB
    assert o["sent_bytes_per_rank"] == o["received_bytes_per_rank"] == 12 * MiB
    assert o["total_sent_bytes"] == 48 * MiB
    assert o["time_s"] is None  # no bandwidth: bytes only


def test_ulysses_all_to_all_send_per_rank():
    o = calc({"operation": "all_to_all", "ranks": 8, "message_bytes": [1024 * 32 * KiB, 1024 * 20 * KiB]})
    assert o["sent_bytes_per_rank"] == [28 * MiB, 17.5 * MiB]


def test_per_layer_collective_bytes_sp2tp2_and_tp4():
    sp2tp2 = calc({"ranks": 2, "message_bytes": 4096, "count": 2,
                   "then": [{"operation": "all_to_all", "message_bytes": 3072}, {"operation": "all_to_all", "message_bytes": 2048}]})
    assert sp2tp2["total_sent_bytes_per_rank"] == 10752
    assert [t["sent_bytes_per_rank"] for t in sp2tp2["then"]] == [1536, 1024]
    tp4 = calc({"ranks": 4, "message_bytes": 8192, "count": 2})
    assert tp4["total_sent_bytes_per_rank"] == 24576
    exit_sp = calc({"operation": "all_gather", "ranks": 2, "message_bytes": 8192})
    assert exit_sp["sent_bytes_per_rank"] == 4096


def test_sharded_query_broadcast_from_coordinator():
    o = calc({"operation": "broadcast", "algorithm": "direct", "ranks": 9, "message_bytes": 768 * 2})
    assert o["sent_bytes_per_rank"] == 12288


def test_link_id_supplies_bandwidth_and_latency_and_is_cited():
    calc_, req, res = run("collective", {"ranks": 8, "message_bytes": 8192, "link": "testlink"}, fake_links)
    assert res.outputs["time_s"] == pytest.approx(28.28672e-6)
    assert {s["field"] for s in res.sources} == {"one_way_bytes_per_s", "latency_s"}
    o = calc({"ranks": 8, "message_bytes": 8192, "link": "nolatency"}, lookup=fake_links)
    assert o["latency_part_s"] == 0
    with pytest.raises(UnknownId):
        calc({"ranks": 8, "message_bytes": 8192, "link": "nope"}, lookup=fake_links)


# ------------------------------------------------------------------ formulas and invariants

def test_known_closed_forms():
    p, M, a, B = 16.0, 1e6, 1e-6, 1e10
    t = lambda op, alg, **kw: calc({"operation": op, "algorithm": alg, "ranks": 16, "message_bytes": M, "link_alpha_s": a,
                                    "link_bandwidth_bytes_per_s": B, **kw})["time_s"]
    assert t("reduce_scatter", "ring") == pytest.approx(15 * a + 15 / 16 * M / B)
    assert t("all_gather", "tree") == pytest.approx(4 * a + 15 / 16 * M / B)
    assert t("all_reduce", "tree") == pytest.approx(8 * (a + M / B))
    assert t("broadcast", "ring", chunks=8) == pytest.approx((14 + 8) * (a + M / 8 / B))
    assert t("point_to_point", "ring") == pytest.approx(a + M / B)
    assert t("all_to_all", "direct") == pytest.approx(a + 15 / 16 * M / B)


def test_multi_nic_striping_and_imbalance():
    base = {"ranks": 8, "message_bytes": 64 * MiB, "link_alpha_s": 0, "link_bandwidth_bytes_per_s": 25e9}
    one = calc(base)["time_s"]
    assert calc({**base, "nics": 4})["time_s"] == pytest.approx(one / 4)
    assert calc({**base, "nics": 4, "nic_imbalance": 0.25})["time_s"] == pytest.approx(one / 4 * 1.25)


def test_single_rank_is_free():
    for op in OPS[:-1]:
        for alg in ALGS:
            o = calc({"operation": op, "algorithm": alg, "ranks": 1, "message_bytes": 1e6, "link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 1e9})
            assert o["time_s"] == 0 and o["sent_bytes_per_rank"] == 0, (op, alg)


@settings(deadline=None)
@given(op=st.sampled_from(OPS), alg=st.sampled_from(ALGS), p=st.integers(1, 4096), M=st.floats(0, 1e12),
       a=st.floats(0, 1e-3), B=st.floats(1e6, 1e13))
def test_time_is_rounds_alpha_plus_wire_over_b_and_never_crashes(op, alg, p, M, a, B):
    o = calc({"operation": op, "algorithm": alg, "ranks": p, "message_bytes": M, "link_alpha_s": a, "link_bandwidth_bytes_per_s": B})
    assert o["time_s"] == pytest.approx(o["latency_part_s"] + o["bandwidth_part_s"])
    assert o["latency_part_s"] == pytest.approx(o["rounds"] * a)
    assert o["time_s"] >= 0 and math.isfinite(o["time_s"])
    assert o["total_sent_bytes"] >= o["sent_bytes_per_rank"] - 1e-6 * max(1.0, o["sent_bytes_per_rank"])


@settings(deadline=None)
@given(p=st.integers(2, 1024), M=st.floats(1, 1e10), a=st.floats(0, 1e-4), B=st.floats(1e6, 1e12), k=st.floats(1.01, 10))
def test_more_bandwidth_or_less_alpha_never_slower(p, M, a, B, k):
    base = {"ranks": p, "message_bytes": M, "link_alpha_s": a, "link_bandwidth_bytes_per_s": B}
    t0 = calc(base)["time_s"]
    assert calc({**base, "link_bandwidth_bytes_per_s": B * k})["time_s"] <= t0 * (1 + 1e-12)
    assert calc({**base, "link_alpha_s": a / k})["time_s"] <= t0 * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(ms=st.lists(st.floats(0, 1e10), min_size=1, max_size=20), p=st.integers(1, 64))
def test_sweep_matches_scalar_calls(ms, p):
    base = {"ranks": p, "link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 1e10}
    swept = calc({**base, "message_bytes": ms})["time_s"]
    assert swept == pytest.approx([calc({**base, "message_bytes": m})["time_s"] for m in ms])


def test_ring_allreduce_bus_bandwidth_approaches_link_bandwidth_for_large_messages():
    o = calc({"ranks": 8, "message_bytes": 1e12, "link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 50e9})
    assert o["bus_bandwidth_bytes_per_s"] == pytest.approx(50e9, rel=1e-6)
    assert o["dominant"] == "bandwidth"


def test_collective_cost_vectorised_over_ranks():
    c = collective_cost("all_reduce", "ring", np.array([1, 2, 8]), 800.0)
    assert c["sent"].tolist() == [0, 800, 1400]


def test_validation():
    with pytest.raises(ValidationError):
        calc({"ranks": 0, "message_bytes": 1})
    with pytest.raises(ValidationError):
        calc({"ranks": 8, "message_bytes": -1})
    with pytest.raises(ValidationError):
        calc({"ranks": 8, "message_bytes": 1, "link_bandwidth_bytes_per_s": 0})
    with pytest.raises(ValidationError):
        calc({"ranks": 8, "message_bytes": 1, "operation": "gossip"})
    with pytest.raises(ValidationError):
        calc({"ranks": 8, "message_bytes": 1, "bogus": 1})
    with pytest.raises(CalcInputError):
        calc({"ranks": [2, 4], "message_bytes": [1, 2, 3], "link_bandwidth_bytes_per_s": 1e9})


# ================================================================== transfer-path

def tp_calc(body, lookup=no_lookup):
    return calc(body, "transfer-path", lookup)


def test_multi_nic_relay_transfer_four_plans():
    nic = {"label": "NIC", "bytes_per_s": 40e9}
    relay = [{"label": "direct", "hops": [nic]},
             {"label": "relay", "hops": [{"label": "relay link", "bytes_per_s": 60e9}, {"label": "borrowed NICs", "bytes_per_s": 80e9}]}]
    o = tp_calc({"payload_bytes": 1.125 * GiB, "plans": [
        {"label": "direct", "paths": [{"hops": [nic]}]},
        {"label": "shared pcie", "paths": [{"count": 3, "hops": [nic]}], "caps": [{"label": "PCIe", "bytes_per_s": 45e9}]},
        {"label": "relay", "paths": relay},
        {"label": "fabric", "paths": relay, "caps": [{"label": "fabric", "bytes_per_s": 70e9}]}]})
    times = [p["time_s"] for p in o["plans"]]
    assert times == pytest.approx([30.1989888e-3, 26.8435456e-3, 12.07959552e-3, 17.25656502857143e-3])
    assert [p["aggregate_bytes_per_s"] for p in o["plans"]] == [40e9, 45e9, 100e9, 70e9]
    assert o["plans"][1]["bottleneck"] == "PCIe" and o["fastest"] == "relay"


def test_host_staged_numa_bounds_are_set_by_the_socket_link():
    def plan(label, dram_a, dram_b, socket):
        return {"label": label, "paths": [{"hops": [{"label": "PCIe", "bytes_per_s": 12e9}]}], "loads": [
            {"label": "DRAM A", "bytes": dram_a * MiB, "bytes_per_s": 40e9}, {"label": "DRAM B", "bytes": dram_b * MiB, "bytes_per_s": 40e9},
            {"label": "socket A->B", "bytes": socket * MiB, "bytes_per_s": 8e9}, {"label": "socket B->A", "bytes": socket * MiB, "bytes_per_s": 8e9}]}
    o = tp_calc({"payload_bytes": 12 * MiB, "plans": [plan("all A", 96, 0, 24), plan("grouped", 48, 48, 12), plan("alternating", 48, 48, 24)]})
    assert [p["time_s"] for p in o["plans"]] == pytest.approx([3.145728e-3, 1.572864e-3, 3.145728e-3])
    assert all(p["bottleneck"].startswith("socket") for p in o["plans"])
    assert o["plans"][0]["loads"][0]["time_s"] == pytest.approx(2.516582e-3, rel=1e-6)


def test_bits_per_s_copies_rate_and_deadline():
    o = tp_calc({"payload_bytes": 30e9, "plans": [
        {"label": "one receiver", "paths": [{"hops": [{"bits_per_s": 50e9}]}]},
        {"label": "sender egress", "copies": 6, "paths": [{"hops": [{"bits_per_s": 200e9}]}]}]})
    assert [p["time_s"] for p in o["plans"]] == pytest.approx([4.8, 7.2])
    assert o["plans"][1]["bytes_moved"] == 180e9
    o = tp_calc({"payload_bytes": 1207959552, "rate_per_s": [8, 16], "plans": [{"paths": [{"hops": [{"bytes_per_s": 11e9}]}]}]})
    p = o["plans"][0]
    assert p["max_rate_per_s"] == pytest.approx(9.106265174018013)
    assert p["required_bytes_per_s"] == [9663676416, 19327352832]
    assert p["sustainable"] == [True, False]
    o = tp_calc({"deadline_s": 0.05, "plans": [{"paths": [{"hops": [{"label": "cross link", "latency_s": 0.08}]}]}]})
    assert o["plans"][0]["meets_deadline"] is False


def test_mesh_propagation_rounds_and_fair_share_under_a_cut():
    o = tp_calc({"plans": [{"rounds": 120, "paths": [{"hops": [{"label": "hop", "latency_s": 100e-9, "count": 15}]}]}]})
    assert o["plans"][0]["time_s"] == pytest.approx(1.5e-6) and o["time_s"] == pytest.approx(180e-6)
    o = tp_calc({"plans": [{"paths": [{"count": 4, "hops": [{"bytes_per_s": 25e9}]}], "caps": [{"label": "cut", "bytes_per_s": 50e9}]}]})
    p = o["plans"][0]
    assert p["uncapped_bytes_per_s"] == 100e9 and p["aggregate_bytes_per_s"] == 50e9
    assert p["paths"][0]["bytes_per_s"] == 12.5e9


def test_store_and_forward_vs_pipelined_chunks():
    hops = [{"label": "GPU->host", "bytes_per_s": 25e9, "latency_s": 10e-6}, {"label": "host->NIC", "bytes_per_s": 50e9, "latency_s": 5e-6}]
    t = lambda ch: tp_calc({"payload_bytes": 1e9, "plans": [{"chunks": ch, "paths": [{"hops": hops}]}]})["time_s"]
    assert t(1) == pytest.approx(10e-6 + 0.04 + 5e-6 + 0.02)                     # store-and-forward: sum
    assert t(None) == pytest.approx(15e-6 + 0.04)                               # ideal streaming: slowest hop
    assert t(4) == pytest.approx((10e-6 + 0.01) + (5e-6 + 0.005) + 3 * (10e-6 + 0.01))
    assert t(None) < t(64) < t(4) < t(1)


def test_packet_rate_of_minimum_frames():
    o = tp_calc({"payload_bytes": 84, "plans": [{"paths": [{"hops": [{"bits_per_s": 40e9}]}]}]})
    assert o["plans"][0]["aggregate_bytes_per_s"] == 5e9
    assert o["plans"][0]["max_rate_per_s"] == pytest.approx(59.5238095e6)


@settings(max_examples=40, deadline=None)
@given(P=st.floats(0, 1e12), bws=st.lists(st.floats(1e6, 1e12), min_size=1, max_size=4), cap=st.floats(1e6, 1e12),
       imb=st.floats(0, 2), ch=st.one_of(st.none(), st.integers(1, 64)), lat=st.floats(0, 1e-3))
def test_transfer_path_never_crashes_and_caps_only_slow_down(P, bws, cap, imb, ch, lat):
    paths = [{"hops": [{"bytes_per_s": b, "latency_s": lat}]} for b in bws]
    free = tp_calc({"payload_bytes": P, "plans": [{"paths": paths, "chunks": ch, "imbalance": imb}]})["time_s"]
    capped = tp_calc({"payload_bytes": P, "plans": [{"paths": paths, "chunks": ch, "imbalance": imb, "caps": [{"bytes_per_s": cap}]}]})["time_s"]
    assert math.isfinite(free) and free >= 0
    assert capped >= free * (1 - 1e-9)


def test_transfer_path_validation():
    with pytest.raises(ValidationError):
        tp_calc({"plans": []})
    with pytest.raises(ValidationError):
        tp_calc({"plans": [{"paths": [{"hops": [{"bytes_per_s": 1e9, "bits_per_s": 8e9}]}]}]})
    with pytest.raises(ValidationError):
        tp_calc({"plans": [{"paths": [{"hops": []}]}]})
    with pytest.raises(UnknownId):
        tp_calc({"plans": [{"paths": [{"hops": [{"link": "nope"}]}]}]}, lookup=fake_links)
    o = tp_calc({"payload_bytes": 5e10, "plans": [{"paths": [{"hops": [{"link": "testlink"}]}]}]}, lookup=fake_links)
    assert o["time_s"] == pytest.approx(2e-6 + 1.0)


# ================================================================== inflight-window

def iw(body):
    return calc(body, "inflight-window")


def test_inflight_reads_required_and_window_bound():
    o = iw({"request_bytes": 256, "completion_s": [2e-6, 4e-6], "target_bytes_per_s": 40e9, "window": 128, "link_bandwidth_bytes_per_s": 40e9})
    assert o["required_inflight"] == [313, 625]
    assert o["window_bound_bytes_per_s"][0] == pytest.approx(16.384e9)
    assert o["limiter"] == ["window", "window"] and o["meets_target"] == [False, False]
    assert iw({"request_bytes": 256, "completion_s": 2e-6, "window": 1})["bound_bytes_per_s"] == pytest.approx(0.128e9)


def test_serial_service_point_and_littles_law_table():
    o = iw({"request_bytes": 256, "completion_s": 2e-6, "window": 128, "link_bandwidth_bytes_per_s": 40e9, "service_s": 0.1e-6})
    assert o["bound_bytes_per_s"] == pytest.approx(2.56e9) and o["limiter"] == "serial"
    o = iw({"request_bytes": 128, "completion_s": [5e-7, 5e-7, 5e-7, 8e-7], "window": [128, 4096, 4096, 4096],
            "link_bandwidth_bytes_per_s": [1e12, 1e12, 2e12, 1e12], "transfer_bytes": 1207959552})
    assert o["bound_bytes_per_s"] == pytest.approx([32.768e9, 1000e9, 1048.576e9, 655.36e9])
    assert o["transfer_time_s"] == pytest.approx([36.864e-3, 1.207959552e-3, 1.152e-3, 1.8432e-3])
    assert iw({"request_bytes": 128, "completion_s": 5e-7, "target_bytes_per_s": 1e12})["required_inflight"] == 3907


@settings(deadline=None)
@given(m=st.floats(1, 1e6), T=st.floats(1e-9, 1e-2), W=st.integers(1, 10**6))
def test_window_reaches_its_own_bound(m, T, W):
    o = iw({"request_bytes": m, "completion_s": T, "window": W})
    back = iw({"request_bytes": m, "completion_s": T, "target_bytes_per_s": o["bound_bytes_per_s"]})
    assert back["required_inflight"] <= W


def test_inflight_needs_something_to_compute():
    with pytest.raises(CalcInputError):
        iw({"request_bytes": 256, "completion_s": 2e-6})
    with pytest.raises(ValidationError):
        iw({"request_bytes": 0, "completion_s": 2e-6, "window": 1})


def test_fuzz_regressions_denormal_rates_and_length_one_sweeps():
    # bits/s so small that /8 underflows to 0: an infinite time (null), never a crash
    o = tp_calc({"payload_bytes": 5, "plans": [{"chunks": 1, "paths": [{"hops": [{"bits_per_s": 5e-324}]}],
                                                 "loads": [{"bits_per_s": 5e-324, "bytes": 1}]}]})
    assert o["time_s"] is None
    # a one-element list meeting scalars
    o = iw({"request_bytes": 256, "completion_s": 2e-6, "window": 128, "link_bandwidth_bytes_per_s": 40e9, "service_s": [1e-7]})
    assert o["limiter"] == ["serial"]


def test_repeated_hops_scale_without_expanding_and_bounds_are_enforced():
    hop = {"bytes_per_s": 1e9, "latency_s": 1e-6, "count": 10_000}
    o = tp_calc({"payload_bytes": 1e6, "plans": [{"chunks": 1, "paths": [{"hops": [hop] * 50}]}]})
    assert o["time_s"] == pytest.approx(500_000 * (1e-6 + 1e-3))
    with pytest.raises(ValidationError):
        tp_calc({"plans": [{"paths": [{"hops": [{"count": 10_001}]}]}]})
    with pytest.raises(ValidationError):
        tp_calc({"plans": [{"imbalance": 1e6, "paths": [{"hops": [{}]}]}]})
    with pytest.raises(ValidationError):
        calc({"ranks": 8, "message_bytes": 1, "nics": 4096})
