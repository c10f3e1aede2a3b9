"""SGLang's dual-stream MoE (calculators.perf.dual_stream_hidden_s): with expert parallelism SGLang does not fuse a
DeepSeek-style model's shared experts into the routed kernel and, in decode steps of at most 1,024 tokens, runs them
on a second CUDA stream beside the router and routed experts, so such a step takes the longer of the two paths.
Summed as serial kernels, InferenceX's SGLang EP runs on B300 came out 15 % slow at the median."""
from __future__ import annotations

import numpy as np
import pytest

from calculators.perf import DUAL_STREAM_TOKENS, Split, dual_stream_hidden_s, load_system, measured_of, step_ops


def _step(lookup, framework, ep, dp_attention=False, batch=(1.0, 32.0, 1024.0, 2048.0)):
    from calculators.domain import hardware_spec, layout_of, resolve_format
    from calculators.families.serving._plan_search import weight_formats
    from calculators.families.serving.serving_estimate import model_record
    from calculators.framework import Result

    class Req:
        model, model_config, hf_config, weight_format = "deepseek-r1", None, None, "nvfp4"
    rec = model_record(Req(), lookup, Result(inputs={}, outputs={}))
    wf, _ = weight_formats(rec, "nvfp4")
    system = load_system(lookup, "b300_sxm", hardware_spec(lookup, "b300-sxm"), framework=framework)
    ops = step_ops(layout_of(rec), "decode", np.asarray(batch), 1, 1536, Split(tp=8, ep=ep, dp_attention=dp_attention),
                   wf, resolve_format("fp8", "kv_format"))
    return ops, measured_of(ops, system, framework)


def test_sglang_under_expert_parallelism_hides_the_shorter_path_up_to_the_token_threshold(lookup):
    ops, est = _step(lookup, "sglang", 8)
    hidden = dual_stream_hidden_s(ops, est, "sglang")
    shared = est.parts_s["shared_gate_up"] + est.parts_s["shared_down"]
    routed = est.parts_s["router"] + est.parts_s["moe_experts"]
    tokens = np.asarray(ops.batch)
    assert np.all(hidden[tokens <= DUAL_STREAM_TOKENS] > 0)
    assert hidden[tokens <= DUAL_STREAM_TOKENS] == pytest.approx(np.minimum(shared, routed)[tokens <= DUAL_STREAM_TOKENS])
    assert np.all(hidden[tokens > DUAL_STREAM_TOKENS] == 0)          # a step of 2,048 tokens runs them in series
    assert np.all(hidden < np.asarray(est.total_s))


@pytest.mark.parametrize("framework, ep, dpa", [("sglang", 1, False), ("sglang", 8, True), ("trtllm", 8, False),
                                                ("vllm", 8, False)])
def test_nothing_is_hidden_where_sglang_fuses_or_another_engine_runs_it(lookup, framework, ep, dpa):
    ops, est = _step(lookup, framework, ep, dpa)
    assert np.all(dual_stream_hidden_s(ops, est, framework) == 0)


def test_serving_estimate_says_so_and_its_decode_step_is_the_measured_sum_less_the_hidden_part(lookup):
    from tests.calculators.plain import compute as run

    body = {"model": "deepseek-r1", "hardware": "b300-sxm", "framework": "sglang", "tp": 8, "ep": 8,
            "weight_format": "nvfp4", "kv_format": "fp8", "input_tokens": 1024, "output_tokens": 1024,
            "concurrency": 32, "calibration": "none"}
    res = run("serving-estimate", body, lookup)[2]
    assert any("second CUDA stream" in a for a in res.assumptions)
    assert not any("second CUDA stream" in a for a in run("serving-estimate", {**body, "ep": 1}, lookup)[2].assumptions)
    from calculators.domain import hardware_spec
    from calculators.framework import Result
    from calculators.perf import collectives_s, tp_link

    ops, est = _step(lookup, "sglang", 8, batch=(1.0,))
    link, _ = tp_link(lookup, Result(inputs={}, outputs={}), None, hardware_spec(lookup, "b300-sxm"), 8)
    kernels = float(np.asarray(est.total_s)[0] - np.asarray(est.comm_s)[0])
    hidden = float(dual_stream_hidden_s(ops, est, "sglang")[0])
    # D(1) = the measured kernels − the hidden path + the link's collectives, at batch 1 and the mean context
    d1 = res.outputs["step_curve"]["decode_step_s"][0]
    assert d1 == pytest.approx(kernels - hidden + float(collectives_s(ops, link)[0]), rel=1e-9)
