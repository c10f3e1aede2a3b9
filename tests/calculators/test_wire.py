"""Arrays stay arrays until the wire: a sweep's outputs are NumPy arrays in the Result, the one encoder
(`api.responses.dumps`, orjson with its NumPy option) writes them as lists of the same numbers, non-finite values
as null, counts as integers; steps describe the first point; every rendering of a sweep still works."""
from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest

from api.markdown import render_markdown
from api.responses import dumps
from calculators.framework import Points, Result, first, jsonable, out, whole_numbers
from calculators.framework.registry import REGISTRY
from api.envelope import envelope, run
from calculators.framework.runner import compute

SWEEP = {"model": "qwen3-8b", "hardware": "h100-sxm", "phase": "decode", "batch": [1, 8, 64, 256] * 5,
         "context_tokens": [1024 * (i + 1) for i in range(20)], "estimate": "bound"}


def wire(value):
    """What a client parses from the JSON answer."""
    return orjson.loads(dumps(value))


def test_a_sweep_is_arrays_in_the_result_and_lists_of_the_same_numbers_in_the_json(lookup):
    _, _, res = compute("roofline", SWEEP, lookup)
    for key in ("time_s", "flops", "bytes", "kv_read_bytes", "tokens_per_s"):
        assert isinstance(res.outputs[key], np.ndarray) and res.outputs[key].shape == (20,), key
    sent = wire(run("roofline", SWEEP, lookup))["outputs"]
    for key in ("time_s", "flops", "bytes", "kv_read_bytes", "tokens_per_s"):
        assert isinstance(sent[key], list) and sent[key] == res.outputs[key].tolist(), key
    assert sent["bound"] == ["memory"] * 20                      # text sweeps are lists already


def test_jsonable_gives_the_values_the_json_holds(lookup):
    env = run("roofline", SWEEP, lookup)
    assert jsonable(env) == wire(env)
    assert jsonable(np.array([1.5, np.nan, np.inf])) == [1.5, None, None]
    assert jsonable({"a": (np.int64(3), np.float64(-np.inf))}) == {"a": [3, None]}
    assert type(jsonable(np.array([7, 8]))[0]) is int


def test_nan_and_inf_inside_float_arrays_become_null():
    assert wire({"x": np.array([1.0, np.nan, np.inf, -np.inf])}) == {"x": [1.0, None, None, None]}
    kept = out(np.array([np.nan, 2.0]))
    assert isinstance(kept, np.ndarray) and math.isnan(kept[0])      # kept as is: the encoder writes null
    assert out(np.float64("nan")) is None and out(np.array(np.inf)) is None    # scalars: None at once


def test_an_infinite_intensity_in_a_sweep_reaches_json_as_null(lookup):
    body = {"operation": {"kind": "custom", "flops": [1e9, 2e9], "bytes": [0.0, 1e6]},
            "peak_flop_per_s": 1e12, "memory_bandwidth_bytes_per_s": 1e12}
    _, _, res = compute("roofline", body, lookup)
    assert np.isinf(res.outputs["arithmetic_intensity"][0])
    assert wire(res.outputs)["arithmetic_intensity"] == [None, 2000.0]


def test_non_contiguous_and_text_arrays_are_written_too():
    view = np.broadcast_to(np.arange(3.0), (2, 3))            # stride 0: orjson alone refuses it
    assert wire({"v": view, "s": np.array(["a", "b"]), "z": np.array(2.5)}) == {"v": [[0.0, 1.0, 2.0]] * 2,
                                                                                 "s": ["a", "b"], "z": 2.5}
    made = out(view)
    assert made.flags.c_contiguous and made.tolist() == [[0.0, 1.0, 2.0]] * 2


def test_counts_and_bytes_stay_exact_integers(lookup):
    counts = whole_numbers(np.array([1.0, 2.0**53 - 1, 1e9]))
    assert counts.dtype == np.int64
    assert dumps(counts) == b"[1,9007199254740991,1000000000]"
    assert whole_numbers(1e9) == 1_000_000_000 and type(whole_numbers(1e9)) is int
    assert whole_numbers(np.array([1.0, np.nan])) == [1, None]          # not all finite: floats and null, as before
    assert dumps({"n": np.array([2**62 + 1])}) == b'{"n":[4611686018427387905]}'
    assert wire({"n": 2**70}) == {"n": float(2**70)}                   # wider than 64 bits: a float, as before
    sent = wire(run("kv-cache", {"model": "qwen3-8b", "tokens": [8192, 1_000_000]}, lookup))["outputs"]
    assert sent["bytes_per_request"] == [1_207_959_552, 147_456_000_000]
    assert all(type(v) is int for v in sent["bytes_per_request"]) and type(sent["bytes_per_token"]) is int
    calls = wire(run("chunk-padding", {"tokens": [513, 1024, 4097], "chunk_tokens": 512}, lookup))["outputs"]["calls"]
    assert calls == [2, 2, 9] and all(type(v) is int for v in calls)


def test_steps_describe_the_first_point_as_python_scalars(lookup):
    _, _, res = compute("roofline", SWEEP, lookup)
    steps = {s.label: s.value for s in res.steps}
    assert steps["step time"] == res.outputs["time_s"][0] and type(steps["step time"]) is float
    assert steps["KV bytes"] == res.outputs["kv_read_bytes"][0] + res.outputs["kv_write_bytes"][0]
    assert all(not isinstance(s.value, (list, np.ndarray)) for s in res.steps)
    r = Result(inputs={}, outputs={})
    assert r.step("x", "f", "s", np.arange(5.0) + 2, "u")[4] == 6.0 and r.steps[0].value == 2.0


