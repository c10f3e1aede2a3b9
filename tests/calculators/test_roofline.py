"""roofline + energy: the book's Qwen3-8B prefill, GEMM intensities and tiling, and invariants."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

QWEN3_8B = {"layers": 36, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "ffn_size": 12288,
            "vocab_size": 151936}
FACT = lambda v: {"value": v, "source": "s", "locator": "t"}
HW = {"id": "gpu", "memory_bytes": FACT(80e9), "memory_bandwidth_bytes_per_s": FACT(3.35e12), "power_w": FACT(700),
      "peaks": [{"input_precision": "BF16", "accumulator": "FP32", "unit": "tensor", "sparsity": "structured", "flop_per_s": FACT(1978.9e12)},
                {"input_precision": "BF16", "accumulator": "BF16", "unit": "vector", "sparsity": "dense", "flop_per_s": FACT(133.8e12)},
                {"input_precision": "BF16", "accumulator": "FP32", "unit": "tensor", "sparsity": "dense", "flop_per_s": FACT(989.4e12)},
                {"input_precision": "FP8", "accumulator": "FP32", "unit": "tensor", "sparsity": "dense", "flop_per_s": FACT(1978.9e12)}]}


def lk(kind, ident):
    return {"hardware": {"gpu": HW}}[kind][ident]


def calc(body, lookup=no_lookup):
    return run("roofline", body, lookup)[2].outputs


def test_qwen3_8b_prefill_8192():
    o = calc({"architecture": QWEN3_8B, "phase": "prefill", "tokens": 8192, "include_lm_head": False})
    assert o["linear_flops"] == 113_799_453_474_816          # 113.799 TFLOPs
    assert o["attention_flops"] == 19_793_625_219_072        # 19.794 TFLOPs
    assert o["flops"] == 133_593_078_693_888
    assert o["causal_pairs"] == 8192 * 8193 / 2
    assert o["kv_write_bytes"] == 8192 * 147456             # 1.125 GiB of BF16 KV
    assert o["bound"] is None                                # no device given


def test_rag_prefill_at_200_tflops():
    o = calc({"architecture": QWEN3_8B, "phase": "prefill", "tokens": [1536, 4608], "include_lm_head": False,
              "peak_flop_per_s": 200e12})
    assert o["compute_time_s"] == pytest.approx([0.11016817606656, 0.35137806925824], rel=1e-12)
    assert o["kv_cache_bytes"] == [216 * 2**20, 648 * 2**20]


def test_packed_segments_pairs():
    o = calc({"architecture": QWEN3_8B, "phase": "prefill", "segments": [7168, 1024], "include_lm_head": False})
    assert o["causal_pairs"] == 26_218_496
    assert o["attention_flops"] / 36 == 429_563_838_464


def test_up_proj_intensity_and_tiling():
    o = calc({"operation": {"kind": "gemm", "m": 1024, "k": 4096, "n": 12288}})
    assert o["flops"] == 103_079_215_104 and o["bytes"] == 128 * 2**20 and o["arithmetic_intensity"] == 768
    t = calc({"operation": {"kind": "gemm", "m": 1024, "k": 4096, "n": 12288, "tile_m": [32, 64, 128],
                            "tile_n": [32, 64, 128], "tile_k": 32}})
    assert t["bytes"] == [6_467_616_768, 3_246_391_296, 1_635_778_560]
    assert t["tile_buffer_bytes"] == [8192, 24576, 81920]
    assert t["arithmetic_intensity"][0] == pytest.approx(15.937743190661479)


def test_attention_head_flops_and_custom_traffic():
    a = calc({"operation": {"kind": "attention", "queries": 8192, "keys": 8192, "head_dim": 128}})
    assert a["flops"] == 34_359_738_368 and a["bytes"] == 8 * 2**20
    c = calc({"operation": {"kind": "custom", "reads": [{"shape": [12288]}], "writes": [{"shape": [12288]}],
                            "count": [1024, 1]}, "memory_bandwidth_bytes_per_s": 1e12})
    assert c["memory_time_s"] == pytest.approx([50.331648e-6, 0.049152e-6])


def test_hardware_peak_is_dense_precision_matched():
    r = run("roofline", {"operation": {"kind": "gemm", "m": 8192, "k": 8192, "n": 8192}, "hardware": "gpu"}, lk)[2]
    assert r.outputs["compute_time_s"] == pytest.approx(2 * 8192**3 / 989.4e12)
    assert r.outputs["ridge_point"] == pytest.approx(989.4e12 / 3.35e12)
    assert r.outputs["bound"] == "compute"
    assert any("dense" in s["field"] and "FP32" in s["field"] for s in r.sources)
    fp8 = calc({"operation": {"kind": "gemm", "m": 8192, "k": 8192, "n": 8192}, "hardware": "gpu", "precision": "FP8"}, lk)
    assert fp8["compute_time_s"] == pytest.approx(2 * 8192**3 / 1978.9e12)
    r4 = run("roofline", {"operation": {"kind": "gemm", "m": 1, "k": 1, "n": 1}, "hardware": "gpu", "precision": "FP4"}, lk)[2]
    assert "compute_time_s" not in r4.outputs and r4.outputs["bound"] is None      # no FP4 row: bandwidth only, said so
    assert any("no dense FP4 peak" in a for a in r4.assumptions)
    with pytest.raises(CalcInputError):   # training needs a peak: missing precision is an error there
        run("training-compute", {"params": 1e9, "tokens": 1e9, "hardware": "gpu", "precision": "FP4"}, lk)


def test_decode_is_memory_bound_and_batch_amortises_weights():
    o = calc({"architecture": QWEN3_8B, "phase": "decode", "batch": [1, 8, 64], "context_tokens": 4096}
             | {"hardware": "gpu"}, lk)
    assert o["bound"] == ["memory", "memory", "memory"]
    assert o["tokens_per_s"][0] < o["tokens_per_s"][1] < o["tokens_per_s"][2]
    assert o["kv_read_bytes"][0] == 4096 * 147456


def test_moe_decode_reads_only_touched_experts():
    arch = {"layers": 48, "hidden_size": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128, "vocab_size": 151936,
            "moe": {"experts": 128, "experts_per_token": 8, "expert_ffn_size": 768}}
    o = calc({"architecture": arch, "batch": [1, 4096]})
    assert o["experts_touched_per_layer"][0] == pytest.approx(8)
    assert o["experts_touched_per_layer"][1] == pytest.approx(128)
    assert o["weight_bytes"][0] < o["weight_bytes"][1]


@settings(max_examples=40)
@given(b=st.integers(1, 512), ctx=st.integers(0, 100_000))
def test_more_context_never_faster(b, ctx):
    base = {"architecture": QWEN3_8B, "batch": b, "peak_flop_per_s": 989e12, "memory_bandwidth_bytes_per_s": 3.35e12}
    t1 = calc({**base, "context_tokens": ctx})["time_s"]
    t2 = calc({**base, "context_tokens": ctx + 1000})["time_s"]
    assert t2 >= t1 and math.isfinite(t1)


@settings(max_examples=30)
@given(m=st.integers(1, 4096), k=st.integers(1, 4096), n=st.integers(1, 4096))
def test_gemm_flops_linear_in_count(m, k, n):
    one = calc({"operation": {"kind": "gemm", "m": m, "k": k, "n": n}})
    three = calc({"operation": {"kind": "gemm", "m": m, "k": k, "n": n, "count": 3}})
    assert three["flops"] == 3 * one["flops"] and three["bytes"] == pytest.approx(3 * one["bytes"])


def test_sweep_matches_scalar_calls():
    base = {"architecture": QWEN3_8B, "peak_flop_per_s": 989e12, "memory_bandwidth_bytes_per_s": 3.35e12}
    s = calc({**base, "batch": [1, 32], "context_tokens": [0, 8192]})
    for i, (b, c) in enumerate([(1, 0), (32, 8192)]):
        assert s["time_s"][i] == pytest.approx(calc({**base, "batch": b, "context_tokens": c})["time_s"])


def test_validation():
    with pytest.raises(ValidationError):
        calc({"architecture": QWEN3_8B, "params": 1e9})
    with pytest.raises(ValidationError):
        calc({"architecture": QWEN3_8B, "segments": [10], "phase": "decode"})
    with pytest.raises(ValidationError):
        calc({"operation": {"kind": "gemm", "m": 0, "k": 1, "n": 1}})
    with pytest.raises(ValidationError):
        calc({"operation": {"kind": "gemm", "m": [1, 2], "k": 1, "n": 1}, "peak_flop_per_s": float("inf")})
    with pytest.raises(CalcInputError):
        calc({"operation": {"kind": "gemm", "m": 1, "k": 1, "n": 1}, "peak_flop_per_s": 1.0, "compute_efficiency": 0})
    with pytest.raises(CalcInputError):
        calc({"operation": {"kind": "gemm", "m": [1, 2], "k": 1, "n": 1, "count": [1, 2, 3]}})


# ------------------------------------------------------------------ energy

def energy(body, lookup=no_lookup):
    return run("energy", body, lookup)[2].outputs


def test_energy_from_hardware_power():
    o = energy({"hardware": "gpu", "devices": 8, "tokens_per_s": 20000, "time_s": 3600}, lk)
    assert o["energy_j"] == pytest.approx(700 * 8 * 3600)
    assert o["joules_per_token"] == pytest.approx(700 * 8 / 20000)


def test_voltage_squared_and_density():
    o = energy({"dynamic_power": {"voltage_old_v": 0.85, "voltage_new_v": 0.55}})
    assert o["power_ratio"] == pytest.approx((0.55 / 0.85) ** 2)
    d = energy({"dynamic_power": {"power_ratio": 0.75, "area_ratio": 0.6}})
    assert d["power_density_ratio"] == pytest.approx(1.25)
    with pytest.raises(ValidationError):
        energy({"dynamic_power": {"voltage_old_v": 0.85}})


@given(p=st.floats(1, 1e5), t=st.floats(0, 1e7))
def test_energy_linear_in_time(p, t):
    assert energy({"power_w": p, "time_s": 2 * t})["energy_j"] == pytest.approx(2 * energy({"power_w": p, "time_s": t})["energy_j"])


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_operation_and_rate_sweeps_of_different_lengths_name_the_field():
    # The fuzzed request swept operation.count over 2 points and peak_flop_per_s over 5: the two were broadcast
    # separately and failed to combine (a 500). Now it is a 422 naming the field.
    body = {"operation": {"kind": "gemm", "m": 772, "k": 4096, "n": 2597, "count": [32, 1176336]},
            "peak_flop_per_s": [1e15, 2e15, 3e15, 4e15, 5e15], "memory_bandwidth_bytes_per_s": 3.35e12}
    with pytest.raises(CalcInputError) as e:
        calc(body)
    assert e.value.loc == ("peak_flop_per_s",)
    with pytest.raises(CalcInputError) as e:
        calc({"params": 8e9, "batch": [1, 2, 3], "memory_bandwidth_bytes_per_s": [1e12, 2e12]})
    assert e.value.loc == ("memory_bandwidth_bytes_per_s",)
    o = calc({**body, "peak_flop_per_s": [1e15, 2e15]})
    assert len(o["time_s"]) == 2


def test_empty_model_id_is_refused():
    # `model: ""` passed the "exactly one of" check but read as absent later: fact_value(None, ...) raised (a 500).
    with pytest.raises(ValidationError) as e:
        calc({"model": "", "kv_format": {"bits_per_value": 5e-324}, "memory_bandwidth_bytes_per_s": 5e-324})
    assert e.value.errors()[0]["loc"][0] == "model"
    with pytest.raises(ValidationError):
        calc({"params": 8e9, "hardware": ""})


def test_dynamic_power_with_an_extreme_voltage_ratio_is_null_not_an_error():
    # (V'/V)**2 raised OverflowError for a ratio above ~1e154; the product now overflows to inf (reported as null).
    import orjson
    _, _, r = run("energy", {"dynamic_power": {"voltage_old_v": 1e-200, "voltage_new_v": 1e30}}, no_lookup)
    o = orjson.loads(orjson.dumps(r.outputs, option=orjson.OPT_SERIALIZE_NUMPY))
    assert o["power_ratio"] is None


# --------------------------------------------------------------------------- grids (`grid: true`)

GRID_BASE = {"model": "qwen3-8b", "hardware": "h100-sxm", "phase": "decode", "estimate": "bound"}
GRID_AXES = {"batch": [1, 8, 64], "context_tokens": [0, 1024, 32768, 131072], "kv_format": ["bf16", "fp8", "fp4"]}


def _answer(body, lookup):
    """The JSON answer's outputs (grids spread over their whole shape), as plain Python values."""
    from calculators.framework import jsonable
    from api.envelope import run as run_envelope
    return jsonable(run_envelope("roofline", body, lookup)["outputs"])


