"""The step model (calculators.perf.step_model / step_eval) over every layout in the store."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calculators.domain import as_model, hardware_spec, layout_of, shipped_weight_formats
from calculators.framework import CalcInputError, TransientRecord
from calculators.framework.runner import compute
from calculators.perf import (
    bound_of, decode_step, load_system, measured_of, measured_system_of, rates_from_spec, Split, step_ops,
    touched_experts, weight_bytes_per_rank,
)

ROOT = Path(__file__).resolve().parents[2]
AIC = ROOT / "benchmarks" / "results" / "aiconfigurator_reference.json"


def _model_ids(lookup) -> list[str]:
    import yaml
    return [r["id"] for r in yaml.safe_load((ROOT / "knowledge" / "data" / "models.yaml").read_text())]


def _formats(rec):
    shipped = shipped_weight_formats(rec.weight_dtype)
    return shipped.for_component if shipped else "bf16"


@pytest.fixture(scope="module")
def systems(lookup):
    out = {}
    for hw_id in ("h100-sxm", "h200-sxm"):
        hw = hardware_spec(lookup, hw_id)
        out[hw_id] = load_system(lookup, measured_system_of(lookup, hw_id), hw)
    return out


def test_touched_experts_match_a_monte_carlo(lookup):
    rng = np.random.default_rng(7)
    for experts, k, tokens in ((128, 8, 1), (128, 8, 16), (256, 8, 64), (32, 4, 3), (8, 2, 40)):
        draws = [len(np.unique(np.concatenate([rng.choice(experts, k, replace=False) for _ in range(tokens)])))
                 for _ in range(400)]
        assert float(touched_experts(experts, k, tokens)) == pytest.approx(np.mean(draws), rel=0.03)


def test_every_store_model_has_a_layout_and_is_planned(lookup):
    """The catalogue walk: every model in the store reaches the planner's answer (no refusal)."""
    ids = _model_ids(lookup)
    assert len(ids) >= 51
    for model in ids:
        lay = layout_of(lookup("model", model))
        assert lay.mixer_layers >= 1 and lay.ffn_layers >= 1, model
        out = compute("deployment-plan", {"model": model, "arrival_rate_per_s": 1, "input_tokens": 1000, "output_tokens": 200,
                                          "ttft_s": 10, "tpot_s": 0.2, "hardware": ["h100-sxm"], "tp": [1, 8],
                                          "batch": [1, 16], "estimate": "bound", "mode": "aggregated"}, lookup)[2].outputs
        assert out["configurations_evaluated"] > 0, model
        assert any(np.isfinite(p["decode_step_s"]) for p in out["candidates"]), model


def test_bound_is_below_the_measured_estimate_everywhere(lookup, systems):
    """A true lower bound: at every point of a grid the kernels' bound ≤ their measured estimate (comm excluded)."""
    cases = [("llama-3.1-8b", 1, 1), ("llama-3.1-70b", 4, 1), ("qwen3-30b-a3b", 1, 1), ("qwen3-235b-a22b", 8, 8),
             ("gpt-oss-120b", 2, 1), ("deepseek-r1", 8, 1), ("qwen3.5-35b-a3b", 1, 1), ("mistral-7b", 1, 1),
             ("nemotron-3-nano-30b-a3b", 1, 1), ("gemma-3-27b", 2, 1), ("glm-5", 8, 8)]
    batch = np.array([1, 4, 16, 64, 256])[:, None]
    ctx = np.array([0, 512, 4096, 32768])[None, :]
    for model, tp, ep in cases:
        rec = as_model(lookup("model", model))
        lay = layout_of(rec)
        for hw_id, system in systems.items():
            for phase, tokens in (("decode", 1), ("prefill", 512)):
                step = step_ops(lay, phase, batch, tokens, ctx, Split(tp=tp, ep=ep), _formats(rec), "bf16")
                bound = bound_of(step, rates_from_spec(hardware_spec(lookup, hw_id))).total_s
                est = measured_of(step, system)
                kernels = np.asarray(est.total_s) - np.asarray(est.comm_s)
                assert np.all(bound <= kernels * (1 + 1e-9)), (model, hw_id, phase, float(np.max(bound / kernels)))


