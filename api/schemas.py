"""Response models of the JSON API (request models of calculators live with the calculators).

Records are the typed records of `knowledge.records`: every numeric fact is a `Fact` (value +
source + locator), so a client always gets the provenance with the number. Record models allow
extra fields: the data files may carry more.
"""
from __future__ import annotations

import json
from typing import Any, Generic, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from api.problems import MAX_DETAILED_FAILURES, MAX_ERRORS, MAX_ERRORS_PER_FIELD
from knowledge import records as R

T = TypeVar("T")


# The records the API serves are the data files' typed records (knowledge/records/), each with
# every number as a Fact (value + source + locator): one declaration for the data, the store's
# columns and these public schemas.
Fact = R.Fact
CountFact = R.CountFact
Source = R.Source
Peak = R.Peak
Hardware = R.Hardware
Link = R.Link
ModelStream = R.ModelStream
ModelLayerGroup = R.ModelLayerGroup
Model = R.Model
Feature = R.Feature
Framework = R.Framework
Price = R.Price
Derivation = R.Derivation
Case = R.Case
Glossary = R.Glossary
Claim = R.Claim
Benchmark = R.Benchmark


class CaseRef(BaseModel):
    slug: str
    title_zh: str
    title_en: str
    url: str = Field(description="HTML page of the case on this service.")


class CaseDetail(R.Case):
    """A case with its worked examples and the cases it relates to."""

    derivations: list[Derivation] = []
    related_cases: list[CaseRef] = []


class PriceMarked(R.Price):
    """A price as /api/v1/prices answers it: the record plus the default-price rule's marks (DATA-FORMAT.md, "The
    default price of a device")."""

    as_of: Optional[str] = Field(None, description="Reference date of the marks (ISO): today, or CASEBOOK_PRICE_AS_OF.")
    age_months: Optional[int] = Field(None, description="Whole months from the price's date to the reference date.")
    stale: bool = Field(False, description="Dated more than 12 months before the reference date: never a default.")
    default_for_device: bool = Field(
        False, description="This GPU-hour offer is its hardware's default price in the calculators (per provider the "
                           "newest on-demand offer, stale ones dropped, the lowest of the rest).")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int = Field(description="Number of records matching the filters (all pages).")
    limit: int
    offset: int
    next: Optional[str] = Field(None, description="URL of the next page, when there is one.")


class SearchHit(BaseModel):
    kind: str
    id: str
    title: str
    url: str
    api_url: str
    snippet: str
    score: float


class SearchResults(BaseModel):
    query: str
    items: list[SearchHit]
    total: int
    limit: int
    offset: int


class Step(BaseModel):
    label: str
    formula: str
    substituted: str
    value: Any = None
    unit: str


class Envelope(BaseModel):
    """What every calculator answers."""

    calculator: str
    headline: str = Field(description="The answer in one sentence (for a sweep or what-if, its first point).")
    inputs: dict[str, Any] = Field(description="The request as resolved, with `sources` for facts taken from the store.")
    outputs: dict[str, Any]
    steps: list[Step]
    assumptions: list[str]
    cases: list[CaseRef]
    explanation_url: str = Field(description="The explainer page computing this request (relative URL). A sweep "
                                 "whose whole request would make it longer than 8,000 characters links the page of "
                                 "its first point, the point the headline and steps describe.")


class CalculatorInfo(BaseModel):
    name: str
    title: str
    family: str
    summary: str
    description: str
    endpoint: str
    request_schema: dict[str, Any]
    example: dict[str, Any]
    sweepable: list[str]
    cases: list[CaseRef]


class FieldError(BaseModel):
    """One thing wrong with a request: the field as the user wrote it, where, why, and what was probably meant."""

    model_config = ConfigDict(populate_by_name=True)
    field: str = Field(description="The field as written in the request: `tokens`, `candidates[0].pass_rate`, "
                                   "`body` for the whole body (e.g. a JSON syntax error).")
    in_: str = Field(alias="in", description="Where the field is: body, query, path or header.")
    message: str = Field(description="What is wrong and how to fix it.")
    type: str = Field(description="Machine-readable kind: missing, extra_forbidden, literal_error, unknown_id, "
                                  "bool_not_number, json_invalid, …")
    suggestions: Optional[list[str]] = Field(None, description="The closest valid names or values, best first "
                                                               "(present when there are any).")
    reason: Optional[str] = Field(None, description="For an unknown id (`type` unknown_id): the message without the "
                                                    "pointer and the did-you-mean.")
    kind: Optional[str] = Field(None, description="For an unknown id: the kind of record named (model, hardware, link, …).")
    value: Optional[str] = Field(None, description="For an unknown id: the id as given.")
    see: Optional[str] = Field(None, description="For an unknown id: the list of that kind to choose from.")


