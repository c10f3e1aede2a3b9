"""speculative-decoding / speculative-verify-budget: closed form, simulation, book examples, invariants."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)


def spec(body):
    return run("speculative-decoding", body, no_lookup)[2].outputs


def budget(body):
    return run("speculative-verify-budget", body, no_lookup)[2].outputs


def test_history_drafts_expected_output():
    o = spec({"acceptance_rate": [0.25, 0.75], "draft_tokens": 4})
    assert o["expected_tokens_per_round"] == pytest.approx([341 / 256, 781 / 256])


def test_history_drafts_time_per_token_and_amortization():
    # 0.1 ms lookup per 4-token draft = 0.025 target steps per draft token; verify = 1.4 steps
    o = spec({"acceptance_rate": [0.25, 0.75], "draft_tokens": 4, "draft_cost_ratio": 0.025,
              "verify_cost_ratio": 1.4, "target_step_s": 0.001, "setup_s": 2.0})
    assert o["time_per_token_s"] == pytest.approx([1.1260997067e-3, 0.4916773367e-3])
    assert o["time_per_token_s"][0] > 0.001  # AAAA is slower than plain decoding
    assert o["max_draft_time_per_round_s"] == pytest.approx([-0.06796875e-3, 1.65078125e-3])
    assert o["setup_amortization_tokens"][1] == pytest.approx(3935, abs=0.5)
    assert o["setup_amortization_tokens"][0] is None  # never amortised: no gain


def test_closed_form_limits():
    o = spec({"acceptance_rate": [0.0, 1.0], "draft_tokens": 5})
    assert o["expected_tokens_per_round"] == [1.0, 6.0]
    assert o["speedup"] == [1.0, 6.0]


def test_page_rule_is_off_in_both_directions():
    o = spec({"acceptance_rate": [0.95, 0.3], "draft_tokens": [4, 16]})
    # near α = 1 the rule forgets the target's own token: too low
    assert o["page_rule_speedup"][0] < o["speedup"][0]
    # long drafts with modest α: linear in k while the truth saturates at 1/(1 − α)
    assert o["page_rule_speedup"][1] > 3 * o["speedup"][1]
    assert o["expected_tokens_per_round"][1] < 1 / (1 - 0.3)


def test_best_k():
    o = spec({"acceptance_rate": [0.6, 0.9], "draft_cost_ratio": 0.05})
    for a, k, s in zip([0.6, 0.9], o["best_k"], o["best_speedup"]):
        ks = np.arange(1, 33)
        vals = (1 - a ** (ks + 1)) / (1 - a) / (ks * 0.05 + 1)
        assert k == ks[np.argmax(vals)] and s == pytest.approx(vals.max())
    assert spec({"acceptance_rate": 0.8})["best_k"] == 32  # free drafts: longer is never worse


def test_amdahl():
    o = spec({"acceptance_rate": 1.0, "draft_tokens": 3, "decode_fraction": 0.5})
    assert o["speedup"] == 4 and o["end_to_end_speedup"] == pytest.approx(1.6)


@pytest.mark.parametrize("alpha,k", [(0.25, 4), (0.75, 4), (0.9, 8), (0.5, 1), (1.0, 3), (0.0, 2)])
def test_simulation_agrees_with_closed_form(alpha, k):
    o = spec({"acceptance_rate": alpha, "draft_tokens": k, "simulate": {"rounds": 200_000, "seed": 1}})
    sim = o["simulation"]
    se = sim["standard_error"]
    if se == 0:
        assert sim["mean_tokens_per_round"] == pytest.approx(o["expected_tokens_per_round"])
    else:
        assert abs(sim["mean_tokens_per_round"] - o["expected_tokens_per_round"]) < 5 * se
        assert se < 0.01


def test_simulation_is_seeded_and_vectorised():
    body = {"acceptance_rate": [0.3, 0.6, 0.9], "draft_tokens": [2, 4, 6], "simulate": {"rounds": 5000, "seed": 42}}
    a, b = spec(body)["simulation"], spec(body)["simulation"]
    assert a == b
    c = spec({**body, "simulate": {"rounds": 5000, "seed": 43}})["simulation"]
    assert c["mean_tokens_per_round"] != a["mean_tokens_per_round"]
    assert all(abs(z) < 5 for z in a["z_score_vs_closed_form"])


def test_simulation_size_is_capped():
    with pytest.raises(CalcInputError) as e:
        spec({"acceptance_rate": [0.5] * 1000, "draft_tokens": 32, "simulate": {"rounds": 5_000_000}})
    assert e.value.status == 413


@settings(max_examples=80)
@given(a=st.floats(0, 0.999), k=st.integers(1, 64), c=st.floats(0, 2))
def test_speedup_invariants(a, k, c):
    o = spec({"acceptance_rate": [a, min(a + 0.001, 1.0)], "draft_tokens": k, "draft_cost_ratio": c})
    e = o["expected_tokens_per_round"]
    assert 1 - 1e-12 <= e[0] <= min(k + 1, 1 / (1 - a)) + 1e-9
    assert e[1] >= e[0] - 1e-12  # more acceptance never hurts
    assert o["speedup"][0] == pytest.approx(e[0] / (k * c + 1))
    assert o["best_speedup"][0] >= spec({"acceptance_rate": a, "draft_tokens": min(k, 32), "draft_cost_ratio": c})["speedup"] - 1e-12


def test_sweep_matches_scalar():
    alphas = [0.1, 0.5, 0.95]
    s = spec({"acceptance_rate": alphas, "draft_tokens": 5, "draft_cost_ratio": 0.1, "target_step_s": 0.02})
    for i, a in enumerate(alphas):
        one = spec({"acceptance_rate": a, "draft_tokens": 5, "draft_cost_ratio": 0.1, "target_step_s": 0.02})
        assert s["time_per_token_s"][i] == pytest.approx(one["time_per_token_s"])
        assert s["best_k"][i] == one["best_k"]


def test_four_request_budget():
    groups = [{"acceptance_rate": p, "draft_tokens": k} for p, k in zip([0.9, 0.5, 0.3, 0.3], [6, 6, 6, 6])]
    full = budget({"groups": groups, "graph_row_tiers": [8, 16, 32], "fixed_round_s": 0.002, "per_row_s": 0.0001})
    assert full["expected_tokens_per_round"] == pytest.approx(10.057924, abs=5e-7)
    assert (full["rows"], full["executed_rows"]) == (28, 32)
    assert full["tokens_per_s"] == pytest.approx(1934.22, abs=0.005)
    compact = [{**g, "draft_tokens": k} for g, k in zip(groups, [6, 2, 1, 1])]
    c = budget({"groups": compact, "graph_row_tiers": [8, 16, 32], "fixed_round_s": 0.002, "per_row_s": 0.0001})
    assert c["expected_tokens_per_round"] == pytest.approx(9.567031, abs=5e-7)
    assert (c["rows"], c["executed_rows"], c["round_s"]) == (14, 16, pytest.approx(0.0036))
    assert c["tokens_per_s"] == pytest.approx(2657.51, abs=0.005)
    capped = budget({"groups": compact, "graph_row_tiers": [8, 16, 32], "min_executed_rows": 28,
                     "fixed_round_s": 0.002, "per_row_s": 0.0001})
    assert capped["executed_rows"] == 32 and capped["tokens_per_s"] == pytest.approx(1839.81, abs=0.005)
    assert budget({"groups": compact, "graph_row_tiers": [8, 16, 32], "min_executed_rows": 25})["executed_rows"] == 32


def test_cumulative_log_semantics():
    o = budget({"groups": [{"draft_tokens": 2, "position_acceptance": [0.5, 0.25], "position_acceptance_kind": "cumulative"}]})
    g = o["groups"][0]
    assert g["expected_tokens_per_request"] == 1.75 and g["if_log_misread_as_conditional"] == 1.625
    same = budget({"groups": [{"draft_tokens": 2, "position_acceptance": [0.5, 0.5]}]})
    assert same["groups"][0]["expected_tokens_per_request"] == 1.75


def test_mask_rows_without_acceptance():
    o = budget({"groups": [{"draft_tokens": 4, "count": 64}], "row_bytes": 18992})
    assert o["rows"] == 320 and o["row_buffer_bytes"] == 6_077_440
    assert o["expected_tokens_per_round"] is None and o["tokens_per_s"] is None


def test_validation():
    with pytest.raises(ValidationError):
        spec({"acceptance_rate": 1.2})
    with pytest.raises(ValidationError):
        spec({"acceptance_rate": 0.5, "draft_tokens": 5000})
    with pytest.raises(ValidationError):
        spec({"acceptance_rate": float("nan")})
    with pytest.raises(CalcInputError):
        spec({"acceptance_rate": 0.5, "setup_s": 1})
    with pytest.raises(CalcInputError):
        spec({"acceptance_rate": [0.5, 0.6], "draft_tokens": [1, 2, 3]})
    with pytest.raises(CalcInputError):
        budget({"groups": [{"draft_tokens": 3, "position_acceptance": [0.5]}]})
    with pytest.raises(CalcInputError):
        budget({"groups": [{"draft_tokens": 2, "position_acceptance": [0.3, 0.5], "position_acceptance_kind": "cumulative"}]})


def test_variants_compare_budgets_in_one_request():
    groups = [{"acceptance_rate": p, "draft_tokens": 6} for p in (0.9, 0.5, 0.3, 0.3)]
    o = budget({"groups": groups, "graph_row_tiers": [8, 16, 32], "fixed_round_s": 0.002, "per_row_s": 0.0001,
                "variants": [{"label": "compact", "draft_tokens": [6, 2, 1, 1]},
                             {"label": "capped", "draft_tokens": [6, 2, 1, 1], "min_executed_rows": 28},
                             {"label": "dp peer", "draft_tokens": [6, 2, 1, 1], "min_executed_rows": 25}]})
    full, (compact, capped, peer) = o, o["variants"]
    assert full["round_s"] == pytest.approx(0.0052) and compact["round_s"] == pytest.approx(0.0036)
    assert compact["tokens_per_s"] > full["tokens_per_s"] > capped["tokens_per_s"]  # fewer tokens can still be faster
    assert capped["expected_tokens_per_round"] == compact["expected_tokens_per_round"]
    assert peer["executed_rows"] == 32
    with pytest.raises(CalcInputError):
        budget({"groups": groups, "variants": [{"draft_tokens": [1, 2]}]})


# --------------------------------------------------------------------------- schema-fuzzing regressions

def as_json(name, body):
    """What the API does with a request: validate, compute, serialise with orjson (which refuses integers
    beyond 64 bits and would turn such an answer into a 500)."""
    import orjson
    _, _, r = run(name, body, no_lookup)
    return orjson.loads(orjson.dumps({"outputs": r.outputs, "steps": [s.as_dict() for s in r.steps]},
                                     option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))["outputs"]


def test_simulation_with_a_draft_length_sweep():
    # The fuzzed request: draft_tokens swept, acceptance scalar. The simulation sized its accumulators by the
    # acceptance sweep (1 point) and failed to broadcast against the 2-point draft sweep (a 500).
    o = as_json("speculative-decoding", {"acceptance_rate": 0.75, "draft_tokens": [3, 4], "draft_cost_ratio": 0,
                                         "target_step_s": 0.001, "setup_s": 2, "decode_fraction": 0.5,
                                         "simulate": {"rounds": 20000, "seed": 7}})
    sim = o["simulation"]
    assert len(sim["mean_tokens_per_round"]) == 2
    for mean, e, z in zip(sim["mean_tokens_per_round"], o["expected_tokens_per_round"], sim["z_score_vs_closed_form"]):
        assert mean == pytest.approx(e, rel=0.02) and abs(z) < 5
    # both swept: element-wise pairs
    o2 = spec({"acceptance_rate": [0.5, 0.9], "draft_tokens": [2, 6], "simulate": {"rounds": 5000, "seed": 1}})
    assert len(o2["simulation"]["mean_tokens_per_round"]) == 2


@pytest.mark.parametrize("body, loc", [
    ({"acceptance_rate": 0.5, "draft_tokens": [4, 4097]}, ("draft_tokens",)),
    ({"acceptance_rate": 0.5, "draft_cost_ratio": 1e7}, ("draft_cost_ratio",)),
    ({"acceptance_rate": 0.5, "verify_cost_ratio": 1e7}, ("verify_cost_ratio",)),
    ({"acceptance_rate": 0.5, "simulate": {"rounds": 5_000_001}}, ("simulate", "rounds")),
])
def test_speculative_bounds_are_enforced(body, loc):
    # These bounds were written as Field(le=...) next to core aliases, which pydantic silently ignores.
    with pytest.raises(ValidationError) as e:
        spec(body)
    assert e.value.errors()[0]["loc"][: len(loc)] == loc


def test_verify_budget_bounds_and_large_buffers():
    # The fuzzed request had a group of 10,607,576 requests and unbounded variant draft limits.
    with pytest.raises(ValidationError):
        budget({"groups": [{"draft_tokens": 2, "count": 10_607_576}]})
    with pytest.raises(ValidationError):
        budget({"groups": [{"draft_tokens": 4097}]})
    with pytest.raises(ValidationError):
        budget({"groups": [{"draft_tokens": 2}], "variants": [{"draft_tokens": [10**15]}]})
    # the largest accepted batch with the largest row buffer: the byte count no longer fits 64 bits, and is a float
    big = {"groups": [{"draft_tokens": 4096, "count": 10**6}] * 1000, "row_bytes": 10**9,
           "graph_row_tiers": [10**15], "min_executed_rows": 10**15,
           "variants": [{"draft_tokens": [4096] * 1000}]}
    o = as_json("speculative-verify-budget", big)
    assert o["rows"] == 1000 * 10**6 * 4097
    assert o["row_buffer_bytes"] == pytest.approx(1000 * 10**6 * 4097 * 1e9)
    assert o["variants"][0]["row_buffer_bytes"] == pytest.approx(o["row_buffer_bytes"])
    # small counts stay exact integers
    assert budget({"groups": [{"draft_tokens": 6, "count": 4}], "row_bytes": 18992})["row_buffer_bytes"] == 4 * 7 * 18992


# --------------------------------------------------------------------------- the target on hardware: the step model

TARGET = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "batch": 8, "context_tokens": 2048}


def test_target_step_and_verify_cost_from_the_step_model(lookup):
    o = run("speculative-decoding", {"acceptance_rate": 0.75, "draft_tokens": [1, 4, 16], **TARGET}, lookup)[2].outputs
    t = o["target_step"]
    assert t["estimate"] == "measured" and t["step_s"] == t["measured_s"] and t["bound_s"] < t["measured_s"]
    assert t["link"] == "nvlink4" and t["comm_s"] > 0
    assert o["verify_cost_ratio"] == pytest.approx([v / t["step_s"] for v in t["verify_step_s"]])
    assert all(v >= 1 for v in o["verify_cost_ratio"])                       # a verify pass does a plain step's work and more
    assert t["verify_bound_s"] == sorted(t["verify_bound_s"])                 # more positions, more work
    assert o["time_per_token_s"] == pytest.approx([t["step_s"] * v / e for v, e in
                                                   zip(o["verify_cost_ratio"], o["expected_tokens_per_round"])])
    assert "speedup_limit_infinite_k" not in o or o["speedup_limit_infinite_k"] is None   # v grows with k
    bound = run("speculative-decoding", {"acceptance_rate": 0.75, "draft_tokens": 4, **TARGET, "estimate": "bound"},
                lookup)[2].outputs
    assert bound["target_step"]["estimate"] == "bound" and bound["target_step"]["step_s"] == t["bound_s"]
    # a given verify cost wins over the step model's
    given_v = run("speculative-decoding", {"acceptance_rate": 0.75, "draft_tokens": 4, **TARGET, "verify_cost_ratio": 1.0},
                  lookup)[2].outputs
    assert given_v["round_cost_steps"] == pytest.approx(1.0)


def test_target_step_refusals(lookup):
    base = {"acceptance_rate": 0.75, "draft_tokens": 4}
    for body, loc in (({**base, **TARGET, "target_step_s": 0.01}, "target_step_s"),
                      ({**base, "model": "llama-3.1-70b"}, "hardware"),
                      ({**base, "hardware": "h100-sxm"}, "model"),
                      ({**base, "batch": 8}, "batch"),
                      ({**base, **TARGET, "tp": 3}, "tp")):
        with pytest.raises(CalcInputError) as e:
            run("speculative-decoding", body, lookup)
        assert e.value.loc == (loc,), body
