"""MCP server at /mcp (streamable HTTP, stateless), sized for agents with small contexts.

`tools/list` stays small (about 35 KB; 241 KB when each calculator was a tool with its full request
schema): three generic tools reach every calculator (`list_calculators`, `describe_calculator(name)` for the full request
schema and an example, `calculate(name, request)`), the most-used calculators are also direct tools
with compact schemas (top-level fields, short descriptions), and look-ups list and get models,
hardware, links and cases with compact rows. Every tool is read-only, idempotent and closed-world.

Calculator tools run the same `calculate` as the REST API and return its envelope as `structuredContent` (with an
`outputSchema`); their text is the envelope's headline and a short summary (`api.mcp_text`: the outputs with their
units, the explanation link), with the envelope as JSON only for clients of a protocol without structuredContent.
A failed call is a tool error listing every field error with its message and a did-you-mean for
unknown ids, calculator names, field names and enum values, so the text reads as the fix.

A call is bounded before any work: one with more arguments than its tool has properties (plus
MAX_UNKNOWN_ARGUMENTS, which still get a did-you-mean each), or a calculator request with more fields than its
calculator has (plus as many), is refused from its length alone, before the SDK or the tool reads a key. A call
whose client disconnects is cancelled (`api.mcp_lazy`); its tool, which runs in a worker thread, checks
`stop_if_cancelled()` between its steps and starts nothing after the step in flight.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import asynccontextmanager
from itertools import islice
from typing import Annotated, Any

import anyio.from_thread
import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from api.mcp_text import calculation_text, structured_content_supported
from api import benchmark_text
from api.queries import CaseQuery, HardwareQuery, Kind, LinkQuery, ListQuery, ModelQuery
from api.responses import dumps
from api.schemas import Envelope
from api.service import CalculationFailed, calculate, case_refs
from api.settings import VERSION
from knowledge.records.benchmark import BenchmarkFramework
from calculators.framework.registry import REGISTRY, Calculator
from calculators.domain import AmbiguousModelId, hardware_kind, resolve_model_id
from calculators.framework import UnknownId, jsonable
from calculators.framework.runner import field_errors
from calculators.framework.suggest import close_matches, phrase

INSTRUCTIONS = (
    "AI Infra Casebook: sourced AI-infrastructure facts and calculators that show their work. "
    "list_calculators names every calculator; describe_calculator(name) gives its request schema and an "
    "example; calculate(name, request) runs any of them (the most-used also have their own tools, e.g. "
    "kv_cache). Results carry a one-sentence headline, outputs, steps (formula, numbers substituted, value, "
    "unit), assumptions, sources and links to the book's cases. Ids: list_models, list_hardware, list_links, "
    "list_cases, search. Published serving measurements (what others measured for a model on an accelerator): "
    "find_benchmarks. Units are SI with the unit in the field name."
)

#: every tool only reads the store and computes: same input, same answer, nothing outside the service
ANNOTATIONS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                              open_world_hint=False)

#: calculators that are also tools of their own (compact schema): those whose entry says `mcp_tool`; every calculator
#: is reachable by `calculate`
DIRECT = tuple(name for name, calc in REGISTRY.items() if calc.mcp_tool)

#: the list tool an unknown id of each kind points to
LIST_TOOL = {"model": "list_models", "hardware": "list_hardware", "link": "list_links", "case": "list_cases"}

def _bare(prop: dict) -> dict:
    """A property of a JSON Schema reduced to its type, for a compact outputSchema: arrays keep their items' type
    unless it is only `object` (the envelope's steps and cases, whose shape api.schemas.Envelope gives; ~50 bytes a
    calculator tool in tools/list)."""
    if "$ref" in prop:
        return {"type": "object"}
    out = {"type": prop.get("type", "object")}
    if out["type"] == "array":
        items = _bare(prop.get("items") or {})
        if items != {"type": "object"}:
            out["items"] = items
    return out


def envelope_schema() -> dict[str, Any]:
    """The outputSchema of every calculator tool: the one declaration of the envelope, `api.schemas.Envelope`, with
    its types only (titles and descriptions would add ~1 kB to each tool in tools/list)."""
    schema = Envelope.model_json_schema()
    return {"type": "object", "properties": {k: _bare(v) for k, v in schema["properties"].items()},
            "required": list(schema.get("required", []))}


#: the calculator envelope (DESIGN "Calculator envelope"), the outputSchema of every calculator tool
ENVELOPE_SCHEMA: dict[str, Any] = envelope_schema()


#: arguments a call may carry beyond its tool's properties (or a request beyond its calculator's fields): each of
#: them is answered with a did-you-mean; a call with more is refused from its length, before any key is read
MAX_UNKNOWN_ARGUMENTS = 16
#: unknown names quoted in that refusal, and the length each is cut to
_QUOTE_NAMES, _QUOTE_CHARS = 5, 40


# --------------------------------------------------------------------------- plumbing

class _RawArguments(ArgModelBase):
    """Hands the tool the arguments exactly as sent: each tool validates them itself, so an unknown
    argument is reported (with a did-you-mean) instead of being dropped, and a calculator's request
    is validated by its own request model, as on REST."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.__pydantic_extra__ or {})}


