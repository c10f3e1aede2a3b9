"""training-compute's attention term per layer kind (issue #26 item 6): models whose layers are not all full
attention get the term from their layer groups, by the step model's own operations, not a refusal."""
from __future__ import annotations

import pytest

from calculators.domain import layout_of
from calculators.framework.runner import compute

S = 8192


def attn(model: str, lookup, s: int = S) -> tuple[float, list]:
    r = compute("training-compute", {"model": model, "tokens": 1e9, "sequence_tokens": s}, lookup)[2]
    return r.outputs["attention_flops_per_token"], r.steps


def test_sliding_window_layers_count_min_s_w_keys_and_stay_below_all_full(lookup):
    model = "gemma-3-27b"
    got, steps = attn(model, lookup)
    lay = layout_of(lookup("model", model))
    hand = full = 0.0
    for m in lay.mixers:
        assert m.kind == "attention"
        w = m.window or S
        pairs = w * (w + 1) / 2 + (S - w) * w       # query i sees min(i, w) keys
        hand += 3 * 2 * pairs / S * m.heads * (m.head_dim + m.v_dim) * m.count
        full += 3 * (S + 1) * m.heads * (m.head_dim + m.v_dim) * m.count
    assert any(m.window for m in lay.mixers) and any(m.window is None for m in lay.mixers)
    assert got == pytest.approx(hand, rel=1e-9)
    assert got < 0.5 * full
    assert sum(1 for s in steps if s.label.startswith("attention FLOPs / token:")) == len(lay.mixers)


def test_mla_with_dsa_uses_the_mla_head_dims_and_top_k(lookup):
    model = "deepseek-v3.2"
    rec = lookup("model", model)
    got, steps = attn(model, lookup)
    mla = rec["mla"]
    dqk = mla["qk_nope_head_dim"]["value"] + mla["qk_rope_head_dim"]["value"]
    dv = mla["v_head_dim"]["value"]
    H, L, k = rec["heads"]["value"], rec["layers"]["value"], rec["index_topk"]["value"]
    pairs = min(S * (S + 1) / 2, S * k)           # the main attention reads top-k keys per query (the step model's bound)
    main = 3 * 2 * pairs / S * H * (dqk + dv) * L
    ih, idim = rec["index_n_heads"]["value"], rec["index_head_dim"]["value"]
    indexer = 3 * (S + 1) * ih * idim * L        # the indexer scores every earlier key
    assert got == pytest.approx(main + indexer, rel=1e-9)
    assert any(f"d_qk={dqk}, d_v={dv}" in s.substituted for s in steps if s.label.startswith("attention FLOPs / token:"))


def test_linear_layers_grow_linearly_not_quadratically(lookup):
    a, _ = attn("qwen3.5-27b", lookup, 4096)
    b, _ = attn("qwen3.5-27b", lookup, 8192)
    full_a, _ = attn("qwen3-32b", lookup, 4096)
    full_b, _ = attn("qwen3-32b", lookup, 8192)
    assert full_b / full_a == pytest.approx(8193 / 4097)
    assert 1.0 < b / a < full_b / full_a      # the full-attention quarter grows with S, the GDN layers do not
