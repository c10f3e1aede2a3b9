"""MCP tool calls are bounded by what the tool takes, and stop when their client leaves (issue #27, item 5).

The audit sent a tool call with 200,000 unknown arguments (2.6 MB): each one cost milliseconds of error
building, the work went on after the client had gone, and SIGTERM then never finished. Now a call with
more arguments than its tool has properties (plus a few unknown ones, which still get a did-you-mean each)
is refused from its length alone, before the SDK or the tool looks at any key; a calculator's `request`
object is held to its calculator's field count the same way. A call whose client disconnects is cancelled:
the tool's thread starts nothing after its current step.

These tests count what is done (keys read, calls made), never how long it takes.
"""
from __future__ import annotations

import threading

import anyio
import orjson
import pytest
from fastapi.testclient import TestClient

from api import mcp_server
from calculators.framework.registry import REGISTRY

N_KEYS = 20_000
#: unknown arguments a call may carry beyond its tool's properties
SLACK = getattr(mcp_server, "MAX_UNKNOWN_ARGUMENTS", 16)


class CountingDict(dict):
    """A dict that counts the keys anyone reads from it through Python (iteration, items, lookups, copies)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = 0

    def __iter__(self):
        for k in super().__iter__():
            self.read += 1
            yield k

    def keys(self):
        return list(iter(self))

    def items(self):
        return [(k, super(CountingDict, self).__getitem__(k)) for k in self]

    def values(self):
        return [v for _, v in self.items()]

    def __getitem__(self, key):
        self.read += 1
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read += 1
        return super().get(key, default)

    def copy(self):
        self.read += len(self)
        return CountingDict(dict(super().items()))


@pytest.fixture(scope="module")
def mcp(built_db):
    """A fresh app (its store read by the tools) and its MCP server, both in one running event loop."""
    from api.app import create_app
    from api.settings import Settings

    app = create_app(Settings(db_path=built_db, build_if_stale=False))
    with TestClient(app) as client:
        yield client.portal, mcp_server.build_server(app), app


@pytest.fixture()
def spy(monkeypatch):
    """Counts the per-key work a refused call must not reach: the SDK's argument validation, the calculator."""
    calls = {"validate": 0, "calculate": 0}
    from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

    real_validate, real_calculate = FuncMetadata.validate_arguments, mcp_server.calculate

    def validate(self, arguments):
        calls["validate"] += 1
        return real_validate(self, arguments)

    def calculate(*args, **kwargs):
        calls["calculate"] += 1
        return real_calculate(*args, **kwargs)

    monkeypatch.setattr(FuncMetadata, "validate_arguments", validate)
    monkeypatch.setattr(mcp_server, "calculate", calculate)
    return calls


def _call(mcp, tool: str, arguments: dict):
    portal, server, _ = mcp

    async def go():
        return await server._handle_call_tool(None, _Params(tool, arguments))

    return portal.call(go)


class _Params:
    """The two fields of tools/call params the server reads."""

    def __init__(self, name, arguments):
        self.name, self.arguments = name, arguments


def _unknown(n: int) -> dict:
    return {f"k{i}": i for i in range(n)}


def _text(result) -> str:
    assert result.is_error, result
    return result.content[0].text


@pytest.mark.parametrize("tool, arguments", [
    ("kv_cache", lambda: CountingDict({"model": "qwen3-8b", "tokens": 8192} | _unknown(N_KEYS))),
    ("calculate", lambda: CountingDict({"name": "kv-cache", "model": "qwen3-8b"} | _unknown(N_KEYS))),
    ("list_models", lambda: CountingDict(_unknown(N_KEYS))),
    ("get_model", lambda: CountingDict({"model_id": "qwen3-8b"} | _unknown(N_KEYS))),
])
def test_too_many_arguments_are_refused_before_any_key_is_read(mcp, spy, tool, arguments):
    args = arguments()
    text = _text(_call(mcp, tool, args))
    limit = mcp[1]._tool_manager.get_tool(tool).max_arguments if hasattr(mcp_server, "MAX_UNKNOWN_ARGUMENTS") \
        else SLACK + len(mcp[1]._tool_manager.get_tool(tool).parameters["properties"])
    assert f"{len(args):,} arguments" in text and f"at most {limit}" in text, text
    assert "k0" in text                      # a few of the unknown names, so the caller sees what went wrong
    assert len(text) < 1000
    # bounded work: no more keys read than the cap (plus one), and neither validation nor the calculator ran
    assert args.read <= limit + 1, f"{args.read} keys read for a call refused by its length"
    assert spy == {"validate": 0, "calculate": 0}


