"""A real MCP client lists and calls the tools over streamable HTTP against uvicorn."""
from __future__ import annotations

import json

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from calculators.registry import REGISTRY


async def _session_do(url, fn):
    async with streamable_http_client(url + "/mcp") as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await fn(session)


def run(url, fn):
    return anyio.run(_session_do, url, fn)


def payload(result):
    """The tool's structured result (or its JSON text content)."""
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


def test_tools_cover_every_calculator_and_lookups(live_server):
    tools = run(live_server, lambda s: s.list_tools())
    names = {t.name for t in tools.tools}
    assert {c.operation_id for c in REGISTRY.values()} <= names
    assert {"search", "get_case", "get_model", "get_hardware", "list_calculators"} <= names
    kv = next(t for t in tools.tools if t.name == "kv_cache")
    assert kv.input_schema == REGISTRY["kv-cache"].request_model.model_json_schema()


def test_calculator_tool_matches_rest(live_server):
    import httpx

    body = {"model": "qwen3-8b", "tokens": 8192}
    result = run(live_server, lambda s: s.call_tool("kv_cache", body))
    assert not result.is_error
    env = payload(result)
    rest = httpx.post(live_server + "/api/v1/calculators/kv-cache", json=body).json()
    assert env["outputs"] == rest["outputs"]
    assert env["steps"] == rest["steps"] and env["cases"] == rest["cases"]


def test_lookup_tools(live_server):
    async def calls(s):
        return (await s.call_tool("search", {"q": "推测解码"}), await s.call_tool("get_model", {"model_id": "qwen3-8b"}),
                await s.call_tool("get_case", {"slug": "multi-lora-serving"}),
                await s.call_tool("get_hardware", {"hardware_id": "h100-sxm"}),
                await s.call_tool("list_calculators", {}))
    search, model, case, hw, calcs = run(live_server, calls)
    assert any(h["id"] == "speculative-execution" for h in payload(search)["items"][:3])
    assert payload(model)["layers"]["value"] == 36
    assert payload(case)["derivations"]
    assert payload(hw)["memory_bytes"]["source"]
    assert len(payload(calcs)["calculators"]) == len(REGISTRY)


def test_bad_tool_input_is_an_error_result_not_a_crash(live_server):
    async def calls(s):
        return (await s.call_tool("kv_cache", {"model": "no-such-model", "tokens": 8}),
                await s.call_tool("get_model", {"model_id": "nope"}))
    bad_calc, bad_model = run(live_server, calls)
    assert bad_calc.is_error and "model" in bad_calc.content[0].text
    assert bad_model.is_error
