"""parallel-split and tp-vs-pp-queueing: the book's TP series, pipeline hand-offs, M/D/1 comparison, invariants."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, UnknownId, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

KV_8K = 1207959552  # 1.125 GiB
TEACH = {"weight_bytes": 16.4e9, "kv_bytes": KV_8K, "layers": 36, "hidden_size": 4096,
         "memory_bandwidth_bytes_per_s": 2e12, "tp": [1, 2, 4, 8]}
FAST = {"link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 200e9}
SLOW = {"link_alpha_s": 5e-6, "link_bandwidth_bytes_per_s": 25e9}


def calc(body, lookup=no_lookup, name="parallel-split"):
    return run(name, body, lookup)[2].outputs


def store(kind, ident):
    recs = {
        ("model", "qwen3-8b"): {
            "id": "qwen3-8b", "kind": "dense", "weight_dtype": "bf16",
            "layers": {"value": 36, "source": "cfg", "locator": "num_hidden_layers"},
            "hidden_size": {"value": 4096, "source": "cfg", "locator": "hidden_size"},
            "kv_heads": {"value": 8, "source": "cfg", "locator": "num_key_value_heads"},
            "head_dim": {"value": 128, "source": "cfg", "locator": "head_dim"},
            "params_total": {"value": 8.2e9, "source": "card", "locator": "params"},
            "layer_groups": [{"count": 36, "streams": [{"dim": 2048, "window": None, "ratio": 1}], "state_elements": 0}],
            "layer_groups_provenance": {"source": "cfg", "locator": "config"}},
        ("hardware", "gpu"): {"id": "gpu", "memory_bytes": {"value": 80e9, "source": "ds", "locator": "mem"},
                              "memory_bandwidth_bytes_per_s": {"value": 2e12, "source": "ds", "locator": "bw"}},
        ("link", "fast"): {"id": "fast", "one_way_bytes_per_s": {"value": 200e9, "source": "ds", "locator": "l"},
                           "latency_s": {"value": 1e-6, "source": "ds", "locator": "lat"}},
    }
    try:
        return recs[(kind, ident)]
    except KeyError:
        raise KeyError(ident) from None


def test_book_series_fast_interconnect():
    o = calc({**TEACH, **FAST})
    assert [round(t * 1e3, 2) for t in o["step_time_s"]] == [8.80, 4.55, 2.64, 2.11]
    assert o["best"]["tp"] == 8
    assert [c["tp"] for c in o["candidates"]] == [1, 2, 4, 8]


def test_book_series_slow_interconnect_tp4_beats_tp8():
    o = calc({**TEACH, **SLOW})
    assert [round(t * 1e3, 2) for t in o["step_time_s"]] == [8.80, 5.15, 4.40, 6.18]
    assert o["best"]["tp"] == 4
    assert o["candidates"][3]["dominant"] == "communication" and o["candidates"][0]["dominant"] == "memory"
    assert "TP=4" in o["why"] and "TP=8" in o["why"]


def test_exact_formula():
    o = calc({**TEACH, **SLOW})
    p, M = 8, 8192
    expect = (16.4e9 + KV_8K) / (p * 2e12) + 72 * (2 * (p - 1) * 5e-6 + 2 * (p - 1) * M / (p * 25e9))
    assert o["step_time_s"][3] == pytest.approx(expect, rel=1e-12)
    assert o["per_device_bytes"][3] == pytest.approx((16.4e9 + KV_8K) / 8)


def test_ids_resolve_weights_kv_hardware_and_link_with_sources():
    _, _, res = run("parallel-split", {"model": "qwen3-8b", "hardware": "gpu", "link": "fast",
                                        "context_tokens": 8192, "tp": [1, 2, 4, 8]}, store)
    o = res.outputs
    assert o["weight_bytes"] == 16.4e9 and o["kv_bytes"] == KV_8K and o["message_bytes"] == 8192
    assert [round(t * 1e3, 2) for t in o["step_time_s"]] == [8.80, 4.55, 2.64, 2.11]
    fields = {s["field"] for s in res.sources}
    assert {"params_total", "layers", "memory_bytes", "memory_bandwidth_bytes_per_s", "one_way_bytes_per_s", "latency_s"} <= fields
    with pytest.raises(UnknownId):
        calc({"model": "nope", "tp": 1}, store)


def test_memory_fit_excludes_candidates_and_workspace_counts():
    o = calc({**TEACH, **SLOW, "memory_per_device_bytes": 6e9})
    assert o["fits"] == [False, False, True, True]
    assert o["best"]["tp"] == 4 and "do not fit" in o["why"]
    o = calc({**TEACH, **SLOW, "memory_per_device_bytes": 6e9, "workspace_bytes": 2e9})
    assert o["fits"] == [False, False, False, True] and o["best"]["tp"] == 8
    o = calc({**TEACH, **SLOW, "memory_per_device_bytes": 1e9})
    assert o["best"] is None and "No candidate fits" in o["why"]


def test_scalar_tp_gives_scalar_outputs():
    o = calc({**TEACH, **SLOW, "tp": 4})
    assert o["step_time_s"] == pytest.approx(4.396384384e-3) and o["best"]["tp"] == 4 and len(o["candidates"]) == 1


def test_pipeline_handoff_payload_and_link_token_rate():
    o = calc({**TEACH, **FAST, "pp": 2, "handoff_tensors": 2, "step_tokens": 8192,
              "pp_link_bandwidth_bytes_per_s": 31.25 * 2**20, "microbatches": 4})
    pl = o["pipeline"]
    assert pl["handoff_bytes_per_token"] == 16 * 1024
    assert pl["handoff_bytes"] == 128 * 2**20
    assert pl["link_tokens_per_s"] == 2000
    assert pl["bubble_fraction"] == pytest.approx(1 / 5)
    assert o["per_device_bytes"][0] == pytest.approx((16.4e9 + KV_8K) / 2)
    one = calc({**TEACH, **FAST, "pp": 2, "hidden_size": 4096})
    assert one["pipeline"]["handoff_bytes_per_token"] == 8192  # a single hidden vector: 8 KiB


def test_compute_bound_term_when_given():
    o = calc({**TEACH, **FAST, "tp": [1], "step_tokens": 8192, "message_bytes": 8192,
              "flops_per_token": 2 * 8.2e9, "peak_flop_per_s": 500e12})
    assert o["candidates"][0]["compute_time_s"] == pytest.approx(8192 * 2 * 8.2e9 / 500e12)
    assert o["candidates"][0]["dominant"] == "compute"


@settings(max_examples=60, deadline=None)
@given(W=st.floats(1e6, 1e13), KV=st.floats(0, 1e12), a=st.floats(0, 1e-4), B=st.floats(1e8, 1e12),
       tps=st.lists(st.integers(1, 4096), min_size=1, max_size=12), L=st.integers(1, 200), mem=st.floats(1e6, 1e12))
def test_best_is_the_fastest_fitting_candidate_and_sweep_matches_scalars(W, KV, a, B, tps, L, mem):
    body = {"weight_bytes": W, "kv_bytes": KV, "layers": L, "message_bytes": 8192, "memory_bandwidth_bytes_per_s": 2e12,
            "memory_per_device_bytes": mem, "link_alpha_s": a, "link_bandwidth_bytes_per_s": B}
    o = calc({**body, "tp": tps})
    fit_steps = [c["step_time_s"] for c in o["candidates"] if c["fits"]]
    if fit_steps:
        assert o["best"]["step_time_s"] == min(fit_steps)
    else:
        assert o["best"] is None
    assert all(math.isfinite(t) for t in o["step_time_s"])
    for t, s in zip(tps[:3], o["step_time_s"][:3]):
        assert calc({**body, "tp": t})["step_time_s"] == pytest.approx(s)


@settings(deadline=None)
@given(p=st.integers(1, 1024))
def test_memory_time_falls_and_comm_grows_with_tp(p):
    o = calc({**TEACH, **SLOW, "tp": [p, p + 1]})
    assert o["memory_time_s"][1] < o["memory_time_s"][0]
    assert o["comm_time_s"][1] > o["comm_time_s"][0]


def test_validation():
    with pytest.raises(ValidationError):
        calc({**TEACH, **SLOW, "tp": [0, 2]})
    with pytest.raises(ValidationError):
        calc({**TEACH, **SLOW, "tp": []})
    with pytest.raises(ValidationError):
        calc({**TEACH, **SLOW, "memory_bandwidth_bytes_per_s": 0})
    with pytest.raises(CalcInputError):
        calc({k: v for k, v in TEACH.items() if k != "memory_bandwidth_bytes_per_s"} | SLOW)
    with pytest.raises(CalcInputError):
        calc({**TEACH, "tp": [1, 2]})  # no link for tp > 1
    with pytest.raises(CalcInputError):
        calc({k: v for k, v in TEACH.items() if k != "hidden_size"} | FAST)  # no message size
    calc({**TEACH, "tp": [1]})  # a single device needs no link


# ================================================================== tp-vs-pp-queueing

def test_tp_vs_pp_prefill_md1_book_values():
    o = calc({"service_s": 0.2, "tp_speedup": 1.6, "devices": 2, "arrival_rate_per_s": [1, 7]}, name="tp-vs-pp-queueing")
    tp, pp, rep = o["candidates"]
    assert tp["capacity_per_s"] == pytest.approx(8) and pp["capacity_per_s"] == pytest.approx(10)
    assert o["tp_mean_time_s"] == pytest.approx([0.13392857142857142, 0.5625])
    assert o["pp_mean_time_s"] == pytest.approx([0.20555555555555557, 0.3166666666666667])
    assert o["best"] == ["tp", "pp"]


def test_queue_unstable_beyond_capacity_is_null():
    o = calc({"service_s": 0.2, "tp_speedup": 1.6, "arrival_rate_per_s": [8, 9, 10]}, name="tp-vs-pp-queueing")
    assert o["tp_mean_time_s"] == [None, None, None]
    assert o["pp_mean_time_s"][1] is not None and o["pp_mean_time_s"][2] is None
    assert o["best"] == ["pp", "pp", None]


@settings(deadline=None)
@given(lam=st.floats(0, 7.9), d=st.floats(0.01, 1))
def test_queueing_times_grow_with_load(lam, d):
    body = {"service_s": 0.2, "tp_speedup": 1.6, "arrival_rate_per_s": [lam, lam + d * (7.99 - lam)]}
    o = calc(body, name="tp-vs-pp-queueing")
    assert o["tp_mean_time_s"][1] >= o["tp_mean_time_s"][0] - 1e-12
    assert o["pp_mean_time_s"][1] >= o["pp_mean_time_s"][0] - 1e-12


def test_what_if_slower_link_moves_the_choice_from_tp8_to_tp4():
    o = calc({**TEACH, **FAST, "what_if": [{"label": "slow", **SLOW}, {"label": "same", "link_alpha_s": 1e-6}]})
    assert o["best"]["tp"] == 8
    slow, same = o["what_if"]
    assert [round(t * 1e3, 2) for t in slow["step_time_s"]] == [8.80, 5.15, 4.40, 6.18]
    assert slow["best"]["tp"] == 4 and "moves from TP=8 to TP=4" in slow["moved"]
    assert same["best"]["tp"] == 8 and "stays" in same["moved"]
    with pytest.raises(CalcInputError) as e:
        calc({**TEACH, **FAST, "what_if": [{"link": "nope"}]}, store)
    assert e.value.loc[:2] == ("what_if", 0)


def test_capacity_screen_free_bytes():
    o = calc({**TEACH, **FAST, "weight_bytes": 470e9, "kv_bytes": 0, "memory_per_device_bytes": 80e9, "tp": [4, 8]})
    assert o["per_device_bytes"] == [117.5e9, 58.75e9]
    assert o["free_bytes"][1] == pytest.approx(21.25e9) and o["fits"] == [False, True]


def test_what_if_nulls_are_ignored_and_bad_variants_are_422():
    o = calc({**TEACH, **FAST, "what_if": [{"label": "x", "workspace_bytes": None, **SLOW}]})
    assert o["what_if"][0]["best"]["tp"] == 4
    # an empty link id is refused by the request model (ids are non-empty), at the variant's field
    with pytest.raises(ValidationError) as ve:
        calc({**TEACH, **FAST, "what_if": [{"link": ""}]}, store)
    assert ve.value.errors()[0]["loc"][:3] == ("what_if", 0, "link")
    with pytest.raises(CalcInputError) as e:
        calc({**TEACH, **FAST, "what_if": [{"link": "no-such-link"}]}, store)
    assert e.value.loc[:2] == ("what_if", 0)


# --------------------------------------------------------------------------- headline and typed outputs

def test_headline_names_the_choice_and_why():
    from calculators.framework.headline import fmt_seconds
    _, _, res = run("parallel-split", {**TEACH, **SLOW}, no_lookup)
    o = res.outputs
    b = o["best"]
    assert res.headline.startswith(f"Choose TP={b['tp']}: a {fmt_seconds(b['step_time_s'])} decode step")
    nxt = next(c for c in o["candidates"] if c["tp"] > b["tp"])
    assert f"TP={nxt['tp']} would save {fmt_seconds(b['memory_time_s'] - nxt['memory_time_s'])}" in res.headline
    _, _, res = run("parallel-split", {**TEACH, **SLOW, "memory_per_device_bytes": 1e9}, no_lookup)
    assert res.outputs["best"] is None and res.headline.startswith("None of the 4 candidates fits")
    _, _, res = run("parallel-split", {**TEACH, **FAST, "tp": 2}, no_lookup)
    assert res.headline.startswith("Choose TP=2") and res.headline.endswith(".")


def test_queueing_headline():
    _, _, res = run("tp-vs-pp-queueing", {"service_s": 0.2, "tp_speedup": 1.6, "devices": 2, "arrival_rate_per_s": [1, 7]}, no_lookup)
    assert res.headline.startswith("At 1 req/s tensor parallelism gives") and "first of 2 points" in res.headline
    _, _, res = run("tp-vs-pp-queueing", {"service_s": 0.2, "tp_speedup": 1.6, "devices": 2, "arrival_rate_per_s": 100}, no_lookup)
    assert "overloaded" in res.headline


def test_outputs_models_validate_every_example(lookup):
    from calculators.framework.registry import REGISTRY
    for name in ("parallel-split", "tp-vs-pp-queueing"):
        c = REGISTRY[name]
        for body in (c.example, *c.extra_examples):
            _, _, res = run(name, body, lookup)
            c.outputs_model.model_validate(res.outputs)
            assert len(res.headline) > 20 and res.headline.endswith(".")
    c = REGISTRY["parallel-split"]
    _, _, res = run("parallel-split", {**TEACH, **SLOW, "tp": 4}, no_lookup)      # scalar tp: flat fields are scalars
    c.outputs_model.model_validate(res.outputs)


# --------------------------------------------------------------------------- the step model, weight_format, the default link, devices

L70 = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "batch": 8, "context_tokens": 2048}


def test_weight_format_fp8_halves_the_weights_and_shortens_the_step(lookup):
    bf16 = calc({**L70, "tp": [2, 4], "weight_format": "bf16"}, lookup)
    fp8 = calc({**L70, "tp": [2, 4], "weight_format": "fp8"}, lookup)
    assert bf16["step_model"] == fp8["step_model"] == "layers"
    assert (bf16["weight_format"], fp8["weight_format"]) == ("bf16", "fp8")
    assert fp8["weight_bytes"] == pytest.approx(bf16["weight_bytes"] / 2, rel=1e-12)
    for a, b in zip(bf16["candidates"], fp8["candidates"]):
        assert b["per_device_bytes"] < a["per_device_bytes"]           # the fit uses the format
        assert b["memory_time_s"] < a["memory_time_s"] and b["step_time_s"] < a["step_time_s"]      # the bound
        assert b["measured_step_time_s"] < a["measured_step_time_s"]   # the measured estimate (FP8 GEMM tables)
    # the book's first-pass model counts W in the format too
    fp = {"model": "llama-3.1-70b", "memory_bandwidth_bytes_per_s": 3.35e12, "link_bandwidth_bytes_per_s": 1e11, "tp": [1, 2]}
    w16, w8 = (calc({**fp, "weight_format": f}, lookup) for f in ("bf16", "fp8"))
    assert w16["step_model"] == "first_pass" and w8["weight_bytes"] == pytest.approx(w16["weight_bytes"] / 2, rel=1e-12)
    assert w8["step_time_s"][0] < w16["step_time_s"][0]
    with pytest.raises(CalcInputError) as e:
        calc({**fp, "weight_format": "fp8", "weight_bytes_per_param": 1}, lookup)
    assert e.value.loc == ("weight_format",)


def test_the_link_defaults_to_the_hardware_scale_up_link_and_says_so(lookup):
    _, _, res = run("parallel-split", {**L70, "tp": [1, 4], "estimate": "bound"}, lookup)
    link = lookup("hardware", "h100-sxm")["links"][0]          # the record's first listed link
    assert res.outputs["link"] == link and res.inputs["link"] == link
    assert any(a.startswith(f"link not given: using {link} (the scale-up link of h100-sxm, source") for a in res.assumptions)
    named = calc({**L70, "tp": [1, 4], "estimate": "bound", "link": link}, lookup)
    assert named["step_time_s"] == res.outputs["step_time_s"]
    # a single device needs no link: nothing is defaulted
    _, _, one = run("parallel-split", {**L70, "tp": 1, "estimate": "bound"}, lookup)
    assert one.outputs["link"] is None and not any("link not given" in a for a in one.assumptions)


def test_a_hardware_without_a_scale_up_link_and_no_link_is_a_422_naming_link():
    with pytest.raises(CalcInputError) as e:
        calc({"model": "qwen3-8b", "hardware": "gpu", "tp": [1, 2], "context_tokens": 1024}, store)
    assert e.value.loc == ("link",)
    calc({"model": "qwen3-8b", "hardware": "gpu", "tp": [1, 2], "context_tokens": 1024, "link": "fast"}, store)


# parallel-split's step time against roofline, serving-cost, tp-overhead, speculative and the planner: test_step_agreement.py


def test_devices_rank_tp_times_replicas_by_tokens_per_device(lookup):
    _, _, res = run("parallel-split", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "devices": 8, "context_tokens": 2048},
                    lookup)
    d = res.outputs["devices"]
    opts = d["options"]
    assert sorted(o["tp"] for o in opts) == [1, 2, 4, 8] and d["batch_basis"] == "largest that fits"
    assert d["ranked_by"] == "measured"
    ok = [o for o in opts if o["fits"]]
    assert [o["tp"] for o in ok] and all(not o["fits"] for o in opts[len(ok):])   # fitting options first
    assert not next(o for o in opts if o["tp"] == 1)["fits"]                         # 141 GB of BF16 weights on one H100
    rates = [o["tokens_per_s_per_device"] for o in ok]
    assert rates == sorted(rates, reverse=True) and [o["rank"] for o in ok] == list(range(1, len(ok) + 1))
    for o in ok:
        assert o["replicas"] * o["tp"] == 8
        assert o["tokens_per_s_per_device"] == pytest.approx(o["batch"] / o["measured_step_time_s"] / o["tp"], rel=1e-12)
    best = d["best"]
    assert best == opts[0] and f"TP={best['tp']}" in res.headline and f"{best['replicas']} replicas" in res.headline
    # the largest batch that fits: one more sequence does not fit at that TP degree
    at = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "context_tokens": 2048, "tp": best["tp"], "estimate": "bound"}
    same = calc({**at, "batch": best["batch"]}, lookup)
    assert same["fits"] and same["per_device_bytes"] == pytest.approx(best["memory_per_device_bytes"], rel=1e-12)
    assert same["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    assert not calc({**at, "batch": best["batch"] + 1}, lookup)["fits"]


def test_devices_at_a_given_batch_reuse_the_candidates_and_drop_invalid_tp(lookup):
    o = calc({**L70, "devices": 8, "estimate": "bound"}, lookup)
    d = o["devices"]
    assert d["batch_basis"] == "given" and d["ranked_by"] == "bound"
    by_tp = {c["tp"]: c for c in o["candidates"]}
    for opt in d["options"]:
        assert opt["batch"] == 8 and opt["step_time_s"] == by_tp[opt["tp"]]["step_time_s"]
        if opt["fits"]:
            assert opt["tokens_per_s_per_device"] == pytest.approx(8 / opt["step_time_s"] / opt["tp"], rel=1e-12)
    six = calc({**L70, "devices": 6, "estimate": "bound"}, lookup)["devices"]
    assert {x["tp"] for x in six["dropped"]} == {3, 6} and "attention heads" in six["dropped"][0]["why"]
    assert {x["tp"] for x in six["options"]} == {1, 2}
    with pytest.raises(CalcInputError) as e:
        calc({**L70, "devices": 8, "tp": [3]}, lookup)
    assert e.value.loc == ("tp",)
    with pytest.raises(CalcInputError) as e:
        calc({"model": "llama-3.1-70b", "hardware": "h100-sxm", "devices": 8, "estimate": "bound"}, lookup)
    assert e.value.loc == ("context_tokens",)       # no KV per sequence: no largest batch


def test_step_model_choice_and_refusals(lookup):
    assert calc({**L70, "tp": 4, "estimate": "bound"}, lookup)["step_model"] == "layers"
    first = calc({**L70, "tp": 4, "step_model": "first_pass"}, lookup)
    assert first["step_model"] == "first_pass"
    assert first["memory_time_s"] == pytest.approx((first["weight_bytes"] + first["kv_bytes"]) / (4 * 3.35e12), rel=1e-12)
    with pytest.raises(CalcInputError) as e:
        calc({**L70, "tp": 4, "step_model": "layers", "weight_bytes": 1e9}, lookup)
    assert e.value.loc == ("weight_bytes",)
    with pytest.raises(CalcInputError) as e:
        calc({**TEACH, **FAST, "step_model": "layers"})
    assert e.value.loc == ("weight_bytes",)         # an input of the first pass only
    with pytest.raises(CalcInputError) as e:
        calc({"memory_bandwidth_bytes_per_s": 2e12, "tp": 1, "step_model": "layers"})
    assert e.value.loc == ("model",)