def _json(value: Any) -> bytes:
    return dumps(value)


def _result(data: dict) -> CallToolResult:
    """A look-up tool's result: `data` as structured content and as compact JSON text (its only reading)."""
    raw = _json(data)
    return CallToolResult(content=[TextContent(type="text", text=raw.decode())], structured_content=orjson.loads(raw))


_ABBREVIATION = re.compile(r"(?:\be\.g|\bi\.e|\bvs|\betc|\bcf|\bapprox|\bno)\.$", re.IGNORECASE)


def _first_sentence(text: str, limit: int = 72) -> str:
    """The first sentence of `text` (a '.' or ';' outside brackets ends it), at most `limit` characters."""
    text = " ".join((text or "").split())
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "([{" and 1 or (-1 if ch in ")]}" else 0)
        if depth <= 0 and ch in ".;" and (i + 1 == len(text) or text[i + 1] == " ") \
                and not _ABBREVIATION.search(text, 0, i + 1):
            text = text[:i]
            break
    text = text.rstrip(".;: ")
    if len(text) <= limit:
        return text
    cut = text[:limit]          # end at a word: a half word is no information
    space = cut.rfind(" ")
    cut = cut[:space] if space > limit // 2 else cut[:limit - 1]
    return cut.rstrip(" ,;:(-–—") + "…"


def _calculation(env: dict, lead: str, protocol_version: str | None) -> CallToolResult:
    """A calculator tool's result: the envelope as structured content, and as text its headline and summary (plus
    the envelope as JSON for a client whose protocol has no structuredContent)."""
    raw = _json(env)
    text = calculation_text(env, lead, with_json=None if structured_content_supported(protocol_version)
                            else raw.decode())
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=orjson.loads(raw))


def _names(mapping: dict, known: Any, limit: int) -> str:
    """The first few keys of `mapping` that are not in `known`, quoted and cut short, reading at most `limit` + 1
    keys: for a refusal that must not walk a huge mapping."""
    unknown = [k for k in islice(iter(mapping), limit + 1) if k not in known][:_QUOTE_NAMES]
    quoted = [repr(k if len(k) <= _QUOTE_CHARS else k[:_QUOTE_CHARS] + "…") for k in unknown if isinstance(k, str)]
    return ", ".join(quoted) + (", …" if quoted else "")


def too_many(what: str, mapping: Any, known: Any, cap: int, noun: str = "arguments") -> str | None:
    """Why `mapping` has too many keys for `what`, which takes at most `cap` (the `known` names and a few unknown
    ones), or None when it does not: O(1), and a refusal reads at most `cap` + 1 keys to quote some unknown ones."""
    if not isinstance(mapping, dict) or len(mapping) <= cap:
        return None
    return (f"Invalid {noun} ({what}): {len(mapping):,} {noun}, but it takes at most {cap} (up to "
            f"{MAX_UNKNOWN_ARGUMENTS} of them unknown, each answered with a did-you-mean); unknown here: "
            f"{_names(mapping, known, cap)}.")


class _BoundedTool(Tool):
    """A tool whose call is refused, from its length alone, when it carries more than `max_arguments` arguments:
    before the SDK validates them or the tool reads one (each unknown argument costs error building)."""

    max_arguments: int
    known: frozenset[str] = frozenset()

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        why = too_many(self.name, arguments, self.known, self.max_arguments)
        if why is not None:
            raise ToolError(why + " Send only the arguments its input schema lists.")
        return await super().run(arguments, context, convert_result=convert_result)


def _tool(name: str, fn: Callable[..., CallToolResult], description: str, parameters: dict, *,
          title: str | None = None, output_schema: dict | None = None, extra_arguments: int = 0) -> Tool:
    """One tool taking its arguments raw (see `_RawArguments`), advertising `parameters` as its input schema, and
    refusing a call with more than its properties + `extra_arguments` + MAX_UNKNOWN_ARGUMENTS arguments. A tool
    with an output schema (a calculator) also gets the request's context as `ctx` (its text depends on the protocol
    version the client negotiated)."""
    known = frozenset(parameters.get("properties", {}))
    return _BoundedTool(fn=fn, name=name, title=title, description=description, parameters=parameters,
                        fn_metadata=FuncMetadata(arg_model=_RawArguments, output_schema=output_schema),
                        is_async=False, annotations=ANNOTATIONS, context_kwarg="ctx" if output_schema else None,
                        known=known, max_arguments=len(known) + extra_arguments + MAX_UNKNOWN_ARGUMENTS)


