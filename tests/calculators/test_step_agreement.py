"""One deployment, one step time: every calculator that times a model step answers the same one (issue #24, item 5).

Llama-3.1-70B on 4 × H100 SXM (TP 4, batch 8, 2,048 tokens of context, BF16 as published) is asked through
roofline (`devices: 4`), serving-cost, the deployment planner, parallel-split, tp-overhead and speculative
decoding's target step; Qwen3-235B-A22B at TP 8 / EP 8 on H200 through the calculators that take an
expert-parallel degree. Per estimate kind (peak-rate bound, measured kernels) the answers must agree within 1 %.

The step time is one rank's kernels plus the step's tensor-parallel all-reduces over the hardware's link (α–β of
the measured all-reduce fit), the way the planner adds them. roofline times the kernels only (its bound has no
link; its measured estimate carries the all-reduce table's own time, `measured_parts_s.allreduce`), so its step is
its kernels plus tp-overhead's all-reduces: that pair is compared like the others. Nothing here states a step time:
the calculators are only compared with each other.
"""
from __future__ import annotations

import pytest

from tests.calculators.plain import compute as run  # outputs as plain values

TOLERANCE = 0.01

DENSE = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "batch": 8, "context": 2048}
MOE = {"model": "gpt-oss-120b", "hardware": "h100-sxm", "tp": 2, "ep": 2, "batch": 4, "context": 2048}


def _out(name, body, lookup):
    return run(name, body, lookup)[2].outputs


def _plan(d, lookup, estimate):
    """The planner's candidate at the deployment's split and batch; its decode step is taken at the mean context
    input + output // 2, so input = context − 1 and output = 2 put it at the deployment's context."""
    body = {"model": d["model"], "hardware": [d["hardware"]], "tp": [d["tp"]], "batch": [d["batch"]],
            "ep": [d.get("ep", 1)], "arrival_rate_per_s": 1, "input_tokens": d["context"] - 1, "output_tokens": 2,
            "ttft_s": 60, "tpot_s": 1, "mode": "aggregated", "estimate": estimate}
    rows = [c for c in _out("deployment-plan", body, lookup)["candidates"]
            if (c["tp"], c["ep"], c["pp"], c["batch"]) == (d["tp"], d.get("ep", 1), 1, d["batch"])
            and not c.get("dp_attention")]           # plain TP, not attention data parallelism
    assert len(rows) == 1
    return rows[0]["decode_step_s"]


def _step_model_answers(d, lookup) -> dict[str, dict[str, float]]:
    """{calculator: {"bound": s, "measured": s}} from the calculators that take tp and ep."""
    ep = d.get("ep", 1)
    tpo = _out("tp-overhead", {"model": d["model"], "hardware": d["hardware"], "tp": d["tp"], "ep": ep,
                               "tokens": d["batch"], "context_tokens": d["context"]}, lookup)
    cost = _out("serving-cost", {"model": d["model"], "hardware": d["hardware"], "tp": d["tp"], "ep": ep,
                                 "batch": d["batch"], "context_tokens": d["context"], "target_tokens_per_s": 1000,
                                 "price_per_device_hour_usd": 3.0}, lookup)
    spec = _out("speculative-decoding", {"acceptance_rate": 0.7, "draft_tokens": 1, "model": d["model"],
                                         "hardware": d["hardware"], "tp": d["tp"], "ep": ep, "batch": d["batch"],
                                         "context_tokens": d["context"]}, lookup)["target_step"]
    answers = {
        "tp-overhead": {"bound": tpo["step_time_s"], "measured": tpo["measured_step_time_s"]},
        "serving-cost": {"bound": cost["step_time_s"], "measured": cost["measured_time_s"]},
        "speculative-decoding target step": {"bound": spec["bound_s"], "measured": spec["measured_s"]},
        "deployment-plan": {"bound": _plan(d, lookup, "bound"), "measured": _plan(d, lookup, "measured")},
    }
    assert cost["step_basis"] == "step model" and cost["devices_per_replica"] == d["tp"]
    assert spec["estimate"] == "measured" and spec["step_s"] == spec["measured_s"]
    return answers, tpo


def _assert_agree(answers: dict[str, dict[str, float]]) -> None:
    for kind in ("bound", "measured"):
        got = {name: a[kind] for name, a in answers.items()}
        assert all(v is not None and v > 0 for v in got.values()), got
        lo, hi = min(got.values()), max(got.values())
        assert hi / lo - 1 <= TOLERANCE, f"{kind} step times disagree by {100 * (hi / lo - 1):.2f} %: {got}"
    for name, a in answers.items():
        assert a["measured"] >= a["bound"], name        # the bound is a lower bound of the same step


@pytest.fixture(scope="module")
def dense(lookup):
    answers, tpo = _step_model_answers(DENSE, lookup)
    d = DENSE
    roof = _out("roofline", {"model": d["model"], "hardware": d["hardware"], "devices": d["tp"], "batch": d["batch"],
                             "context_tokens": d["context"], "estimate": "both"}, lookup)
    comm = tpo["total_s"]
    answers["roofline + tp-overhead"] = {
        "bound": roof["time_s"] + comm,
        "measured": roof["measured_time_s"] - roof["measured_parts_s"].get("allreduce", 0.0) + comm,
    }
    split = _out("parallel-split", {"model": d["model"], "hardware": d["hardware"], "link": "nvlink4",
                                    "tp": [d["tp"]], "batch": d["batch"], "context_tokens": d["context"]}, lookup)
    cand = next(c for c in split["candidates"] if c["tp"] == d["tp"])
    answers["parallel-split"] = {"bound": cand["step_time_s"], "measured": cand["measured_step_time_s"]}
    return answers, tpo


def test_dense_deployment_has_one_step_time(dense):
    answers, _ = dense
    _assert_agree(answers)


def test_dense_communication_is_the_same_link_time(dense):
    """The all-reduces every step-model calculator adds are tp-overhead's: the planner's bound minus serving-cost's
    kernels, and speculative's comm, equal tp-overhead's total."""
    answers, tpo = dense
    assert tpo["compute_time_s"] + tpo["total_s"] == pytest.approx(tpo["step_time_s"], rel=1e-12)
    assert answers["deployment-plan"]["bound"] - tpo["compute_time_s"] == pytest.approx(tpo["total_s"], rel=1e-6)
    assert tpo["allreduces"] > 0 and tpo["comm_share"] < 0.5


def test_moe_deployment_with_expert_parallelism_has_one_step_time(lookup):
    answers, tpo = _step_model_answers(MOE, lookup)
    _assert_agree(answers)
    assert tpo["allreduces"] > 0