class Problem(BaseModel):
    """An error, as RFC 9457 problem details (`application/problem+json`)."""

    type: str = Field(description="URI naming the kind of problem.")
    title: str
    status: int
    detail: str = Field(description="What went wrong and how to fix it, in one or two sentences.")
    instance: Optional[str] = Field(None, description="The request path.")
    errors: Optional[list[FieldError]] = Field(None, description="Field-level errors (400 and 422).")
    see: Optional[str] = Field(None, description="For an unknown id or name: the list to choose from.")
    suggestions: Optional[list[str]] = Field(None, description="For an unknown id or name: the closest known ones.")
    errors_omitted: Optional[dict[str, int]] = Field(None, description=(
        f"Errors left out of `errors`, counted per request field (at most {MAX_ERRORS_PER_FIELD} are listed per field "
        f"and {MAX_ERRORS} in all)."))
    errors_count: Optional[int] = Field(None, description=(
        f"In a batch, for a failed item past the first {MAX_DETAILED_FAILURES}: how many errors it had (its `errors` "
        "are not listed)."))


class BatchItem(BaseModel):
    calculator: str = Field(description="A registered calculator name, e.g. kv-cache.")
    request: dict[str, Any] = Field(description="Its request body.")


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requests: list[BatchItem] = Field(max_length=1000, description="Up to 1,000 calculator requests, answered in order.")


class BatchResult(BaseModel):
    status: int
    response: Optional[Envelope] = None
    problem: Optional[Problem] = None


class BatchResponse(BaseModel):
    results: list[BatchResult]


class Health(BaseModel):
    status: str
    version: str
    content_hash: str
    built_at: Optional[str] = None
    store_stale_reason: Optional[str] = Field(None, description="Why the store served is older than the data files "
                                              "(they do not build); null when it is current.")
    counts: dict[str, int]


class CoverageUnbound(BaseModel):
    id: str
    name: Optional[str] = None
    title: Optional[str] = None
    family: str
    reason: Optional[str] = Field(None, description="Why no calculator recomputes it (`unbound_reason`).")


class CoverageNotQuantity(BaseModel):
    id: str
    entry: str
    text: str
    reason: str


class CoverageNotCounted(BaseModel):
    id: str
    entry: str
    text: str
    number: str = Field(description="The printed number, as the text shows it.")
    kind: str = Field(description="given (an input matched against the request), echo (a check whose value is one "
                                  "of the request's inputs) or unchecked (an excused entry).")
    reason: str


class CoverageCase(BaseModel):
    slug: str
    title_zh: str
    stored: int
    bound: int
    families_unbound: list[str]
    printed_numbers: int = Field(0, description="Numbers the case's bound examples print.")
    checked_numbers: int = Field(0, description="Of those, read by a passing check that follows the rules.")
    excused_numbers: int = Field(0, description="Unread numbers of entries listed in `unchecked` (with a reason).")
    checked_fraction: float = 0.0
    checked_by: dict[str, int] = Field({}, description="Checked numbers by kind of check: output (a calculator output), "
                                       "derived (formed from outputs).")
    not_counted_by: dict[str, int] = Field({}, description="Printed numbers matched but not counted: given, echo, unchecked.")
    not_counted: list[CoverageNotCounted] = Field([], description="Each of those, with the reason.")
    checked_examples: int = Field(0, description="Bound examples with at least one counted check.")
    printed_words: int = Field(0, description="Printed verdicts and labels (yes/no, a choice) of the bound examples.")
    checked_words: int = Field(0, description="Of those, checked against a boolean or text output.")
    not_quantities: list[CoverageNotQuantity] = Field([], description="Printed texts that are no quantity, with the reason.")
    printed_numbers_unbound: int = Field(0, description="Numbers the case's unbound examples print.")
    violations: int = Field(0, description="Rule violations (R1–R4) of the case's examples.")
    unbound: list[CoverageUnbound] = []