def test_gpt_oss_weights_in_their_shipped_mxfp4_match_the_checkpoint():
    """gpt-oss's model card gives checkpoint sizes of 60.8 GiB (120b) and 12.8 GiB (20b); MXFP4 experts (4.25 bits
    with their E8M0 scales) beside BF16 everything else must land within 3 % (a BF16 count would be ~3.6× off)."""
    from knowledge.loader import catalog_lookup, default_catalog
    lk = catalog_lookup(default_catalog())
    for model, gib in (("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)):
        rec = as_model(lk("model", model))
        got = weight_bytes_per_rank(layout_of(rec), Split(), _formats(rec))["total"] / 2**30
        assert got == pytest.approx(gib, rel=0.03), (model, got)
        out = compute("weight-memory", {"model": model}, lk)[2].outputs
        assert out["bytes_total"] / 2**30 == pytest.approx(gib, rel=0.03), (model, out["bytes_total"] / 2**30)


def test_a_sliding_window_reads_only_the_window(lookup):
    lay = layout_of(lookup("model", "gpt-oss-120b"))
    windowed = [m for m in lay.mixers if m.window]
    assert windowed and windowed[0].window == 128
    step = step_ops(lay, "decode", 1, 1, np.array([100, 128, 10_000, 100_000]), Split(), "bf16", "bf16")
    swa = [op for op in step.ops if op.kind == "attention" and op.group == windowed[0].name][0]
    full = [op for op in step.ops if op.kind == "attention" and op.group != windowed[0].name][0]
    # the windowed layers read (and attend to) at most 128 cached entries, whatever the context
    assert swa.bytes[1] == swa.bytes[2] == swa.bytes[3] > swa.bytes[0] and swa.flops[2] == swa.flops[3]
    assert full.bytes[3] > 9 * full.bytes[2]


def test_expert_parallelism_splits_the_experts_and_needs_a_valid_split(lookup):
    lay = layout_of(lookup("model", "qwen3-235b-a22b"))
    one = weight_bytes_per_rank(lay, Split(tp=8, ep=1), "bf16")["components_per_rank"]["routed_experts"]
    ep8 = weight_bytes_per_rank(lay, Split(tp=8, ep=8), "bf16")["components_per_rank"]["routed_experts"]
    assert one == pytest.approx(ep8)                      # same bytes per device, experts placed whole
    moe = [o for o in step_ops(lay, "decode", 8, 1, 2048, Split(tp=8, ep=8)).ops if o.kind == "moe"][0]
    assert float(moe.shape["touched"]) == pytest.approx(float(touched_experts(128, 8, 8)) / 8)
    with pytest.raises(CalcInputError) as exc:
        step_ops(lay, "decode", 8, 1, 2048, Split(tp=8, ep=3))
    assert "ep 3" in exc.value.message
    with pytest.raises(CalcInputError):
        step_ops(lay, "decode", 8, 1, 2048, Split(tp=3))


def test_an_unknown_layout_is_a_422_naming_the_field():
    rec = TransientRecord({"id": "x", "attention": "quantum", "layers": 2, "hidden_size": 64, "heads": 4,
                           "vocab_size": 100})
    with pytest.raises(CalcInputError) as exc:
        layout_of(rec)
    assert exc.value.loc == ("model.attention",) and "quantum" in exc.value.message


@pytest.mark.parametrize("name", ["llama3.1-70b h100 tp4 b8", "qwen3-235b-a22b h200 tp8 ep8 b8",
                                  "qwen3-235b-a22b h200 tp8 ep8 b32", "gpt-oss-120b h100 tp2 b4"])
def test_measured_estimate_within_15_percent_of_aiconfigurator(lookup, systems, name):
    """NVIDIA's own estimator over the same tables (aiconfigurator 0.12.0, SILICON, static mode), run in its own
    environment by benchmarks/aiconfigurator_reference.py: one decode step at the prompt's length. (DeepSeek-R1, whose
    MLA core comes from the MLA tables, is checked in test_measured_frameworks.py.)"""
    ref = {r["name"]: r for r in json.loads(AIC.read_text())}[name]
    model = {"meta-llama/Meta-Llama-3.1-70B": "llama-3.1-70b", "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b",
             "openai/gpt-oss-120b": "gpt-oss-120b", "deepseek-ai/DeepSeek-R1": "deepseek-r1"}[ref["model"]]
    hw = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}[ref["system"]]
    rec = as_model(lookup("model", model))
    kv = "fp8" if ref["kv_dtype"] == "fp8" else "bf16"
    est = decode_step(layout_of(rec), systems[hw], batch=ref["batch"], context_tokens=ref["isl"], tp=ref["tp"],
                      ep=ref["ep"], weight_dtype=_formats(rec), kv_dtype=kv)
    want = ref["decode_step_ms_at_isl"] / 1e3
    assert float(est.total_s) == pytest.approx(want, rel=0.15), (name, float(est.total_s) * 1e3, want * 1e3)


def _successive_sampling(rng, experts: int, k: int, tokens: int, skew: float, reps: int) -> np.ndarray:
    """Monte Carlo of skewed routing, independent of the model's approximation: each token takes k distinct experts by
    successive sampling with Zipf weights p_e ∝ e^(−skew), drawn exactly as the k smallest of Exp(1)/p_e (order
    sampling with exponential keys). Returns the (reps, tokens, k) expert ids."""
    p = np.arange(1, experts + 1, dtype=float) ** -skew
    keys = rng.exponential(size=(reps, tokens, experts)) / (p / p.sum())
    return np.argpartition(keys, k - 1, axis=2)[:, :, :k]


def test_skewed_routing_matches_a_monte_carlo():
    """Distinct experts touched, those of the hottest expert rank (experts dealt round-robin in popularity order) and
    that rank's share of the token–expert assignments, against sampled routing."""
    from calculators.perf.step_model import routing_load
    rng = np.random.default_rng(11)
    for experts, k, tokens, skew, ep in ((256, 8, 1, 1.0, 8), (256, 8, 16, 1.0, 8), (128, 8, 64, 0.6, 4),
                                         (64, 6, 8, 1.5, 8), (32, 4, 3, 0.8, 4)):
        reps = max(200, 4000 // tokens)
        picks = _successive_sampling(rng, experts, k, tokens, skew, reps)
        hit = np.zeros((reps, experts), dtype=bool)
        hit[np.arange(reps)[:, None], picks.reshape(reps, -1)] = True
        case = (experts, k, tokens, skew, ep)
        assert float(touched_experts(experts, k, tokens, skew)) == pytest.approx(hit.sum(axis=1).mean(), rel=0.05), case
        hot, share = routing_load(experts, k, tokens, ep, skew)
        assert float(hot) == pytest.approx(hit[:, 0::ep].sum(axis=1).mean(), rel=0.06), case
        assert share == pytest.approx(np.mean(picks % ep == 0), rel=0.05), case
        assert share > 1 / ep
    # skew 0 is the uniform closed form
    assert routing_load(128, 8, 16, 8, 0.0)[1] == 1 / 8
    assert float(touched_experts(128, 8, 16, 0.0)) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 16))


