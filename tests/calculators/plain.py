"""`runner.compute` for tests that compare outputs with Python lists and numbers.

A sweep's outputs stay NumPy arrays in the Result until the wire (`tests/calculators/test_wire.py` checks that);
these tests check the numbers, so they read the outputs as `jsonable` gives them: the values the JSON answer holds.
"""
from __future__ import annotations

from typing import Any

from calculators.framework import Lookup, jsonable, no_lookup
from calculators.framework.runner import compute as compute_arrays


def compute(name: str, body: Any, lookup: Lookup = no_lookup):
    """(calculator, request, result) with `result.outputs` as plain Python values (lists, not arrays)."""
    calc, request, result = compute_arrays(name, body, lookup)
    result.outputs = jsonable(result.outputs)
    return calc, request, result
