"""Every calculator declares a typed outputs model, and what it answers validates against that model.

The API publishes a calculator's `outputs_model` as its response schema (OpenAPI, generated clients) and MCP
describes the outputs from it, so a model that misses a key, types one wrongly or takes any key it is given
misleads every client. Checked for every calculator in the registry, on its example, its extra examples and every
bound worked example (knowledge/data/derivations/*.yaml) that names it: the outputs as the JSON answer holds them
(`jsonable`: lists, not arrays; null for non-finite numbers; a grid request's outputs on its grid).

A calculator without a model fails `test_declares_an_outputs_model` only; its validation cases are skipped, so
the missing models are listed once, by name.
"""
from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, ValidationError

from calculators.framework import jsonable, on_grid
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import compute
from knowledge.loader import default_catalog

BOUND = [d for d in default_catalog().records.get("derivation", []) if d.get("calculator")]


def _bodies() -> list:
    """(calculator, body) for every example, extra example and bound worked example, ids naming the source."""
    cases = []
    for name, calc in REGISTRY.items():
        cases.append(pytest.param(name, calc.example, id=f"{name}:example"))
        cases += [pytest.param(name, body, id=f"{name}:example{i}") for i, body in enumerate(calc.extra_examples, 2)]
        cases += [pytest.param(name, d["request"], id=f"{name}:{d['id']}") for d in BOUND if d["calculator"] == name]
    return cases


def _model(name: str) -> type[BaseModel]:
    model = REGISTRY[name].outputs_model
    assert model is not None, f"{name} declares no outputs model"
    return model


def _answer(name: str, body, lookup) -> dict:
    """The outputs of `body` as the JSON answer holds them."""
    _, _, result = compute(name, body, lookup)
    outputs = result.outputs if result.grid_shape is None else on_grid(result.outputs, result.grid_shape)
    return jsonable(outputs)


def _nested_models(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and every model its fields hold (in unions, lists and maps), each once."""
    found: list[type[BaseModel]] = []

    def visit(tp) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp not in found:
                found.append(tp)
                for f in tp.model_fields.values():
                    visit(f.annotation)
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(model)
    return found


@pytest.mark.parametrize("name", list(REGISTRY))
def test_declares_an_outputs_model(name):
    assert REGISTRY[name].outputs_model is not None, f"{name} has no outputs_model: its outputs are untyped in the API"


@pytest.mark.parametrize("name,body", _bodies())
def test_outputs_validate_against_the_model(name, body, lookup):
    model = _model(name)
    model.model_validate(_answer(name, body, lookup))


@pytest.mark.parametrize("name", list(REGISTRY))
def test_an_undocumented_output_is_refused(name, lookup):
    model = _model(name)
    outputs = _answer(name, REGISTRY[name].example, lookup)
    with pytest.raises(ValidationError, match="undocumented_output"):
        model.model_validate({**outputs, "undocumented_output": 1})
    loose = [m.__name__ for m in _nested_models(model) if m.model_config.get("extra") != "forbid"]
    assert not loose, f"models of {name} that take any key: {loose}"

