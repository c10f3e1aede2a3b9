"""Numbers carry a comma every three digits, so a list of them joined with ", " runs two items together
("10,200,000,000, 652,800,000,000", issue #28 item 5): every list of numbers in an answer's text is joined with
`LIST_SEP` ("; "). This walks the example answer of every calculator (and its extra examples) and fails on a
thousands-grouped number followed by ", " and a digit in any step, assumption or headline."""
from __future__ import annotations

import re

import pytest

from calculators.framework import LIST_SEP, num_list
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import compute

#: a thousands-grouped number, then ", " and another number: the separators collide
COLLISION = re.compile(r"\d{1,3}(?:,\d{3})+, \d")


def _examples():
    for name, calc in sorted(REGISTRY.items()):
        for i, body in enumerate((calc.example, *(calc.extra_examples or ()))):
            yield pytest.param(name, body, id=f"{name}-{i}")


def _texts(result) -> list[tuple[str, str]]:
    """(where, text) of every piece of prose of an answer."""
    out = [("headline", result.headline)] + [(f"assumption {i}", a) for i, a in enumerate(result.assumptions)]
    for s in result.steps:
        out += [(f"step {s.label!r} {part}", str(getattr(s, part))) for part in ("label", "formula", "substituted")]
    return out


def test_the_pattern_catches_the_collision_and_not_the_list_helper():
    assert COLLISION.search(", ".join(["10,200,000,000", "652,800,000,000"]))
    assert COLLISION.search("queue 1,000, link 2,000".replace("link ", ""))
    assert not COLLISION.search(num_list([10_200_000_000, 652_800_000_000]))
    assert LIST_SEP in num_list([1e10, 2e10]) and not COLLISION.search("1,000 B, and 3 more")


@pytest.mark.parametrize("name, body", list(_examples()))
def test_no_answer_text_runs_two_numbers_together(name, body, lookup):
    _, _, result = compute(name, body, lookup)
    bad = [f"{where}: {text}" for where, text in _texts(result) if COLLISION.search(text)]
    assert not bad, "\n".join(bad)
