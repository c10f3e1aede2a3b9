"""A real MCP client lists and calls the tools over streamable HTTP against uvicorn.

The tool list is sized for small contexts (generic calculator tools, a few direct ones with compact
schemas, look-ups with compact rows); every calculator stays reachable through `calculate`.
"""
from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from api.markdown import scalar
from api.mcp_server import DIRECT
from api.responses import dumps
from calculators.framework.registry import REGISTRY

#: the whole tools/list result in bytes of JSON: the budget of issue 13 (about 35 KB today; 241 KB when
#: each calculator was a tool with its full request schema)
TOOLS_LIST_BUDGET = 40_000


async def _session_do(url, fn):
    async with streamable_http_client(url + "/mcp") as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            # The client validates structured content against the listed outputSchema only for tools
            # it has listed, so list first: every result below is checked against its schema.
            await session.list_tools()
            return await fn(session)


def run(url, fn):
    return anyio.run(_session_do, url, fn)


def payload(result):
    """The tool's structured result (or its JSON text content)."""
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


def error_text(result) -> str:
    assert result.is_error, result
    return result.content[0].text


def _rpc(url: str, method: str, params: dict | None = None, version: str = "2025-06-18") -> httpx.Response:
    """One raw JSON-RPC request to the stateless endpoint (initialize first, as a client would, offering `version`)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = httpx.post(url + "/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    version = init.json()["result"]["protocolVersion"]
    body = {"jsonrpc": "2.0", "id": 2, "method": method} | ({"params": params} if params else {})
    return httpx.post(url + "/mcp", headers={**headers, "mcp-protocol-version": version}, json=body)


@pytest.fixture(scope="module")
def tools(live_server):
    return {t.name: t for t in run(live_server, lambda s: s.list_tools()).tools}


# --------------------------------------------------------------------------- the list

def test_tools_list_fits_a_small_context(live_server):
    response = _rpc(live_server, "tools/list")
    result = response.json()["result"]
    size = len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())
    assert size <= TOOLS_LIST_BUDGET, f"tools/list is {size} bytes"
    assert len(response.content) <= TOOLS_LIST_BUDGET + 200


def test_generic_direct_and_lookup_tools_are_listed(tools):
    assert {"list_calculators", "describe_calculator", "calculate", "search", "list_models", "list_hardware",
            "list_links", "list_cases", "get_case", "get_model", "get_hardware", "get_link"} <= set(tools)
    assert {REGISTRY[n].operation_id for n in DIRECT} <= set(tools)
    kv = tools["kv_cache"].input_schema
    assert {"model", "tokens", "kv_format", "requests"} <= set(kv["properties"])
    assert kv["additionalProperties"] is False
    assert "sweep" in kv["properties"]["tokens"]["description"]


def test_every_tool_is_annotated_read_only(tools):
    for tool in tools.values():
        a = tool.annotations
        assert a is not None, tool.name
        assert (a.read_only_hint, a.idempotent_hint, a.open_world_hint, a.destructive_hint) == (True, True, False, False), \
            tool.name


def test_calculator_tools_declare_the_envelope(tools):
    for name in ["calculate", *(REGISTRY[n].operation_id for n in DIRECT)]:
        schema = tools[name].output_schema
        assert schema is not None, name
        assert set(schema["required"]) == {"calculator", "headline", "inputs", "outputs", "steps", "assumptions",
                                           "cases", "explanation_url"}


# --------------------------------------------------------------------------- calculators

def test_direct_tool_matches_rest_and_leads_with_the_headline(live_server):
    body = {"model": "qwen3-8b", "tokens": 8192}
    result = run(live_server, lambda s: s.call_tool("kv_cache", body))
    assert not result.is_error
    env = result.structured_content
    rest = httpx.post(live_server + "/api/v1/calculators/kv-cache", json=body).json()
    assert env["outputs"] == rest["outputs"]
    assert env["steps"] == rest["steps"] and env["cases"] == rest["cases"]
    text = result.content[0].text
    if env["headline"]:
        assert text.startswith(env["headline"])
    assert_summary_not_json(text, env)
    # the key outputs with their units, read the way the Markdown explanation reads them
    assert f"- bytes_per_request: {scalar(env['outputs']['bytes_per_request'], 'bytes')}" in text
    assert " B = " in text and "GB" in text and "GiB" in text
    assert env["explanation_url"] in text and "_format=json" in text
    assert f"{len(env['steps'])} steps" in text and "structuredContent" in text


def assert_summary_not_json(text: str, env: dict) -> None:
    """A calculator tool's text is the headline and a summary: never the envelope (or its steps) as JSON again."""
    assert dumps(env).decode() not in text and json.dumps(env) not in text
    assert '"steps":' not in text and '"inputs":' not in text and '"outputs":' not in text
    assert not any(line.lstrip().startswith("{") for line in text.splitlines())


