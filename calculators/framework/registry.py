"""The one table of calculators that the API, the CLI, the site and MCP all read.

Every module under `calculators/families/` declares `CALCULATORS = [Calculator(...), ...]`; this module
walks that package and collects them in the order of their module names (the topic package does not
count, so the list reads as it did when the modules lay flat), so adding a
calculator is adding a module: there is no list to keep. Family modules import `calculators.framework`,
never this module, so loading the table has no import cycle.
"""
from __future__ import annotations

import importlib
import pkgutil

from calculators.framework.calculator import Calculator, Chart

__all__ = ["REGISTRY", "Calculator", "Chart", "get"]


def _discover() -> dict[str, Calculator]:
    import calculators.families as families

    table: dict[str, Calculator] = {}
    for info in sorted(pkgutil.walk_packages(families.__path__, "calculators.families."), key=lambda m: m.name.rpartition(".")[2]):
        if info.ispkg or info.name.rpartition(".")[2].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for calc in getattr(module, "CALCULATORS", []):
            if calc.name in table:
                raise RuntimeError(f"calculator {calc.name!r} registered twice")
            table[calc.name] = calc
    return table


REGISTRY: dict[str, Calculator] = _discover()


def get(name: str) -> Calculator:
    return REGISTRY[name]
