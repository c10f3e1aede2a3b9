"""Records about the book and the ecosystem: frameworks, cases, derivations, glossary, audited claims."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from knowledge.records.base import (Calculator, Commit, Label, Problems, Record, Slug, SourceId, Text, listed, ref,
                                    refs, refuse)
from knowledge.records.facts import Provenance


# ---------------------------------------------------------------------------- frameworks

class Feature(BaseModel):
    """A dated feature row of a framework: when it landed and where that is written."""

    model_config = ConfigDict(extra="allow")
    feature: Text
    name: Optional[str] = None
    since: Optional[Label] = None
    date: Optional[Label] = None
    source: SourceId
    locator: Optional[str] = None
    note: Optional[str] = None
    source_url: Optional[str] = Field(None, description="Filled in by the build from the source.")

    @model_validator(mode="before")
    @classmethod
    def _sourced(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("source"):
            raise refuse(("source", "feature row has no source"))
        return data


class Framework(Record):
    """An inference, training or communication framework with dated feature rows."""

    id: Slug
    name: Text
    kind: Literal["inference-engine", "training", "communication", "kernel-library", "runtime", "orchestration"]
    url: Optional[str] = None
    license: Optional[str] = None
    summary: Optional[str] = None
    strengths: Optional[str] = None
    best_for: Optional[str] = None
    strengths_source: Optional[Provenance] = None
    see_also: refs("source") = []
    features: list[Feature] = []


# ---------------------------------------------------------------------------- cases and derivations

# Rule R4: a derivation without a calculator must say why (`unbound_reason`); False accepts it silently.
REQUIRE_UNBOUND_REASON = True

class Uses(BaseModel):
    """The facts a case uses, by kind."""

    model_config = ConfigDict(extra="forbid")
    models: refs("model") = []
    hardware: refs("hardware") = []
    links: refs("link") = []
    frameworks: refs("framework") = []

    @model_validator(mode="before")
    @classmethod
    def _kinds(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                raise refuse(*((str(k), "unknown kind of fact") for k in unknown))
        return data


class Case(Record):
    """A case study of the book, as listed in its index."""

    key: ClassVar[str] = "slug"
    slug: Slug
    title_zh: Text
    title_en: Text
    section: Text
    section_en: Optional[str] = None
    section_order: Optional[int] = None
    cited_chapters: list[int] = []
    summary: Text
    summary_zh: Optional[Annotated[Text, Field(pattern=r"[\u3400-\u9fff]")]] = Field(
        None, description="The summary in Chinese (our own words, 1–3 sentences), for readers and Chinese search.")
    source_commit: Optional[Commit] = None
    source_url: Text
    related: refs("case") = []
    uses: Annotated[Uses, BeforeValidator(lambda v: {} if v is None else v)] = Uses()
    tags: list[str] = []


class Check(BaseModel):
    """A printed number, verdict or label of the book against what the calculator returns (see
    `knowledge.derivations.check_kind`): an output, a quantity derived from outputs, a given, a verdict or a label."""

    model_config = ConfigDict(extra="allow")
    path: Optional[Text] = Field(None, description="The output path (in `expected`) an output, verdict or label check reads.")
    printed: Optional[Union[float, str]] = Field(None, description="The number the book prints (a fraction as text: "
                                                 "'7/3'); not for verdict and label checks.")
    scale: float = 1
    decimals: Optional[int] = None
    rel: Optional[float] = None
    printed_key: Optional[str] = Field(None, description="The `printed` entry this check reads (default: the only "
                                       "entry whose text holds this number).")
    offset: float = Field(0, description="Subtracted from the output before scaling: a ratio 1.22 checks a printed "
                          "'+22 %' with offset 1 and scale 0.01.")
    coarse: Optional[str] = Field(None, description="Why a tolerance wider than 5 % of the printed value is right "
                                  "(the book rounds coarser than that and our exact value differs by more).")
    ratio_of: Optional[list[Any]] = Field(None, description="Derived: output path a / output path b (an operand "
                                          "`request:<path>` is a stated request field).")
    difference_of: Optional[list[Any]] = Field(None, description="Derived: a − b of outputs (or `request:<path>`).")
    sum_of: Optional[list[Any]] = Field(None, description="Derived: the sum of outputs (or `request:<path>`).")
    product_of: Optional[list[Any]] = Field(None, description="Derived: the product of outputs (or `request:<path>`).")
    given: Optional[str] = Field(None, description="A given: the request path whose value the book prints (counted "
                                 "apart from output checks).")
    verdict: Optional[bool] = Field(None, description="A verdict: the boolean output at `path` and the printed "
                                    "text's yes/no must both be this.")
    label: Optional[str] = Field(None, description="A label: the text output at `path` (or the name picked by "
                                 "`min_of`/`max_of`) equals it, and the printed text shows it.")
    shown_as: Optional[str] = Field(None, description="The printed words for the label when they differ from the "
                                    "output's name (the candidate B16 printed as '16 workers').")
    min_of: Optional[dict[str, str]] = Field(None, description="Label of the smallest of these outputs (label → path).")
    max_of: Optional[dict[str, str]] = Field(None, description="Label of the largest of these outputs (label → path).")
    at_most: Optional[list[Any]] = Field(None, description="Verdict: operand a <= operand b (outputs, `request:<path>`, constants).")
    at_least: Optional[list[Any]] = Field(None, description="Verdict: operand a >= operand b.")
    whole: Optional[Any] = Field(None, description="Verdict: the operand is a whole number (an even split).")

    @model_validator(mode="after")
    def _one_source(self) -> "Check":
        sources = [n for n in ("path", "ratio_of", "difference_of", "sum_of", "product_of", "given", "min_of", "max_of",
                               "at_most", "at_least", "whole") if getattr(self, n) is not None]
        problems: Problems = []
        if len(sources) != 1:
            problems.append(("path", f"a check reads exactly one of path, ratio_of, difference_of, sum_of, "
                                     f"product_of, given, min_of, max_of, at_most, at_least, whole (here: {', '.join(sources) or 'none'})"))
        if self.verdict is None and self.label is None and self.printed is None:
            problems.append(("printed", "a numeric check needs the printed number"))
        if problems:
            raise refuse(*problems)
        return self


class Derivation(Record):
    """A worked example of a case, optionally recomputed by a calculator."""

    id: str = Field(description="`<case>/<name>`")
    case: ref("case")
    name: Text
    family: Text
    title: Text
    formula: Optional[str] = None
    inputs: dict[str, Any] = {}
    printed: dict[str, Any] = {}
    calculator: Optional[Calculator] = None
    request: Optional[dict[str, Any]] = None
    expected: Optional[dict[str, Any]] = None
    checks: Optional[list[Check]] = None
    note: Optional[str] = None
    unbound_reason: Optional[str] = Field(None, description="Why no calculator recomputes this example (unbound only).")
    unchecked: dict[str, str] = Field({}, description="`printed` entries of a bound example that no check reads, "
                                      "each with the reason (a label, a quoted measurement, a number with no output).")
    not_quantities: dict[str, str] = Field({}, description="`printed` entries whose text is no quantity (an index "
                                           "formula such as floor(r/2)), each with the reason; their digits are not "
                                           "counted as printed numbers.")

    @model_validator(mode="after")
    def _bound(self) -> "Derivation":
        problems: Problems = []
        if self.calculator is not None:
            if self.request is None:
                problems.append(("request", "a bound derivation needs a request body"))
            if not self.expected:
                problems.append(("expected", "a bound derivation needs expected outputs"))
        elif REQUIRE_UNBOUND_REASON and not (self.unbound_reason or "").strip():
            problems.append(("unbound_reason", "an example no calculator recomputes says why (rule R4)"))
        if problems:
            raise refuse(*problems)
        return self


# ---------------------------------------------------------------------------- glossary and claims

class Glossary(Record):
    """A method or term, with the paper that introduced it."""

    id: Slug
    term: Text
    term_zh: Optional[str] = None
    kind: Literal["kv-eviction", "speculative-decoding", "caching", "batching", "parallelism"]
    definition: Text
    aliases: list[str] = []
    paper: SourceId
    also_papers: refs("source") = []
    related_calculators: list[Calculator] = []
    seen_in: Optional[SourceId] = None


class ClaimAlternative(BaseModel):
    """Another reading of a claim, recomputed the same way."""

    model_config = ConfigDict(extra="allow")
    label: Text
    calculator: Calculator
    request: dict[str, Any]
    expected: dict[str, Any]


class PageNumber(BaseModel):
    """One number of the page, parsed, and the output of ours it is compared with.

    `ours` is read from the claim's `expected` (or `alternatives.N.<path>` for an alternative's), divided by
    `per` when given; `ratio` = ours / the page's value (for a range, / the nearest end, 1 inside). The
    build fills `ours`, `ratio` and `within` from the stored outputs; tests/test_claims.py recomputes them.
    """

    model_config = ConfigDict(extra="forbid")
    text: Text = Field(description="The page's words for the number, verbatim or nearly.")
    value: float | list[float] = Field(description="The page's number parsed, in SI units (bytes, seconds, "
                                                   "USD, a plain ratio or count); a two-element list is a range.")
    unit: Text = Field(description="Unit of `value` and `ours`: B, s, USD/h, USD/Mtok, tok/s, requests, GPUs, x, 1 …")
    path: Text = Field(description="Output path of ours: a key of `expected`, or alternatives.N.<key>.")
    per: Optional[str] = Field(None, description="Optional denominator path: ours = path / per.")
    relation: Literal["=", ">=", "<="] = Field(
        "=", description="What the page's words assert about ours: about equal (within tolerance), at least, at most.")
    tolerance: float = Field(0.05, gt=0, lt=1, description="Relative tolerance of the comparison (the page's rounding).")
    condition: Optional[str] = Field(None, description="For holds-if: the condition under which ours is computed.")
    ours: Optional[float] = Field(None, description="Filled in from the stored outputs.")
    ratio: Optional[float] = Field(None, description="ours / the page's value (range: / the nearest end).")
    within: Optional[bool] = Field(None, description="Whether ours satisfies `relation` within `tolerance`.")

    @model_validator(mode="after")
    def _range(self) -> "PageNumber":
        if isinstance(self.value, list) and (len(self.value) != 2 or not 0 < self.value[0] < self.value[1]):
            raise refuse(("value", "a range is [low, high] with 0 < low < high"))
        if not isinstance(self.value, list) and self.value <= 0:
            raise refuse(("value", "the page's value must be > 0"))
        return self


def _claim_output(claim: dict, path: str) -> Any:
    """A stored output of a claim: `path` in `expected`, or alternatives.N.<path> in an alternative's."""
    expected = claim.get("expected") or {}
    if path.startswith("alternatives."):
        _, index, path = path.split(".", 2)
        expected = (claim.get("alternatives") or [])[int(index)].get("expected") or {}
    if path in expected:
        return expected[path]
    head, _, index = path.rpartition(".")          # an item of a list output: "total_s.0"
    if head in expected and isinstance(expected[head], list) and index.isdigit():
        return expected[head][int(index)]
    raise KeyError(path)


