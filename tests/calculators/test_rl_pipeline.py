"""rl-pipeline / rl-recovery / rl-rollout-tail / rl-policy-ratio: the book's RL examples and invariants."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import GIB, CalcInputError, no_lookup
from calculators.framework.runner import compute as run


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


JOBS = [{"name": "A", "phases": [{"pool": "rollout", "duration_s": 360}, {"pool": "train", "duration_s": 120}], "host_state_bytes": 400 * GIB},
        {"name": "B", "phases": [{"pool": "rollout", "duration_s": 120}, {"pool": "train", "duration_s": 360}], "host_state_bytes": 500 * GIB}]


def test_supply_bound():
    o = calc("rl-pipeline", {"generator_samples_per_s": 12, "verifier_samples_per_s": 6, "learner_samples_per_s": 8,
                             "reject_fraction": 0.25})["supply"]
    assert o["accepted_samples_per_s"] == 4.5 and o["bound"] == "verifier"
    assert o["excess_generation_per_s"] == 6  # more generators only grow the queue


@settings(max_examples=60)
@given(g=st.floats(0.1, 1e3), v=st.floats(0.1, 1e3), lr=st.floats(0.1, 1e3), rej=st.floats(0, 0.99), more=st.floats(1, 10))
def test_supply_monotone_and_bounded(g, v, lr, rej, more):
    body = {"generator_samples_per_s": [g, g * more], "verifier_samples_per_s": v, "learner_samples_per_s": lr, "reject_fraction": rej}
    a = calc("rl-pipeline", body)["supply"]["accepted_samples_per_s"]
    assert a[1] >= a[0] - 1e-12
    assert a[0] <= min(lr, g, v) + 1e-9


def test_coscheduling_cycles_switches_and_host():
    cs = {"jobs": JOBS, "mixes": [{"counts": {"A": 1}}, {"counts": {"A": 1, "B": 1}}, {"counts": {"A": 2}},
                                  {"counts": {"A": 1, "B": 1}, "switch_s": 5}, {"counts": {"A": 1, "B": 1}, "switch_s": 45}],
          "slowdown_allowance": 0.1, "host_memory_bytes": 1024 * GIB, "host_reserve_bytes": 150 * GIB}
    o = calc("rl-pipeline", {"coschedule": cs})["coschedule"]
    cyc = [m["cycle_lower_bound_s"] for m in o["mixes"]]
    assert cyc == [480, 480, 720, 490, 570]
    assert [m["feasible"] for m in o["mixes"]] == [True, True, False, True, False]
    assert o["mixes"][0]["allowed_cycle_s"] == pytest.approx(528)
    assert o["mixes"][1]["host_need_bytes"] == 1050 * GIB and o["mixes"][1]["host_fits"] is False


def test_colocated_pool_adds_phases():
    jobs = [{"name": "J", "phases": [{"pool": "gpus", "duration_s": 300}, {"pool": "gpus", "duration_s": 60}]}]
    o = calc("rl-pipeline", {"coschedule": {"jobs": jobs, "mixes": [{"counts": {"J": 1}}], "switch_s": 10}})["coschedule"]
    assert o["mixes"][0]["cycle_lower_bound_s"] == 300 + 60 + 2 * 10


def test_phase_memory_and_trade_offs():
    o = calc("rl-pipeline", {
        "phase_memory": {"train_state_bytes": 40 * GIB, "weight_bytes": 16381470720, "kv_bytes": 24 * GIB,
                         "runtime_bytes": 4 * GIB, "memory_per_device_bytes": 64 * GIB},
        "idle_wait": {"waiting_gpus": 64, "wait_s": 2, "saved_gpu_s": 60},
        "extra_rollout": {"base_price_per_hour_usd": 83.79, "extra_price_per_hour_usd": 5.32, "extra_instances": 6, "throughput_multipliers": [1.2, 1.6]}})
    pm = o["phase_memory"]
    assert pm["train_only_bytes"] / GIB == 44
    assert pm["naive_peak_bytes"] / GIB == pytest.approx(83.2564, abs=5e-5)
    assert pm["staged_peak_bytes"] / GIB == pytest.approx(59.2564, abs=5e-5)
    assert pm["naive_fits"] is False and pm["staged_fits"] is True
    assert o["idle_wait"]["net_gpu_s"] == 68 and o["idle_wait"]["worth_it"] is False
    er = o["extra_rollout"]
    assert er["total_usd_per_h"] == pytest.approx(115.71)
    assert er["break_even_multiplier"] == pytest.approx(1.381, abs=5e-4)
    assert er["cost_per_work_ratio"] == pytest.approx([1.151, 0.863], abs=5e-4)


def test_weight_sync():
    o = calc("rl-pipeline", {"generator_samples_per_s": 10, "learner_samples_per_s": 8,
                             "weight_sync": {"weight_bytes": 16e9, "bytes_per_s": 50e9, "fixed_s": 0.5, "samples_per_update": 80}})
    assert o["weight_sync"]["sync_s"] == pytest.approx(0.82)
    assert o["weight_sync"]["update_interval_s"] == pytest.approx(10)


def test_trainer_failure_and_checkpoint():
    o = calc("rl-recovery", {"failure": {"rollout_s": 300, "train_s": 60, "fail_after_s": 30, "detect_s": 20, "restore_s": 80, "checkpoint_s": 3},
                             "checkpoint": {"interval_s": 1000, "cost_s": 20, "mtbf_s": 100000}})
    f = o["failure"]
    assert (f["whole_round_redo_s"], f["keep_trajectories_s"], f["saved_s"]) == (790, 490, 300)
    assert f["checkpoint_overhead_fraction"] == pytest.approx(0.0083, abs=5e-5)
    c = o["checkpoint"]
    assert c["young_interval_s"] == pytest.approx(2000)
    assert c["waste_fraction_at_young"] <= c["expected_waste_fraction"]


@settings(max_examples=40)
@given(cost=st.floats(1, 100), mtbf=st.floats(1e4, 1e7), f=st.floats(0.2, 5))
def test_young_interval_is_near_optimal(cost, mtbf, f):
    young = math.sqrt(2 * cost * mtbf)
    a = calc("rl-recovery", {"checkpoint": {"interval_s": young, "cost_s": cost, "mtbf_s": mtbf}})["checkpoint"]["expected_waste_fraction"]
    b = calc("rl-recovery", {"checkpoint": {"interval_s": young * f, "cost_s": cost, "mtbf_s": mtbf}})["checkpoint"]["expected_waste_fraction"]
    assert a <= b + 1e-12


def test_preemption_migration_and_batch_trim():
    o = calc("rl-recovery", {"preemption": {"received_tokens": [8000], "decode_tokens_per_s": 80, "prefix_prepare_s": 2, "handoff_s": 1}})["preemption"]
    assert o["redo_from_scratch_s"] == [100] and o["migration_saved_s"] == [97]
    t = calc("rl-recovery", {"preemption": {"received_tokens": [4000, 1000], "decode_tokens_per_s": 80}})["preemption"]
    assert t["batch_trim_kept_tokens"] == 1000 and t["batch_trim_redo_tokens"] == [3000, 0] and t["batch_trim_redo_s"] == 37.5


def test_rollout_tail_race_and_oversampling():
    o = calc("rl-rollout-tail", {"long_fraction": 0.5, "short_s": 1, "long_s": 10, "race_copies": 2,
                                 "oversample": {"prompts": 128, "responses_per_prompt": 8, "prompt_factor": 1.25, "response_factor": 1.25}})
    assert (o["kept_long_fraction"], o["single_expected_s"], o["race_expected_s"], o["race_slot_s"]) == (0.25, 5.5, 3.25, 6.5)
    ov = o["oversample"]
    assert (ov["submitted"], ov["target"], ov["extra_fraction"]) == (1600, 1024, 0.5625)


@settings(max_examples=60)
@given(p=st.floats(0, 1), n=st.integers(1, 10**6), r=st.integers(1, 8))
def test_tail_invariants(p, n, r):
    o = calc("rl-rollout-tail", {"long_fraction": p, "short_s": 1, "long_s": 10, "race_copies": r, "batch": n})
    assert 1 - 1e-9 <= o["race_expected_s"] <= o["single_expected_s"] + 1e-9 <= o["batch_expected_wall_s"] + 2e-9
    assert o["batch_expected_wall_s"] <= 10 + 1e-9


def test_policy_ratios():
    o = calc("rl-policy-ratio", {"logp_current": -3.0, "logp_behavior": -3.0, "logp_old": -3.25, "clip_epsilon": 0.2})
    assert o["behavior_ratio"] == 1
    assert o["update_ratio"] == pytest.approx(1.2840, abs=5e-5) and o["behavior_weight"] == pytest.approx(0.7788, abs=5e-5)
    assert o["product"] == pytest.approx(1)
    assert o["update_ratio_outside"] is True and o["behavior_ratio_outside"] is False


@given(cur=st.floats(-50, 0), old=st.floats(-50, 0), beh=st.floats(-50, 0))
def test_decoupled_product_equals_behavior_ratio(cur, old, beh):
    o = calc("rl-policy-ratio", {"logp_current": cur, "logp_behavior": beh, "logp_old": old})
    assert o["product"] == pytest.approx(o["behavior_ratio"], rel=1e-9)


def test_validation():
    with pytest.raises(CalcInputError):
        calc("rl-pipeline", {})
    with pytest.raises(CalcInputError):
        calc("rl-pipeline", {"generator_samples_per_s": 3})
    with pytest.raises(ValidationError):
        calc("rl-pipeline", {"generator_samples_per_s": 0, "learner_samples_per_s": 1})
    with pytest.raises(ValidationError):
        calc("rl-pipeline", {"generator_samples_per_s": 1, "learner_samples_per_s": 1, "reject_fraction": 1.5})
    with pytest.raises(CalcInputError):
        calc("rl-pipeline", {"coschedule": {"jobs": JOBS, "mixes": [{"counts": {"C": 1}}]}})
    with pytest.raises(CalcInputError):
        calc("rl-recovery", {"failure": {"rollout_s": 1, "train_s": 1, "fail_after_s": 2}})
    with pytest.raises(CalcInputError):
        calc("rl-rollout-tail", {"long_fraction": 0.5})
    with pytest.raises(ValidationError):
        calc("rl-policy-ratio", {"logp_current": 0.5, "logp_behavior": -1})
    with pytest.raises(ValidationError):
        calc("rl-policy-ratio", {"logp_current": [-1.0] * 100_001, "logp_behavior": -1})
    with pytest.raises(ValidationError):
        calc("rl-policy-ratio", {"logp_current": -1, "logp_behavior": 1})


# --------------------------------------------------------------------------- schema-fuzzing regressions

def as_json(name, body):
    """What the API does with a request: validate, compute, serialise with orjson (which refuses integers
    beyond 64 bits and would turn such an answer into a 500)."""
    import orjson
    _, _, r = run(name, body, no_lookup)
    return orjson.loads(orjson.dumps({"outputs": r.outputs, "steps": [s.as_dict() for s in r.steps]},
                                     option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))["outputs"]


TAIL = {"batch": 1, "long_fraction": 0.5, "long_s": 10, "race_copies": 1, "short_s": 1,
        "oversample": {"prompt_factor": 1, "prompts": 128, "response_factor": 1.25, "responses_per_prompt": 8}}


@pytest.mark.parametrize("path, value", [
    (("oversample", "response_factor"), 1e30),   # the fuzzed request: ceil(8 × 1e30) is not a 64-bit integer
    (("oversample", "prompt_factor"), 100.5),
    (("oversample", "responses_per_prompt"), 10**4 + 1),
    (("oversample", "prompts"), 10**9 + 1),
    (("race_copies",), 1025),
    (("batch",), 10**9 + 1),
])
def test_rollout_tail_bounds_are_enforced(path, value):
    # The bounds used to be written as Field(le=...) next to PosInt/PosFloat, which pydantic silently ignores.
    body = {**TAIL, "oversample": dict(TAIL["oversample"])}
    (body["oversample"] if len(path) == 2 else body)[path[-1]] = value
    with pytest.raises(ValidationError) as e:
        calc("rl-rollout-tail", body)
    assert e.value.errors()[0]["loc"] == path


def test_rollout_tail_at_the_largest_accepted_inputs_answers():
    body = {**TAIL, "race_copies": 1024, "batch": 10**9,
            "oversample": {"prompts": 10**9, "responses_per_prompt": 10**4, "prompt_factor": 100, "response_factor": 100}}
    o = as_json("rl-rollout-tail", body)
    assert o["oversample"]["submitted"] == 10**11 * 10**6
    assert o["oversample"]["extra_fraction"] == pytest.approx(100 * 100 - 1)


def test_policy_ratio_beyond_float_range_is_null_not_an_error():
    # exp(−3.25 − (−9999)) overflows float64: math.exp raised OverflowError (a 500); now the weight is null.
    o = as_json("rl-policy-ratio", {"logp_current": [-3.5, -3.25, -3.0, -2.75], "logp_behavior": -9999.0,
                                    "logp_old": -3.25, "clip_epsilon": 0.2})
    assert o["behavior_weight"] is None
    assert o["update_ratio"][1] == pytest.approx(1.0)
    assert all(v is None for v in o["behavior_ratio"])
    assert o["behavior_ratio_outside"] == [True] * 4
