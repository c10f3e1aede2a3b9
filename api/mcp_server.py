"""MCP server at /mcp (streamable HTTP, stateless): every calculator as a tool, plus look-ups.

Tools read the same store and run the same `calculate` as the REST API, so a tool result carries
the same outputs, steps and case links. Nothing here writes anything.
"""
from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, Field

from api.service import CalculationFailed, calculate, case_refs
from api.settings import VERSION
from calculators.registry import REGISTRY, Calculator

INSTRUCTIONS = (
    "AI Infra Casebook: sourced AI-infrastructure facts and calculators that show their work. "
    "Call list_calculators to see the calculators; each calculator tool returns outputs, "
    "explanation steps (formula, numbers substituted, value, unit), assumptions, the sources of "
    "facts it used and links to the book's cases. Units are SI with the unit in the field name."
)



def _plain(value: Any) -> Any:
    """Tool arguments as plain JSON values (nested models to dicts, unset fields dropped)."""
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value.model_dump(exclude_unset=True).items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _calculator_tool(server: MCPServer, app, calc: Calculator) -> None:
    model = calc.request_model
    # The SDK builds its own argument model from the signature; arguments are validated by the
    # calculator's request model inside `calculate`, so each parameter is typed loosely here and
    # the advertised input schema is replaced by the request model's own (below).
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Any,
                                default=inspect.Parameter.empty if field.is_required() else None)
              for name, field in model.model_fields.items()]

    def run(**kwargs: Any) -> dict:
        body = {k: _plain(v) for k, v in kwargs.items() if v is not None}
        try:
            return calculate(calc.name, body, app.state.store)
        except CalculationFailed as exc:
            raise ToolError(f"{exc.body.get('title')}: {exc.body.get('detail')}") from None

    run.__signature__ = inspect.Signature(params, return_annotation=dict)
    run.__name__ = calc.operation_id
    server.add_tool(run, name=calc.operation_id, title=calc.title,
                    description=f"{calc.summary}\n\n{calc.description}".strip())
    tool = server._tool_manager.get_tool(calc.operation_id)
    if tool is not None:  # advertise exactly the REST request model's schema
        tool.parameters = model.model_json_schema()


def build_server(app) -> MCPServer:
    server = MCPServer(name="ai-infra-casebook", title="AI Infra Casebook", version=VERSION,
                       instructions=INSTRUCTIONS, log_level="WARNING")
    for calc in REGISTRY.values():
        _calculator_tool(server, app, calc)

    def store():
        return app.state.store

    def record(kind: str, ident: str, list_endpoint: str) -> dict:
        rec = store().get(kind, ident)
        if rec is None:
            raise ToolError(f"unknown {kind} {ident!r}; see {list_endpoint}")
        return rec

    @server.tool(description="List the calculators: name, tool name, summary, sweepable fields and an example request.")
    def list_calculators() -> dict:
        return {"calculators": [{"name": c.name, "tool": c.operation_id, "title": c.title, "summary": c.summary,
                                 "sweepable": list(c.sweepable), "example": c.example,
                                 "cases": case_refs(store(), c.cases)} for c in REGISTRY.values()]}

    @server.tool(description="Search cases, models, hardware, frameworks, worked examples, glossary and claims "
                             "(English or Chinese). Returns ranked hits with their API and page URLs.")
    def search(q: Annotated[str, Field(min_length=1, max_length=500)],
               limit: Annotated[int, Field(ge=1, le=100)] = 10) -> dict:
        hits, total = app.state.search_index.search(q, None, limit, 0)
        return {"query": q, "total": total,
                "items": [{"kind": d.kind, "id": d.id, "title": d.title, "url": d.url, "api_url": d.api_url,
                           "snippet": d.snippet, "score": round(s, 4)} for d, s in hits]}

    @server.tool(description="One case study of the book by slug (e.g. multi-lora-serving): summary, chapters, "
                             "source file and every stored worked example with its calculator request.")
    def get_case(slug: Annotated[str, Field(min_length=1, max_length=200)]) -> dict:
        case = store().get("case", slug)
        if case is None:
            raise ToolError(f"unknown case {slug!r}; search or list /api/v1/cases")
        out = dict(case)
        out["derivations"] = store().derivations_of(slug)
        return out

    @server.tool(description="One model architecture by id (e.g. qwen3-8b, deepseek-v3): every number with its "
                             "source and locator, and its attention layer groups.")
    def get_model(model_id: Annotated[str, Field(min_length=1, max_length=200)]) -> dict:
        return record("model", model_id, "/api/v1/models")

    @server.tool(description="One accelerator or system by id (e.g. h100-sxm, b200-sxm, mi300x): memory, bandwidth, "
                             "power and per-precision peaks, each with source and locator.")
    def get_hardware(hardware_id: Annotated[str, Field(min_length=1, max_length=200)]) -> dict:
        return record("hardware", hardware_id, "/api/v1/hardware")

    return server


def mount(app) -> None:
    """Add the MCP endpoint at /mcp and hook its session manager into the app's lifespan."""
    server = build_server(app)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    for route in mcp_app.routes:
        if getattr(route, "path", None) == "/mcp":
            app.router.routes.append(route)
    app.state.mcp_server = server

    @asynccontextmanager
    async def run_sessions():
        # The SDK lets a session manager run once per instance, but an app may be started more than
        # once in a process (test clients, fuzzers); a stateless manager keeps no session between
        # runs, so its run flag is reset before each start.
        manager = server.session_manager
        manager._has_started = False
        async with manager.run():
            yield

    app.state.mcp_lifespan = run_sessions
