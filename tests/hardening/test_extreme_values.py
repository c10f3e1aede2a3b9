"""Subnormal and overflowing inputs are a 422 or a finite (or null) answer, never a 500 (issue 27, finding B).

The audit's schema fuzzing found `speedup` dividing by a rate that underflowed to 0. The sweep below takes every
calculator's example and puts, in turn, each positive number at its top level (the first element of a list of
numbers; the fields of a first-level object, of the first object of a list and of the objects inside it) to the
smallest subnormal, a subnormal, a tiny normal and the largest value a request takes (MAX_VALUE); a property test
then sets a few of them at once (a tiny numerator over a huge denominator, as in the audit's case). Every answer
must be below 500, and a 200 answers finite numbers or null.

NumPy's floating-point warnings ("overflow encountered in …") are errors here: every calculator runs with them off
(the runner's `np.errstate`, as `quiet` does), so a calculation that prints one again fails this test (as a 500).
"""
from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given, settings, strategies as st

from calculators.framework import MAX_VALUE
from calculators.framework.registry import REGISTRY

EXTREMES = (5e-324, 2.2e-311, 1e-300, MAX_VALUE)

#: NumPy's RuntimeWarnings ("overflow encountered in divide", "invalid value encountered in …") raise
pytestmark = pytest.mark.filterwarnings("error:.*encountered in:RuntimeWarning")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def number_paths(example: dict) -> list[tuple]:
    """The paths of the positive numbers of an example, down to the objects inside a first-level list of objects."""
    found: list[tuple] = []
    for k, v in example.items():
        if _number(v):
            found.append((k,))
        elif isinstance(v, list) and v and _number(v[0]):
            found.append((k, 0))
        elif isinstance(v, dict):
            found += [(k, k2) for k2, v2 in v.items() if _number(v2)]
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for k2, v2 in v[0].items():
                if _number(v2):
                    found.append((k, 0, k2))
                elif isinstance(v2, list) and v2 and _number(v2[0]):
                    found.append((k, 0, k2, 0))
                elif isinstance(v2, dict):
                    found += [(k, 0, k2, k3) for k3, v3 in v2.items() if _number(v3)]
    return found


def _with(example: dict, path: tuple, value: float) -> dict:
    body = copy.deepcopy(example)
    at = body
    for p in path[:-1]:
        at = at[p]
    at[path[-1]] = value
    return body


def _finite_or_null(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite_or_null(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite_or_null(v) for v in x)
    return True


def _check(client, name: str, body: dict) -> str | None:
    r = client.post(f"/api/v1/calculators/{name}", json=body)
    if r.status_code >= 500:
        return f"{r.status_code} {r.json().get('detail', '')[:200]}"
    if r.status_code == 200 and not _finite_or_null(r.json()["outputs"]):
        return "a non-finite output"
    return None


def test_the_audit_case_speedup_of_an_underflowing_rate_is_not_a_500(client):
    body = {"pairs": [{"new": {"time_s": 6.15e29, "work": 2.2e-311}, "baseline": {"rate_per_s": 7.26e28}}]}
    r = client.post("/api/v1/calculators/speedup", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"].startswith("pairs[0].new")


def test_a_baseline_rate_that_overflows_is_a_422_naming_the_baseline(client):
    body = {"pairs": [{"new": {"time_s": 1.0}, "baseline": {"time_s": 5e-324}}]}
    r = client.post("/api/v1/calculators/speedup", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "pairs[0].baseline"


def test_a_speedup_that_overflows_is_null_not_a_500(client):
    body = {"pairs": [{"new": {"rate_per_s": 1e30}, "baseline": {"rate_per_s": 1e-300}}]}
    r = client.post("/api/v1/calculators/speedup", json=body)
    assert r.status_code == 200, r.text
    pair = r.json()["outputs"]["pairs"][0]
    assert pair["speedup"] is None and pair["time_reduction"] == 1.0


def absent_number_fields(calc, example: dict) -> list[str]:
    """The top-level fields of a calculator's request that take a number and that `example` leaves out."""
    props = calc.request_model.model_json_schema().get("properties", {})
    return [k for k, p in props.items() if k not in example and "'number'" in str(p)]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_extreme_numbers_anywhere_are_never_a_500(client, name):
    calc = REGISTRY[name]
    failures = []
    for example in (calc.example, *calc.extra_examples):
        variants = [(path, value) for path in number_paths(example) for value in EXTREMES]
        # the optional numbers the example does not set, at both ends
        variants += [((f,), value) for f in absent_number_fields(calc, example) for value in (EXTREMES[0], MAX_VALUE)]
        for path, value in variants:
            if (why := _check(client, name, _with(example, path, value))) is not None:
                failures.append(f"{path}={value!r}: {why}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if len(number_paths(REGISTRY[n].example)) >= 2))
@settings(max_examples=12)
@given(data=st.data())
def test_several_extreme_numbers_at_once_are_never_a_500(client, name, data):
    example = REGISTRY[name].example
    paths = number_paths(example)
    picks = data.draw(st.lists(st.tuples(st.sampled_from(paths), st.sampled_from(EXTREMES)), min_size=2, max_size=4,
                               unique_by=lambda t: t[0]), label="fields set to extremes")
    body = example
    for path, value in picks:
        body = _with(body, path, value)
    assert _check(client, name, body) is None, picks
