"""Shared building blocks of every calculator: requests, steps, results, sweeps, formatting.

A calculator is a function `compute(request, lookup) -> Result`. `request` is a validated
pydantic model (plain numbers, lists where a field is sweepable, and ids); `lookup(kind, id)`
returns a store record as a plain dict so that calculators never import the store.
"""
from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Iterable, Sequence

import numpy as np
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

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


class CalcInputError(ValueError):
    """A request that validates by type but cannot be computed; `loc` names the field."""

    def __init__(self, loc: Sequence[str | int] | str, message: str, status: int = 422):
        self.loc = (loc,) if isinstance(loc, str) else tuple(loc)
        self.message = message
        self.status = status
        super().__init__(f"{'.'.join(map(str, self.loc))}: {message}")


class UnknownId(CalcInputError):
    """A request names an id the store does not hold (front ends add the closest ids: see `ids_of`)."""

    def __init__(self, loc: Sequence[str | int] | str, kind: str, ident: str):
        self.kind = kind
        self.ident = ident
        super().__init__(loc, f"unknown {kind} id {ident!r}; see /api/v1/{kind_plural(kind)}")


def kind_plural(kind: str) -> str:
    return {"hardware": "hardware", "model": "models", "link": "links", "framework": "frameworks",
            "case": "cases", "price": "prices", "source": "sources"}.get(kind, kind + "s")


Lookup = Callable[[str, str], dict]
#: `lookup(IDS, kind)` lists the ids of a kind, where a lookup can (for did-you-mean on unknown ids).
IDS = "ids"


def no_lookup(kind: str, ident: str) -> dict:
    """A lookup that knows no ids (for pure-number requests and tests)."""
    raise KeyError(ident)


def ids_of(lookup: Lookup, kind: str) -> list[str]:
    """The ids of `kind` the lookup knows ([] when it cannot list them)."""
    try:
        ids = lookup(IDS, kind)
    except (KeyError, TypeError, ValueError):
        return []
    return [str(i) for i in ids] if isinstance(ids, (list, tuple, set, frozenset, dict)) else []


def fetch(lookup: Lookup, kind: str, ident: str, loc: str) -> dict:
    """Resolve an id through `lookup`, turning a miss into a 422 that names the field."""
    try:
        return lookup(kind, ident)
    except KeyError:
        raise UnknownId(loc, kind, ident) from None


def fact_value(record: dict, *path: str, required: bool = True, loc: str = "") -> float | None:
    """The `value` of a sourced fact inside a store record (None when absent and optional)."""
    node: Any = record
    for key in path:
        if not isinstance(node, dict) or key not in node or node[key] is None:
            if required:
                raise CalcInputError(loc or path[0], f"{record.get('id', '?')} has no sourced {'.'.join(path)}")
            return None
        node = node[key]
    return node["value"] if isinstance(node, dict) else node


def fact_source(record: dict, *path: str) -> dict | None:
    """Provenance of a fact: {field, value, source, locator} or None."""
    node: Any = record
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if not isinstance(node, dict) or "source" not in node:
        return None
    return {"record": record.get("id"), "field": ".".join(path), "value": node.get("value"),
            "source": node.get("source"), "locator": node.get("locator"),
            "source_url": node.get("source_url")}


class TransientRecord(dict):
    """A record built for one request (from a `model_config`): nothing derived from it is memoised, since no later
    request will hold the same record."""

    __slots__ = ()


class RecordMemo:
    """Values derived from store records, computed once per record rather than once per request.

    Keyed by the record's identity and the arguments that shape the value: a store's records are built once and
    never change, and the memo holds each record it keys on, so an id cannot be reused while its entry lives. A
    record built per request (from a `model_config`) misses and is computed as before. Values handed out are
    shared between requests: callers treat them as read-only. Bounded: cleared when `maxsize` entries are held."""

    def __init__(self, maxsize: int = 512):
        self.maxsize = maxsize
        self._entries: dict[tuple, tuple[dict, Any]] = {}

    def get(self, rec: dict, key: tuple, make: Callable[[], Any]) -> Any:
        """The value for (`rec`, `key`), made by `make()` on the first request for it (every time for a
        TransientRecord)."""
        if isinstance(rec, TransientRecord):
            return make()
        k = (id(rec), *key)
        hit = self._entries.get(k)
        if hit is not None and hit[0] is rec:
            return hit[1]
        value = make()
        if len(self._entries) >= self.maxsize:
            self._entries.clear()
        self._entries[k] = (rec, value)
        return value