class Coverage(BaseModel):
    cases: int
    derivations: int
    bound: int
    bound_fraction: float
    calculators_used: list[str]
    per_case: list[CoverageCase]
    families_without_calculator: list[str]
    printed_numbers: int = Field(0, description="Numbers printed by the bound examples.")
    checked_numbers: int = Field(0, description="Of those, read by a passing, rule-conforming check.")
    excused_numbers: int = Field(0, description="Unread numbers of `unchecked` entries.")
    checked_fraction: float = Field(0.0, description="checked_numbers / printed_numbers.")
    checked_by: dict[str, int] = Field({}, description="checked_numbers by kind of check: output, derived (from "
                                       "outputs).")
    not_counted_by: dict[str, int] = Field({}, description="Printed numbers matched but not counted: given (an input "
                                           "matched against the request), echo (a check whose value is an input), "
                                           "unchecked (an excused entry).")
    not_counted: list[CoverageNotCounted] = Field([], description="Each of those, with the reason.")
    checked_examples: int = Field(0, description="Bound examples with at least one counted check (or checked verdict).")
    counting_rule: str = Field("", description="What counts as a checked number.")
    printed_words: int = Field(0, description="Printed verdicts and labels of the bound examples.")
    checked_words: int = Field(0, description="Of those, checked against a boolean or text output.")
    not_quantities: list[CoverageNotQuantity] = Field([], description="Printed texts that are no quantity, with the reason.")
    unbound_without_reason: int = 0
    violations: int = 0
    derivations_with_violations: int = 0
    families: dict[str, dict[str, int]] = {}


# --------------------------------------------------------------------------- validation (api.routes.validation)

class ValidationErrorStat(BaseModel):
    n: int = Field(description="Points with a measured value of the metric that the estimate either predicts or "
                               "cannot serve (those count as outside every bound).")
    median_abs_error: Optional[float] = Field(None, description="Median of |predicted / measured − 1| (0.1 is 10 %); "
                                              "null when unserved points are more than half.")
    within_25_percent: Optional[float] = Field(None, description="Share of those points with |error| ≤ 0.25.")
    unserved: int = Field(0, description="Of those, points whose measured load the estimate judged unstable "
                                         "(it predicts no figure although the run served that load).")


class ValidationBoundCheck(BaseModel):
    n: int = Field(description="Compared points with a measured TPOT.")
    holds: int = Field(description="Of those, points whose peak-rate floor (bound_tpot_s) is at or below it.")


class ValidationGroup(BaseModel):
    points: int = Field(description="Points compared in the group.")
    tpot_s: ValidationErrorStat
    output_tokens_per_s_per_device: ValidationErrorStat
    ttft_s: ValidationErrorStat
    bound_below_measured: ValidationBoundCheck


class ValidationFigures(BaseModel):
    tpot_s: Optional[float] = Field(None, description="Mean TPOT (measured: mean, else median, else ITL), s.")
    ttft_s: Optional[float] = Field(None, description="Mean TTFT, s.")
    output_tokens_per_s_per_device: Optional[float] = None


class ValidationRow(BaseModel):
    id: str = Field(description="Benchmark point id.")
    source: str
    model: Optional[str] = Field(None, description="Store model id (null: the model is not in the catalogue).")
    model_hf: Optional[str] = Field(None, description="The model as published.")
    model_family: Optional[str] = None
    hardware: Optional[str] = Field(None, description="Store hardware id (null: not in the catalogue).")
    hardware_name: Optional[str] = Field(None, description="The accelerator as published.")
    hardware_family: Optional[str] = Field(None, description="The calibration group of the hardware's architecture "
                                           "(\"arch:\" + the architecture its record names), null when it names none.")
    devices: Optional[int] = None
    date: Optional[str] = Field(None, description="The run's date as published (ISO).")
    run_half: Optional[str] = Field(None, description="The half-year of the run (\"2025-H2\"; its year alone when only the "
                                    "year is published), as by_run_date groups it.")
    framework: str
    load: str = Field(description="concurrency, poisson, offline or burst when compared; else the load's kind.")
    compared: bool
    reason: Optional[str] = Field(None, description="Why the point is not compared.")
    mapping: list[str] = Field(description="How the published configuration was read into the request.")
    request: Optional[dict[str, Any]] = Field(None, description="The serving-estimate request of the point.")
    measured: ValidationFigures
    predicted: ValidationFigures
    errors: ValidationFigures = Field(description="predicted / measured − 1 per metric (positive: slower TPOT/TTFT, "
                                                  "more tokens/s than measured).")
    basis: Optional[str] = Field(None, description="What the estimate rests on (measured kernels of a system, or bound).")
    bound_below_measured: Optional[bool] = None
    page_url: str = Field(description="The benchmark point's page.")
    api_url: str = Field(description="The benchmark point as JSON.")
    validation_url: str = Field(description="This row as JSON.")
    calculator_url: Optional[str] = Field(None, description="The serving-estimate page computing the request.")
    loso: Optional[dict[str, Any]] = Field(None, description="The point estimated with efficiency factors fitted on "
                                           "every other source (fold, factor, group, fitted_on points and sources, "
                                           "predicted, errors; note: why no factor applied, when none did).")