def stop_if_cancelled() -> None:
    """Raise the cancellation when the call this tool runs for was cancelled (its client disconnected, the server is
    shutting down): a tool runs in a worker thread that cancellation cannot interrupt, so it checks between steps.
    A no-op outside a worker thread (a tool called directly)."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:     # not in an AnyIO worker thread
        pass


def _protocol_version(ctx: Any) -> str | None:
    """The protocol version of the request a tool runs for (None outside a request)."""
    try:
        return ctx.protocol_version if ctx is not None else None
    except (AttributeError, LookupError, RuntimeError):
        return None


# --------------------------------------------------------------------------- compact schemas

def _member_types(prop: dict) -> tuple[list[str], list[Any], bool, dict | None]:
    """(JSON types, enum values, has object members, simple item schema) of a property and its anyOf members."""
    types: list[str] = []
    enum: list[Any] = []
    objects = False
    items = None
    for member in prop.get("anyOf") or prop.get("oneOf") or [prop]:
        if "$ref" in member or "allOf" in member:
            objects = True
            continue
        if "enum" in member or "const" in member:
            enum += member.get("enum", [member.get("const")])
            continue
        t = member.get("type")
        for one in (t if isinstance(t, list) else [t]):
            if one == "object":
                objects = True
            elif one and one != "null" and one not in types:
                types.append(one)
        if member.get("type") == "array" and isinstance(member.get("items"), dict) \
                and member["items"].get("type") in ("number", "integer", "string"):
            items = {"type": member["items"]["type"]}
    if "integer" in types and "number" in types:
        types.remove("integer")
    return types, enum, objects, items


#: enums longer than this are listed by describe_calculator, not in a direct tool's schema
MAX_ENUM = 8


def compact_property(prop: dict, sweepable: bool = False, limit: int = 72) -> dict:
    """One request field in a few dozen bytes: JSON type(s), enum values, a one-line description and a
    scalar default; nested objects are `object` (their shape is in describe_calculator)."""
    types, enum, objects, items = _member_types(prop)
    if objects:
        types.append("object")
    out: dict[str, Any] = {}
    enum = [e for e in enum if e is not None]
    listed = ""
    if len(enum) > MAX_ENUM:   # a long list (the formats) is named in the description, kept in describe_calculator
        listed = " (" + ", ".join(map(str, enum[:6])) + ", …)"
        types, enum = ([*types, "string"] if "string" not in types else types), []
    if enum and not types:
        out["enum"] = enum
    elif enum:
        out["anyOf"] = [{"enum": enum}, {"type": types[0] if len(types) == 1 else types}]
    elif types:
        out["type"] = types[0] if len(types) == 1 else types
    if items and "array" in types:
        out["items"] = items
    desc = _first_sentence(prop.get("description", ""), limit) + listed
    if sweepable and "sweep" not in desc.lower():
        desc = (desc + " " if desc else "") + "(list = sweep)"
    if desc:
        out["description"] = desc
    default = prop.get("default")
    if isinstance(default, (int, float, bool)) or (isinstance(default, str) and len(default) <= 20):
        out["default"] = default
    return out


_LISTED = re.compile(r" \(([^()]*, …)\)")


def _list_once(props: dict[str, dict]) -> None:
    """A long choice list (the formats) written out in the first field that takes it; the next fields with the same
    list name that field instead of repeating it."""
    first: dict[str, str] = {}
    for name, p in props.items():
        m = _LISTED.search(p.get("description", ""))
        if m is None:
            continue
        if m.group(1) in first:
            p["description"] = p["description"][:m.start()] + f" (as {first[m.group(1)]})" + p["description"][m.end():]
        else:
            first[m.group(1)] = name


def compact_schema(calc: Calculator) -> dict:
    """The calculator's request schema, top level only (describe_calculator has the full one)."""
    full = calc.request_model.model_json_schema()
    sweep = {s for s in calc.sweepable if "." not in s}
    props = {name: compact_property(p, name in sweep) for name, p in full.get("properties", {}).items()}
    _list_once(props)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if full.get("required"):
        out["required"] = full["required"]
    return out


def _args_schema(model: type[BaseModel]) -> dict:
    """A look-up tool's input schema: its pydantic model's, with one-line descriptions."""
    full = model.model_json_schema()
    defs = full.get("$defs", {})
    inline = lambda s: defs.get(s["$ref"].rsplit("/", 1)[-1], s) if "$ref" in s else s   # an enum's values in place
    props = {}
    for name, p in full.get("properties", {}).items():
        p = inline(p) | ({"anyOf": [inline(s) for s in p["anyOf"]]} if "anyOf" in p else {})
        c = compact_property(p, limit=200)
        for key in ("minimum", "maximum", "minLength", "maxLength"):
            if key in p:
                c[key] = p[key]
        props[name] = c
    out = {"type": "object", "properties": props, "additionalProperties": False}
    if full.get("required"):
        out["required"] = full["required"]
    return out


# --------------------------------------------------------------------------- errors that say the fix

_QUOTED = re.compile(r"'([^']*)'")
_UNION_TAG = re.compile(r"\.[A-Z]\w*$")


def _at(body: Any, path: str) -> Any:
    """The value at `a.b[0].c` in a request body (None if absent)."""
    cur = body
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(cur, list):
            i = int(part[1:-1])
            cur = cur[i] if i < len(cur) else None
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
    return cur