# --------------------------------------------------------------------------- sweeps

def arr(x: Any, dtype: type = float) -> np.ndarray:
    """A request value (scalar or list) as a NumPy array."""
    return np.asarray(x, dtype=dtype)


def is_sweep(*values: Any) -> bool:
    """Is any of `values` a list or an array of at least one dimension (checked without converting a list)?"""
    return any(isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim > 0) for v in values)


def broadcast(named: dict[str, Any], dtype: type = float, axes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Broadcast the sweepable inputs against each other.

    Lists of equal length pair up element-wise; a list meeting a list of another length is an
    error naming the field. Scalars broadcast to every point. With `axes` (a grid request: see `grid_axes`)
    each listed field is instead its own axis, of any length, and the result spans every combination: the list
    of `axes[i]` is shaped to lie along dimension i, so NumPy's broadcasting forms the grid only where
    a formula combines the fields.
    """
    arrays = {k: np.asarray(v, dtype=dtype) for k, v in named.items()}
    if axes is not None:
        for k, a in arrays.items():
            if a.ndim == 1:
                if k not in axes:
                    raise CalcInputError(k, "a list in a grid request must be one of its axes: " + ", ".join(axes))
                shape = [1] * len(axes)
                shape[axes.index(k)] = a.shape[0]
                arrays[k] = a.reshape(shape)
        return arrays
    length = None
    for k, a in arrays.items():
        if a.ndim == 1:
            if length is None:
                length = a.shape[0]
            elif a.shape[0] != length:
                raise CalcInputError(k, f"sweep of {a.shape[0]} points does not match another swept field of {length}")
    if length and length > MAX_SWEEP_POINTS:
        raise CalcInputError(next(iter(arrays)), f"sweep of {length} points exceeds {MAX_SWEEP_POINTS}", status=413)
    return arrays


#: a request's `grid` switch (annotate it StrictBool: the cost model reads raw bodies too, where only `true` is a grid)
GRID_FIELD = Field(False, description="Combine the swept fields as a grid instead of pairing them point by point: every "
                   "list becomes its own axis, of any length, and the outputs hold every combination as nested arrays "
                   "(`grid_shape`, axes in the order of `grid_axes`). The points of a grid count against the same "
                   "limits as a sweep's. JSON true or false only.")


def grid_axes(req: BaseModel, fields: Sequence[str]) -> tuple[str, ...] | None:
    """The axes of a grid request, in the order of `fields` (those of them given as lists); None when the request
    does not ask for a grid. A grid of more than MAX_SWEEP_POINTS points is refused (413) naming its first axis."""
    if not getattr(req, "grid", False):
        return None
    axes = tuple(f for f in fields if isinstance(getattr(req, f, None), list))
    points = math.prod(len(getattr(req, f)) for f in axes)
    if points > MAX_SWEEP_POINTS:
        raise CalcInputError(axes[0], f"a grid of {points:,} points ({' × '.join(str(len(getattr(req, f))) for f in axes)}) "
                             f"exceeds {MAX_SWEEP_POINTS:,}", status=413)
    return axes


def grid_shape(req: BaseModel, axes: Sequence[str]) -> tuple[int, ...]:
    """The shape of a grid request's outputs: one dimension per axis, its list's length."""
    return tuple(len(getattr(req, f)) for f in axes)


def on_grid(x: Any, shape: tuple[int, ...]) -> Any:
    """Every array in an output tree (nested in dicts) spread over the whole grid `shape`, contiguous, so each
    per-point output of a grid request has the grid's shape whatever subset of the axes it depends on. Plain numbers
    stay numbers: an output that depends on no axis is one value, as in a paired sweep."""
    if isinstance(x, np.ndarray) and x.ndim:
        return x if x.shape == shape else np.ascontiguousarray(np.broadcast_to(x, shape))
    if isinstance(x, dict):
        return {k: on_grid(v, shape) for k, v in x.items()}
    return x


def first(x: Any) -> Any:
    """The first point of a sweep (or the scalar itself) as a Python scalar: steps describe this point. An array
    gives its first element only; a list of one number type gives its first item without converting the rest."""
    if isinstance(x, np.ndarray):
        return x.reshape(-1)[0].item() if x.ndim else x.item()
    if isinstance(x, list) and x and len(kinds := set(map(type, x))) == 1 and kinds <= {int, float}:
        return x[0]
    a = np.asarray(x)
    return a.reshape(-1)[0].item() if a.ndim else a.item()


def out(x: Any) -> Any:
    """A NumPy result as it is kept until the wire: arrays stay arrays, scalars become Python scalars.

    A sweep's outputs are float64/int64/bool arrays (made contiguous, so the one encoder, orjson with its
    NumPy option, writes them without a copy and writes NaN/inf as null); 0-d arrays and NumPy scalars
    become Python numbers (non-finite ones None); text and object arrays, which the encoder cannot write,
    become lists. Nothing is converted element by element: `jsonable` gives plain Python when a consumer
    wants it."""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return _py(x.item())
        kind = x.dtype.kind
        if kind == "f":
            return x if x.dtype == np.float64 and x.flags.c_contiguous else np.ascontiguousarray(x, dtype=np.float64)
        if kind in "iub":
            return x if x.flags.c_contiguous else np.ascontiguousarray(x)
        if kind in "US":
            return x.tolist()
        return [out(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        return _py(x.item())
    if isinstance(x, dict):
        return {k: out(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [out(v) for v in x]
    return _py(x)


def _py(v: Any) -> Any:
    """A Python scalar for JSON: NaN and ±inf as None (lists from `item()` of object arrays recurse)."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, list):
        return [out(i) for i in v]
    return v


