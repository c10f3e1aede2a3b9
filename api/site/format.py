"""Formatting for people: numbers with their unit readings, JSON for attributes, sourced-fact walks.

Presentation only: nothing here reads the store. The functions become Jinja filters and globals
(see `api.site.render`), and views use the record walks (`iter_facts`, `cited_sources`).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from markupsafe import Markup

from calculators.framework import fmt_s, num

Scale = tuple[tuple[float, str, str], ...]


def _abbr(unit: str, title: str) -> Markup:
    """A unit with its meaning as a tooltip (GB: 10⁹ bytes)."""
    return Markup('<abbr title="{}">{}</abbr>').format(title, unit)


DEC: Scale = ((1e15, "PB", "10¹⁵ bytes (decimal)"), (1e12, "TB", "10¹² bytes (decimal)"), (1e9, "GB", "10⁹ bytes (decimal)"),
       (1e6, "MB", "10⁶ bytes (decimal)"), (1e3, "kB", "10³ bytes (decimal)"))
BIN: Scale = ((2**50, "PiB", "2⁵⁰ bytes (binary)"), (2**40, "TiB", "2⁴⁰ bytes (binary)"), (2**30, "GiB", "2³⁰ bytes (binary)"),
       (2**20, "MiB", "2²⁰ bytes (binary)"), (2**10, "KiB", "2¹⁰ bytes (binary)"))


def _scaled(v: float, table: Scale) -> tuple[float, str, str] | None:
    """`v` in the largest unit of `table` it reaches (None below the smallest)."""
    for factor, unit, title in table:
        if abs(v) >= factor:
            return v / factor, unit, title
    return None


def human_bytes(v: float, per: str = "") -> Markup:
    """`80 GB = 74.51 GiB` with both prefixes labelled (decimal and binary)."""
    if abs(v) < 1000:
        return Markup("{} B{}").format(num(v), per)
    d = _scaled(v, DEC)
    b = _scaled(v, BIN)
    parts = [Markup("{} {}{}").format(num(d[0], 4), _abbr(d[1], d[2]), per)]
    if b:
        parts.append(Markup("{} {}{}").format(num(b[0], 4), _abbr(b[1], b[2]), per))
    return Markup(" = ").join(parts)


def _si(v: float, unit: str, digits: int = 4) -> str:
    """`v` with a decimal SI prefix (k, M, G … E)."""
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{num(v / factor, digits)} {prefix}{unit}"
    return f"{num(v, digits)} {unit}"


#: rates read in one fixed prefix where people compare them (TFLOP/s for accelerators, TB/s for memory, GB/s for links)
RATE_BYTES: Scale = ((1e12, "TB/s", "10¹² bytes per second"), (1e9, "GB/s", "10⁹ bytes per second"),
                     (1e6, "MB/s", "10⁶ bytes per second"), (1e3, "kB/s", "10³ bytes per second"))
RATE_FLOP: Scale = ((1e17, "PFLOP/s", "10¹⁵ operations per second"), (1e12, "TFLOP/s", "10¹² operations per second"),
                    (1e9, "GFLOP/s", "10⁹ operations per second"), (1e6, "MFLOP/s", "10⁶ operations per second"))


def rate(v: float, scale: Scale, unit: str) -> Markup:
    """A rate in the prefix people compare it in (`1,978.9 TFLOP/s`, `3.35 TB/s`, `450 GB/s`), the prefix
    explained in a tooltip; PFLOP/s only from 100,000 TFLOP/s so that accelerators compare in one unit."""
    for factor, name, title in scale:
        if abs(v) >= factor:
            if name == "PFLOP/s":
                factor = 1e15
            return Markup("{} {}").format(num(v / factor, 5), _abbr(name, title))
    return Markup("{} {}").format(num(v, 5), unit)


def human(key: str, value: Any) -> Markup | str:
    """A reading of a number for people, chosen by the unit its field name carries ('' when none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    v = float(value)
    if not math.isfinite(v):
        return ""
    k = key.lower()
    if v == 0:
        return ""
    words = k.split("_")
    if k.endswith("bytes_per_s"):
        return rate(v, RATE_BYTES, "B/s")
    if "bytes" in words:  # bytes, kv_bytes, bytes_per_token, per_device_bytes_per_request …
        return human_bytes(v)
    if k.endswith("_bits_per_s"):
        return _si(v, "bit/s")
    if k.endswith(("flop_per_s", "flops_per_s")):
        return rate(v, RATE_FLOP, "FLOP/s")
    if k.endswith("_flops") or k == "flops":
        return _si(v, "FLOP")
    if k.endswith("_usd_per_mtok"):
        return f"${num(v, 4)} per 10⁶ tokens"
    if k.endswith("_usd"):
        return f"${num(v, 6)}"
    if k.endswith("_w"):
        return _si(v, "W")
    if k.endswith("_j"):
        return _si(v, "J")
    if k.endswith("_s") and not k.endswith(("_per_s", "tokens", "_rounds")):
        return fmt_s(v)
    return ""


UNIT_KEYS: dict[str, str] = {"b": "x_bytes", "bytes": "x_bytes", "byte": "x_bytes", "b/s": "x_bytes_per_s", "bytes/s": "x_bytes_per_s",
             "bit/s": "x_bits_per_s", "s": "x_s", "seconds": "x_s", "flop": "x_flops", "flops": "x_flops",
             "flop/s": "x_flop_per_s", "w": "x_w", "j": "x_j", "usd": "x_usd"}


def unit_key(unit: str) -> str:
    """A step's unit as a field name suffix, so that `human` can add a reading (B → GB and GiB)."""
    return UNIT_KEYS.get(str(unit or "").strip().lower(), "")


def step_reading(value: Any, unit: str) -> Markup | str:
    """A step value's reading in other units, when it says more than `value unit`."""
    r = human(unit_key(unit), value)
    if not r or str(r) == f"{num(value, 8)} {unit}" or str(r) == f"{num(value, 5)} {unit}":
        return ""
    return r


def show(value: Any) -> str:
    """The number itself, as computed: thousands separators (whole numbers up to 10²¹ in full, so a peak
    rate reads 1,978,900,000,000,000 rather than 1.9789e+15); scientific only for extremes."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if float(value).is_integer() and 1e15 <= abs(value) < 1e21:
            return f"{int(value):,}"
        return num(value, 8)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def raw(value: Any) -> str:
    """A value for a data-value attribute: machine-readable (no separators), lists and objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pretty_json(value: Any) -> str:
    """Indented JSON, for text areas and code blocks."""
    return json.dumps(value, ensure_ascii=False, indent=2)


def compact_json(value: Any) -> str:
    """One-line JSON with spaces after separators, for table cells."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def is_fact(node: Any) -> bool:
    """Is this a sourced number (`{value, source, locator …}`)?"""
    return isinstance(node, dict) and "value" in node and "source" in node


def iter_facts(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every sourced number of a record: (dotted field path, fact)."""
    if is_fact(node):
        yield path, node
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("layer_groups_provenance",):
                continue
            yield from iter_facts(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from iter_facts(v, f"{path}.{i}")


def cited_sources(*records: Any) -> list[str]:
    """Source ids cited anywhere in the given records, in first-seen order."""
    seen: dict[str, None] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            src = node.get("source") if "source" in node else node.get("source_id")
            if isinstance(src, str):
                seen.setdefault(src)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for r in records:
        walk(r)
    return list(seen)


def _prose(value: Any) -> bool:
    """Is this output a sentence (an explanation such as `why`) rather than a name or a number?"""
    return isinstance(value, str) and len(value) > 40 and value.count(" ") >= 5


#: order of the result table: explanations first (shown above it), then numbers, lists, tables of objects
_ROW_ORDER = {"prose": 0, "value": 1, "list": 2, "table": 3}


def flatten_outputs(outputs: dict, prefix: str = "") -> list[dict[str, Any]]:
    """Output rows for the result page: sentences (`kind` prose, shown above the table), scalars, short
    lists, and lists of objects as sub-tables (last, full width), in that order; the outputs' own order within each."""
    rows: list[dict[str, Any]] = []
    for key, value in outputs.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            rows.extend(flatten_outputs(value, path))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            cols: list[str] = []
            for v in value:
                for c in v:
                    if c not in cols:
                        cols.append(c)
            table = [[(c, v.get(c), f"{path}.{i}.{c}") for c in cols] for i, v in enumerate(value)]
            rows.append({"path": path, "key": key, "kind": "table", "table": {"cols": cols, "rows": table}})
        elif isinstance(value, list):
            rows.append({"path": path, "key": key, "kind": "list", "list": value, "n": len(value)})
        else:
            rows.append({"path": path, "key": key, "kind": "prose" if _prose(value) else "value", "value": value})
    if not prefix:
        rows.sort(key=lambda r: _ROW_ORDER[r["kind"]])
    return rows