def test_skewed_routing_loads_the_hottest_expert_rank(lookup):
    """Under expert parallelism the hottest rank sets the MoE time: at prefill (compute-bound) and at batch 1 a
    skewed routing costs at least the uniform one; without expert parallelism a skew only touches fewer experts."""
    rec = as_model(lookup("model", "qwen3-235b-a22b"))
    lay = layout_of(rec)
    rates = rates_from_spec(hardware_spec(lookup, "h200-sxm"))

    def moe(phase, batch, tokens, split, skew):
        step = step_ops(lay, phase, batch, tokens, 0, split, "bf16", "bf16", expert_skew=skew)
        op = [o for o in step.ops if o.kind == "moe"][0]
        return op, float(bound_of(step, rates).parts_s["moe_experts"])

    for phase, batch, tokens in (("prefill", 1, 4096), ("decode", 1, 1)):
        _, uniform = moe(phase, batch, tokens, Split(tp=8, ep=8), 0.0)
        for skew in (0.5, 1.0, 2.0):
            op, skewed = moe(phase, batch, tokens, Split(tp=8, ep=8), skew)
            assert skewed >= uniform * (1 - 1e-12), (phase, skew)
    _, uniform = moe("prefill", 1, 4096, Split(tp=8, ep=8), 0.0)
    _, hot = moe("prefill", 1, 4096, Split(tp=8, ep=8), 1.0)
    assert hot > 1.2 * uniform                    # compute-bound: the hottest rank's token share, not 1/8
    one, _ = moe("decode", 64, 1, Split(tp=8), 1.5)
    flat, _ = moe("decode", 64, 1, Split(tp=8), 0.0)
    assert float(one.shape["touched"]) < float(flat.shape["touched"])


