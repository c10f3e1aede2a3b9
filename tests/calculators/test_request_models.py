"""Every calculator request model: the bounds a field declares are the bounds pydantic enforces.

In this pydantic version a constraint given to `Field()` next to a core alias that already carries the same
kind of constraint is silently dropped: `x: PosInt = Field(1, le=64)` accepts 10**15 (PosInt's own le wins).
Bounds must be declared inside the type, `Annotated[int, Field(ge=1, le=64)]`. Schema fuzzing found 500s
behind several such ignored bounds; this test keeps them from coming back.
"""
from __future__ import annotations

import types
import typing
from collections import Counter

import pytest
from pydantic import BaseModel

from calculators.framework.registry import REGISTRY


def _models() -> list[type[BaseModel]]:
    seen: dict[type[BaseModel], None] = {}

    def visit(t) -> None:
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t in seen:
                return
            seen[t] = None
            for f in t.model_fields.values():
                visit(f.annotation)
        for a in typing.get_args(t) or ():
            visit(a)

    for calc in REGISTRY.values():
        visit(calc.request_model)
    return list(seen)


MODELS = _models()


def test_request_models_are_found():
    assert len(MODELS) > len(REGISTRY)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.__module__.rsplit('.', 1)[-1]}.{m.__name__}")
def test_no_declared_bound_is_silently_dropped(model):
    bad = []
    for name, f in model.model_fields.items():
        kinds = Counter(type(m).__name__ for m in f.metadata)
        twice = sorted(k for k, n in kinds.items() if n > 1)
        if twice:
            bad.append(f"{name}: {twice} declared twice ({f.metadata}); one of them is ignored")
        if typing.get_origin(f.annotation) in (typing.Union, types.UnionType) and f.metadata:
            members = [a for a in typing.get_args(f.annotation) if a is not type(None)]
            if len(members) > 1:
                bad.append(f"{name}: {f.metadata} on a union of {len(members)} types applies to some members only")
    assert not bad, "; ".join(bad)


def test_the_check_catches_the_pattern():
    from calculators.framework import CalcRequest, PosInt
    from pydantic import Field

    class Bad(CalcRequest):
        x: PosInt = Field(1, le=64)

    assert Bad(x=10**6).x == 10**6                      # the bound is ignored ...
    assert Counter(type(m).__name__ for m in Bad.model_fields["x"].metadata)["Le"] == 2   # ... and detectable
