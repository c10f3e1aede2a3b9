"""Ten realistic questions put through a real MCP client (benchmarks/mcp_questions.py asks and
prints them): each is answered, in at most three tool calls, and the answer says what was asked."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "mcp_questions", Path(__file__).resolve().parents[2] / "benchmarks" / "mcp_questions.py")
mcp_questions = importlib.util.module_from_spec(_spec)
sys.modules["mcp_questions"] = mcp_questions   # dataclasses look their module up
_spec.loader.exec_module(mcp_questions)


@pytest.fixture(scope="module")
def asked(live_server):
    return mcp_questions.ask(live_server)


def test_ten_questions_are_answered_in_few_calls(asked):
    size, rows = asked
    assert size <= 40_000
    assert len(rows) == 10
    assert all(1 <= r["calls"] <= 3 for r in rows), [(r["question"], r["calls"]) for r in rows]
    assert sum(r["calls"] for r in rows) <= 16


def test_answers_carry_the_numbers_asked_for(asked):
    _, rows = asked

    def by(start: str) -> str:
        return next(r["answer"] for r in rows if r["question"].startswith(start))
    fit = by("Do 16 requests of L")
    assert re.search(r"\d+ requests fit on 8 × h100-sxm", fit), fit
    assert re.search(r"\$\d", by("Which of two models")), "cost per task in dollars"
    assert "device" in by("Is it faster to ship")
    serving = by("What does serving Ll")
    assert "$" in serving and "batch 1 " not in serving, serving    # the default batch is the one that fits, not 1
    assert "×" in by("What speed-up does s")
    assert re.match(r"\d+ adapters", by("How many rank-16 q/v"))