def test_dp_attention_steps(lookup):
    """DeepSeek-R1 with attention data-parallel over 8 ranks: attention replicated (each rank its own 1/8 of the
    sequences), experts spread over all 8 with a dispatch and combine per MoE layer, shared experts replicated; with
    experts sliced instead (ep < tp) the tokens are gathered and scattered around every FFN."""
    rec = as_model(lookup("model", "deepseek-r1"))
    lay = layout_of(rec)
    wf = _formats(rec)
    tp8 = step_ops(lay, "decode", 64, 1, 4096, Split(tp=8, ep=8), wf, "bf16")
    dp8 = step_ops(lay, "decode", 64, 1, 4096, Split(tp=8, ep=8, dp_attention=True), wf, "bf16")
    mla = lambda st: [o for o in st.ops if o.kind == "mla"][0]
    # the latent cache is replicated under TP: each rank reads all 64 sequences' KV; under DP only its 8
    assert float(mla(tp8).bytes) == pytest.approx(8 * float(mla(dp8).bytes))
    kinds = {o.name: o for o in dp8.ops if o.kind in ("allreduce", "alltoall")}
    assert kinds["moe_dispatch_combine"].count == 2 * lay.moe_layers and "allreduce" not in kinds
    assert kinds["dp_gather_scatter"].count == lay.dense_layers
    w_tp = weight_bytes_per_rank(lay, Split(tp=8, ep=8), wf)["components_per_rank"]
    w_dp = weight_bytes_per_rank(lay, Split(tp=8, ep=8, dp_attention=True), wf)["components_per_rank"]
    assert w_dp["attention"] == pytest.approx(8 * w_tp["attention"]) and w_dp["shared_experts"] == pytest.approx(8 * w_tp["shared_experts"])
    assert w_dp["routed_experts"] == pytest.approx(w_tp["routed_experts"])
    sliced = step_ops(lay, "decode", 64, 1, 4096, Split(tp=8, ep=1, dp_attention=True), wf, "bf16")
    gather = [o for o in sliced.ops if o.name == "dp_gather_scatter"][0]
    assert gather.count == lay.dense_layers + lay.moe_layers and not any(o.kind == "alltoall" for o in sliced.ops)


def test_mtp_modules_are_one_more_layer_each(lookup):
    """DeepSeek-R1 ships one MTP module (num_nextn_predict_layers 1): with it, a decode step verifies 2 positions per
    sequence and runs one more MLA + MoE layer with the [embedding; hidden] projection and the shared LM head."""
    rec = as_model(lookup("model", "deepseek-r1"))
    lay = layout_of(rec)
    assert lay.mtp_layers == 1 and layout_of(lookup("model", "llama-3.1-70b")).mtp_layers == 0
    plain = step_ops(lay, "decode", 16, 1, 2048, Split(tp=8, ep=8), "bf16", "bf16")
    mtp = step_ops(lay, "decode", 16, 2, 2048, Split(tp=8, ep=8), "bf16", "bf16", mtp_drafts=1)
    extra = {o.name for o in mtp.ops} - {o.name for o in plain.ops}
    assert {"mtp_eh_proj", "mtp_mla_attention", "mtp_moe_experts", "mtp_lm_head"} <= extra
    main_moe = [o for o in plain.ops if o.name == "moe_experts"][0]
    mtp_moe = [o for o in mtp.ops if o.name == "mtp_moe_experts"][0]
    assert mtp_moe.count == 1 and float(mtp_moe.flops) == pytest.approx(float(main_moe.flops))   # 16 tokens each
    # weights: one MoE layer's experts, shared experts, router and attention, plus the 2d × d projection
    led = weight_bytes_per_rank(lay, Split(), "bf16", mtp=True)["components"]
    d = lay.d
    one_layer = (led["routed_experts"] / lay.moe_layers + led["shared_experts"] / lay.moe_layers
                 + led["router"] / lay.moe_layers + led["attention"] / lay.mixer_layers)
    assert led["mtp"] == pytest.approx(one_layer + 2 * 2 * d * d, rel=1e-3)
    assert "mtp" not in weight_bytes_per_rank(lay, Split(), "bf16")["components"]
    with pytest.raises(CalcInputError) as exc:
        step_ops(layout_of(lookup("model", "llama-3.1-70b")), "decode", 1, 2, 10, Split(), mtp_drafts=1)
    assert exc.value.loc == ("mtp",)