def test_text_summary_is_short_where_the_envelope_is_large(every_example):
    """The deployment planner answers hundreds of KB of JSON (every configuration): its text stays a few lines."""
    result = every_example["deployment-plan"]
    assert not result.is_error, result.content[0].text[:2000]
    env = result.structured_content
    text = result.content[0].text
    assert text.startswith(env["headline"]) and len(text) < len(env["headline"]) + 3_000 < len(dumps(env))
    assert_summary_not_json(text, env)
    rows = len(env["outputs"]["candidates"])
    assert f"- candidates: {rows:,} rows (" in text     # a list of records: counted, its columns named


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_clients_without_structured_content_get_the_json_in_the_text(live_server, version):
    """structuredContent arrived with protocol 2025-06-18: a client of an older revision reads the envelope from the
    text, after the same summary."""
    body = {"name": "kv_cache", "arguments": {"model": "qwen3-8b", "tokens": 8192}}
    old = _rpc(live_server, "tools/call", body, version=version).json()["result"]
    new = _rpc(live_server, "tools/call", body).json()["result"]
    summary = new["content"][0]["text"]
    assert_summary_not_json(summary, new["structuredContent"])
    text = old["content"][0]["text"]
    head, _, tail = text.rpartition("\n\n")
    assert json.loads(tail) == old["structuredContent"] == new["structuredContent"]
    assert head.replace("below as JSON", "in structuredContent") == summary


def test_calculate_by_name_matches_the_direct_tool(live_server):
    body = {"model": "qwen3-8b", "tokens": [1024, 8192]}

    async def calls(s):
        return (await s.call_tool("calculate", {"name": "kv-cache", "request": body}),
                await s.call_tool("calculate", {"name": "kv_cache", "request": json.dumps(body)}),
                await s.call_tool("kv_cache", body),
                await s.call_tool("kv_cache", {"request": body}))
    by_name, by_tool_name_and_json_text, direct, direct_wrapped = run(live_server, calls)
    assert direct_wrapped.structured_content["outputs"] == direct.structured_content["outputs"]
    assert not by_name.is_error and not by_tool_name_and_json_text.is_error
    assert by_name.structured_content["outputs"] == direct.structured_content["outputs"]
    assert by_tool_name_and_json_text.structured_content["outputs"] == direct.structured_content["outputs"]


def test_describe_and_list_calculators(live_server):
    async def calls(s):
        return (await s.call_tool("describe_calculator", {"name": "routing-cost"}),
                await s.call_tool("list_calculators", {}),
                await s.call_tool("list_calculators", {"family": "rl"}))
    described, listed, rl = run(live_server, calls)
    d = payload(described)
    calc = REGISTRY["routing-cost"]
    assert d["request_schema"] == calc.request_model.model_json_schema()
    assert d["example"] == calc.example and d["sweepable"] == list(calc.sweepable)
    assert d["example_outputs"] and d["example_steps"] and d["tool"] == "routing_cost"
    rows = payload(listed)["calculators"]
    assert [r["name"] for r in rows] == list(REGISTRY)
    assert all(set(r) <= {"name", "family", "summary", "tool"} and len(r["summary"]) <= 120 for r in rows)
    assert len(described.content[0].text) < 60_000 and len(listed.content[0].text) < 10_000
    assert {r["name"] for r in payload(rl)["calculators"]} == {c.name for c in REGISTRY.values()
                                                               if "rl" in (c.family, *c.families)}


@pytest.fixture(scope="module")
def every_example(live_server):
    """Each registered calculator's own example through `calculate`, in one session."""
    async def calls(s):
        return {name: await s.call_tool("calculate", {"name": name, "request": calc.example})
                for name, calc in REGISTRY.items()}
    return run(live_server, calls)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_calculator_is_reachable_through_calculate(every_example, name):
    result = every_example[name]
    assert not result.is_error, result.content[0].text[:2000]
    env = result.structured_content
    assert env["calculator"] == name and env["outputs"]
    text = result.content[0].text
    assert text.startswith(env["headline"] or REGISTRY[name].title)
    assert_summary_not_json(text, env)
    assert len(text) < len(env["headline"] or "") + 3_000, len(text)   # 12 output lines, a link: a bounded summary


# --------------------------------------------------------------------------- look-ups

def test_list_tools_return_compact_filtered_rows(live_server):
    async def calls(s):
        return (await s.call_tool("list_models", {"family": "qwen", "limit": 5}),
                await s.call_tool("list_hardware", {"q": "h100", "vendor": "nvidia"}),
                await s.call_tool("list_links", {"kind": "nvlink"}),
                await s.call_tool("list_cases", {"chapter": 2}),
                await s.call_tool("list_hardware", {"vendor": "nvida"}))
    models, hardware, links, cases, misspelt = run(live_server, calls)
    m = payload(models)
    assert len(m["items"]) == 5 and m["total"] > 5 and m["next_offset"] == 5
    assert all(r["family"] == "qwen" and "layers" in r for r in m["items"])
    assert max(len(json.dumps(r)) for r in m["items"]) < 400
    h = payload(hardware)["items"]
    assert "h100-sxm" in {r["id"] for r in h}
    sxm = next(r for r in h if r["id"] == "h100-sxm")
    assert sxm["memory_bytes"] > 0 and sxm["bf16_dense_flop_per_s"] > 0
    assert {r["id"] for r in payload(links)["items"]} >= {"nvlink4", "nvlink5"}
    assert all(2 in r["chapters"] for r in payload(cases)["items"]) and payload(cases)["items"]
    assert payload(misspelt)["total"] == 0 and "NVIDIA" in payload(misspelt)["hint"]