class ValidationPoint(ValidationRow):
    same_basis: Optional[ValidationGroup] = Field(None, description="Errors of the compared points estimated on the "
                                                                    "same basis: how far off an estimate of its kind is.")


class ValidationTables(BaseModel):
    overall: ValidationGroup
    by_source: dict[str, ValidationGroup]
    by_hardware: dict[str, ValidationGroup]
    by_model_family: dict[str, ValidationGroup]
    by_framework: dict[str, ValidationGroup]
    by_load: dict[str, ValidationGroup]
    by_run_date: dict[str, ValidationGroup] = Field(description="By the half-year each point was run (2025-H2): the "
                                                    "engine software of its date against kernel tables of one version.")


class ValidationTarget(BaseModel):
    id: str
    what: str = Field(description="The figure the issue's target is on.")
    target: str
    threshold: Optional[float] = None
    uncalibrated: Any = Field(description="The figure of the uncalibrated estimate.")
    leave_one_source_out: Any = Field(description="The figure of the calibrated estimate, each source left out.")
    met_uncalibrated: Optional[bool] = None
    met_leave_one_source_out: Optional[bool] = None


class ValidationReport(ValidationTables):
    """The uncalibrated error tables (inherited) beside the leave-one-source-out ones."""

    stored: int = Field(description="Benchmark points stored.")
    points: int = Field(description="Points the filters keep.")
    compared: int
    not_compared: int
    filters: dict[str, Any] = Field(description="The filters applied.")
    within: float = Field(description="The error bound of within_25_percent (0.25).")
    method: dict[str, str] = Field(description="What is compared and how, in words.")
    leave_one_source_out: ValidationTables = Field(description="The same tables for the calibrated estimate, each "
                                                   "source's points estimated with factors fitted on the others.")
    targets: list[ValidationTarget] = Field(description="Issue #25's targets, uncalibrated beside leave-one-source-out.")
    calibration: dict[str, Any] = Field(description="The calibration model, and the factors fitted on every source "
                                        "(hardware/framework/basis -> factor, points, sources, leave-one-source-out "
                                        "error), those applied, and the figures had every factor been applied.")
    not_compared_reasons: dict[str, Optional[str]] = Field(description="Point id -> why it is not compared.")
    rows: list[ValidationRow]
    cache_key: str = Field(description="sha256 of the store's content hash and the code that computed the report.")


# --------------------------------------------------------------------------- the published OpenAPI document

def tidy_openapi(spec: dict) -> dict:
    """The OpenAPI document as clients should read it: error responses as `application/problem+json`
    (FastAPI files every declared model under application/json) and every choice list (a Literal or enum
    written inline in a model) as a named schema of its own, so generated clients get `FormatName`,
    `Operation` or `FrameworkKind` instead of `KVCacheRequestKvFormatType0`."""
    ref = {"$ref": "#/components/schemas/Problem"}
    for path in spec.get("paths", {}).values():
        for op in path.values():
            for status, resp in (op.get("responses") or {}).items():
                content = resp.get("content") or {}
                if str(status)[:1] not in "45":
                    continue
                # FastAPI files the declared Problem under the route's own media type (JSON, text/plain, …)
                moved = {media for media, body in content.items() if body.get("schema") == ref}
                if moved or "application/problem+json" in content:
                    kept = {m: b for m, b in content.items() if m not in moved and m != "application/problem+json"}
                    resp["content"] = {"application/problem+json": {**content.get("application/problem+json", {}),
                                                                    "schema": ref}, **kept}
    _name_enums(spec.setdefault("components", {}).setdefault("schemas", {}))
    return spec


