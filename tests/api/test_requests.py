"""JSON bodies are read by orjson where that gives exactly what the standard library gives (api/requests.py)."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.requests import loads

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


def _same(a, b) -> bool:
    """Equal, with NaN equal to NaN and int/float kept apart (1 and 1.0 are different readings)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(JSON)
def test_any_body_reads_as_the_standard_library_reads_it(value):
    body = json.dumps(value).encode()
    assert _same(loads(body), json.loads(body))


@pytest.mark.parametrize("body", [
    b'{"n": 18446744073709551617}', b'{"n": -9223372036854775809}', b'[NaN, Infinity, -Infinity]', b'1e400',
    b'"\\ud800"', b'{"a": 1, "a": 2}', b'  {"x": [1, 2.50, -0.0]}  '])
def test_what_orjson_reads_differently_or_refuses_reads_as_before(body):
    assert _same(loads(body), json.loads(body))
    assert type(loads(b'{"n": 18446744073709551617}')["n"]) is int


@pytest.mark.parametrize("body", [b'{"x": 1', b'{"x": }', b"", b"[1,]", b"{'x': 1}", b"\xff\xfe"])
def test_malformed_bodies_fail_with_the_standard_librarys_error(body):
    with pytest.raises(ValueError) as ours:
        loads(body)
    with pytest.raises(ValueError) as std:
        json.loads(body)
    assert type(ours.value) is type(std.value) and str(ours.value) == str(std.value)


@pytest.mark.parametrize("raw, status, field", [
    (b'{"model": "qwen3-8b", "tokens": NaN}', 422, "tokens"),
    (b'{"model": "qwen3-8b", "tokens": 99999999999999999999999999999999}', 422, "tokens"),
    (b'{"model": "qwen3-8b", "tokens": 5', 422, "body"),
])
def test_calculator_routes_answer_odd_bodies_as_before(client, raw, status, field):
    r = client.post("/api/v1/calculators/kv-cache", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert field in {e["field"] for e in r.json()["errors"]}
    if field == "tokens" and b"999" in raw:
        assert any("less than or equal" in e["message"] for e in r.json()["errors"])


def test_a_sweep_body_is_read_by_the_fast_path(client, monkeypatch):
    """The common body (no long digit runs, valid JSON) never reaches the standard library."""
    import api.requests as R

    def refuse(*_a, **_k):
        raise AssertionError("json.loads used for a plain body")

    with monkeypatch.context() as m:
        m.setattr(R.json, "loads", refuse)
        r = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": list(range(1024, 9216, 1024))})
    assert r.status_code == 200, r.text
    assert len(r.json()["outputs"]["bytes_per_request"]) == 8
