"""tp-overhead: per-layer all-reduce cost of tensor parallelism, the book's decode total and the compendium claim."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

BOOK = {"hidden_size": 4096, "layers": 36, "tokens": 1, "tp": 8, "allreduces_per_layer": 2,
        "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 50e9}


def calc(body, lookup=no_lookup):
    return run("tp-overhead", body, lookup)[2].outputs


def test_tp_decode_allreduce_total_and_sensitivities():
    o = calc(BOOK)
    assert o["per_allreduce_s"] == pytest.approx(28.28672e-6, rel=1e-12)
    assert o["total_s"] == pytest.approx(2.03664384e-3, rel=1e-12)
    assert o["saved_if_bandwidth_doubles_s"] == pytest.approx(10.32192e-6, rel=1e-12)
    assert o["saved_if_alpha_halves_s"] == pytest.approx(1.008e-3, rel=1e-12)
    assert o["dominant"] == "latency" and o["allreduces"] == 72


def test_message_sizes_for_decode_and_prefill():
    o = calc({**BOOK, "tokens": [1, 4, 16, 1024, 8192]})
    assert o["bytes_per_allreduce"] == [8192, 32768, 131072, 8 * 2**20, 64 * 2**20]
    assert o["dominant"][0] == "latency" and o["dominant"][-1] == "bandwidth"


def test_message_sizes_without_a_link_have_null_times():
    o = calc({"hidden_size": 4096, "layers": 36, "tokens": 1024, "tp": 8})
    assert o["bytes_per_allreduce"] == 8 * 2**20 and o["total_s"] is None


def test_compendium_claim_is_a_prefill_figure_not_decode():
    """'NVLink (900 GB/s) ~0.1 ms per layer, PCIe (32 GB/s) ~3 ms; 80 layers: ~8 ms vs ~240 ms' (70B, TP=2, 1 all-reduce/layer).

    With hidden 8192 in FP16 and p = 2 (each rank sends M once) the figures need M ≈ 90–96 MB per all-reduce,
    i.e. a prefill of ≈5.5–6k tokens, and they take 900 GB/s (NVLink 4's bidirectional aggregate) as one way.
    A decode step (1 token = 16 KiB) is latency-bound and three orders of magnitude smaller in data movement.
    """
    claim = {"hidden_size": 8192, "layers": 80, "tp": 2, "allreduces_per_layer": 1, "link_alpha_s": 0}
    nv = calc({**claim, "tokens": 5493, "link_bandwidth_bytes_per_s": 900e9})
    pcie = calc({**claim, "tokens": 5859, "link_bandwidth_bytes_per_s": 32e9})
    assert nv["per_layer_s"] == pytest.approx(0.1e-3, rel=0.01) and nv["total_s"] == pytest.approx(8e-3, rel=0.01)
    assert pcie["per_layer_s"] == pytest.approx(3e-3, rel=0.01) and pcie["total_s"] == pytest.approx(240e-3, rel=0.01)
    one_way = calc({**claim, "tokens": 5493, "link_bandwidth_bytes_per_s": 450e9})
    assert one_way["total_s"] == pytest.approx(2 * nv["total_s"])  # the one-way NVLink 4 rate doubles it
    decode = calc({**claim, "tokens": 1, "link_bandwidth_bytes_per_s": 450e9, "link_alpha_s": 3e-6})
    assert decode["bytes_per_allreduce"] == 16384
    assert decode["total_bandwidth_part_s"] < 0.01 * decode["total_latency_part_s"]
    assert decode["per_layer_s"] < 0.1e-3 / 10


def test_model_id_supplies_hidden_and_layers():
    def lookup(kind, ident):
        if kind == "model" and ident == "m":
            return {"id": "m", "hidden_size": {"value": 4096, "source": "cfg", "locator": "hidden_size"},
                    "layers": {"value": 36, "source": "cfg", "locator": "num_hidden_layers"}}
        raise KeyError(ident)
    _, _, res = run("tp-overhead", {"model": "m", "tokens": 1, "tp": 8, "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 50e9}, lookup)
    assert res.outputs["total_s"] == pytest.approx(2.03664384e-3)
    assert {s["field"] for s in res.sources} == {"hidden_size", "layers"}


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 10**6), p=st.integers(1, 512), a=st.floats(0, 1e-4), B=st.floats(1e8, 1e13), L=st.integers(1, 200))
def test_total_is_layers_times_per_layer_and_parts_add_up(n, p, a, B, L):
    o = calc({"hidden_size": 4096, "layers": L, "tokens": n, "tp": p, "link_alpha_s": a, "link_bandwidth_bytes_per_s": B})
    assert o["total_s"] == pytest.approx(L * o["per_layer_s"])
    assert o["total_s"] == pytest.approx(o["total_latency_part_s"] + o["total_bandwidth_part_s"])
    assert math.isfinite(o["total_s"])
    if p == 1:
        assert o["total_s"] == 0


@settings(deadline=None)
@given(n=st.integers(1, 10**5), k=st.integers(2, 10))
def test_bandwidth_part_is_linear_in_tokens(n, k):
    a = calc({**BOOK, "tokens": n})["total_bandwidth_part_s"]
    b = calc({**BOOK, "tokens": n * k})["total_bandwidth_part_s"]
    assert b == pytest.approx(k * a)


def test_validation():
    with pytest.raises(CalcInputError):
        calc({"layers": 36, "tokens": 1, "tp": 8})
    with pytest.raises(CalcInputError):
        calc({"hidden_size": 4096, "tokens": 1, "tp": 8})
    with pytest.raises(ValidationError):
        calc({**BOOK, "tokens": 0})
    with pytest.raises(ValidationError):
        calc({**BOOK, "link_bandwidth_bytes_per_s": 0})
    with pytest.raises(ValidationError):
        calc({**BOOK, "algorithm": "butterfly"})


def test_compendium_claim_with_store_facts(lookup):
    """Llama 3.1 70B (hidden, layers from the store) at TP=2 over NVLink 4 and PCIe 4.0 x16: by default the link's
    α–β comes from measured NCCL all-reduces (h100_sxm and l40s); the datasheet rate is one field away."""
    from calculators.domain.link_fit import fit_all_reduce

    body = {"model": "llama-3.1-70b", "tp": 2, "allreduces_per_layer": 1}
    decode_nv = calc({**body, "tokens": 1, "link": "nvlink4"}, lookup)
    prefill_nv = calc({**body, "tokens": 6000, "link": "nvlink4"}, lookup)
    prefill_pcie = calc({**body, "tokens": 6000, "link": "pcie4-x16"}, lookup)
    assert decode_nv["bytes_per_allreduce"] == 16384
    for out, system in ((decode_nv, "h100_sxm"), (prefill_nv, "h100_sxm"), (prefill_pcie, "l40s")):
        fit = next(f for f in fit_all_reduce(lookup("measurement", f"{system}/nccl")["columns"]) if f.gpus == 2)
        assert out["per_layer_s"] == pytest.approx(fit.start_up_s + out["bytes_per_allreduce"] / fit.algorithm_bytes_per_s)
    assert decode_nv["per_layer_s"] < 20e-6                    # start-up bound: microseconds, not 0.1 ms
    assert prefill_pcie["per_layer_s"] > 10 * prefill_nv["per_layer_s"]
    # the datasheet's one-way PCIe 4.0 rate and no start-up, as the compendium computes it
    sheet = calc({**body, "tokens": 6000, "link": "pcie4-x16", "link_alpha_s": 0,
                  "link_bandwidth_bytes_per_s": lookup("link", "pcie4-x16")["one_way_bytes_per_s"]["value"]}, lookup)
    assert sheet["per_layer_s"] == pytest.approx(3.072e-3)
    assert sheet["total_s"] == pytest.approx(80 * 3.072e-3)

# --------------------------------------------------------------------------- with a model on hardware: the step model

STEP = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tokens": 8, "context_tokens": 2048}


def test_step_model_supplies_the_all_reduces_and_the_kernels(lookup):
    """The all-reduces are the step model's collectives (two per layer of each rank's [tokens, hidden] BF16 row),
    timed on the hardware's first link with its measured fit; the whole step is the kernels plus them."""
    rec = lookup("model", "llama-3.1-70b")
    layers, d = rec["layers"]["value"], rec["hidden_size"]["value"]
    o = calc({**STEP, "tp": [1, 2, 4, 8]}, lookup)
    assert o["allreduces"] == 2 * layers
    assert o["bytes_per_allreduce"] == [0.0] + [8 * d * 2.0] * 3          # nothing is reduced on one rank
    assert o["total_s"][0] == 0 and all(t > 0 for t in o["total_s"][1:])
    assert o["step_time_s"] == pytest.approx([k + t for k, t in zip(o["compute_time_s"], o["total_s"])], rel=1e-12)
    assert o["measured_step_time_s"] == pytest.approx([k + t for k, t in zip(o["measured_compute_time_s"], o["total_s"])])
    assert o["compute_time_s"] == sorted(o["compute_time_s"], reverse=True)   # more ranks, less work per rank
    assert all(m >= b for m, b in zip(o["measured_compute_time_s"], o["compute_time_s"]))
    assert o["compute_per_layer_s"][2] == pytest.approx(o["compute_time_s"][2] / layers)
    # the same all-reduces as the α–β path asked with the step model's message and the same link
    same = calc({"hidden_size": d, "layers": layers, "tokens": 8, "tp": 4, "link": "nvlink4", "hardware": "h100-sxm"}, lookup)
    assert same["total_s"] == pytest.approx(o["total_s"][2], rel=1e-12)


