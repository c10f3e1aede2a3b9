"""The one table of calculators that the API, the CLI, the site and MCP all read.

Each family module under `calculators/` declares `CALCULATORS = [Calculator(...), ...]`; this
module collects them in file-name order, so adding a family is adding a module. Family modules
import `calculators.base`, never this module, so loading the table has no import cycle.
"""
from __future__ import annotations

import importlib
import pkgutil

from calculators.base import Calculator, Chart

__all__ = ["REGISTRY", "Calculator", "Chart", "get"]

#: modules of the package that hold shared machinery, not calculators
INFRASTRUCTURE = {"base", "core", "registry", "runner", "specs", "formats", "architecture", "hf_config", "link_fit",
                  "measured", "measured_tables", "measured_step", "measured_estimate"}


def _discover() -> dict[str, Calculator]:
    import calculators

    table: dict[str, Calculator] = {}
    for info in sorted(pkgutil.iter_modules(calculators.__path__), key=lambda m: m.name):
        if info.name in INFRASTRUCTURE or info.name.startswith("_"):
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
