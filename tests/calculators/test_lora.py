"""lora: the book's multi-LoRA serving example (Qwen3-8B q/v rank 16), plus invariants and validation."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, UnknownId, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

MIB, GIB = 2**20, 2**30
QV = {"model": "qwen3-8b", "rank": 16, "target_modules": ["q_proj", "v_proj"], "adapter_bytes_per_param": 2}
EXPLICIT = {"layers": 36, "modules": [{"name": "q_proj", "d_in": 4096, "d_out": 4096},
                                      {"name": "v_proj", "d_in": 4096, "d_out": 1024}], "rank": 16}
SCHEDULE = {"requests": 4, "load_s": 0.004,
            "prefill_s_by_batch": [{"batch": 1, "prefill_s": 0.016}, {"batch": 3, "prefill_s": 0.020},
                                   {"batch": 4, "prefill_s": 0.022}]}


def calc(body, lookup=no_lookup):
    return run("lora", body, lookup)[2].outputs


def fake_model(**facts):
    rec = {"id": "m", **{k: {"value": v, "source": "src", "locator": k} for k, v in facts.items()}}

    def lookup(kind, ident):
        if (kind, ident) == ("model", "m"):
            return rec
        raise KeyError(ident)
    return lookup


def test_qwen3_8b_q_v_rank16_is_14_625_mib(lookup):
    _, _, res = run("lora", {**QV, "adapters": 100}, lookup)
    o = res.outputs
    assert [m["params_per_layer"] for m in o["modules"]] == [131072, 81920]
    assert o["params_per_adapter"] == 7_667_712
    assert o["bytes_per_adapter"] == 15_335_424
    assert o["bytes_per_adapter"] / MIB == 14.625
    assert o["bytes_all_adapters"] / GIB == pytest.approx(1.428, abs=5e-4)
    assert {s["field"] for s in res.sources} >= {"layers", "hidden_size", "heads", "kv_heads", "head_dim"}


def test_explicit_modules_agree_with_the_model(lookup):
    assert calc(EXPLICIT)["bytes_per_adapter"] == calc(QV, lookup)["bytes_per_adapter"]


def test_slots_padding_and_load_bound():
    o = calc({**EXPLICIT, "gpu_slots": 8, "pinned_slots": 6, "tokens_per_adapter": [[20], [17, 1, 1, 1]],
              "link_bandwidth_bytes_per_s": 12 * GIB})
    assert o["free_slots"] == 2
    assert o["blocks"] == [2, 5]
    assert o["padded_positions"] == [32, 80]
    assert o["efficiency"] == [0.625, 0.25]
    assert o["lora_flops"][0] == o["lora_flops"][1]            # same logical LoRA work ...
    assert o["lora_padded_flops"][1] == 2.5 * o["lora_padded_flops"][0]   # ... different tiling work
    assert o["load_lower_bound_s"] * 1e3 == pytest.approx(1.19, abs=5e-3)
    one = calc({**EXPLICIT, "tokens_per_adapter": [17, 1, 1, 1]})
    assert one["blocks"] == 5 and one["efficiency"] == 0.25   # a single batch gives scalars


def test_load_overlap_schedules_match_the_book():
    s = calc({**EXPLICIT, "gpu_slots": 4, "schedule": SCHEDULE})["schedule"]
    assert s["load_end_s"] == pytest.approx([0.004, 0.008, 0.012, 0.016])
    assert s["load_all"]["completion_s"] == pytest.approx([0.038] * 4)
    assert s["load_all"]["gpu_busy_s"] == pytest.approx(0.022)
    assert s["ready_first"]["completion_s"] == pytest.approx([0.020, 0.040, 0.040, 0.040])
    assert s["ready_first"]["mean_s"] == pytest.approx(0.035)
    assert s["ready_first"]["max_s"] == pytest.approx(0.040)
    assert s["ready_first"]["gpu_busy_s"] == pytest.approx(0.036)
    assert s["load_all"]["mean_wait_s"] == pytest.approx(0.016) == s["ready_first"]["mean_wait_s"]


def test_schedule_defaults_to_the_copy_bound_and_reports_missing_batch_sizes():
    sched = {"requests": 2, "prefill_s_by_batch": [{"batch": 1, "prefill_s": 0.01}, {"batch": 2, "prefill_s": 0.015}]}
    s = calc({**EXPLICIT, "link_bandwidth_bytes_per_s": 12 * GIB, "schedule": sched})["schedule"]
    assert s["load_end_s"][0] == pytest.approx(15_335_424 / (12 * GIB))
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "schedule": {**SCHEDULE, "prefill_s_by_batch": SCHEDULE["prefill_s_by_batch"][:2]}})
    assert e.value.loc == ("schedule", "prefill_s_by_batch")


def test_moe_model_without_dense_ffn_refuses_ffn_targets():
    lk = fake_model(layers=48, hidden_size=2048, heads=32, kv_heads=4, head_dim=128)
    assert calc({"model": "m", "rank": 8, "target_modules": ["q_proj", "o_proj"]}, lk)["params_per_adapter"] == \
        48 * 8 * ((2048 + 4096) * 2)
    with pytest.raises(CalcInputError) as e:
        calc({"model": "m", "rank": 8, "target_modules": ["gate_proj"]}, lk)
    assert e.value.loc == ("target_modules",)


@settings(max_examples=60, deadline=None)
@given(r=st.integers(1, 512), k=st.integers(2, 8))
def test_size_is_linear_in_rank(r, k):
    a = calc({**EXPLICIT, "rank": r})["params_per_adapter"]
    b = calc({**EXPLICIT, "rank": r * k})["params_per_adapter"]
    assert b == k * a


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(st.integers(0, 500), min_size=1, max_size=20), block=st.integers(1, 64))
def test_padding_invariants(groups, block):
    o = calc({**EXPLICIT, "tokens_per_adapter": groups, "block_tokens": block})
    assert o["padded_positions"] == block * o["blocks"]
    assert o["tokens"] <= o["padded_positions"] < o["tokens"] + block * len(groups) or o["tokens"] == 0
    if o["tokens"]:
        assert 0 < o["efficiency"] <= 1
    else:
        assert o["efficiency"] is None


@settings(max_examples=40, deadline=None)
@given(ranks=st.lists(st.integers(1, 256), min_size=1, max_size=10))
def test_rank_sweep_matches_scalar_calls(ranks):
    swept = calc({**EXPLICIT, "rank": ranks, "link_bandwidth_bytes_per_s": 1e10})
    assert swept["bytes_per_adapter"] == [calc({**EXPLICIT, "rank": r})["bytes_per_adapter"] for r in ranks]
    assert len(swept["load_lower_bound_s"]) == len(ranks)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), load=st.floats(0, 1), base=st.floats(0.001, 1))
def test_load_all_finishes_everything_at_once(n, load, base):
    table = [{"batch": k, "prefill_s": base * (1 + 0.1 * k)} for k in range(1, n + 1)]
    s = calc({**EXPLICIT, "schedule": {"requests": n, "load_s": load, "prefill_s_by_batch": table}})["schedule"]
    assert s["load_all"]["completion_s"] == pytest.approx([n * load + base * (1 + 0.1 * n)] * n)
    assert s["ready_first"]["completion_s"][0] <= s["load_all"]["completion_s"][0] + 1e-12


@pytest.mark.parametrize("body, loc", [
    ({**QV, "layers": 36}, ("layers",)),
    ({"rank": 16}, ("model",)),
    ({"modules": EXPLICIT["modules"], "rank": 16}, ("layers",)),
    ({**EXPLICIT, "target_modules": ["k_proj"]}, ("target_modules", 0)),
    ({**EXPLICIT, "target_modules": ["q_proj", "q_proj"]}, ("target_modules", 1)),
    ({**EXPLICIT, "gpu_slots": 4, "pinned_slots": 5}, ("pinned_slots",)),
    ({**EXPLICIT, "pinned_slots": 1}, ("gpu_slots",)),
    ({**EXPLICIT, "gpu_slots": 3, "schedule": SCHEDULE}, ("schedule", "requests")),
    ({**EXPLICIT, "schedule": {**SCHEDULE, "load_s": None}}, ("schedule", "load_s")),
    ({**EXPLICIT, "rank": [1, 2], "tokens_per_adapter": [[1], [2], [3]]}, ("tokens_per_adapter",)),
])
def test_semantic_errors_name_the_field(body, loc, lookup):
    with pytest.raises(CalcInputError) as e:
        calc(body, lookup)
    assert e.value.loc == loc


def test_unknown_model_is_a_named_error():
    with pytest.raises(UnknownId):
        calc({"model": "no-such-model", "rank": 4})


@pytest.mark.parametrize("patch", [{"rank": 0}, {"rank": -1}, {"adapter_bytes_per_param": 0}, {"block_tokens": 0},
                                   {"tokens_per_adapter": [[]]}, {"link_bandwidth_bytes_per_s": 0}, {"extra": 1}])
def test_bad_values_are_refused_by_the_model(patch):
    with pytest.raises(ValidationError):
        calc({**EXPLICIT, **patch})


# --------------------------------------------------------------------------- schema-fuzzing regressions

@pytest.mark.parametrize("patch", [
    {"adapter_bytes_per_param": 17}, {"block_tokens": 65537}, {"gpu_slots": 100_001}, {"pinned_slots": 100_001},
    {"layers": 10_001}, {"tokens_per_adapter": []}, {"tokens_per_adapter": [[1]] * 4097},
    {"gpu_slots": 8, "schedule": {**SCHEDULE, "requests": 65}},
    {"gpu_slots": 8, "schedule": {**SCHEDULE, "prefill_s_by_batch": [{"batch": 65, "prefill_s": 0.1}]}},
])
def test_lora_bounds_are_enforced(patch):
    # These bounds were written as Field(le=...) next to core aliases, which pydantic silently ignores.
    with pytest.raises(ValidationError):
        calc({**EXPLICIT, **patch})


# --------------------------------------------------------------------------- memory budget: how many adapters fit

def test_budget_in_bytes_gives_adapters_that_fit_by_hand():
    # 36 layers × 16 × ((4096 + 4096) + (4096 + 1024)) × 2 B = 15,335,424 B per adapter
    o = calc({**EXPLICIT, "memory_budget_bytes": 1e9, "kv_reserve_bytes": 0.2e9, "adapters": 60})
    per = 36 * 16 * (8192 + 5120) * 2
    assert o["bytes_per_adapter"] == per == 15_335_424
    assert o["budget_bytes"] == pytest.approx(0.8e9)
    assert o["adapters_that_fit"] == 52 == int(0.8e9 // per)      # 52 × 15,335,424 = 797,442,048 ≤ 8e8 < 53 × …
    assert o["all_adapters_fit"] is False                            # 60 adapters do not
    assert calc({**EXPLICIT, "memory_budget_bytes": 1e9, "adapters": 60})["adapters_that_fit"] == 65


def test_budget_from_hardware_subtracts_base_weights_and_kv_reserve(lookup):
    cap = lookup("hardware", "h100-sxm")["memory_bytes"]["value"]
    body = {**EXPLICIT, "hardware": "h100-sxm", "devices": 2, "base_weight_bytes": 16e9, "kv_reserve_bytes": 40e9}
    _, _, res = run("lora", body, lookup)
    o = res.outputs
    budget = cap * 0.9 * 2 - 16e9 - 40e9          # memory rule (0.9, no reserve) × 2 devices − weights − KV reserve
    assert o["budget_bytes"] == pytest.approx(budget)
    assert o["adapters_that_fit"] == int(budget // 15_335_424)
    assert any("kv_reserve_bytes" in s.formula for s in res.steps)
    # with the model, the base weights default to its published weight bytes
    o2 = calc({**QV, "hardware": "h100-sxm"}, lookup)
    assert 0 < o2["budget_bytes"] < cap * 0.9 and o2["adapters_that_fit"] == int(o2["budget_bytes"] // o2["bytes_per_adapter"])


def test_budget_sweep_pairs_with_rank_and_matches_scalar_calls():
    o = calc({**EXPLICIT, "rank": [8, 16, 32], "memory_budget_bytes": [1e9, 1e9, 2e9]})
    for i, (r, b) in enumerate([(8, 1e9), (16, 1e9), (32, 2e9)]):
        assert o["adapters_that_fit"][i] == calc({**EXPLICIT, "rank": r, "memory_budget_bytes": b})["adapters_that_fit"]


def test_budget_refusals():
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "memory_budget_bytes": 1e9, "hardware": "h100-sxm"})
    assert e.value.loc == ("memory_budget_bytes",)
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "memory_budget_bytes": 1e9, "base_weight_bytes": 1e9, "subtract_weights": False})
    assert e.value.loc == ("base_weight_bytes",)
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "memory_budget_bytes": 1e9, "subtract_weights": True})    # explicit modules: no weights known
    assert e.value.loc == ("base_weight_bytes",)
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "memory_utilization": 0.8, "memory_budget_bytes": 1e9})
    assert e.value.loc == ("memory_utilization",)
    with pytest.raises(CalcInputError) as e:
        calc({**EXPLICIT, "kv_reserve_bytes": 1e9})
    assert e.value.loc == ("kv_reserve_bytes",)


def test_budget_in_bytes_takes_the_base_weights_out(lookup):
    # a memory budget holds the base weights too: given bytes, or the model's own (as weight-memory counts them)
    net = calc({**EXPLICIT, "memory_budget_bytes": 2e9, "base_weight_bytes": 1e9})
    assert net["budget_bytes"] == pytest.approx(1e9)
    assert net["adapters_that_fit"] == calc({**EXPLICIT, "memory_budget_bytes": 1e9})["adapters_that_fit"]
    w = run("weight-memory", {"model": "qwen3-8b"}, lookup)[2].outputs["bytes_total"]
    o = calc({**QV, "memory_budget_bytes": 24 * GIB}, lookup)
    assert o["budget_bytes"] == pytest.approx(24 * GIB - w)
    kept = calc({**QV, "memory_budget_bytes": 24 * GIB, "subtract_weights": False}, lookup)
    assert kept["budget_bytes"] == pytest.approx(24 * GIB)


def test_budget_smaller_than_the_weights_fits_no_adapter():
    o = calc({**EXPLICIT, "memory_budget_bytes": 1e9, "kv_reserve_bytes": 2e9})
    assert o["budget_bytes"] == 0 and o["adapters_that_fit"] == 0


def test_headline_states_adapter_size_and_count(lookup):
    from calculators.framework.headline import fmt_bytes as hb
    _, _, res = run("lora", {**QV, "memory_budget_bytes": 24 * GIB}, lookup)
    o = res.outputs
    assert hb(o["bytes_per_adapter"]) in res.headline and f"{o['adapters_that_fit']:,} adapters" in res.headline
    assert "Qwen3-8B" in res.headline and res.headline.endswith(".")
    _, _, res = run("lora", {**EXPLICIT, "adapters": 100}, no_lookup)
    assert "100 adapters take" in res.headline and hb(res.outputs["bytes_all_adapters"]) in res.headline


def test_outputs_model_validates_every_example(lookup):
    from calculators.framework.registry import REGISTRY
    c = REGISTRY["lora"]
    assert c.outputs_model is not None
    for body in (c.example, *c.extra_examples):
        _, _, res = run("lora", body, lookup)
        c.outputs_model.model_validate(res.outputs)
        assert len(res.headline) > 20
    with pytest.raises(ValidationError):
        c.outputs_model.model_validate({**run("lora", c.example, lookup)[2].outputs, "undocumented": 1})
