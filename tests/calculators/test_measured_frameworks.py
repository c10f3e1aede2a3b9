"""The measured estimate per serving framework (vLLM, SGLang, TensorRT-LLM): MLA, DSA, linear-attention, KDA and
all-to-all kernels from their own tables (calculators.perf.measured_layers), a fallback only where a table is
absent (and said so), the framework as a request field of roofline and deployment-plan."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from calculators.domain import as_model, hardware_spec, layout_of, shipped_weight_formats
from calculators.framework.runner import compute
from calculators.perf import (
    FRAMEWORKS, bound_of, decode_step, load_system, measured_of, prefill_step, rates_from_spec, Split, step_ops,
)

ROOT = Path(__file__).resolve().parents[2]
AIC = ROOT / "benchmarks" / "results" / "aiconfigurator_reference.json"


def _formats(rec):
    shipped = shipped_weight_formats(rec.weight_dtype)
    return shipped.for_component if shipped else "bf16"


@pytest.fixture(scope="module")
def h200(lookup):
    return load_system(lookup, "h200_sxm", hardware_spec(lookup, "h200-sxm"))


@pytest.fixture(scope="module")
def r1(lookup):
    rec = as_model(lookup("model", "deepseek-r1"))
    return layout_of(rec), _formats(rec)


def test_deepseek_r1_mla_core_comes_from_its_table_and_agrees_with_aiconfigurator(h200, r1):
    """DeepSeek-R1 on 8×H200, batch 32 at 2048 tokens: the MLA core is vLLM's MLA module minus the block's projections
    (it was the bound ÷ GEMM efficiency, 11.8 % of the step, before these tables); only the norms fall back now."""
    lay, wf = r1
    ref = {r["name"]: r for r in json.loads(AIC.read_text())}["deepseek-r1 h200 tp8 b32"]
    est = decode_step(lay, h200, batch=ref["batch"], context_tokens=ref["isl"], tp=ref["tp"], ep=ref["ep"],
                      weight_dtype=wf, kv_dtype="fp8")
    assert "mla_attention" not in est.fallback_s and set(est.fallback_s) == {"norms_residual"}
    assert est.flags["mla_attention"].tolist() in ("measured", "interpolated")
    assert est.tables["mla_generation_module_perf"] == "vllm 0.24.0" and "mla_bmm_perf" in est.tables
    # the norms alone are now the fallback: a small share of the step
    assert float(est.fallback_fraction) == pytest.approx(float(est.parts_s["norms_residual"] / est.total_s))
    assert float(est.parts_s["mla_attention"]) > float(est.parts_bound_s["mla_attention"])
    want = ref["decode_step_ms_at_isl"] / 1e3
    assert float(est.total_s) == pytest.approx(want, rel=0.15), (float(est.total_s) * 1e3, want * 1e3)


def test_sglang_and_trtllm_give_different_sane_numbers_from_their_own_tables(lookup, h200, r1):
    lay, wf = r1
    kw = dict(batch=32, context_tokens=2048, tp=8, weight_dtype=wf, kv_dtype="fp8")
    base = decode_step(lay, h200, **kw)
    step = step_ops(lay, "decode", 32, 1, 2048, Split(tp=8), wf, "fp8")
    bound = float(bound_of(step, h200.rates).total_s)
    for fw in ("sglang", "trtllm"):
        est = decode_step(lay, h200, framework=fw, **kw)
        own = lookup("measurement", f"h200_sxm/{fw}/moe")
        assert est.framework == fw and est.version == own["version"]
        assert est.tables["moe_perf"] == f"{fw} {own['version']}"
        assert est.tables["generation_mla_perf"].startswith(fw)        # the MLA core alone, no module
        assert est.tables["gemm_perf"].startswith("vllm")              # GEMMs are vLLM's for every framework
        assert "mla_attention" not in est.fallback_s
        total = float(est.total_s)
        assert abs(total / float(base.total_s) - 1) > 0.01, fw        # another framework's kernels
        assert bound < float(est.total_s - est.comm_s) and total < 3 * float(base.total_s), fw
    # the same through measured_of's framework argument
    assert float(measured_of(step, h200, "sglang").total_s) == pytest.approx(
        float(decode_step(lay, h200, framework="sglang", **kw).total_s))


def test_a_gated_deltanet_model_reads_its_linear_attention_rows(lookup, h200):
    """Qwen3.5-35B-A3B (Gated DeltaNet): at a measured point the state op is the table's convolution + delta-rule
    kernels of its own shape (32 value heads, d = 2048) per layer."""
    rec = as_model(lookup("model", "qwen3.5-35b-a3b"))
    lay = layout_of(rec)
    gdn = next(m for m in lay.mixers if m.linear_kind == "gated-deltanet")
    est = decode_step(lay, h200, batch=8, context_tokens=2048, tp=1, weight_dtype=_formats(rec))
    assert "gated-deltanet_state" not in est.fallback_s and est.tables["gdn_perf"] == "vllm 0.24.0"
    assert est.flags["gated-deltanet_state"].tolist() == "measured"
    cols = lookup("measurement", "h200_sxm/vllm/gdn")["columns"]
    rows = ((cols["phase"] == "generation") & (cols["batch_size"] == 8) & (cols["num_v_heads"] == gdn.heads)
            & (cols["d_model"] == lay.d))
    kernels = set(cols["kernel_source"][rows])
    assert len(kernels) == 2 and any("conv1d" in k for k in kernels)
    per_layer_s = float(np.sum(cols["latency"][rows])) / 1e3
    assert float(est.parts_s["gated-deltanet_state"]) == pytest.approx(gdn.count * per_layer_s, rel=1e-9)
    pre = prefill_step(lay, h200, batch=1, tokens=4096, tp=1, weight_dtype=_formats(rec), framework="sglang")
    assert "gated-deltanet_state" not in pre.fallback_s and pre.tables["gdn_perf"].startswith("sglang")


def test_an_absent_framework_table_falls_back_and_says_so(lookup, h200):
    """TensorRT-LLM published no KDA kernels: Kimi-K3's KDA layers fall back to the bound and the answer says why."""
    rec = as_model(lookup("model", "kimi-k3"))
    lay = layout_of(rec)
    est = decode_step(lay, h200, batch=8, context_tokens=2048, tp=8, ep=8, weight_dtype=_formats(rec), framework="trtllm")
    assert "kda_state" in est.fallback_s and est.flags["kda_state"].tolist() == "extrapolated"
    assert "trtllm" in est.fallback_why["kda_state"] and "kda" in est.fallback_why["kda_state"]
    assert "kda_perf" not in est.tables and 0 < float(est.fallback_fraction) < 1
    vllm = decode_step(lay, h200, batch=8, context_tokens=2048, tp=8, ep=8, weight_dtype=_formats(rec))
    assert "kda_state" not in vllm.fallback_s and vllm.tables["kda_perf"].startswith("vllm")
    # through a calculator: the assumptions name the op, its share and the reason; the tables their framework
    _, _, res = compute("roofline", {"model": "kimi-k3", "hardware": "h200-sxm", "devices": 8, "batch": 8,
                                     "context_tokens": 2048, "phase": "decode", "framework": "trtllm"}, lookup)
    kernels = res.outputs["measured_kernels"]
    assert kernels["framework"] == "trtllm" and kernels["tables"]["moe_perf"].startswith("trtllm")
    assert any("kda_state" in a and "trtllm" in a and "Fell back" in a for a in res.assumptions)
    assert any("vLLM's kernels" in a for a in res.assumptions)          # GEMMs etc. borrowed, and said so


