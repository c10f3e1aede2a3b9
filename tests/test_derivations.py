"""Every bound worked example is recomputed by its calculator; printed values match at the book's rounding."""
from __future__ import annotations

import pytest

from calculators.framework import registry
from knowledge.derivations import audit, printed_checks, recompute
from knowledge.loader import default_catalog

ALL = default_catalog().records.get("derivation", [])
BOUND = [d for d in ALL if d.get("calculator")]


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


# ---------------------------------------------------------------------------- the rules R1–R4 (issue 15)
# `python -m knowledge.derivations --audit [family.yaml ...]` prints the same violations.

def _violations(derivation, *rules):
    return [f"{r} {m}" for r, m in audit(derivation).violations if r in rules]


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_every_printed_number_is_checked_or_excused(derivation):
    """R1: each number of `printed` is read by a check (by `printed_key` or by value), or its entry is in
    `unchecked` with the reason."""
    bad = _violations(derivation, "R1")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_checks_are_as_precise_as_the_book(derivation):
    """R2: a check passes, keeps the decimals the book prints, is at most 5 % wide (else `coarse`), scale > 0."""
    bad = _violations(derivation, "R2")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_no_check_reads_an_echoed_request_field(derivation):
    """R3: an output that is a request field passed through proves nothing."""
    bad = _violations(derivation, "R3")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("derivation", ALL, ids=[d["id"] for d in ALL])
def test_unbound_examples_say_why(derivation):
    """R4: an example without a calculator has `unbound_reason`; a bound one has none."""
    bad = _violations(derivation, "R4")
    assert not bad, "\n".join(bad)