def test_a_grid_holds_every_combination_and_equals_the_paired_sweep_of_the_same_points(lookup):
    import numpy as np
    g = _answer({**GRID_BASE, **GRID_AXES, "grid": True}, lookup)
    assert g["grid_axes"] == ["batch", "context_tokens", "kv_format"] and g["grid_shape"] == [3, 4, 3]
    b, c = np.meshgrid(GRID_AXES["batch"], GRID_AXES["context_tokens"], indexing="ij")
    for k, fmt in enumerate(GRID_AXES["kv_format"]):
        z = _answer({**GRID_BASE, "batch": b.ravel().tolist(), "context_tokens": c.ravel().tolist(), "kv_format": fmt}, lookup)
        for key, want in z.items():
            if isinstance(want, list):            # every per-point output, whatever axes it depends on
                got = np.asarray(g[key] if not isinstance(want[0], dict) else [], dtype=object)[:, :, k].ravel().tolist()
                assert got == want, key
            elif isinstance(want, dict):
                for sub, w in want.items():
                    assert np.asarray(g[key][sub])[:, :, k].ravel().tolist() == w, f"{key}.{sub}"


def test_each_output_of_a_grid_has_the_grid_shape_in_the_answer_and_a_broadcastable_one_in_process(lookup):
    import numpy as np
    from calculators.framework.runner import compute as compute_arrays
    body = {**GRID_BASE, **GRID_AXES, "grid": True}
    _, _, res = compute_arrays("roofline", body, lookup)
    assert res.grid_shape == (3, 4, 3)
    per_point = [k for k, v in res.outputs.items() if isinstance(v, np.ndarray) and v.ndim]
    assert {"time_s", "bound", "linear_flops", "weight_bytes", "kv_read_bytes"} <= set(per_point)
    for k in per_point:
        assert np.broadcast_shapes(res.outputs[k].shape, res.grid_shape) == res.grid_shape, k
    assert res.outputs["linear_flops"].shape == (3, 1, 1)          # depends on the batch only
    answer = _answer(body, lookup)
    for k in per_point:
        assert np.shape(answer[k]) == (3, 4, 3), k
    assert "first of 36 points, a 3 × 4 × 3 grid" in res.headline