@pytest.mark.parametrize("tool, wrap", [
    ("calculate", lambda req: {"name": "kv-cache", "request": req}),
    ("kv_cache", lambda req: {"request": req}),
])
def test_a_request_object_is_held_to_its_calculators_fields(mcp, spy, tool, wrap):
    request = CountingDict({"model": "qwen3-8b", "tokens": 8192} | _unknown(N_KEYS))
    text = _text(_call(mcp, tool, wrap(request)))
    limit = len(REGISTRY["kv-cache"].request_model.model_fields) + SLACK
    assert f"{len(request):,} fields" in text and f"at most {limit}" in text, text
    assert request.read <= limit + 1
    assert spy["calculate"] == 0


def test_a_request_sent_as_a_json_string_is_held_too(mcp, spy):
    request = orjson.dumps({"model": "qwen3-8b", "tokens": 8192} | _unknown(N_KEYS)).decode()
    text = _text(_call(mcp, "calculate", {"name": "kv-cache", "request": request}))
    assert f"{N_KEYS + 2:,} fields" in text
    assert spy["calculate"] == 0


def test_a_few_unknown_arguments_still_get_a_did_you_mean_each(mcp, spy):
    text = _text(_call(mcp, "kv_cache", {"model": "qwen3-8b", "tokens": 8192, "tokns": 1, "modle": "x"}))
    assert "tokns: unknown field" in text and "'tokens'" in text, text
    assert "modle: unknown field" in text
    assert spy["calculate"] == 1


def test_the_limit_allows_every_field_of_the_largest_calculator(mcp):
    """A call may name every field of a calculator, beside `name` in `calculate` too, without meeting the cap."""
    tool = mcp[1]._tool_manager.get_tool("calculate")
    most = max(len(c.request_model.model_fields) for c in REGISTRY.values())
    assert tool.max_arguments >= most + 1 + SLACK


# --------------------------------------------------------------------------- a client that leaves

def test_a_call_whose_client_disconnects_starts_no_more_work(mcp, monkeypatch):
    """A calculation in flight when the client disconnects: the endpoint returns at the disconnect, and the tool's
    thread, once its current step ends, stops at the next check instead of building the answer."""
    portal, _, app = mcp
    started, release, checked = threading.Event(), threading.Event(), threading.Event()
    outcome: dict = {"answered": 0}
    real_calculate, real_stop = mcp_server.calculate, mcp_server.stop_if_cancelled

    def slow_calculate(*args, **kwargs):
        started.set()
        release.wait(60)        # the step in flight: held until the test has seen the endpoint return
        return real_calculate(*args, **kwargs)

    def watched_stop():
        if not started.is_set():
            return real_stop()
        try:
            real_stop()
            outcome["checkpoint"] = "passed"
        except BaseException as exc:    # noqa: BLE001 - the cancellation is what is looked for
            outcome["checkpoint"] = type(exc).__name__
            raise
        finally:
            checked.set()

    def answered(*args, **kwargs):
        outcome["answered"] += 1
        return real_answer(*args, **kwargs)

    real_answer = mcp_server._calculation
    monkeypatch.setattr(mcp_server, "calculate", slow_calculate)
    monkeypatch.setattr(mcp_server, "stop_if_cancelled", watched_stop)
    monkeypatch.setattr(mcp_server, "_calculation", answered)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": "kv_cache", "arguments": {"model": "qwen3-8b", "tokens": 8192}}})
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
             "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"accept", b"application/json, text/event-stream"),
                         (b"mcp-protocol-version", b"2025-06-18"), (b"content-length", str(len(body)).encode())]}
    sent: list[dict] = []

    async def go():
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await anyio.to_thread.run_sync(started.wait, 60)   # the client leaves once the calculation runs
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        with anyio.fail_after(60):   # a hang guard, not a speed limit
            await app.state.mcp_endpoint(scope, receive, send)

    portal.call(go)
    assert started.is_set()
    assert not [m for m in sent if m["type"] == "http.response.body" and m.get("body")], sent
    release.set()
    assert checked.wait(60), "the tool's thread never reached its next check"
    assert outcome["checkpoint"] in ("CancelledError", "Cancelled"), outcome
    assert outcome["answered"] == 0


def test_the_stop_check_outside_a_worker_thread_does_nothing():
    mcp_server.stop_if_cancelled()     # a tool called directly (tests, describe_calculator's example) is not cancellable


def test_the_audits_call_over_http_is_refused(live_server):
    """The audit's 2.6 MB call (200,000 unknown arguments) through uvicorn and the MCP SDK: a tool error saying so."""
    import httpx

    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-06-18"}
    arguments = {"model": "qwen3-8b", "tokens": 8192} | _unknown(200_000)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "kv_cache", "arguments": arguments}})
    assert len(body) > 2_500_000
    r = httpx.post(live_server + "/mcp", headers=headers, content=body, timeout=120)
    result = r.json()["result"]
    assert result["isError"] is True
    assert "200,002 arguments" in result["content"][0]["text"]
    assert len(r.content) < 2000