def test_get_and_search_tools(live_server):
    async def calls(s):
        return (await s.call_tool("search", {"q": "推测解码"}), await s.call_tool("get_model", {"model_id": "qwen3-8b"}),
                await s.call_tool("get_case", {"slug": "multi-lora-serving"}),
                await s.call_tool("get_hardware", {"hardware_id": "h100-sxm"}),
                await s.call_tool("get_link", {"link_id": "nvlink4"}))
    search, model, case, hw, link = run(live_server, calls)
    assert any(h["id"] == "speculative-execution" for h in payload(search)["items"][:3])
    assert payload(model)["layers"]["value"] == 36
    assert payload(case)["derivations"]
    assert payload(hw)["memory_bytes"]["source"]
    assert payload(link)["one_way_bytes_per_s"]["value"] > 0


def test_get_model_reads_a_hugging_face_name_and_says_so(live_server):
    async def calls(s):
        return (await s.call_tool("get_model", {"model_id": "meta-llama/Llama-3.1-8B-Instruct"}),
                await s.call_tool("get_model", {"model_id": "LLAMA-3.1-8B"}),
                await s.call_tool("get_model", {"model_id": "llama-3.1-8b"}),
                await s.call_tool("get_model", {"model_id": "meta-llama/Llama-9-1B"}))
    repo, case, exact, unknown = run(live_server, calls)
    assert repo.content[0].text == "`meta-llama/Llama-3.1-8B-Instruct` read as `llama-3.1-8b`"
    assert payload(repo)["resolution"] == repo.content[0].text
    assert payload(case)["resolution"] == "`LLAMA-3.1-8B` read as `llama-3.1-8b`"
    assert "resolution" not in payload(exact)
    assert {k: v for k, v in payload(repo).items() if k != "resolution"} == payload(exact)
    assert "unknown model id" in error_text(unknown)


# --------------------------------------------------------------------------- errors that carry their fix

def test_errors_say_the_fix(live_server):
    split = dict(REGISTRY["roofline"].example)

    async def calls(s):
        return {
            "hardware": await s.call_tool("roofline", {**split, "hardware": "h100"}),
            "model": await s.call_tool("kv_cache", {"model": "llama-70b", "tokens": 8}),
            "enum": await s.call_tool("kv_cache", {"model": "qwen3-8b", "tokens": 8, "kv_format": "bf61"}),
            "negative": await s.call_tool("kv_cache", {"model": "qwen3-8b", "tokens": -1}),
            "field": await s.call_tool("calculate", {"name": "kv-cache", "request": {"model": "qwen3-8b",
                                                                                    "tokens": 8, "request": 2}}),
            "misspelt_field": await s.call_tool("kv_cache", {"model": "qwen3-8b", "tokens": 8, "requets": 2}),
            "calculator": await s.call_tool("calculate", {"name": "kv-cahce", "request": {}}),
            "describe": await s.call_tool("describe_calculator", {"name": "roofline-model"}),
            "get": await s.call_tool("get_hardware", {"hardware_id": "h100"}),
            "get_model": await s.call_tool("get_model", {"model_id": "nope"}),
            "lookup_arg": await s.call_tool("list_models", {"familly": "qwen"}),
            "two": await s.call_tool("kv_cache", {"model": "qwen3-8b", "tokens": -1, "kv_format": "q4"}),
        }
    r = run(live_server, calls)
    assert "hardware" in error_text(r["hardware"]) and "'h100-sxm'" in error_text(r["hardware"])
    assert "Did you mean" in error_text(r["hardware"]) and "list_hardware" in error_text(r["hardware"])
    assert "model: unknown model id 'llama-70b'. Did you mean" in error_text(r["model"])
    assert "'llama-3.1-70b'" in error_text(r["model"])
    assert "kv_format" in error_text(r["enum"]) and "Did you mean 'bf16'" in error_text(r["enum"])
    negative = error_text(r["negative"])
    assert "tokens:" in negative and "greater than or equal to 0" in negative, negative
    assert "request: unknown field" in error_text(r["field"]) and "'requests'" in error_text(r["field"])
    assert "requets: unknown field. Did you mean 'requests'?" in error_text(r["misspelt_field"])
    assert "unknown calculator 'kv-cahce'. Did you mean 'kv-cache'" in error_text(r["calculator"])
    assert "'roofline'" in error_text(r["describe"])
    assert "unknown hardware id 'h100'. Did you mean 'h100-sxm'" in error_text(r["get"])
    assert "unknown model id 'nope'" in error_text(r["get_model"])
    assert "familly: unknown field. Did you mean 'family'?" in error_text(r["lookup_arg"])
    two = error_text(r["two"])
    assert "2 fields to fix" in two and "- tokens:" in two and "- kv_format:" in two   # not its union echo
    assert "FormatSpec" not in two and "'q4_0'" in two
