"""The GET forms of calculator pages: one field per request property, and the query string read back
into a request body.

A calculator page takes its request as `body` (JSON) and/or one parameter per top-level field
(`?model=qwen3-8b&tokens=1024,2048`); fields override the body. A list field may also be given as
repeated parameters, the standard HTML encoding of a multiple choice (`target_modules=q_proj&target_modules=v_proj`),
and the two spellings mix. The request model validates the result afterwards, so this module only
turns text into JSON values and says which text is not JSON.

Fields that name a stored record (`model`, `hardware`, `link` …) offer the store's ids: a
`<datalist>` for one id (free typing stays possible), a multiple `<select>` for a list of ids.
"""
from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import QueryParams

from api.site.format import compact_json, pretty_json
from api.site.render import ENV, store_of
from calculators.framework.registry import Calculator

Spec = dict[str, Any]
Problem = dict[str, Any]

#: request fields that name a stored record: field name -> store kind
ID_FIELDS: dict[str, str] = {"model": "model", "hardware": "hardware", "link": "link",
                             "pp_link": "link", "price": "price", "framework": "framework"}


class FieldError(Exception):
    """A form value that cannot be read (named by field, shown on the 422 page)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def _kinds(prop: dict, defs: dict) -> tuple[set[str], list[str], bool]:
    """(JSON kinds, enum values, is an array) of a schema property, through $ref, anyOf and oneOf."""
    def deref(s: dict) -> dict:
        while isinstance(s, dict) and "$ref" in s:
            s = defs.get(s["$ref"].rsplit("/", 1)[-1], {})
        return s

    kinds: set[str] = set()
    enum: list[str] = []
    is_array = False
    stack = [prop]
    while stack:
        s = deref(stack.pop())
        if "anyOf" in s or "oneOf" in s:
            stack.extend(s.get("anyOf") or s.get("oneOf"))
            continue
        if "enum" in s:
            kinds.add("enum")
            enum.extend(str(e) for e in s["enum"])
            continue
        if "const" in s:
            kinds.add("enum")
            enum.append(str(s["const"]))
            continue
        t = s.get("type")
        if t == "array":
            is_array = True
            item = deref(s.get("items") or {})
            members = [deref(m) for m in item.get("anyOf") or [item]]     # a unit field's items: number or string
            kinds.add("list" if all(m.get("type") in ("number", "integer", "string") and "enum" not in m for m in members)
                      else "json")
        elif t == "object" or "properties" in s:
            kinds.add("json")
        elif t in ("number", "integer", "string", "boolean", "null"):
            kinds.add(t)
        elif not s:
            kinds.add("json")
    kinds.discard("null")
    return kinds, enum, is_array


def _widget(kinds: set[str]) -> str:
    if "json" in kinds:
        return "textarea"
    if kinds == {"boolean"}:
        return "bool"
    if kinds == {"enum"}:
        return "select"
    return "input"


def field_specs(calc: Calculator) -> list[Spec]:
    """One form field per top-level request property, from the request model's JSON schema."""
    schema = calc.request_model.model_json_schema()
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        kinds, enum, is_array = _kinds(prop, defs)
        ids = ID_FIELDS.get(name) if (kinds <= {"string"} or kinds == {"list"}) and not enum else None
        widget = _widget(kinds)
        if ids and kinds == {"list"}:
            widget = "multi"        # a list of stored ids: several choices
        out.append({"name": name, "title": prop.get("title", name), "description": prop.get("description", ""),
                    "default": prop.get("default"), "has_default": "default" in prop, "required": name in required,
                    "kinds": sorted(kinds), "widget": widget, "enum": list(dict.fromkeys(enum)),
                    "sweepable": name in calc.sweepable, "string_only": kinds <= {"string", "enum"},
                    "array": is_array, "list_only": kinds == {"list"}, "string_items": _string_items(prop, defs),
                    "ids": ids, "schema": prop,
                    # one plain number: a phone may open its numeric keypad; a unit field ("80 GiB"), a list ("1, 2, 4")
                    # or an id needs letters or commas, so it keeps the full keyboard
                    "numbers_only": bool(kinds) and kinds <= {"number", "integer"}})
    return out


def _string_items(prop: dict, defs: dict) -> bool:
    """Is this a list of strings (so `1, 2` stays text instead of becoming numbers)?"""
    stack = [prop]
    while stack:
        s = stack.pop()
        while isinstance(s, dict) and "$ref" in s:
            s = defs.get(s["$ref"].rsplit("/", 1)[-1], {})
        stack.extend(s.get("anyOf") or s.get("oneOf") or [])
        if s.get("type") == "array" and isinstance(s.get("items"), dict) and s["items"].get("type") == "string":
            return True
    return False


