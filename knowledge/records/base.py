"""The building blocks of the typed records: sourced facts, the unit and bounds rules their field
names imply, small validated types, and the conversion of pydantic errors into the builder's wording.

Rules that need the whole catalog (references, calculator names) read the validation context
`{"ids": {kind: set of ids}, "calculators": set of names}`; without a context they are skipped.
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Iterable, Literal, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      ValidationInfo, field_validator, model_validator)
from pydantic_core import PydanticCustomError

SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
#: field-name endings that carry a unit (SI base units, see DATA-FORMAT.md)
UNIT_SUFFIXES = ("_bytes", "_bytes_per_s", "_bits_per_s", "_s", "_w", "_flop_per_s", "_flops",
                 "_usd", "_usd_per_mtok", "_usd_per_hour", "_hz", "_j", "_m")
#: endings whose value must be strictly positive (a size, rate or power of zero is a typo)
POSITIVE_SUFFIXES = ("_bytes", "_bytes_per_s", "_bits_per_s", "_flop_per_s", "_w")
#: dimensionless counts and ratios that are facts without a unit suffix
COUNT_FIELDS = {"layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size", "vocab_size",
                "experts", "experts_per_token", "shared_experts", "expert_ffn_size", "dense_layers",
                "params_total", "params_active", "params_total_without_embeddings",
                "params_active_without_embeddings", "params_indexer", "context_length", "kv_lora_rank", "q_lora_rank",
                "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window", "devices",
                "lanes", "links", "index_head_dim", "index_n_heads", "index_topk", "compress_ratio",
                "window", "moe_layer_freq", "num_nextn_predict_layers", "routed_scaling_factor",
                "linear_attention_heads", "linear_attention_head_dim", "full_attention_layers",
                "linear_attention_layers", "sm_count", "cores", "gpu_cores", "nics", "ports",
                "efficiency", "ratio", "count", "year", "bits"}
#: counts that may be zero (every other count must be > 0)
MAY_BE_ZERO = {"dense_layers", "shared_experts", "sliding_window", "num_nextn_predict_layers"}
#: counts that may be fractional
FRACTIONAL = {"efficiency", "ratio", "routed_scaling_factor"}
#: numeric leaves that are structure, not facts (no source needed) where a fact record allows free keys
STRUCTURAL = {"devices_in_scope", "section_order", "cited_chapters", "count", "dim", "window", "ratio",
              "state_elements", "kv_heads_per_group", "order"}
NO_SOURCE = "fact has no source: write {value, source, locator}"

Problems = list[tuple[str, str]]


# ---------------------------------------------------------------------------- errors

def refuse(*problems: tuple[str, str]) -> PydanticCustomError:
    """One pydantic error carrying any number of (field relative to here, message) problems."""
    return PydanticCustomError("casebook", "{message}", {
        "message": "; ".join(m for _, m in problems), "problems": [[f, m] for f, m in problems]})


def join(*parts: Any) -> str:
    """A dotted field path, skipping empty parts: join("peaks", 0, "") == "peaks.0"."""
    return ".".join(str(p) for p in parts if p != "")


def describe(errors: Iterable[dict]) -> Problems:
    """pydantic error dicts -> (dotted field, message) in the builder's wording."""
    out: Problems = []
    for err in errors:
        loc, kind, ctx = err["loc"], err["type"], err.get("ctx") or {}
        where = join(*loc)
        if kind == "casebook":
            out += [(join(where, f), m) for f, m in ctx["problems"]]
        elif kind == "missing":
            out.append((where, "missing id" if loc in (("id",), ("slug",)) else "required field is missing"))
        elif kind == "string_too_short":
            out.append((where, "required field is missing"))
        elif kind == "extra_forbidden":
            out.append((where, "unknown field"))
        elif kind == "literal_error":
            out.append((where, f"must be one of {ctx.get('expected')} (got {err.get('input')!r})"))
        else:
            out.append((where, f"{err['msg']} (got {str(err.get('input'))[:80]!r})"))
    return out


# ---------------------------------------------------------------------------- small types

def _text(v: Any) -> Any:
    """YAML reads `2023-06-01` as a date and `4` as an int where text is meant: keep them as text."""
    return v if v is None or isinstance(v, (str, bool, dict, list)) else str(v)


def _slug(v: str) -> str:
    if not SLUG.match(v):
        raise refuse(("", f"id {v!r} is not a lowercase slug"))
    return v


