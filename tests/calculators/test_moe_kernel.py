"""serving-estimate's `moe_kernel`: the MoE kernel family an engine was launched with, when its own measured table
holds another. TensorRT-LLM's table measures FP8 block-scale MoE with DeepGEMM only; InferenceX launches DeepSeek-R1
on B200 with `moe_config: backend: TRTLLM`, TensorRT-LLM's generated kernels, which SGLang's and vLLM's tables measure
through FlashInfer. Read with DeepGEMM the TPOT came out 40-90 % above the published runs."""
from __future__ import annotations

import numpy as np
import pytest

from calculators.framework import CalcInputError
from tests.calculators.plain import compute as run

R1 = {"model": "deepseek-r1", "hardware": "b200-sxm", "framework": "trtllm", "tp": 8, "kv_format": "fp8",
      "input_tokens": 1024, "output_tokens": 1024, "concurrency": 4, "calibration": "none"}


def test_the_borrowed_table_keeps_only_rows_of_the_kernel_family(lookup):
    from calculators.domain import hardware_spec
    from calculators.perf import load_system, moe_kernel
    from calculators.perf.measured_tables import moe_kernel_sources

    system = load_system(lookup, "b200_sxm", hardware_spec(lookup, "b200-sxm"), framework="trtllm")
    assert moe_kernel_sources(system.tables["moe_perf"], "fp8_block") == ["deepgemm"]
    borrowed, fw = system.with_moe_kernels("trtllm", "fp8_block")
    assert fw == "sglang" and borrowed.framework == "trtllm"
    kinds = moe_kernel_sources(borrowed.tables["moe_perf"])
    assert kinds and all("trtllm" in k for k in kinds)
    assert system.tables["moe_perf"] is not borrowed.tables["moe_perf"]       # the original is untouched
    tokens = np.array([1.0, 4.0, 32.0])
    own, _ = moe_kernel(system, tokens, 7168, 2048, 8, 256, 8, 1, "fp8_block", None)
    gen, _ = moe_kernel(borrowed, tokens, 7168, 2048, 8, 256, 8, 1, "fp8_block", None)
    assert np.all(gen < own)       # the generated kernels beat DeepGEMM at TP-sharded decode sizes


def test_moe_kernel_changes_only_the_moe_and_says_where_its_times_come_from(lookup):
    own = run("serving-estimate", R1, lookup)[2]
    gen = run("serving-estimate", {**R1, "moe_kernel": "trtllm"}, lookup)[2]
    assert gen.outputs["tpot_s"]["mean"] < own.outputs["tpot_s"]["mean"]
    # the floor is kernel-free: it moves only with the decode batch the faster steps leave running
    assert gen.outputs["bound_tpot_s"] == pytest.approx(own.outputs["bound_tpot_s"], rel=0.01)
    assert gen.outputs["kv_capacity_requests"] == own.outputs["kv_capacity_requests"]
    assert any("sglang table's rows" in a for a in gen.assumptions)
    assert not any("MoE kernels:" in a for a in own.assumptions)


def test_moe_kernel_on_a_dense_model_or_where_nobody_measured_it_is_a_4xx_naming_the_field(lookup):
    for body in ({**R1, "model": "llama-3.1-70b", "moe_kernel": "trtllm"},
                 {**R1, "hardware": "h200-sxm", "moe_kernel": "trtllm"}):
        with pytest.raises(CalcInputError) as exc:
            run("serving-estimate", body, lookup)
        assert exc.value.loc == ("moe_kernel",) and exc.value.status == 422


def test_moe_kernel_on_a_bound_estimate_says_it_changes_nothing(lookup):
    a = run("serving-estimate", {**R1, "estimate": "bound"}, lookup)[2]
    b = run("serving-estimate", {**R1, "estimate": "bound", "moe_kernel": "trtllm"}, lookup)[2]
    assert a.outputs["tpot_s"] == b.outputs["tpot_s"]
    assert any("changes nothing" in x for x in b.assumptions)