def jsonable(x: Any) -> Any:
    """`x` as plain Python (dicts, lists, int, float, bool, str, None), the values its JSON holds: arrays
    become lists (NaN/inf as None, int arrays as ints), NumPy scalars Python scalars. For the consumers that
    read outputs as Python values (site pages, CLI, derivation checks); the JSON answer never needs it."""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            return _py(x.item())
        kind = x.dtype.kind
        if kind == "f":
            finite = np.isfinite(x)
            return x.tolist() if finite.all() else np.where(finite, x, None).tolist()
        if kind in "iubUS":
            return x.tolist()
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        return _py(x.item())
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return x


# --------------------------------------------------------------------------- formatting

def num(x: float, digits: int = 6) -> str:
    """A number for humans: thousands separators for integers, `digits` significant figures else."""
    if x is None:
        return "—"
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if x != 0 and (abs(x) >= 1e15 or abs(x) < 1e-4):
        return f"{x:.{digits - 1}e}"
    s = f"{x:,.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}g}"
    if "e" in s:
        s = f"{x:,.{max(digits - len(str(int(abs(x)))), 0)}f}"
    return s


def fmt_bytes(b: float) -> str:
    """Bytes with both a decimal (GB) and a binary (GiB) reading, each labelled."""
    b = float(b)
    if abs(b) < 1000:
        return f"{num(b)} B"
    dec = next(((b / f, u) for f, u in ((TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "kB")) if abs(b) >= f))
    binu = next(((b / f, u) for f, u in ((TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")) if abs(b) >= f), (b, "B"))
    return f"{num(b)} B = {num(dec[0], 5)} {dec[1]} (decimal) = {num(binu[0], 5)} {binu[1]} (binary)"


def fmt_s(s: float) -> str:
    s = float(s)
    if s == 0:
        return "0 s"
    if abs(s) < 1e-3:
        return f"{num(s * 1e6, 5)} µs"
    if abs(s) < 1:
        return f"{num(s * 1e3, 5)} ms"
    if abs(s) < 3600 * 2:
        return f"{num(s, 5)} s"
    if abs(s) < 86400 * 3:
        return f"{num(s / 3600, 5)} h"
    return f"{num(s / 86400, 5)} days"


def fmt_rate(bps: float) -> str:
    return f"{num(bps / 1e9, 5)} GB/s"


def fmt_flops(f: float) -> str:
    return f"{num(f / 1e12, 6)} TFLOP"


# --------------------------------------------------------------------------- results

@dataclass
class Step:
    label: str
    formula: str
    substituted: str
    value: Any
    unit: str

    def as_dict(self) -> dict:
        return {"label": self.label, "formula": self.formula, "substituted": self.substituted,
                "value": out(self.value), "unit": self.unit}


@dataclass
class Result:
    """What a calculator returns: the envelope minus the parts the API adds (name, urls, cases)."""

    inputs: dict
    outputs: dict
    steps: list[Step] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)
    headline: str = ""          # the answer in one sentence, set by the calculator (sweeps: the first point)
    #: a grid request's shape: its outputs are arrays broadcastable to it (each spans the axes it depends on), and
    #: the answer (`runner.envelope`) spreads every one over the whole grid
    grid_shape: tuple[int, ...] | None = None

    def step(self, label: str, formula: str, substituted: str, value: Any, unit: str) -> Any:
        """Record one explanation step and hand its value back, so formulas read inline."""
        self.steps.append(Step(label, formula, substituted, first(value) if is_sweep(value) else out(value), unit))
        return value

    def assume(self, *lines: str) -> None:
        self.assumptions.extend(lines)

    def cite(self, provenance: dict | None) -> None:
        if provenance and provenance not in self.sources:
            self.sources.append(provenance)


def request_inputs(req: BaseModel, exclude_none: bool = False, exclude_unset: bool = False, by_alias: bool = False) -> dict:
    """The request as JSON-ready values (`model_dump(mode="json", ...)` with these options), fields in declaration
    order. A swept field is handed over as its validated `Points` (already a list of plain numbers, written by the
    encoder as it is) rather than copied number by number by pydantic's serialiser (~12 µs per 1,000 points)."""
    options = {"exclude_none": exclude_none, "exclude_unset": exclude_unset, "by_alias": by_alias}
    swept = {name for name, value in req if isinstance(value, Points)}
    if not swept:
        return req.model_dump(mode="json", **options)
    if exclude_unset:
        swept &= req.model_fields_set
    dumped = req.model_dump(mode="json", exclude=swept, **options)
    fields = type(req).model_fields
    key = {name: (info.alias or name) if by_alias else name for name, info in fields.items()}
    return {key[name]: getattr(req, name) if name in swept else dumped[key[name]]
            for name in fields if name in swept or key[name] in dumped}


def sum_list(values: Iterable[float]) -> float:
    return float(sum(values))


# --------------------------------------------------------------------------- shared compute helpers

def quiet(fn):
    """Run a compute with NumPy floating-point warnings off (overflow gives inf, 0·inf gives NaN) and pass
    every output through `out`, so that non-finite values anywhere are reported as null."""
    @functools.wraps(fn)
    def wrapper(req, lookup):
        with np.errstate(all="ignore"):
            res = fn(req, lookup)
        res.outputs = out(res.outputs)
        return res
    return wrapper


def aligned(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Broadcast every swept input to one shape, so that every output of a sweep is a list of its length."""
    keys = list(x)
    return dict(zip(keys, np.broadcast_arrays(*[x[k] for k in keys]))) if keys else x


def whole_numbers(a) -> object:
    """Whole numbers as JSON integers while float64 holds them exactly: an int64 array for a sweep whose every
    point is finite and below 2^53, a Python int for a scalar; otherwise floats (larger ones: JSON integers stop
    at 64 bits) with null where not finite."""
    a = np.asarray(a, dtype=float)
    if a.ndim and a.size:
        if -2**53 < a.min() and a.max() < 2**53:      # False for NaN (max and min propagate it) and ±inf too
            return a.astype(np.int64) if a.ndim > 1 else a.astype(np.int64).ravel()
        if a.ndim > 1:
            return out(a)                             # a grid: floats (null where not finite)
        return [(int(v) if abs(v) < 2**53 else v) if math.isfinite(v) else None for v in a.ravel().tolist()]
    if not a.ndim:
        v = float(a)
        return (int(v) if abs(v) < 2**53 else v) if math.isfinite(v) else None
    return []
