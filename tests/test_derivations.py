"""Every bound worked example is recomputed by its calculator; printed values match at the book's rounding."""
from __future__ import annotations

import pytest

from calculators import registry
from knowledge.derivations import printed_checks, recompute
from knowledge.loader import default_catalog

BOUND = [d for d in default_catalog().records.get("derivation", []) if d.get("calculator")]


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_bound_derivation_recomputes(derivation, lookup):
    assert derivation["calculator"] in registry.REGISTRY, f"unknown calculator {derivation['calculator']}"
    assert derivation.get("expected"), "a bound derivation needs at least one expected output"
    checks = recompute(derivation, lookup)
    bad = [c for c in checks if not c.ok]
    assert not bad, "; ".join(f"{c.path}: expected {c.expected!r}, got {c.got!r} {c.message}" for c in bad)


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_printed_values_match_expected(derivation):
    bad = [c for c in printed_checks(derivation) if not c.ok]
    assert not bad, "; ".join(f"{c.path}: expected {c.expected!r} does not print as {c.got!r} {c.message}" for c in bad)


def test_enough_derivations_are_stored():
    assert len(default_catalog().records["derivation"]) >= 300
