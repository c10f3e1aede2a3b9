"""What a calculator is: the record each family module declares in its `CALCULATORS` list.

Kept apart from the registry so that family modules can import it without loading every other
family (the registry imports the families; the families import only this module).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from calculators.core import Lookup, Result


@dataclass(frozen=True)
class Chart:
    """How the site draws a sweep of this calculator: y output(s) against x input."""

    x: str                      # request field swept along the x axis
    y: tuple[str, ...]          # output keys (lists) drawn as lines / stacked parts
    kind: str = "line"          # line | stacked-bar
    x_label: str = ""
    y_label: str = ""
    marker: str | None = None   # output key holding an x value to mark (e.g. a break-even)


@dataclass(frozen=True)
class Calculator:
    """One calculator: its URL name, request model, compute function, example and the cases behind it."""

    name: str                                   # URL name, e.g. "kv-cache"
    family: str                                 # derivation family it recomputes, e.g. "kv_sizing"
    title: str                                  # short human title
    summary: str                                # one or two sentences: what and why
    request_model: type[BaseModel]
    compute: Callable[[Any, Lookup], Result]
    example: dict                               # a full, valid request body
    cases: tuple[str, ...] = ()                 # slugs of the cases that explain the method
    sweepable: tuple[str, ...] = ()             # request fields that accept a list
    outputs_model: type[BaseModel] | None = None
    chart: Chart | None = None
    families: tuple[str, ...] = ()              # further derivation families it covers
    description: str = ""                       # longer text for docs and the site (method, limits)
    extra_examples: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def operation_id(self) -> str:
        return self.name.replace("-", "_")
