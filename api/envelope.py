"""The calculator envelope of DESIGN (`calculator`, `headline`, `inputs` with their sources, `outputs`, `steps`,
`assumptions`, `cases`, `explanation_url`): what every front end answers for a computed request. Its one declaration
is `api.schemas.Envelope` (the OpenAPI response model, and MCP's outputSchema); `envelope` fills it as a plain dict,
which a test validates against the model for every calculator.

The calculation layer returns data (`calculators.framework.runner.solve` gives the validated request and its
`Result`); the links in the answer (the explanation page, the case pages) are spelt here by `api.urls.Urls`, the
one URL builder.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import BaseModel

from api.urls import urls
from calculators.framework import Calculator, Lookup, Result, no_lookup, on_grid, request_inputs

from calculators.framework.runner import solve

__all__ = ["EXPLANATION_URL_MAX", "case_refs", "envelope", "explanation_link", "first_point", "run"]

#: longest explanation URL given whole: 8,000 characters is what common servers and proxies accept in a request
#: line (nginx's default header buffer is 8 KiB); a sweep beyond it links the page of its first point
EXPLANATION_URL_MAX = 8000


def explanation_link(calc: Calculator, body: dict) -> str:
    """The explainer page computing `body`; when that URL would be longer than EXPLANATION_URL_MAX (a sweep of
    thousands of points), the page of the sweep's first point (every swept field at its first value), which is
    the point the headline and the steps describe; when even that is too long, the calculator's form."""
    body_json = orjson.dumps(body)
    if len(body_json) <= EXPLANATION_URL_MAX:                # escaping only lengthens: test the cheap bound first
        url = urls.calculator(calc.name, body_json)
        if len(url) <= EXPLANATION_URL_MAX:
            return url
    url = urls.calculator(calc.name, first_point(body, calc.sweepable))
    return url if len(url) <= EXPLANATION_URL_MAX else urls.calculator(calc.name)


def first_point(body: dict, sweepable: Sequence[str]) -> dict:
    """`body` with every swept field (dotted paths into nested objects) at its first value; the rest shared."""
    first = dict(body)
    for path in sweepable:
        *parents, leaf = path.split(".")
        node = first
        for key in parents:
            child = node.get(key)
            if not isinstance(child, dict):
                node = None
                break
            node[key] = node = dict(child)                  # copy on the way down: `body` is never changed
        if node is not None and isinstance(node.get(leaf), list) and node[leaf]:
            node[leaf] = node[leaf][0]
    return first


def _get(lookup: Lookup, kind: str, ident: str) -> dict | None:
    try:
        return lookup(kind, ident)
    except KeyError:
        return None


def case_refs(lookup: Lookup, slugs: Sequence[str]) -> list[dict]:
    """The cases that explain a calculator, as {slug, titles, url} (unknown slugs are skipped)."""
    refs = []
    for slug in slugs:
        c = _get(lookup, "case", slug)
        if c:
            refs.append({"slug": slug, "title_zh": c["title_zh"], "title_en": c["title_en"], "url": urls.case(slug)})
    return refs


def _with_source_titles(lookup: Lookup, sources: list[dict]) -> list[dict]:
    """Each cited fact with its source's URL and title beside the source id."""
    out = []
    for s in sources:
        s = dict(s)
        src = _get(lookup, "source", s["source"]) if s.get("source") else None
        if src:
            s["source_url"] = s.get("source_url") or src.get("url")
            s["source_title"] = src.get("title")
        out.append(s)
    return out


def envelope(calc: Calculator, request: BaseModel, result: Result, lookup: Lookup) -> dict:
    """The DESIGN's calculator envelope for a computed result."""
    inputs = dict(result.inputs)
    config = inputs.pop("hf_config", None)       # the attribute pydantic lets us use; users write `model_config`
    if config is not None:
        inputs["model_config"] = config
    inputs["sources"] = _with_source_titles(lookup, result.sources)
    return {
        "calculator": calc.name,
        "headline": result.headline,
        "inputs": inputs,
        "outputs": result.outputs if result.grid_shape is None else on_grid(result.outputs, result.grid_shape),
        "steps": [s.as_dict() for s in result.steps],
        "assumptions": result.assumptions,
        "cases": case_refs(lookup, calc.cases),
        "explanation_url": explanation_link(calc, request_inputs(request, exclude_unset=True, by_alias=True)),
    }


def run(name: str, body: Any, lookup: Lookup = no_lookup) -> dict:
    """Validate `body`, compute and wrap: the envelope, or a RunError saying what to fix."""
    calc, request, result = solve(name, body, lookup)
    return envelope(calc, request, result, lookup)