def test_a_grid_is_cheaper_in_kv_bits_the_narrower_the_format(lookup):
    o = _answer({**GRID_BASE, **GRID_AXES, "grid": True}, lookup)
    for i in range(3):
        for j in range(1, 4):                         # with a history to read, fp4 < fp8 < bf16 bytes and time
            kv = o["kv_read_bytes"][i][j]
            assert kv[0] == 2 * kv[1] and kv[1] > kv[2] > 0
            assert o["time_s"][i][j][0] > o["time_s"][i][j][1] > o["time_s"][i][j][2]


def test_a_kv_format_list_without_grid_pairs_point_by_point_and_spreads_every_output(lookup):
    o = _answer({**GRID_BASE, "context_tokens": 4096, "kv_format": ["bf16", "fp8"]}, lookup)
    assert len(o["kv_read_bytes"]) == 2 and o["kv_read_bytes"][0] == 2 * o["kv_read_bytes"][1]
    assert len(o["linear_flops"]) == 2 and o["linear_flops"][0] == o["linear_flops"][1]   # unswept, spread
    with pytest.raises(CalcInputError) as e:
        calc({**GRID_BASE, "batch": [1, 2, 3], "kv_format": ["bf16", "fp8"]}, lookup)
    assert e.value.loc == ("kv_format",)


