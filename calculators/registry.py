"""The one table of calculators that the API, the CLI, the site and MCP all read.

Each family module under `calculators/` declares `CALCULATORS = [Calculator(...), ...]`;
this module collects them in file-name order, so adding a family is adding a module.
"""
from __future__ import annotations

import importlib
import pkgutil
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


def _discover() -> dict[str, Calculator]:
    import calculators

    table: dict[str, Calculator] = {}
    for info in sorted(pkgutil.iter_modules(calculators.__path__), key=lambda m: m.name):
        if info.name in {"core", "registry"} or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"calculators.{info.name}")
        for calc in getattr(module, "CALCULATORS", []):
            if calc.name in table:
                raise RuntimeError(f"calculator {calc.name!r} registered twice")
            table[calc.name] = calc
    return table


REGISTRY: dict[str, Calculator] = _discover()


def get(name: str) -> Calculator:
    return REGISTRY[name]


def run(name: str, body: dict, lookup: Lookup) -> tuple[Calculator, Any, Result]:
    """Validate `body` against the calculator's request model and compute it."""
    calc = REGISTRY[name]
    request = calc.request_model.model_validate(body)
    return calc, request, calc.compute(request, lookup)