def id_choices(request: Any, kind: str) -> list[dict[str, str]]:
    """The stored records a field may name: [{id, name}] sorted by id (options of a datalist or select)."""
    store = store_of(request)
    if store is None:
        return []
    return sorted(({"id": str(r["id"]), "name": str(r.get("name") or r["id"])} for r in store.all(kind) if r.get("id")),
                  key=lambda o: o["id"].lower())


ENV.globals["id_choices"] = id_choices


def parse_field(spec: Spec, raw: str) -> Any:
    """A form value as JSON for the request: numbers, lists (`1, 2, 4` or `[1, 2, 4]`), objects, strings."""
    raw = raw.strip()
    if spec["string_only"]:
        return raw
    if spec["widget"] == "bool":
        return raw.lower() in ("true", "1", "yes", "on")
    try:
        value = json.loads(raw)
    except ValueError:
        pass
    else:
        if spec.get("list_only") and not isinstance(value, list):
            return [raw if spec.get("string_items") else value]
        return value
    if (spec["array"] or spec["sweepable"]) and "," in raw:
        return [part.strip() if spec.get("string_items") else _scalar(part) for part in raw.split(",") if part.strip()]
    if spec.get("list_only"):
        return [raw if spec.get("string_items") else _scalar(raw)]  # one element of a list field
    if "string" in spec["kinds"] or "enum" in spec["kinds"]:
        return raw
    if spec["widget"] == "textarea":
        raise FieldError(spec["name"], "is not valid JSON")
    return raw  # the request model names the problem


def _scalar(part: str) -> Any:
    """One element of a comma-separated list: JSON when it reads as JSON, else the text."""
    part = part.strip()
    try:
        return json.loads(part)
    except ValueError:
        return part


def show_plain(v: Any) -> str:
    """A scalar as a user would type it (whole floats without `.0`, booleans lower case)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v)) if abs(v) < 1e6 else repr(v)
    return json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v


def field_text(value: Any, widget: str = "input") -> str:
    """A request value as the text of its form field (what `parse_field` reads back)."""
    if value is None:
        return ""
    if widget == "textarea":
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
            return pretty_json(value)
        return value if isinstance(value, str) else compact_json(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)) and (isinstance(value, dict) or any(isinstance(v, (dict, list)) for v in value)):
        return pretty_json(value)
    if isinstance(value, list):
        return ", ".join(show_plain(v) for v in value)
    return show_plain(value)


def _problem(detail: str, errors: list[dict[str, str]]) -> Problem:
    return {"title": "Invalid request", "status": 422, "detail": detail, "errors": errors}


def request_from_query(params: QueryParams, calc: Calculator, specs: list[Spec]) -> tuple[dict | None, str, Problem | None]:
    """(body, how it was given, problem): `body` JSON and/or individual fields; the example when neither.

    `given` is `example`, `body`, `fields` or `body+fields` (the page says which it computed)."""
    raw_body = params.get("body", "").strip()
    body: dict = {}
    given = "example"
    if raw_body:
        given = "body"
        try:
            parsed = json.loads(raw_body)
        except ValueError as exc:
            return None, given, _problem("body: not valid JSON",
                                         [{"field": "body", "in": "query", "message": f"not valid JSON: {exc}"}])
        if not isinstance(parsed, dict):
            return None, given, _problem("body: must be a JSON object",
                                         [{"field": "body", "in": "query", "message": "must be a JSON object"}])
        body = parsed
    by_name = {s["name"]: s for s in specs}
    errors = []
    grouped: dict[str, list[str]] = {}
    for key, raw in params.multi_items():
        if key in by_name and raw.strip() != "":
            grouped.setdefault(key, []).append(raw)
    for key, raws in grouped.items():
        spec = by_name[key]
        given = "fields" if given == "example" else "body+fields"
        try:
            body[key] = _repeated(spec, raws)
        except FieldError as exc:
            errors.append({"field": exc.field, "in": "query", "message": exc.message})
    if errors:
        return body, given, _problem("invalid field(s): " + ", ".join(e["field"] for e in errors), errors)
    if given == "example":
        body = dict(calc.example)
    return body, given, None


def _repeated(spec: Spec, raws: list[str]) -> Any:
    """A field given once, or repeated: a list field joins its values (each may itself be `a, b`);
    any other field takes its last value, as a form post would."""
    if len(raws) == 1 or not (spec["array"] or spec["sweepable"]):
        return parse_field(spec, raws[-1])
    values: list[Any] = []
    for raw in raws:
        v = parse_field(spec, raw)
        values.extend(v if isinstance(v, list) else [v])
    return values


def field_schema(calc: Calculator, specs: list[Spec], name: str) -> dict | None:
    """JSON schema of a request field, top level or inside a nested object (for sweep ranges)."""
    schema = next((s["schema"] for s in specs if s["name"] == name), None)
    if schema is None:
        for d in (calc.request_model.model_json_schema().get("$defs") or {}).values():
            if name in (d.get("properties") or {}):
                return d["properties"][name]
    return schema