def _literal_aliases() -> dict[tuple, str]:
    """Module-level Literal aliases of the calculators and records (`FormatName = Literal[...]`): their names
    are the names a reader knows the choices by."""
    import sys
    import typing

    names: dict[tuple, str] = {}
    for modname in sorted(m for m in list(sys.modules) if m.startswith(("calculators.", "knowledge.records"))):
        for attr, obj in sorted(vars(sys.modules[modname]).items()):
            if typing.get_origin(obj) is typing.Literal and attr[:1].isupper():
                names.setdefault(tuple(typing.get_args(obj)), attr)
    return names


def _pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", "_").split("_") if p)


#: field names too general to name a choice list alone
_GENERIC_FIELDS = {"name", "kind", "mode", "record", "method", "type", "request", "expected"}


def _name_enums(schemas: dict) -> None:
    """Move inline enums (two or more values) of component schemas into components, named by the Literal alias
    of the same values, else the field's name, else model + field."""
    uses: dict[tuple, list[tuple[str, str, dict, Any]]] = {}   # values -> [(model, field, holder, key)]

    def visit(model: str, field: str, holder: Any, key: Any, member: bool = False) -> None:
        node = holder[key]
        if not isinstance(node, dict):
            return
        if "enum" in node and len(node["enum"]) >= 2 and "$ref" not in node:
            uses.setdefault(tuple(node["enum"]), []).append((model, field, holder, key))
            return
        if member and node.get("type") == "object" and "properties" not in node and "$ref" not in node:
            # a free-form map as one member of a union (`model_config: object | null`): named, not `…Type0`
            shape = {k: v for k, v in node.items() if k not in ("title", "description")}
            uses.setdefault(("<map>", field, json.dumps(shape, sort_keys=True)), []).append((model, field, holder, key))
            return
        for sub in ("anyOf", "oneOf", "allOf"):
            for i in range(len(node.get(sub) or [])):
                visit(model, field, node[sub], i, member=True)
        if isinstance(node.get("items"), dict):
            visit(model, field, node, "items")
        if isinstance(node.get("additionalProperties"), dict):
            visit(model, field, node, "additionalProperties")

    for model, schema in list(schemas.items()):
        for field, prop in list((schema.get("properties") or {}).items()):
            visit(model, field, schema["properties"], field)
    if not uses:
        return
    aliases = _literal_aliases()
    taken = set(schemas)
    order = sorted(uses, key=lambda v: (v not in aliases, sorted({f for _, f, _, _ in uses[v]}), v))
    for values in order:
        places = uses[values]
        fields = sorted({f for _, f, _, _ in places})
        models = sorted({m for m, _, _, _ in places})
        candidates = [aliases.get(values)] if values in aliases else []
        own = models[0].removesuffix("Request").removesuffix("Out") + _pascal(fields[0]) if len(models) == 1 else None
        if own and fields[0] in _GENERIC_FIELDS:       # `QueueCandidateName` says more than `Name`
            candidates.append(own)
        if len(fields) == 1:
            candidates.append(_pascal(fields[0]))
        if own:
            candidates.append(own)
        if values[:1] == ("<map>",):
            candidates.append(_pascal(models[0].removesuffix("Request")) + _pascal(fields[0]) + "Map")
        else:
            candidates.append("Or".join(_pascal(str(v)) for v in values) if len(values) <= 4 else
                              _pascal(models[0].removesuffix("Request")) + _pascal(fields[0]) + "Choice")
        name = next((c for c in candidates if c and c not in taken), None)
        i = 2
        while name is None:
            name = f"{candidates[-1]}{i}" if f"{candidates[-1]}{i}" not in taken else None
            i += 1
        taken.add(name)
        first = places[0][2][places[0][3]]
        moved = ("type", "enum") if values[:1] != ("<map>",) else tuple(k for k in first if k not in ("title", "description"))
        component = {k: first[k] for k in moved if k in first}
        component["title"] = name
        schemas[name] = component
        for _, _, holder, key in places:
            node = holder[key]
            rest = {k: v for k, v in node.items() if k not in moved and k != "title"}
            holder[key] = {"$ref": f"#/components/schemas/{name}", **rest}