def _fields_at(model: type[BaseModel] | None, path: str) -> list[str]:
    """Field names accepted beside `path` (its parent model's fields), for unknown-field suggestions."""
    if model is None:
        return []
    schema = model.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    node = schema
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path)[:-1]:
        if part.startswith("["):
            node = node.get("items", {}) if isinstance(node, dict) else {}
        else:
            node = node.get("properties", {}).get(part, {})
        for _ in range(4):   # follow $ref / the object member of an anyOf
            if "$ref" in node:
                node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
            elif "anyOf" in node:
                node = next((m for m in node["anyOf"] if "$ref" in m or m.get("type") in ("object", "array")), {})
            else:
                break
    return list(node.get("properties", {}))


class _Ids:
    """Did-you-mean over the store's ids."""

    def __init__(self, store_of: Callable[[], Any]):
        self.store_of = store_of

    def ids(self, kind: str) -> list[str]:
        store = self.store_of()
        return list(store.records.get(kind, {})) if store is not None else []

    def unknown(self, kind: str, ident: str) -> str:
        tool = LIST_TOOL.get(kind)
        hint = phrase(close_matches(ident, self.ids(kind)))
        see = f" ({tool} lists them)" if tool else ""
        return f"unknown {kind} id {ident!r}.{hint}{see}" if hint else f"unknown {kind} id {ident!r}{see}."


def _fix_text(err: dict, body: Any, model: type[BaseModel] | None, ids: _Ids) -> str:
    """One field error as `field: message. Did you mean …?`, from the problem's structured field error: an unknown id
    (`kind`, `value`, `reason`) points at the tool that lists that kind instead of a URL; otherwise the error's own
    suggestions, else a did-you-mean for an unknown field name or enum value."""
    field, message = err.get("field", "body"), str(err.get("message", "invalid"))
    suggestions = list(err.get("suggestions") or [])
    tail = ""
    if err.get("kind"):
        kind = str(err["kind"])
        message = str(err.get("reason") or message)
        if not suggestions and err.get("value") is not None:
            suggestions = close_matches(str(err["value"]), ids.ids(kind))
        tool = LIST_TOOL.get(kind)
        tail = f" ({tool} lists them)" if tool else ""
    elif not suggestions and err.get("type") == "extra_forbidden":
        leaf = re.split(r"[.\[]", field)[-1]
        message = "unknown field"
        suggestions = close_matches(leaf, _fields_at(model, field))
    elif not suggestions and err.get("type") in ("literal_error", "enum"):
        value = _at(body, field)
        allowed = _QUOTED.findall(message)
        if isinstance(value, str) and allowed:
            suggestions = close_matches(value, allowed)
    text = f"{field}: {message}"
    if suggestions and "did you mean" not in message.lower():   # the runner may already have said it
        text = text.rstrip(".") + "." + phrase(suggestions)
    return text + tail


def _problem_text(what: str, problem: dict, body: Any, model: type[BaseModel] | None, ids: _Ids) -> str:
    """A CalculationFailed problem body as a tool error: its title, then every field error as a fix."""
    errors = [e for e in problem.get("errors") or [] if isinstance(e, dict)]
    fields = {e.get("field") for e in errors}
    # a scalar-or-object field fails once per union member: the object member's echo adds nothing
    errors = [e for e in errors if not (_UNION_TAG.search(str(e.get("field", "")))
                                        and _UNION_TAG.sub("", str(e["field"])) in fields)]
    head = f"{problem.get('title', 'Error')} ({what})"
    if not errors:
        return f"{head}: {problem.get('detail', '')}"
    lines = [_fix_text(e, body, model, ids) for e in errors]
    omitted = problem.get("errors_omitted") or {}   # the runner lists a bounded number of errors per field
    more = ("\n- and " + ", ".join(f"{n} more on {f}" for f, n in omitted.items())) if omitted else ""
    if len(lines) == 1 and not more:
        return f"{head}: {lines[0]}"
    return f"{head}, {len(lines) + sum(omitted.values())} fields to fix:\n" + "\n".join(f"- {line}" for line in lines) + more


def _validate(model: type[BaseModel], arguments: dict, tool: str, ids: _Ids) -> BaseModel:
    """A look-up tool's arguments, or a ToolError naming every bad argument and its fix."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        errors = [e.as_dict() for e in field_errors(exc.errors(include_url=False), ("body",))]
        raise ToolError(_problem_text(tool, {"title": "Invalid arguments", "errors": errors},
                                      arguments, model, ids)) from None


def _parse_json_object(value: Any) -> Any:
    """An object or list (a sweep) that some clients send as a JSON string."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


# --------------------------------------------------------------------------- compact rows

def _v(rec: dict, key: str) -> Any:
    """A stored fact's value (facts are {value, source, locator}; plain fields are returned as they are)."""
    x = rec.get(key)
    return x.get("value") if isinstance(x, dict) else x


def _bf16_dense(rec: dict) -> Any:
    for prec in ("BF16", "FP16"):
        for p in rec.get("peaks") or []:
            if p.get("input_precision") == prec and p.get("sparsity", "dense") == "dense":
                return _v(p, "flop_per_s")
    return None


