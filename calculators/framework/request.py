"""What a calculator request is: the `CalcRequest` base (unknown fields, NaN/Infinity and booleans as numbers
refused, unit strings read into SI numbers) and the bounded scalar and sweepable field types every request model uses."""
from __future__ import annotations

import contextvars
import functools
import types
import typing
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo,
                      field_validator, model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

from calculators.framework import units
from calculators.framework.vocabulary import SYNONYMS


#: Largest number of points a single sweep may broadcast to (documented in the API).
MAX_SWEEP_POINTS = 1_000_000
#: Largest list a single sweepable field accepts.
MAX_LIST_LENGTH = 100_000
#: Upper bound for any single numeric input: far beyond any physical quantity used here,
#: small enough that products of a few of them stay finite in float64.
MAX_VALUE = 1e30

KIB, MIB, GIB, TIB = 2**10, 2**20, 2**30, 2**40
KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12


class CalcRequest(BaseModel):
    """Base of every calculator request: unknown fields, NaN/Infinity and booleans as numbers are refused."""

    # defer_build: a request model's validator is built at its first use, not at import, so a worker holds only
    # those of the calculators it has served (~3.5 MB less for an idle worker)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True, defer_build=True)
    #: what reading the request's unit strings and bare numbers found (`unit_notes`): set only when there is any
    _unit_notes: tuple[str, ...] = PrivateAttr()

    @model_validator(mode="wrap")
    @classmethod
    def _unit_strings(cls, data: Any, handler: Any) -> Any:
        """A field whose name ends with its unit (`memory_budget_bytes`, `rtt_s`: see `units`) also takes a string
        with a unit ("80 GiB", "5 ms"), scalars and sweep items alike, read here into the SI number the field holds,
        which is what the answer echoes; a string that is no quantity of that unit is refused at its place. The
        outermost request reads its nested requests too (so that each line it states names the whole path), keeps
        a line per unit string read and a warning per implausible bare number (`units.PLAUSIBLE`), and hands them to
        the runner, which states them first among the answer's assumptions."""
        if not isinstance(data, dict):
            return handler(data)
        nested = _IN_REQUEST.get()
        lines: list[str] | None = None if nested else []
        errors: list[tuple[tuple, str, str]] = []
        data = units.read_request(cls, data, _numbers_only, lines, errors, recurse=not nested)
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(type=PydanticCustomError(
                "unit_string", "{reason}", {"reason": why}), loc=loc, input=text) for loc, text, why in errors])
        if nested:
            return handler(data)
        token = _IN_REQUEST.set(True)
        try:
            request = handler(data)
        finally:
            _IN_REQUEST.reset(token)
        if lines:
            request._unit_notes = tuple(sorted(lines, key=lambda line: not line.startswith("Warning:")))
        return request

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """The JSON schema (and OpenAPI) of a unit field says it takes a number or a string with a unit."""
        schema = super().__get_pydantic_json_schema__(core_schema, handler)
        target = handler.resolve_ref_schema(schema)
        props = target.get("properties") or {}
        plan = units.unit_plan(cls, _numbers_only)
        for key, prop in props.items():
            kind = plan.get(key, (None, ()))[0]
            if kind is not None and isinstance(prop, dict):
                props[key] = units.with_unit_strings(prop, kind)
        return schema

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        """`true`/`false` where a number is expected is a mistake, not 1/0 (pydantic's lax mode would take it):
        refused for every numeric field of every request, scalars, lists and maps alike, each error at the
        place of the boolean (nested request models check their own fields)."""
        if not isinstance(data, dict):
            return data
        errors = []
        for key, v in data.items():
            if not (v is True or v is False or isinstance(v, (list, tuple, dict))) or not isinstance(key, str):
                continue
            refuse, in_dicts = _numbers_only(cls, key)
            where = _boolean_in(v, in_dicts) if refuse else None
            if where is not None:
                value = v[where[0]] if where else v
                errors.append(InitErrorDetails(type=PydanticCustomError(
                    "bool_not_number", "a boolean ({value}) where a number is expected: write the number "
                    "(JSON true/false are not 1/0)", {"value": "true" if value else "false"}), loc=(key, *where), input=value))
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data

    @field_validator("hf_config", check_fields=False)
    @classmethod
    def _model_or_config(cls, v: Any, info: ValidationInfo) -> Any:
        """Every request that takes `model` and `model_config` takes one of them, refused naming model_config."""
        if v is not None and info.data.get("model") is not None:
            raise ValueError("give `model` (an id) or `model_config` (a config.json), not both")
        return v

    @model_validator(mode="before")
    @classmethod
    def _public_names_only(cls, data: Any) -> Any:
        """`hf_config` is only the Python name of the `model_config` field: a body must use the public one."""
        if isinstance(data, dict) and "hf_config" in data:
            raise ValueError("unknown field 'hf_config': write the config.json object as `model_config`")
        return data

    #: old name -> field, for a rename that holds in this request model only (the global ones are vocabulary.SYNONYMS)
    renamed_fields: ClassVar[dict[str, str]] = {}
    _renamed: tuple[tuple[str, str], ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _old_names(cls, data: Any, handler: Any) -> Any:
        """A field's old name (a synonym of `vocabulary.SYNONYMS` or of `renamed_fields`) is read as the field; the
        request remembers it so that the answer can say "`tensor_parallel` is now `tp`" (`renamed_notes`)."""
        moved: tuple[tuple[str, str], ...] = ()
        if isinstance(data, dict) and data:
            data, moved = _rename(cls, data)
        obj = handler(data)
        if moved and isinstance(obj, CalcRequest):
            obj._renamed = moved
        return obj


@functools.cache
def _names(model: type[BaseModel]) -> frozenset[str]:
    """Every name a body may use for a field of `model` (field names and aliases)."""
    return frozenset([*model.model_fields, *(f.alias for f in model.model_fields.values() if f.alias)])


def _rename(model: type[CalcRequest], data: dict) -> tuple[dict, tuple[tuple[str, str], ...]]:
    """`data` with old field names replaced by the fields they now are, and the (old, new) pairs replaced."""
    names = _names(model)
    moved = []
    for key in data:
        if isinstance(key, str) and key not in names:
            new = model.renamed_fields.get(key) or SYNONYMS.get(key)
            if new in names:
                if new in data:
                    raise ValidationError.from_exception_data(model.__name__, [InitErrorDetails(
                        type=PydanticCustomError("renamed_field", "`{old}` is the old name of `{new}`: give only `{new}`",
                                                 {"old": key, "new": new}), loc=(key,), input=data[key])])
                moved.append((key, new))
    if not moved:
        return data, ()
    new_names = dict(moved)
    return {new_names.get(k, k): v for k, v in data.items()}, tuple(moved)


def renamed_notes(req: BaseModel) -> list[str]:
    """One sentence per old field name a validated request (or any request object inside it) was given with."""
    notes: list[str] = []
    todo = [req]
    while todo:
        obj = todo.pop()
        if not isinstance(obj, BaseModel):
            continue
        if isinstance(obj, CalcRequest):
            notes += [f"`{old}` is now `{new}`: the old name is still read, but write `{new}`." for old, new in obj._renamed]
        for name in type(obj).model_fields:
            v = getattr(obj, name, None)
            if isinstance(v, BaseModel):
                todo.append(v)
            elif isinstance(v, (list, tuple)) and v and isinstance(v[0], BaseModel):
                todo.extend(v)
    return list(dict.fromkeys(notes))


#: set while a request's nested requests validate: the outermost one has read their unit strings already
_IN_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar("casebook_in_request", default=False)


def unit_notes(request: BaseModel) -> tuple[str, ...]:
    """The lines a validated request's unit strings and implausible bare numbers call for (warnings first):
    `memory_budget_bytes: '80 GiB' read as 85,899,345,920 bytes`; () when there are none."""
    return getattr(request, "_unit_notes", ())


@functools.cache
def _numbers_only(model: type[BaseModel], key: str) -> tuple[bool, bool]:
    """(the field takes numbers and never a boolean, a map's values may hold its numbers) for the request
    field a body names `key` (its name or alias)."""
    info = model.model_fields.get(key)
    if info is None:
        info = next((f for f in model.model_fields.values() if f.alias == key), None)
    if info is None:
        return False, False
    leaves: set[str] = set()
    _leaf_kinds(info.annotation, leaves)
    return ("number" in leaves and "other" not in leaves), ("dict" in leaves and "model" not in leaves)


def _leaf_kinds(tp: Any, out: set[str]) -> None:
    """What a type annotation accepts at its leaves: number, other (bool, Any, unknown: never refused), dict, model."""
    origin = typing.get_origin(tp)
    if tp is bool or tp is Any or tp is object:
        out.add("other")
    elif tp in (int, float):
        out.add("number")
    elif tp in (str, bytes, type(None)):
        pass
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        out.add("model")               # a nested request validates its own fields
    elif origin is Annotated:
        _leaf_kinds(typing.get_args(tp)[0], out)
    elif origin is typing.Literal:
        if any(isinstance(a, bool) for a in typing.get_args(tp)):
            out.add("other")
    elif origin in (list, tuple, set, frozenset, typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not Ellipsis:
                _leaf_kinds(arg, out)
    elif origin is dict:
        out.add("dict")
        args = typing.get_args(tp)
        _leaf_kinds(args[1] if len(args) == 2 else Any, out)
    elif tp is dict:
        out.update(("dict", "other"))
    elif isinstance(tp, type) and issubclass(tp, (int, float)) and not issubclass(tp, bool):
        out.add("number")              # IntEnum and friends
    else:
        out.add("other")               # unknown: never refuse what it might accept


def _boolean_in(v: Any, in_dicts: bool) -> tuple | None:
    """Where a boolean sits in a request value: () for the value itself, (i,) for a list item, (key,) for a
    map value; None when there is none."""
    if v is True or v is False:
        return ()
    if isinstance(v, (list, tuple)):
        if bool in set(map(type, v)):                      # one pass in C over a 100,000-point sweep
            return (next(i for i, x in enumerate(v) if x is True or x is False),)
        return None
    if isinstance(v, dict) and in_dicts:
        for k, x in v.items():
            if x is True or x is False:
                return (k,)
    return None


# Bounded scalar types used in request models.
PosFloat = Annotated[float, Field(gt=0, le=MAX_VALUE, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_VALUE, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PosInt = Annotated[int, Field(ge=1, le=10**15)]
NonNegInt = Annotated[int, Field(ge=0, le=10**15)]


class Points(list):
    """The validated list of a swept field: a plain list to everything that reads it (JSON, model_dump,
    `isinstance(v, list)`), which NumPy converts once per dtype and then copies: the several places of a
    calculator that broadcast the same 100,000 points don't each convert 100,000 Python numbers."""

    __slots__ = ("_arrays",)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The points as an array (a fresh copy unless `copy=False`, which gets the shared read-only one)."""
        cache = getattr(self, "_arrays", None)
        if cache is None or cache[0] != len(self):
            cache = (len(self), {})
            self._arrays = cache
        key = np.dtype(dtype) if dtype is not None else None
        a = cache[1].get(key)
        if a is None:
            a = self._convert(key)
            a.flags.writeable = False
            cache[1][key] = a
        return a if copy is False else a.copy()

    def _convert(self, dtype: np.dtype | None) -> np.ndarray:
        return np.array(list(self), dtype=dtype)


class IntPoints(Points):
    """Points of an integer sweep (bounded to |x| ≤ 1e15, so int64 holds every one exactly): read into int64 in one
    pass that needs no type inference (about half the time of `np.array` on a list), then cast to the dtype asked."""

    __slots__ = ()

    def _convert(self, dtype: np.dtype | None) -> np.ndarray:
        a = np.fromiter(self, dtype=np.int64, count=len(self))
        return a if dtype is None or dtype == a.dtype else a.astype(dtype)


def _sweep(item: Any) -> Any:
    """A list of `item` (1 to MAX_LIST_LENGTH of them), validated into `Points` (`IntPoints` for integers)."""
    wrap = IntPoints if item in (PosInt, NonNegInt) else Points
    return Annotated[list[item], Field(min_length=1, max_length=MAX_LIST_LENGTH), AfterValidator(wrap)]


# Sweepable variants: a scalar or a list of them.
PosFloatSweep = PosFloat | _sweep(PosFloat)
NonNegFloatSweep = NonNegFloat | _sweep(NonNegFloat)
FractionSweep = Fraction | _sweep(Fraction)
PosIntSweep = PosInt | _sweep(PosInt)
NonNegIntSweep = NonNegInt | _sweep(NonNegInt)