def compare_page_number(value: float | list[float], ours: float, relation: str = "=",
                        tolerance: float = 0.05) -> tuple[float, bool]:
    """(ratio, within): ours / the page's value (for a range, / its nearest end) and whether the relation holds."""
    if isinstance(value, (list, tuple)):
        low, high = value
        ratio = ours / min(max(ours, low), high)
    else:
        ratio = ours / value
    if relation == ">=":
        return ratio, ratio >= 1 - tolerance
    if relation == "<=":
        return ratio, ratio <= 1 + tolerance
    return ratio, abs(ratio - 1) <= tolerance


def factor(ratio: float) -> float:
    """The larger over the smaller: max(ratio, 1 / ratio)."""
    return max(ratio, 1 / ratio)


class Claim(Record):
    """An audited numeric claim of a source, recomputed by a calculator, its page numbers tied to our outputs."""

    id: Slug
    topic: Text
    claim_en: Text
    claim_zh: Optional[str] = None
    page_value: Optional[Label] = None
    page_numbers: listed(PageNumber) = Field(min_length=1)
    source: SourceId
    locator: Optional[str] = None
    calculator: Calculator
    request: dict[str, Any]
    expected: dict[str, Any]
    alternatives: listed(ClaimAlternative) = []
    recomputed: Optional[str] = None
    assumptions: list[str] = []
    verdict: Literal["holds", "holds-if", "off"]
    off_by: Optional[float] = Field(None, gt=1, description="Only with verdict off: larger / smaller.")
    explanation: Optional[str] = None

    #: relative tolerance between off_by and the factor of the page number furthest off
    OFF_BY_REL: ClassVar[float] = 0.05

    @staticmethod
    def compared(claim: dict) -> list[dict]:
        """The claim's page numbers with `ours`, `ratio` and `within` filled in from its stored outputs."""
        out = []
        for n in claim.get("page_numbers") or []:
            n = dict(n)
            try:
                ours = float(_claim_output(claim, n["path"]))
                if n.get("per"):
                    ours /= float(_claim_output(claim, n["per"]))
            except (KeyError, IndexError, ValueError, TypeError, ZeroDivisionError):
                out.append({**n, "ours": None, "ratio": None, "within": None})
                continue
            ratio, within = compare_page_number(n["value"], ours, n.get("relation", "="), n.get("tolerance", 0.05))
            out.append({**n, "ours": ours, "ratio": ratio, "within": within})
        return out

    @staticmethod
    def verdict_problems(verdict: str, off_by: float | None, numbers: list[dict]) -> list[str]:
        """Why the verdict does not follow from the compared page numbers (empty when it does).

        holds: every number within its tolerance. holds-if: the same, each under its stated condition.
        off: some number outside, and off_by = the largest factor max(r, 1/r) among those (5 %).
        """
        bad = [f"{n['path']}: {n['text']} could not be compared" for n in numbers if n.get("ratio") is None]
        if bad:
            return bad
        outside = [n for n in numbers if not n["within"]]
        problems = []
        if verdict in ("holds", "holds-if"):
            problems += [f"{n['text']}: ratio {n['ratio']:.4g} is outside {n.get('relation', '=')} "
                         f"±{n.get('tolerance', 0.05):g} yet the verdict is {verdict}" for n in outside]
            if verdict == "holds-if":
                problems += [f"{n['text']}: a holds-if number needs its condition" for n in numbers
                             if not (n.get("condition") or "").strip()]
        elif verdict == "off":
            if not outside:
                problems.append("verdict off, but every page number is within its tolerance")
            else:
                worst = max(factor(n["ratio"]) for n in outside)
                if off_by is None or abs(off_by / worst - 1) > Claim.OFF_BY_REL:
                    problems.append(f"off_by {off_by} does not match the computed factor {worst:.4g}")
        return problems

    @model_validator(mode="after")
    def _off_by(self) -> "Claim":
        if (self.verdict == "off") != (self.off_by is not None):
            raise refuse(("off_by", "off_by is given exactly when the verdict is off"))
        data = self.model_dump(include={"expected", "alternatives", "page_numbers"})
        numbers = self.compared(data)
        for n, filled in zip(self.page_numbers, numbers):
            n.ours, n.ratio, n.within = filled["ours"], filled["ratio"], filled["within"]
        problems = self.verdict_problems(self.verdict, self.off_by, numbers)
        if problems:
            raise refuse(*(("page_numbers", p) for p in problems))
        return self