def test_a_swept_field_converts_once_and_reads_as_a_list():
    req = REGISTRY["roofline"].request_model.model_validate(SWEEP)
    assert isinstance(req.batch, Points) and isinstance(req.batch, list)
    a = np.asarray(req.batch, dtype=float)
    a[0] = -1.0                                                  # a copy: the request keeps its points
    assert np.asarray(req.batch, dtype=float)[0] == 1.0 and req.batch[0] == 1
    assert req.model_dump(mode="json")["batch"] == SWEEP["batch"]
    assert first(req.batch) == 1 and first([2.5, 3.0]) == 2.5 and type(first([1, 2.5])) is float


def test_markdown_of_a_sweep_summarises_the_arrays(lookup):
    env = run("roofline", SWEEP, lookup)
    md = render_markdown(env, REGISTRY["roofline"])
    assert md.startswith(f"**{env['headline']}**")
    assert "- **time_s**: 20 values: " in md and "(min " in md
    assert "array(" not in md and "np." not in md


def test_markdown_html_and_json_of_a_sweep_over_http(client):
    url = "/api/v1/calculators/roofline"
    sent = client.post(url, json=SWEEP)
    assert sent.status_code == 200 and len(sent.json()["outputs"]["time_s"]) == 20
    md = client.post(url, json=SWEEP, headers={"Accept": "text/markdown"})
    assert md.status_code == 200 and "20 values:" in md.text
    page = client.get("/calculators/roofline", params={"body": json.dumps(SWEEP)})
    assert page.status_code == 200 and "(first of 20 points)" in page.text


def test_the_batch_endpoint_writes_sweeps(client):
    body = {"requests": [{"calculator": "roofline", "request": SWEEP},
                         {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": [1, 2, 3]}}]}
    r = client.post("/api/v1/calculators:batch", json=body)
    assert r.status_code == 200
    first_item, second = r.json()["results"]
    assert len(first_item["response"]["outputs"]["time_s"]) == 20
    assert second["response"]["outputs"]["bytes_per_request"] == [147456, 294912, 442368]


@pytest.fixture(scope="module")
def mcp_call(live_server):
    """A tools/call over the stateless MCP endpoint of a real server (initialize first, as a client would)."""
    import httpx

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def call(tool: str, arguments: dict) -> dict:
        with httpx.Client(base_url=live_server, headers=headers, timeout=120) as http:
            init = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
            version = init.json()["result"]["protocolVersion"]
            r = http.post("/mcp", headers={"mcp-protocol-version": version}, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        assert r.status_code == 200, r.text
        return r.json()["result"]
    return call


def test_mcp_structured_content_of_a_sweep(mcp_call):
    result = mcp_call("roofline", SWEEP)
    assert not result.get("isError"), result
    outputs = result["structuredContent"]["outputs"]
    assert isinstance(outputs["time_s"], list) and len(outputs["time_s"]) == 20
    assert outputs["bound"][0] == "memory"


def test_envelope_of_a_sweep_keeps_arrays_until_encoded(lookup):
    calc, req, res = compute("kv-cache", {"model": "qwen3-8b", "tokens": [1, 2, 3]}, lookup)
    env = envelope(calc, req, res, lookup)
    assert isinstance(env["outputs"]["bytes_per_request"], np.ndarray)
    assert wire(env)["outputs"]["bytes_per_request"] == [147456, 294912, 442368]


def test_an_integer_sweep_reads_into_the_same_array_as_numpy_would():
    from calculators.framework import IntPoints
    req = REGISTRY["roofline"].request_model.model_validate({**SWEEP, "batch": [1, 2, 10**15, 7] * 5})
    assert type(req.batch) is IntPoints
    for dtype in (None, float, np.int64):
        got, want = np.asarray(req.batch, dtype=dtype), np.array(list(req.batch), dtype=dtype)
        assert got.dtype == want.dtype and (got == want).all()
    floats = REGISTRY["roofline"].request_model.model_validate({**SWEEP, "peak_flop_per_s": [1.5e12, 2.25e12] * 10})
    assert type(floats.peak_flop_per_s) is Points and np.asarray(floats.peak_flop_per_s)[0] == 1.5e12


@pytest.mark.parametrize("options", [{}, {"exclude_none": True}, {"exclude_unset": True, "by_alias": True},
                                     {"exclude_none": True, "exclude_unset": True}])
def test_request_inputs_are_what_model_dump_gives_in_the_same_order(options):
    from calculators.framework import request_inputs
    for name, body in (("roofline", SWEEP), ("roofline", {**SWEEP, "batch": 8}),
                       ("kv-cache", {"model_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                                       "num_key_value_heads": 2, "vocab_size": 100}, "tokens": [1, 2, 3]})):
        req = REGISTRY[name].request_model.model_validate(body)
        got, want = request_inputs(req, **options), req.model_dump(mode="json", **options)
        assert got == want and list(got) == list(want), (name, options)
        assert wire(got) == want


def test_a_record_memo_keys_on_the_record_itself():
    from calculators.framework import RecordMemo
    memo, made = RecordMemo(maxsize=2), []
    make = lambda: made.append(1) or object()
    a, b = {"id": "a"}, {"id": "a"}                 # equal, not the same record
    first_a = memo.get(a, ("x",), make)
    assert memo.get(a, ("x",), make) is first_a and len(made) == 1
    assert memo.get(b, ("x",), make) is not first_a and len(made) == 2
    assert memo.get(a, ("y",), make) is not first_a and len(made) == 3      # another key: another value
    assert len(memo._entries) <= 2                                           # bounded: cleared when full