def test_dp_attention_all_to_all_reads_the_deepep_tables(lookup, h200, r1):
    """DP attention over 8 ranks: dispatch + combine per MoE layer from the DeepEP tables (vLLM's `latency` is in
    µs, SGLang's dispatch/combine columns too), at 32 tokens per rank: the mean of a measured dispatch and combine."""
    lay, wf = r1
    for fw, ident in (("vllm", "h200_sxm/vllm/moe_a2a"), ("sglang", "h200_sxm/sglang/wideep_deepep_ll")):
        est = decode_step(lay, h200, batch=256, context_tokens=2048, tp=8, ep=8, dp_attention=True, weight_dtype=wf,
                          kv_dtype="fp8", framework=fw)
        assert "moe_dispatch_combine" not in est.fallback_s and est.flags["moe_dispatch_combine"].tolist() == "measured"
        c = lookup("measurement", ident)["columns"]
        if fw == "vllm":
            sel = ((c["comm_backend"] == "deepep_ll") & (c["hidden_size"] == lay.d) & (c["topk"] == lay.top_k)
                   & (c["num_experts"] == lay.experts) & (c["num_tokens"] == 32))
            call = np.mean([np.exp(np.mean(np.log(c["latency"][sel & (c["phase"] == ph)]))) for ph in ("dispatch", "combine")])
        else:
            sel = (c["hidden_size"] == lay.d) & (c["num_topk"] == lay.top_k) & (c["num_experts"] == lay.experts) & (c["num_token"] == 32)
            call = float(np.exp(np.mean(np.log((c["dispatch_avg_t_us"][sel] + c["combine_avg_t_us"][sel]) / 2))))
        assert float(est.parts_s["moe_dispatch_combine"]) == pytest.approx(2 * lay.moe_layers * call * 1e-6, rel=1e-9), fw