def test_step_model_prefill_and_bound_only(lookup):
    o = calc({**STEP, "tokens": 4096, "context_tokens": 0, "tp": 4, "phase": "prefill", "estimate": "bound"}, lookup)
    assert "measured_step_time_s" not in o or o["measured_step_time_s"] is None
    assert o["bytes_per_allreduce"] == 4096 * 8192 * 2.0
    assert o["dominant"] == "bandwidth" and 0 < o["comm_share"] < 1


def test_step_model_refusals(lookup):
    with pytest.raises(CalcInputError) as e:
        calc({**STEP, "tp": 3}, lookup)                   # 64 heads do not split over 3 ranks
    assert e.value.loc == ("tp",)
    with pytest.raises(CalcInputError) as e:
        calc({**STEP, "tp": 4, "hidden_size": 4096}, lookup)
    assert e.value.loc == ("hidden_size",)
    with pytest.raises(CalcInputError) as e:
        calc({**STEP, "tp": 4, "allreduces_per_layer": 1}, lookup)
    assert e.value.loc == ("allreduces_per_layer",)
    with pytest.raises(CalcInputError) as e:              # a step field without hardware
        calc({"model": "llama-3.1-70b", "tokens": 8, "tp": 4, "context_tokens": 2048, "link": "nvlink4"}, lookup)
    assert e.value.loc == ("context_tokens",)
    with pytest.raises(CalcInputError) as e:
        calc({**STEP, "tp": 4, "ep": 2}, lookup)          # a dense model has no experts to place
    assert e.value.loc == ("tp",)
