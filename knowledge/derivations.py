"""Recompute the stored worked examples through their calculators and compare.

Two checks per bound derivation: `expected` against the calculator's outputs (relative 1e-9),
and the book's `printed` numbers (in `checks`) against `expected` at the book's rounding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from calculators import runner
from calculators.core import Lookup

REL_TOL = 1e-9


def resolve_path(outputs: Any, path: str) -> Any:
    """Follow a dotted path ("candidates.1.cost_per_success") through dicts and lists."""
    node = outputs
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                raise KeyError(path)
            node = node[part]
        else:
            raise KeyError(path)
    return node


def close(expected: Any, got: Any, rel: float = REL_TOL) -> bool:
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(close(e, g, rel) for e, g in zip(expected, got))
    if isinstance(expected, (bool, str)) or expected is None:
        return expected == got
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return False
    return math.isclose(float(expected), float(got), rel_tol=rel, abs_tol=1e-12)


@dataclass
class Check:
    path: str
    expected: Any
    got: Any
    ok: bool
    message: str = ""


def recompute(derivation: dict, lookup: Lookup) -> list[Check]:
    """Run a bound derivation's request and compare every `expected` path."""
    _, _, result = runner.compute(derivation["calculator"], derivation["request"], lookup)
    checks = []
    for path, want in (derivation.get("expected") or {}).items():
        try:
            got = resolve_path(result.outputs, path)
        except (KeyError, IndexError, ValueError):
            checks.append(Check(path, want, None, False, "path not in outputs"))
            continue
        checks.append(Check(path, want, got, close(want, got)))
    return checks


def printed_matches(expected: float, printed: float, scale: float = 1.0, decimals: int | None = None,
                    rel: float | None = None) -> bool:
    """Does `expected / scale` print as `printed` at the stated rounding?

    `decimals`: the book shows that many decimal places (half a unit in the last place allowed);
    `rel`: a relative tolerance instead, for values printed with "≈" or significant figures.
    """
    value = expected / scale
    if rel is not None:
        return math.isclose(value, printed, rel_tol=rel)
    if decimals is None:
        decimals = 0
    return abs(value - printed) <= 0.5 * 10 ** (-decimals) + 1e-9 * max(1.0, abs(printed))


def printed_checks(derivation: dict) -> list[Check]:
    out = []
    expected = derivation.get("expected") or {}
    for chk in derivation.get("checks") or []:
        path = chk["path"]
        if path not in expected:
            out.append(Check(path, None, chk.get("printed"), False, "check path has no expected value"))
            continue
        want = expected[path]
        ok = printed_matches(float(want), float(chk["printed"]), float(chk.get("scale", 1.0)),
                             chk.get("decimals"), chk.get("rel"))
        out.append(Check(path, want, chk["printed"], ok))
    return out
