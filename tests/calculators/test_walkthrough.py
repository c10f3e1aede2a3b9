"""The walk-through of calculators/CONTRIBUTING.md, followed literally: a new module `hbm_fill.py` in
`calculators/families/memory/`, written only with the faces (`calculators.framework`, `calculators.domain`), is found
by the registry with no other edit, is run by the runner and wrapped in the envelope like any other, and validates against its outputs
model. The module is written to a temporary folder added to the topic package's path, so the tree is not touched.
"""
from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

MODULE = textwrap.dedent('''
    """`hbm-fill`: how much of one device's usable memory a model's weights and the KV cache of one request fill."""
    from __future__ import annotations

    import numpy as np
    from pydantic import BaseModel, ConfigDict, Field

    from calculators.domain import (
        MODEL_CONFIG_FIELD, explain_memory_rule, groups_from_model, hardware_spec, kv_sizes, model_record,
        model_weight_bytes, note_scope, resolve_format,
    )
    from calculators.framework import Calculator, CalcRequest, Lookup, NonNegInt, Result, request_inputs


    class HbmFillRequest(CalcRequest):
        model: str | None = Field(None, min_length=1, max_length=100, description="Model id.", examples=["qwen3-8b"])
        hf_config: dict | None = MODEL_CONFIG_FIELD
        hardware: str = Field(description="Hardware id.", examples=["h100-sxm"])
        tokens: NonNegInt = Field(description="Tokens of one request's history.", examples=[8192])


    class HbmFillOutputs(BaseModel):
        model_config = ConfigDict(extra="forbid")
        usable_bytes: float = Field(description="Usable memory of one device, B.")
        weight_bytes: float = Field(description="Weights in their published format, B.")
        kv_bytes: float = Field(description="KV cache of one request, B.")
        fill: float = Field(description="(weights + KV) / usable memory.")


    def compute(req: HbmFillRequest, lookup: Lookup) -> Result:
        res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
        rec = model_record(req, lookup, res)
        hw = hardware_spec(lookup, req.hardware)
        note_scope(res, hw)
        usable = float(explain_memory_rule(res, hw.require("memory_bytes", "hardware"), None, None))
        weights = float(model_weight_bytes(rec, None, res))
        bf16, fp32 = resolve_format("bf16", "kv_format"), resolve_format("fp32", "state_format")
        kv = float(kv_sizes(groups_from_model(rec, res, "model"), bf16, fp32, np.asarray(req.tokens)).bytes_per_request)
        res.outputs = {"usable_bytes": usable, "weight_bytes": weights, "kv_bytes": kv,
                       "fill": (weights + kv) / usable}
        res.headline = f"Weights and one request fill {res.outputs['fill']:.0%} of a device."
        return res


    CALCULATORS = [Calculator(
        name="hbm-fill", family="kv_sizing", title="HBM fill", summary="Weights plus one request's KV against a device.",
        request_model=HbmFillRequest, compute=compute, example={"model": "qwen3-8b", "hardware": "h100-sxm", "tokens": 8192},
        outputs_model=HbmFillOutputs,
    )]
''')


@pytest.fixture()
def new_calculator(tmp_path, monkeypatch):
    from calculators.families import memory
    from calculators.framework import registry

    (tmp_path / "hbm_fill.py").write_text(MODULE)
    monkeypatch.setattr(memory, "__path__", [*memory.__path__, str(tmp_path)])
    table = registry._discover()
    yield table
    sys.modules.pop("calculators.families.memory.hbm_fill", None)
    importlib.invalidate_caches()


def test_the_registry_finds_a_new_module_without_other_edits(new_calculator, lookup):
    from calculators.framework import registry

    assert "hbm-fill" in new_calculator and len(new_calculator) == len(registry.REGISTRY) + 1
    calc = new_calculator["hbm-fill"]
    result = calc.compute(calc.request_model.model_validate(calc.example), lookup)
    calc.outputs_model.model_validate(result.outputs)
    assert result.outputs["kv_bytes"] == 147456 * 8192          # Qwen3-8B: 144 KiB per token in BF16
    assert 0 < result.outputs["fill"] < 1 and result.headline.endswith(".")


def test_the_runner_and_the_envelope_serve_it_once_registered(new_calculator, lookup, monkeypatch):
    """Registered in the table the front ends read, the runner and the envelope serve it like any other."""
    from api.envelope import run
    from calculators.framework import registry

    monkeypatch.setitem(registry.REGISTRY, "hbm-fill", new_calculator["hbm-fill"])
    env = run("hbm-fill", {"model": "qwen3-8b", "hardware": "h100-sxm", "tokens": 8192}, lookup)
    assert env["calculator"] == "hbm-fill" and env["explanation_url"].startswith("/calculators/hbm-fill?body=")
    assert env["outputs"]["kv_bytes"] == 147456 * 8192
