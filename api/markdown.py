"""The calculator envelope as Markdown, for agents that paste answers (`Accept: text/markdown`).

Values are rendered as Markdown, never as Python reprs: the headline first, scalars with their unit (read from the
key's SI suffix: `_bytes`, `_s`, `_usd`, …), booleans as yes/no, null as "—", lists of records as tables, nested
objects as nested lists, long lists summarised. A sweep's outputs arrive as NumPy arrays (they stay arrays until
the wire): a long one is summarised from the array itself, never converted whole.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request

from calculators.framework import headline as hf
from calculators.framework import LIST_SEP, jsonable, num

TEMPLATES = Path(__file__).resolve().parent / "templates"   # package data of `api`
_env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=False, undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True)

#: Lists longer than this are summarised (count, first, last, range) instead of printed in full.
MAX_LIST = 8
#: Rows of a record table printed before the rest is summarised.
MAX_ROWS = 50
#: Nesting depth rendered as nested lists; deeper values are rendered inline.
MAX_DEPTH = 4


def wants_markdown(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/markdown" in accept and "application/json" not in accept.split("text/markdown")[0]


# --------------------------------------------------------------------------- scalars

def _unit_of(key: str | None) -> str:
    """The unit a field name carries (`weight_bytes` → bytes, `wall_s` → seconds), or ''."""
    k = (key or "").lower()
    if k.endswith("_per_s") and not k.endswith(("_bytes_per_s", "_bits_per_s", "_flop_per_s")):
        return "per_s"
    for suffix, unit in (("_bytes_per_s", "rate"), ("_bits_per_s", "bitrate"), ("_flop_per_s", "flop_rate"),
                         ("_usd_per_h", "usd_h"), ("_usd", "usd"), ("_bytes", "bytes"), ("_flops", "flops"),
                         ("_kwh", "kwh"), ("_s", "s"), ("_w", "w"), ("_j", "j")):
        if k.endswith(suffix) or k == suffix[1:]:
            return unit
    if k in ("bytes", "payload_bytes"):
        return "bytes"
    if k == "flops":
        return "flops"
    return ""


def scalar(value: Any, key: str | None = None) -> str:
    """One value as Markdown text: yes/no, —, a number with its unit, or the string itself."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        v = float(value)
        if math.isnan(v):
            return "—"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        unit = _unit_of(key)
        if unit == "bytes":
            return f"{num(v)} B" if abs(v) < 1000 else f"{num(v)} B = {hf.fmt_bytes(v)}"
        if unit == "s":
            return f"{num(v)} s" if 1 <= abs(v) < 120 or v == 0 else f"{num(v)} s = {hf.fmt_seconds(v)}"
        if unit == "per_s":
            return f"{num(v)}/s"
        if unit == "usd":
            return hf.fmt_usd(v)
        if unit == "usd_h":
            return f"{hf.fmt_usd(v)}/h"
        if unit == "rate":
            return f"{num(v)} B/s = {hf.fmt_rate(v)}"
        if unit == "bitrate":
            return f"{num(v)} bit/s"
        if unit == "flop_rate":
            return f"{num(v)} FLOP/s = {hf.fmt_flop_rate(v)}"
        if unit == "flops":
            return f"{num(v)} FLOP"
        if unit == "kwh":
            return f"{num(v)} kWh"
        if unit == "w":
            return f"{num(v)} W"
        if unit == "j":
            return f"{num(v)} J"
        return num(v)
    if isinstance(value, str):
        return value
    return inline(value, key)


def inline(value: Any, key: str | None = None) -> str:
    """Any value on one line (for table cells and list items): lists joined, objects as `k: v; …`."""
    if isinstance(value, (np.ndarray, np.generic)):
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.size > MAX_LIST and value.dtype.kind in "fiu":
            return _array_summary(value, key)
        return inline(jsonable(value), key) if isinstance(value, np.ndarray) else scalar(jsonable(value), key)
    if isinstance(value, dict):
        if not value:
            return "—"
        return "; ".join(f"{k}: {_member(v, k)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return _scalar_list(list(value), key)
        shown = [inline(v, key) for v in value[:MAX_LIST]]
        more = f" … ({len(value)} in all)" if len(value) > MAX_LIST else ""
        return " / ".join(f"({s})" for s in shown) + more
    return scalar(value, key)


def _scalar_list(values: list, key: str | None) -> str:
    if len(values) <= MAX_LIST:
        return LIST_SEP.join(scalar(v, key) for v in values)
    numeric = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(float(v))]
    text = f"{len(values):,} values: {scalar(values[0], key)} … {scalar(values[-1], key)}"
    if len(numeric) > 1:
        text += f" (min {scalar(min(numeric), key)}{LIST_SEP}max {scalar(max(numeric), key)})"
    return text


def _member(value: Any, key: str) -> str:
    """A value inside an object's `k: v; …` line: a list of several items in brackets, so that its own
    separator (LIST_SEP, "; ") is not read as the object's."""
    text = inline(value, key)
    several = isinstance(value, (list, tuple)) and len(value) > 1 or isinstance(value, np.ndarray) and value.size > 1
    return f"[{text}]" if several else text


def _array_summary(values: np.ndarray, key: str | None) -> str:
    """A long numeric sweep as `_scalar_list` writes a long list (count, first … last, min and max of the finite
    values), read from the array."""
    text = f"{values.size:,} values: {scalar(jsonable(values[0]), key)} … {scalar(jsonable(values[-1]), key)}"
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    if finite.size > 1:
        text += f" (min {scalar(float(finite.min()), key)}{LIST_SEP}max {scalar(float(finite.max()), key)})"
    return text


def cell(value: Any, key: str | None = None) -> str:
    """A Markdown table cell: inline text with pipes escaped and newlines flattened."""
    text = value if isinstance(value, str) else inline(value, key)
    return text.replace("|", "\\|").replace("\n", " ")


# --------------------------------------------------------------------------- blocks

def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def table(rows: list[dict]) -> str:
    """A list of records as a Markdown table (columns: the union of keys, in first-seen order)."""
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for r in rows[:MAX_ROWS]:
        lines.append("| " + " | ".join(cell(r.get(c), c) for c in cols) + " |")
    if len(rows) > MAX_ROWS:
        lines.append(f"\n… {len(rows) - MAX_ROWS:,} more rows ({len(rows):,} in all).")
    return "\n".join(lines)


def block(key: str, value: Any, depth: int = 0) -> str:
    """`- **key**: value` as Markdown: nested objects as nested lists, lists of records as tables."""
    pad = "  " * depth
    if isinstance(value, dict) and value and depth < MAX_DEPTH:
        inner = "\n".join(block(k, v, depth + 1) for k, v in value.items())
        return f"{pad}- **{key}**:\n{inner}"
    if _is_records(value) and depth < MAX_DEPTH:
        body = "\n".join(f"{pad}  {line}" for line in table(value).splitlines())
        return f"{pad}- **{key}**:\n\n{body}\n"
    return f"{pad}- **{key}**: {inline(value, key)}"


def outputs_markdown(outputs: dict) -> str:
    """The outputs object as a Markdown list (tables for lists of records)."""
    return "\n".join(block(k, v) for k, v in (outputs or {}).items())


_env.filters["cell"] = cell
_env.filters["md"] = inline
_env.globals["outputs_markdown"] = outputs_markdown


def render_markdown(envelope: dict, calc) -> str:
    return _env.get_template("calculator.md.j2").render(e=envelope, calc=calc)