def _positive_int(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise refuse(("", "impossible value: a positive integer is required"))
    return v


def _window(v: Any) -> Any:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
        raise refuse(("", "must be a positive integer or null"))
    return v


def _ratio(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise refuse(("", "must be a positive integer"))
    return v


def _list(v: Any) -> Any:
    return [] if v is None else v


def _known(kind: str):
    """An after-validator: the id (or every id of a list) exists in the catalog's `kind`."""
    def check(value: Any, info: ValidationInfo) -> Any:
        ids = (info.context or {}).get("ids")
        if ids is not None:
            unknown = [i for i in (value if isinstance(value, list) else [value]) if i not in ids.get(kind, ())]
            if unknown:
                raise refuse(*(("", f"reference to unknown {kind} {i!r}") for i in unknown))
        return value
    return AfterValidator(check)


def _calculator(value: str, info: ValidationInfo) -> str:
    names = (info.context or {}).get("calculators")
    if names is not None and value not in names:
        raise refuse(("", f"unknown calculator {value!r}"))
    return value


Text = Annotated[str, BeforeValidator(_text), Field(min_length=1)]
Label = Annotated[str, BeforeValidator(_text)]
Slug = Annotated[str, AfterValidator(_slug)]
PositiveInt = Annotated[int, BeforeValidator(_positive_int)]
SourceId = Annotated[str, _known("source")]
Calculator = Annotated[str, AfterValidator(_calculator)]
Commit = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


Window = Annotated[Optional[int], BeforeValidator(_window)]
Ratio = Annotated[int, BeforeValidator(_ratio)]


def ref(kind: str) -> Any:
    """The id of a record of `kind`."""
    return Annotated[str, _known(kind)]


def refs(kind: str) -> Any:
    """A list of ids of `kind` (null reads as an empty list)."""
    return Annotated[list[str], BeforeValidator(_list), _known(kind)]


def listed(item: Any) -> Any:
    """A list of `item` (null reads as an empty list)."""
    return Annotated[list[item], BeforeValidator(_list)]


# ---------------------------------------------------------------------------- facts

def fact_rule(name: str, value: float) -> list[str]:
    """What the field name implies for a fact's value: a unit or a known count, and its bounds."""
    if not (name.endswith(UNIT_SUFFIXES) or name in COUNT_FIELDS):
        return ["unit missing: the field name must end in a unit (_bytes, _bytes_per_s, _s, _w, "
                "_flop_per_s, _usd_per_mtok …) or be a known count"]
    out = []
    if value < 0:
        out.append(f"impossible value: must be >= 0 (got {value})")
    elif value == 0 and ((name in COUNT_FIELDS and name not in MAY_BE_ZERO) or name.endswith(POSITIVE_SUFFIXES)):
        out.append("impossible value: must be > 0 (got 0)")
    if name in COUNT_FIELDS - FRACTIONAL and float(value) != int(value):
        out.append(f"a count must be an integer (got {value})")
    return out


class Fact(BaseModel):
    """One sourced number in SI units; the unit is the field name's suffix (`_bytes`, `_w` …)."""

    model_config = ConfigDict(extra="forbid")
    value: float = Field(description="The number, in the SI unit named by the field (bytes, bytes/s, FLOP/s, s, W, USD).")
    source: SourceId = Field(description="Source id; see /api/v1/sources/{id}.")
    locator: str = Field(description="Where in the source: table, page, section or config key.")
    as_published: Optional[Label] = Field(None, description="The number as the source prints it, with its unit convention.")
    note: Optional[str] = None
    per: Optional[Literal["device", "total", "system"]] = Field(
        None, description="What the number covers: one device, the total over the devices in scope, or the system as a whole.")
    basis: Optional[Literal["binary", "decimal"]] = Field(
        None, description="How the source's GB/TB reads: binary (2^30) or decimal (1e9).")
    basis_source: Optional[SourceId] = Field(None, description="Source that settles the binary/decimal reading.")
    basis_locator: Optional[str] = None
    source_url: Optional[str] = Field(None, description="Filled in by the build from the source.")
    source_title: Optional[str] = Field(None, description="Filled in by the build from the source.")

    @model_validator(mode="before")
    @classmethod
    def _sourced(cls, data: Any) -> Any:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            raise refuse(("", NO_SOURCE))
        if not isinstance(data, dict):
            return data
        problems: Problems = []
        value = data.get("value")
        if "value" not in data:
            problems.append(("", "fact has no value"))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(("", f"value must be a finite number (got {value!r})"))
        if not data.get("source"):
            problems.append(("", "fact has no source"))
        if not data.get("locator"):
            problems.append(("", "fact has no locator (table, page, section or config key)"))
        if data.get("basis_source") and not data.get("basis"):
            problems.append(("basis", "basis_source given without basis (binary or decimal)"))
        if problems:
            raise refuse(*problems)
        return data


class CountFact(Fact):
    """A sourced count (layers, heads, sizes): an integer value with no unit suffix."""


def _loose_facts(path: str, node: Any, context: Any) -> Problems:
    """Problems of a free-form key of a fact record: every number in it must be a sourced fact."""
    name = path.rsplit(".", 1)[-1]
    if isinstance(node, bool) or node is None or isinstance(node, str):
        return []
    if isinstance(node, (int, float)):
        return [] if name in STRUCTURAL else [(path, NO_SOURCE)]
    if isinstance(node, dict):
        if "value" in node:
            try:
                fact = Fact.model_validate(node, context=context)
            except ValidationError as exc:
                return [(join(path, f), m) for f, m in describe(exc.errors())]
            return [(path, m) for m in fact_rule(name, fact.value)]
        return [p for k, v in node.items() for p in _loose_facts(join(path, k), v, context)]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) if isinstance(v, (dict, list))
                for p in _loose_facts(join(path, i), v, context)]
    return []


class FactGroup(BaseModel):
    """A mapping whose numbers are sourced facts: declared facts are checked against their field
    name (unit, bounds), and free-form extra keys must hold sourced facts too."""

    model_config = ConfigDict(extra="allow")

    @field_validator("*", mode="after")
    @classmethod
    def _named(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, Fact) and info.field_name:
            problems = fact_rule(info.field_name, value.value)
            if problems:
                raise refuse(*(("", p) for p in problems))
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _extras(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        extra: Problems = []
        if isinstance(data, dict):
            for k, v in data.items():
                if k not in cls.model_fields:
                    extra += _loose_facts(str(k), v, info.context)
        try:
            model = handler(data)
        except ValidationError as exc:
            if not extra:
                raise
            raise refuse(*(describe(exc.errors()) + extra)) from None
        if extra:
            raise refuse(*extra)
        return model


class Record(BaseModel):
    """A top-level record of a data file; `key` names its identifying field."""

    model_config = ConfigDict(extra="allow")
    key: ClassVar[str] = "id"