def model_row(rec: dict) -> dict:
    row = {k: rec.get(k) for k in ("id", "name", "family", "kind", "attention")}
    row |= {k: _v(rec, k) for k in ("layers", "params_total", "params_active", "context_length")}
    return {k: v for k, v in row.items() if v is not None}


def hardware_row(rec: dict) -> dict:
    row = {k: rec.get(k) for k in ("id", "name", "vendor", "architecture", "scope", "devices_in_scope")}
    row["kind"] = rec.get("kind") or hardware_kind(rec)   # HardwareQuery.run sets it; derived otherwise
    row |= {k: _v(rec, k) for k in ("memory_bytes", "memory_bandwidth_bytes_per_s", "power_w")}
    row["bf16_dense_flop_per_s"] = _bf16_dense(rec)
    return {k: v for k, v in row.items() if v is not None}


def link_row(rec: dict) -> dict:
    row = {k: rec.get(k) for k in ("id", "name", "kind", "generation")}
    row |= {k: _v(rec, k) for k in ("one_way_bytes_per_s", "latency_s")}
    return {k: v for k, v in row.items() if v is not None}


def case_row(rec: dict) -> dict:
    return {"slug": rec["slug"], "title_en": rec.get("title_en"), "title_zh": rec.get("title_zh"),
            "chapters": rec.get("cited_chapters")}


# --------------------------------------------------------------------------- look-up argument models

Text = Annotated[str | None, Field(max_length=200)]
Limit = Annotated[int, Field(ge=1, le=100, description="Rows to return.")]
Offset = Annotated[int, Field(ge=0, le=100_000, description="Rows to skip.")]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListCalculatorsArgs(_Args):
    family: Text = Field(None, description="Only this family (e.g. kv_sizing, rl).")
    q: Text = Field(None, description="Substring of the name, title or summary.")


class NameArgs(_Args):
    name: str = Field(min_length=1, max_length=100, description="Calculator name, e.g. kv-cache (or kv_cache).")


def _list_args(name: str, query: type[ListQuery], fields: tuple[str, ...], limit: int) -> type[_Args]:
    """A look-up tool's arguments: the REST list query's own filter fields (same types, bounds and
    descriptions), with a smaller page for small contexts."""
    defs = {f: (query.model_fields[f].annotation, query.model_fields[f]) for f in fields}
    return create_model(name, __base__=_Args, **defs, limit=(Limit, limit), offset=(Offset, 0))


ListModelsArgs = _list_args("ListModelsArgs", ModelQuery, ("q", "family", "kind", "attention"), 20)
ListHardwareArgs = _list_args("ListHardwareArgs", HardwareQuery, ("q", "vendor", "architecture", "scope", "kind"), 20)
ListLinksArgs = _list_args("ListLinksArgs", LinkQuery, ("kind",), 50)
ListCasesArgs = _list_args("ListCasesArgs", CaseQuery, ("q", "chapter"), 30)


class SearchArgs(_Args):
    q: str = Field(min_length=1, max_length=500, description="Words or Chinese text.")
    kind: list[Kind] | None = Field(None, description="Only these kinds: " + ", ".join(k.value for k in Kind) + ".")
    limit: Limit = 10


class FindBenchmarksArgs(_Args):
    model: Text = Field(None, description="Store model id or Hugging Face name, or part of one (deepseek-r1, "
                                          "Llama-3.1-405B).")
    hardware: Text = Field(None, description="Store hardware id or the published accelerator name, or part of one "
                                             "(h200-sxm, MI300X).")
    framework: BenchmarkFramework | None = Field(None, description="vllm, sglang, trtllm or other.")
    limit: Annotated[int, Field(ge=1, le=50, description="Points to return.")] = 10


def _id_args(field: str, example: str) -> type[_Args]:
    return type(f"Get_{field}", (_Args,), {
        "__annotations__": {field: str},
        field: Field(min_length=1, max_length=200, description=f"e.g. {example}")})


# --------------------------------------------------------------------------- the server