def test_a_measured_estimate_needs_one_kv_format(lookup):
    body = {**GRID_BASE, **GRID_AXES, "grid": True}
    with pytest.raises(CalcInputError) as e:
        calc({**body, "estimate": "measured"}, lookup)
    assert e.value.loc == ("kv_format",) and "one KV format" in e.value.message
    _, _, res = run("roofline", {**body, "estimate": None}, lookup)
    assert "measured_time_s" not in res.outputs
    assert any("one KV format at a time" in a for a in res.assumptions)


def test_a_grid_of_one_kv_format_carries_the_measured_estimate_in_the_grid_shape(lookup):
    import numpy as np
    o = _answer({**GRID_BASE, "estimate": "both", "batch": [1, 8], "context_tokens": [1024, 4096, 16384],
                 "kv_format": "fp8", "grid": True}, lookup)
    if "measured_time_s" not in o:
        pytest.fail("h100-sxm has measured kernels: a grid of one KV format must carry the measured estimate")
    assert np.shape(o["measured_time_s"]) == (2, 3) and np.shape(o["measured_to_bound_ratio"]) == (2, 3)
    single = _answer({**GRID_BASE, "estimate": "both", "batch": 8, "context_tokens": 4096, "kv_format": "fp8"}, lookup)
    assert o["measured_time_s"][1][1] == pytest.approx(single["measured_time_s"], rel=1e-12)


