"""The text content of an MCP calculator result: the headline and a short summary, not the envelope a second time.

A calculator tool answers the whole envelope as `structuredContent` (declared by its `outputSchema`, protocol
2025-06-18 and later). Its text content is what a model or a person reads first: the headline, the outputs one line
each with their units (read from the field names, as the Markdown explanation reads them), what else the structured
result holds, and the link to the page that explains the calculation step by step. A client that negotiated an
older protocol (2024-11-05, 2025-03-26) has no `structuredContent`, so its text also carries the envelope as JSON.
"""
from __future__ import annotations

from typing import Any

from mcp_types.version import is_version_at_least

from api.markdown import inline
from api.urls import base_url, urls

#: the first protocol revision with `structuredContent` and `outputSchema`
STRUCTURED_SINCE = "2025-06-18"
#: output lines in the summary; the rest is counted and left to the structured result
MAX_OUTPUT_LINES = 12
#: characters of one output line before it is cut with "…"
MAX_LINE = 160
#: explanation links longer than this (a large request in the query) are replaced by the calculator's page
MAX_LINK = 600


def structured_content_supported(protocol_version: str | None) -> bool:
    """Whether a client of `protocol_version` reads `structuredContent` (an unknown or missing version: no)."""
    return bool(protocol_version) and is_version_at_least(protocol_version, STRUCTURED_SINCE)


def _cut(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _output_line(key: str, value: Any) -> str:
    """`- key: value with its unit` on one line; a list of records says how many and which columns it has."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        columns = list(dict.fromkeys(k for row in value[:3] for k in row))
        shown = ", ".join(columns[:6]) + (", …" if len(columns) > 6 else "")
        return _cut(f"- {key}: {len(value):,} row{'s' if len(value) != 1 else ''} ({shown})")
    return _cut(f"- {key}: {inline(value, _unit_key(key))}")


def _unit_key(key: str) -> str:
    """The key whose suffix gives the unit (api.markdown reads units from suffixes): the key itself, or `bytes` for
    the byte counts the contract names with the unit first (`bytes_per_token`, `bytes_per_request`, `bytes_total`)."""
    k = key.lower()
    return "bytes" if k.startswith("bytes_") and not k.endswith("_per_s") else key


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _link(envelope: dict) -> str:
    """Where the calculation is explained: the page computing this request (absolute under CASEBOOK_BASE_URL when
    it is set, never built from the Host header), or the calculator's form when that link would be too long."""
    url = str(envelope.get("explanation_url") or "")
    if url and len(url) <= MAX_LINK:
        twin = " (HTML; add &_format=json or &_format=md for JSON or Markdown)" if "?body=" in url else " (HTML)"
        return f"Explained step by step: {base_url()}{url}{twin}."
    form = base_url() + urls.calculator(str(envelope.get("calculator", "")))
    return f"Explained step by step on the calculator's page, {form} (this request is too long for a link)."


def calculation_text(envelope: dict, lead: str, *, with_json: str | None = None) -> str:
    """The text of a calculator tool's result: `lead` (the headline), the outputs in short, where the rest is, and
    the explanation link; `with_json` (the envelope as JSON text) is appended for clients without structuredContent."""
    outputs = {k: v for k, v in (envelope.get("outputs") or {}).items() if k != "headline"}
    lines = [_output_line(k, v) for k, v in list(outputs.items())[:MAX_OUTPUT_LINES]]
    if len(outputs) > MAX_OUTPUT_LINES:
        lines.append(f"- … {_count(len(outputs) - MAX_OUTPUT_LINES, 'more output')}")
    parts = [lead]
    if lines:
        parts.append("Outputs:\n" + "\n".join(lines))
    held = ", ".join([_count(len(envelope.get("steps") or []), "step") + " (formula, numbers substituted, value, unit)",
                      _count(len(envelope.get("assumptions") or []), "assumption"),
                      _count(len(envelope.get("cases") or []), "case") + " of the book"])
    where = "below as JSON" if with_json is not None else "in structuredContent"
    parts.append(f"The full result ({where}): inputs with their sources, every output, {held}.")
    parts.append(_link(envelope))
    if with_json is not None:
        parts.append(with_json)
    return "\n\n".join(parts)