class _Tools:
    """The tools of one app: they read `app.state.store` (and its search index) at call time."""

    def __init__(self, app):
        self.app = app
        self.ids = _Ids(lambda: getattr(app.state, "store", None))
        self.by_tool = {c.operation_id: c for c in REGISTRY.values()}

    @property
    def store(self):
        return self.app.state.store

    # ---- calculators
    def calculator(self, name: str) -> Calculator:
        calc = REGISTRY.get(name) or self.by_tool.get(name) or REGISTRY.get(name.strip().lower().replace("_", "-"))
        if calc is None:
            hint = phrase(close_matches(name, list(REGISTRY)))
            raise ToolError(f"unknown calculator {name!r}.{hint} list_calculators names them all." if hint else
                            f"unknown calculator {name!r}; list_calculators names them all.")
        return calc

    def run(self, calc: Calculator, body: Any, ctx: Any = None) -> CallToolResult:
        if not isinstance(body, dict):
            raise ToolError(f"Invalid request ({calc.name}): the request must be a JSON object of the fields "
                            f"describe_calculator({calc.name!r}) lists, e.g. {_json(calc.example).decode()}")
        self.bounded(calc, body)
        stop_if_cancelled()
        try:
            env = calculate(calc.name, body, self.store)
        except CalculationFailed as exc:
            stop_if_cancelled()
            raise ToolError(_problem_text(calc.name, exc.body, body, calc.request_model, self.ids)) from None
        stop_if_cancelled()
        return _calculation(env, env.get("headline") or f"{calc.title}: see outputs.", _protocol_version(ctx))

    @staticmethod
    def bounded(calc: Calculator, body: Any) -> None:
        """Refuse a request with more fields than `calc` has (plus MAX_UNKNOWN_ARGUMENTS), from its length alone."""
        fields = calc.request_model.model_fields
        why = too_many(calc.name, body, fields, len(fields) + MAX_UNKNOWN_ARGUMENTS, noun="fields")
        if why is not None:
            raise ToolError(f"{why} describe_calculator({calc.name!r}) lists its fields.")

    def direct(self, calc: Calculator) -> Callable[[dict], CallToolResult]:
        def run(arguments: dict, ctx: Any = None) -> CallToolResult:
            if len(arguments) == 1 and "request" in arguments:   # calculate's shape, sent here
                request = _parse_json_object(arguments["request"])
                if isinstance(request, dict):
                    return self.run(calc, request, ctx)
            self.bounded(calc, arguments)
            body = {k: _parse_json_object(v) for k, v in arguments.items()}
            return self.run(calc, body, ctx)
        return run

    def calculate(self, arguments: dict, ctx: Any = None) -> CallToolResult:
        if not isinstance(arguments.get("name"), str):
            raise ToolError("Invalid arguments (calculate): name: required, a calculator name such as "
                            "'kv-cache'; list_calculators names them all.")
        calc = self.calculator(arguments["name"])
        rest = {k: v for k, v in arguments.items() if k != "name"}
        if "request" in rest:
            extra = sorted(set(rest) - {"request"})
            if extra:
                raise ToolError(f"Invalid arguments (calculate): unknown argument(s) {', '.join(extra)}; put the "
                                f"calculator's fields inside `request`.")
            body = _parse_json_object(rest["request"])
        else:   # the fields given beside `name`: accepted as the request
            body = rest
        return self.run(calc, body, ctx)

    def list_calculators(self, arguments: dict) -> CallToolResult:
        args = _validate(ListCalculatorsArgs, arguments, "list_calculators", self.ids)
        rows = []
        for c in REGISTRY.values():
            families = (c.family, *c.families)
            if args.family and args.family.lower() not in families:
                continue
            if args.q and args.q.lower() not in f"{c.name} {c.title} {c.summary}".lower():
                continue
            row = {"name": c.name, "family": c.family, "summary": _first_sentence(c.summary, 120)}
            if c.name in DIRECT:
                row["tool"] = c.operation_id
            rows.append(row)
        out: dict[str, Any] = {"total": len(rows), "calculators": rows,
                               "next": "describe_calculator(name) for the request schema and an example; "
                                       "calculate(name, request) to run one."}
        if not rows and args.family:
            known = sorted({f for c in REGISTRY.values() for f in (c.family, *c.families)})
            out["hint"] = f"no family {args.family!r}.{phrase(close_matches(args.family, known))}"
        return _result(out)

    def describe_calculator(self, arguments: dict) -> CallToolResult:
        args = _validate(NameArgs, arguments, "describe_calculator", self.ids)
        c = self.calculator(args.name)
        out: dict[str, Any] = {
            "name": c.name, "title": c.title, "family": c.family, "summary": c.summary, "method": c.description,
            "tool": c.operation_id if c.name in DIRECT else None,
            "call": f"calculate(name={c.name!r}, request=<object>)",
            "sweepable": list(c.sweepable), "example": c.example, "more_examples": list(c.extra_examples[:2]),
            "request_schema": c.request_model.model_json_schema(),
            "cases": case_refs(self.store, c.cases),
        }
        if c.outputs_model is not None:
            out["outputs"] = {n: f.description or "" for n, f in c.outputs_model.model_fields.items()}
        stop_if_cancelled()
        try:   # the example's answer: output keys (units in their names), magnitudes and the method's steps
            env = calculate(c.name, c.example, self.store)
            out["example_headline"] = env.get("headline", "")
            out["example_outputs"] = {k: (v[:3] + ["…"] if isinstance(v, list) and len(v) > 3 else v)
                                      for k, v in jsonable(env["outputs"]).items()}   # sweeps are arrays
            out["example_steps"] = [{k: st.get(k) for k in ("label", "formula", "unit")} for st in env["steps"]]
        except CalculationFailed:
            pass
        return _result({k: v for k, v in out.items() if v is not None})

    # ---- look-ups
    def _page(self, kind: str, query: BaseModel, row: Callable[[dict], dict], filters: dict) -> CallToolResult:
        page = query.run(self.store)
        out: dict[str, Any] = {"total": page.total, "offset": page.offset, "items": [row(r) for r in page.items]}
        if page.offset + len(page.items) < page.total:
            out["next_offset"] = page.offset + len(page.items)
        if not page.total:   # an exact filter that matches nothing: the values it could have been
            hints = []
            for field, value in filters.items():
                if not value:
                    continue
                values = sorted({str(r[field]) for r in self.store.all(kind) if r.get(field)})
                if value.lower() not in {v.lower() for v in values}:
                    near = phrase(close_matches(value, values))
                    hints.append(f"no {kind} with {field} {value!r}.{near}" if near else
                                 f"no {kind} with {field} {value!r}; known: {', '.join(values[:20])}.")
            if hints:
                out["hint"] = " ".join(hints)
        return _result(out)

    def _list(self, tool: str, args: type[_Args], query: type[ListQuery], row: Callable[[dict], dict],
              arguments: dict) -> CallToolResult:
        """A page of the REST list `query` from a look-up tool's arguments; its exact filters give the hints."""
        a = _validate(args, arguments, tool, self.ids)
        return self._page(query.kind_listed, query(**a.model_dump()), row,
                          {f: getattr(a, f) for f in query.exact if f in args.model_fields})

    def list_models(self, arguments: dict) -> CallToolResult:
        return self._list("list_models", ListModelsArgs, ModelQuery, model_row, arguments)

    def list_hardware(self, arguments: dict) -> CallToolResult:
        return self._list("list_hardware", ListHardwareArgs, HardwareQuery, hardware_row, arguments)

    def list_links(self, arguments: dict) -> CallToolResult:
        return self._list("list_links", ListLinksArgs, LinkQuery, link_row, arguments)

    def list_cases(self, arguments: dict) -> CallToolResult:
        return self._list("list_cases", ListCasesArgs, CaseQuery, case_row, arguments)

    def search(self, arguments: dict) -> CallToolResult:
        a = _validate(SearchArgs, arguments, "search", self.ids)
        kinds = {k.value for k in a.kind} if a.kind else None
        hits, total = self.app.state.search_index.search(a.q, kinds, a.limit, 0)
        return _result({"query": a.q, "total": total,
                        "items": [{"kind": d.kind, "id": d.id, "title": d.title, "url": d.url, "api_url": d.api_url,
                                   "snippet": d.snippet, "score": round(s, 4)} for d, s in hits]})

    def find_benchmarks(self, arguments: dict) -> CallToolResult:
        """The published points nearest to a model on an accelerator: a short table with their sources as text, the
        compact rows as structured content."""
        a = _validate(FindBenchmarksArgs, arguments, "find_benchmarks", self.ids)
        points = self.store.all("benchmark")
        found = benchmark_text.nearest(points, a.model, a.hardware, a.framework)
        shown = found[:a.limit]
        asked = " on ".join(x for x in (a.model, a.hardware) if x) or "any model on any accelerator"
        asked += f" with {a.framework}" if a.framework else ""
        out: dict[str, Any] = {"total": len(found), "items": [benchmark_text.row(p) for p in shown],
                               "list": "/api/v1/benchmarks"}
        if not found:
            known = [("model", a.model, [n for p in points for n in (p.get("model"), p.get("model_hf")) if n]),
                     ("hardware", a.hardware, [n for p in points for n in (p.get("hardware"), p.get("hardware_name")) if n])]
            hints = [f"no point for {what} {value!r}." + (phrase(close_matches(value, sorted(set(names)))) or
                                                          f" Stored: {', '.join(sorted(set(names))[:12])}.")
                     for what, value, names in known if value]
            out["hint"] = " ".join(hints) or f"no point with framework {a.framework!r}."
            text = f"No published measurement stored for {asked}. {out['hint']}"
        else:
            text = (f"{len(found)} published measurement(s) for {asked}, nearest first"
                    f"{f' (showing {len(shown)})' if len(shown) < len(found) else ''}; TTFT and TPOT are the "
                    "median where the source prints one, else the mean:\n\n" + benchmark_text.table(shown))
        raw = _json(out)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=orjson.loads(raw))

    def getter(self, kind: str, field: str, example: str) -> tuple[type[_Args], Callable[[dict], CallToolResult]]:
        model = _id_args(field, example)

        def get(arguments: dict) -> CallToolResult:
            a = _validate(model, arguments, f"get_{kind}", self.ids)
            ident = getattr(a, field)
            rec, how = self.store.get(kind, ident), None
            if rec is None and kind == "model":
                rec, how = self._resolve_model(field, ident)
            if rec is None:
                raise ToolError(f"{field}: {self.ids.unknown(kind, ident)}")
            if kind == "case":
                rec = {**rec, "derivations": self.store.derivations_of(ident)}
            if how:
                # the record as stored, with how the name was read said first (text) and beside it (structured)
                raw = _json({"resolution": how, **rec})
                return CallToolResult(content=[TextContent(type="text", text=how), TextContent(type="text", text=raw.decode())],
                                      structured_content=orjson.loads(raw))
            return _result(rec)
        return model, get

    def _resolve_model(self, field: str, ident: str) -> tuple[dict | None, str | None]:
        """A model named by a Hugging Face repository, a case variant or without -Instruct, as calculators read
        `model`: (record, "`asked` read as `id`"), or (None, None) when it reads as no model."""
        try:
            mid, _ = resolve_model_id(self.store.lookup, ident, field)
        except AmbiguousModelId as exc:
            raise ToolError(f"{field}: {exc.message}") from None
        except UnknownId:
            return None, None
        return self.store.get("model", mid), f"`{ident}` read as `{mid}`"