def test_grid_refusals_name_their_field(lookup):
    with pytest.raises(ValidationError, match="grid applies to model steps"):
        calc({"operation": {"kind": "gemm", "m": [1, 2], "k": 4, "n": 4}, "peak_flop_per_s": 1e12, "grid": True})
    with pytest.raises(ValidationError, match="at most 16 KV formats"):
        calc({**GRID_BASE, "kv_format": ["bf16"] * 17})
    from calculators.framework.registry import REGISTRY
    roofline = REGISTRY["roofline"]
    req = roofline.request_model.model_validate({**GRID_BASE, "batch": list(range(1, 1002)),
                                                 "context_tokens": list(range(1001)), "grid": True})
    with pytest.raises(CalcInputError) as e:                       # past MAX_SWEEP_POINTS even in-process
        roofline.compute(req, lookup)
    assert e.value.status == 413 and e.value.loc == ("batch",) and "1,002,001" in e.value.message


def test_the_cost_of_a_grid_is_its_every_combination():
    from calculators.framework import limits
    from calculators.framework.registry import REGISTRY
    roofline = REGISTRY["roofline"]
    body = {**GRID_BASE, "batch": list(range(1, 101)), "context_tokens": list(range(0, 100_000, 50)), "grid": True}
    assert limits.cost_of(roofline, body).points == 100 * 2000
    assert limits.cost_of(roofline, {**body, "grid": False}).points == 2000
    big = {**body, "tokens": list(range(1, 11))}
    with pytest.raises(limits.LimitExceeded) as e:
        limits.check(roofline, big)
    assert "grid of 2,000,000 points" in e.value.message and "shrink the grid (batch 100 × tokens 10 × context_tokens 2,000)" in e.value.message


def test_a_grid_over_http_json_markdown_page_and_batch(client):
    body = {**GRID_BASE, "batch": [1, 8], "context_tokens": [1024, 4096], "kv_format": ["bf16", "fp8"], "grid": True}
    r = client.post("/api/v1/calculators/roofline", json=body)
    assert r.status_code == 200 and r.json()["outputs"]["grid_shape"] == [2, 2, 2]
    assert r.json()["outputs"]["bound"] == [[["memory"] * 2] * 2] * 2
    md = client.post("/api/v1/calculators/roofline", json=body, headers={"Accept": "text/markdown"})
    assert md.status_code == 200 and "a 2 × 2 × 2 grid" in md.text
    page = client.get(r.json()["explanation_url"])
    assert page.status_code == 200 and "a 2 × 2 × 2 grid" in page.text
    batch = client.post("/api/v1/calculators:batch", json={"requests": [{"calculator": "roofline", "request": body}]})
    assert batch.status_code == 200 and batch.json()["results"][0]["response"]["outputs"]["grid_shape"] == [2, 2, 2]
    huge = {**body, "batch": list(range(1, 1001)), "context_tokens": list(range(0, 2_000_000, 1000))}
    refused = client.post("/api/v1/calculators/roofline", json=huge)
    assert refused.status_code == 413 and refused.json()["limit"]["name"] == "evaluations"


def test_grid_takes_json_true_only_so_the_cost_model_and_the_request_agree():
    from calculators.framework import limits
    from calculators.framework.registry import REGISTRY
    roofline = REGISTRY["roofline"]
    body = {**GRID_BASE, "batch": list(range(1, 101)), "context_tokens": list(range(100)), "tokens": list(range(1, 11))}
    for loose in (1, "true", "yes", 1.0):
        with pytest.raises(ValidationError):
            roofline.request_model.model_validate({**body, "grid": loose})
    assert limits.cost_of(roofline, {**body, "grid": True}).points == 100_000


def test_a_moe_record_whose_expert_shapes_overshoot_its_published_total_reads_what_its_counts_allow(lookup):
    """kimi-k3's experts work in a narrower latent than the hidden size, so 3·d·f per expert overshoots its published
    2.78 T total: the expert size comes from the published counts, and the bytes stay positive and consistent."""
    rec = lookup("model", "kimi-k3")
    total, active = rec["params_total"]["value"], rec["params_active"]["value"]
    one = {"model": "kimi-k3", "hardware": "h100-sxm", "estimate": "bound"}
    fp8 = calc({**one, "weight_format": "fp8", "batch": [1, 64, 100000]}, lookup)
    assert fp8["weight_bytes"][0] == pytest.approx(active)              # one token: the active parameters, 1 B each
    assert active < fp8["weight_bytes"][1] < total                      # a batch touches more experts, never more than all
    assert fp8["weight_bytes"][2] == pytest.approx(total, rel=1e-6)     # a huge batch touches every expert
    published = calc({**one, "batch": 1}, lookup)                       # BF16 with MXFP4 routed experts
    assert active < published["weight_bytes"] < 2 * active
    _, _, res = run("roofline", one, lookup)
    assert any("taken from the published counts" in a for a in res.assumptions)