def test_the_bound_stays_below_every_framework_s_estimate(lookup, h200):
    batch = np.array([1, 16, 128])[:, None]
    ctx = np.array([0, 4096])[None, :]
    for model, tp, ep in (("deepseek-r1", 8, 1), ("deepseek-v3.2", 8, 8), ("glm-5", 8, 1), ("qwen3.5-35b-a3b", 2, 1),
                          ("kimi-k3", 8, 8)):
        rec = as_model(lookup("model", model))
        lay = layout_of(rec)
        for phase, tokens in (("decode", 1), ("prefill", 512)):
            step = step_ops(lay, phase, batch, tokens, ctx, Split(tp=tp, ep=ep), _formats(rec), "bf16")
            bound = bound_of(step, rates_from_spec(hardware_spec(lookup, "h200-sxm"))).total_s
            for fw in FRAMEWORKS:
                est = measured_of(step, h200, fw)
                kernels = np.asarray(est.total_s) - np.asarray(est.comm_s)
                assert np.all(bound <= kernels * (1 + 1e-9)), (model, phase, fw, float(np.max(bound / kernels)))


def test_framework_is_a_request_field_of_roofline_and_the_planner(lookup):
    body = {"model": "deepseek-r1", "hardware": "h200-sxm", "devices": 8, "batch": 32, "context_tokens": 2048,
            "phase": "decode", "kv_format": "fp8"}
    outs = {fw: compute("roofline", {**body, "framework": fw}, lookup)[2].outputs for fw in ("vllm", "sglang")}
    assert compute("roofline", body, lookup)[2].outputs["measured_time_s"] == outs["vllm"]["measured_time_s"]
    assert outs["sglang"]["measured_kernels"]["framework"] == "sglang"
    assert outs["sglang"]["measured_time_s"] != outs["vllm"]["measured_time_s"]
    with pytest.raises(ValidationError) as exc:
        compute("roofline", {**body, "framework": "llama.cpp"}, lookup)
    assert exc.value.errors()[0]["loc"] == ("framework",)
    plan = {"model": "deepseek-r1", "arrival_rate_per_s": 1, "input_tokens": 2048, "output_tokens": 128, "ttft_s": 10,
            "tpot_s": 0.2, "hardware": ["h200-sxm"], "tp": [8], "batch": [32], "mode": "aggregated", "framework": "sglang"}
    best = compute("deployment-plan", plan, lookup)[2].outputs["best"]
    assert "sglang" in best["step_source"]