#: the get_<kind> tools: kind, argument, an example id, description
GETTERS = (
    ("case", "slug", "multi-lora-serving",
     "One case study: summary, chapters, source and its worked examples with calculator requests."),
    ("model", "model_id", "qwen3-8b",
     "One model (store id or Hugging Face repo name, any case): every number with source and locator, and its attention layer groups."),
    ("hardware", "hardware_id", "h100-sxm",
     "One accelerator or system: memory, bandwidth, power, per-precision peaks, each sourced."),
    ("link", "link_id", "nvlink4", "One interconnect: one-way bandwidth, latency, direction convention, sources."),
)


def build_tools(app) -> list[Tool]:
    t = _Tools(app)
    tools = [
        _tool("list_calculators", t.list_calculators, "Every calculator: name, family, one-line summary (and its own "
              "tool, if it has one). Filter by family or a word.", _args_schema(ListCalculatorsArgs)),
        _tool("describe_calculator", t.describe_calculator, "One calculator in full: request JSON schema, a valid "
              "example, sweepable fields, method, the outputs of the example and the book's cases.",
              _args_schema(NameArgs)),
        _tool("calculate", t.calculate, "Run any calculator: name (see list_calculators) and request (an object of "
              "its fields, see describe_calculator). Returns headline, outputs, steps, assumptions, sources, cases.",
              {"type": "object", "properties": {
                  "name": {"type": "string", "description": "e.g. kv-cache"},
                  "request": {"type": "object", "description": "The calculator's fields, e.g. "
                                                                "{\"model\":\"qwen3-8b\",\"tokens\":8192}"}},
               "required": ["name", "request"], "additionalProperties": False},
              output_schema=ENVELOPE_SCHEMA,
              # the fields of any calculator may also come beside `name`
              extra_arguments=max(len(c.request_model.model_fields) for c in REGISTRY.values())),
    ]
    for name in DIRECT:
        c = REGISTRY.get(name)
        if c is None:
            continue
        # which fields sweep is said by each of them ("list = sweep"), not again here
        example = min([c.example, *c.extra_examples], key=lambda e: len(_json(e)))   # the shortest shows the shape
        desc = _first_sentence(c.summary, 400) + "." + \
            f" Example: {_json(example).decode()}. Full schema: describe_calculator('{c.name}')."
        tools.append(_tool(c.operation_id, t.direct(c), desc, compact_schema(c), title=c.title,
                           output_schema=ENVELOPE_SCHEMA))
    tools += [
        _tool("list_models", t.list_models, "Model architectures (id, name, family, kind, attention, layers, "
              "params, context); filter by name, family, kind, attention.", _args_schema(ListModelsArgs)),
        _tool("list_hardware", t.list_hardware, "Accelerators and systems (id, name, vendor, scope, kind, memory, "
              "bandwidth, power, BF16 dense FLOP/s); filter by name, vendor, architecture, scope, kind.",
              _args_schema(ListHardwareArgs)),
        _tool("list_links", t.list_links, "Interconnects (id, name, kind, one-way bytes/s, latency).",
              _args_schema(ListLinksArgs)),
        _tool("list_cases", t.list_cases, "The book's case studies (slug, titles, chapters); filter by title or "
              "chapter.", _args_schema(ListCasesArgs)),
        _tool("search", t.search, "Search cases, models, hardware, links, frameworks, worked examples, glossary "
              "and claims (English or Chinese): ranked hits with URLs.", _args_schema(SearchArgs)),
        _tool("find_benchmarks", t.find_benchmarks, "What did anyone measure for a model on an accelerator? Published "
              "end-to-end serving results (MLPerf, InferenceX, vendor pages): the nearest points with configuration, "
              "load, TTFT, TPOT, tokens/s per device and the source of each.", _args_schema(FindBenchmarksArgs)),
    ]
    for kind, field, example, desc in GETTERS:
        model, fn = t.getter(kind, field, example)
        tools.append(_tool(f"get_{kind}", fn, desc, _args_schema(model)))
    return tools


def build_server(app) -> MCPServer:
    return MCPServer(name="ai-infra-casebook", title="AI Infra Casebook", version=VERSION,
                     instructions=INSTRUCTIONS, log_level="WARNING", tools=build_tools(app))


def mount(app) -> None:
    """Add the MCP endpoint at /mcp and hook its session manager into the app's lifespan."""
    server = build_server(app)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True,
        # Host/Origin (DNS rebinding) and the methods are checked in front of /mcp by api.middleware.McpGuard,
        # which answers refusals as problem+json and reads the allowed lists from the environment.
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
