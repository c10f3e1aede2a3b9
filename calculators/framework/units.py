"""Quantities as a person types them: a request field whose name ends with its SI unit also takes a string with a
unit, read here into the number in that unit; and the one table of bare numbers too small to be meant in it.

The unit of a field is its name's suffix (see calculators/CONTRIBUTING.md):

| suffix | the number is in | strings it takes, e.g. |
|---|---|---|
| `_bytes` | bytes | "80 GiB", "512 MB", "4 KiB", "1.5 TB", "64 B" |
| `_bytes_per_s` | bytes per second | "3.35 TB/s", "900 GB/s", "25 GiB/s", "20 Mbit/s" (÷ 8) |
| `_bits_per_s` | bits per second | "20 Mbit/s", "400 Gbps", "100 Gb/s", "12.5 GB/s" (× 8) |
| `_s` (not `_per_s`) | seconds | "5 ms", "20 us", "20 µs", "300 ns", "2 min", "1.5 h", "3 days" |
| `_flops` | floating-point operations | "6e23 FLOP", "3.2 PFLOP", "1e21 FLOPs" |
| `_flop_per_s` | FLOP per second | "989 TFLOP/s", "989 TFLOPS", "2.25 PFLOP/s" |
| `_w` | watts | "700 W", "1.2 kW" |

Other rates (`tokens_per_s`, `arrival_rate_per_s`), counts and money (`_usd`) take numbers only.

Spellings. Prefixes are SI decimal (k, M, G, T, P, E: 10³ … 10¹⁸; m, u/µ/μ, n, p below one) or binary (Ki, Mi, Gi,
Ti, Pi, Ei: 2¹⁰ … 2⁶⁰), case-sensitive: `kB` is 1,000 bytes, `KiB` 1,024, and `KB` is refused as ambiguous. `B`
(or `byte`) is a byte and `b` (or `bit`) a bit, so `Gb/s` and `Gbps` are gigabits per second and `GB/s` and `GBps`
gigabytes per second; a prefix below one on a bit or byte (`mb`, millibits) is refused. A rate is a unit over `s`
(`GB/s`, `TFLOP/s`); `TFLOPS` (capital S) is the rate and `TFLOPs` or `TFLOP` the count. Time: `s`, `sec`, `ms`,
`us`, `µs`, `ns`, `ps`, `min`, `h`, `hr`, `hour`, `day` (plurals too). A string without a unit ("80") is the number
in the field's own unit, as a JSON number would be.

The string is a number (digits, an optional decimal point and exponent) and a unit expression that pint
(https://pint.readthedocs.io) parses against a small registry of only these units, so nothing from outside the
field's world (barns, gilberts, baud) can match by accident. pint is imported at the first string only: a worker
that never receives one never loads it. The number is multiplied by pint's exact (decimal) factor, so "3.35 TB/s" is
the float 3.35e12, exactly what the JSON number would have given.
"""
from __future__ import annotations

import fnmatch
import functools
import re
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Kind:
    """The unit a field suffix names: pint's spelling of it, the word answers use, and examples of strings."""

    suffix: str
    pint: str
    word: str
    what: str
    examples: tuple[str, ...]


#: every unit a field name may end with; the longer suffixes first (`_bytes_per_s` before `_s`)
KINDS: tuple[Kind, ...] = (
    Kind("bytes_per_s", "byte / second", "bytes/s", "a data rate in bytes per second", ("3.35 TB/s", "900 GB/s")),
    Kind("bits_per_s", "bit / second", "bit/s", "a data rate in bits per second", ("20 Mbit/s", "400 Gbps")),
    Kind("flop_per_s", "FLOP / second", "FLOP/s", "a compute rate in FLOP per second", ("989 TFLOP/s", "989 TFLOPS")),
    Kind("bytes", "byte", "bytes", "a size in bytes", ("80 GiB", "512 MB")),
    Kind("flops", "FLOP", "FLOP", "a count of floating-point operations", ("6e23 FLOP", "3.2 PFLOP")),
    Kind("w", "watt", "W", "a power in watts", ("700 W", "1.2 kW")),
    Kind("s", "second", "s", "a time in seconds", ("5 ms", "2 h")),
)
_BY_SUFFIX = {k.suffix: k for k in KINDS}

#: a string this module reads: a number, then an optional unit expression (letters first) of bounded length
NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
UNIT_TEXT = r"[A-Za-zµμ][A-Za-z0-9µμ /*^().-]{0,39}"
#: the pattern the OpenAPI schema gives a unit string (the same as what `read` accepts, up to blanks at the ends)
PATTERN = rf"^\s*{NUMBER}\s*(?:{UNIT_TEXT})?\s*$"
_STRING = re.compile(rf"\s*({NUMBER})\s*({UNIT_TEXT})?\s*", re.S)
#: a longer string is refused before any parsing
MAX_CHARS = 64


@functools.cache
def unit_of(name: str) -> Kind | None:
    """The unit a field name ends with (`memory_budget_bytes` -> bytes, `rtt_s` -> seconds), None for a field
    without one (counts, fractions, money, and rates of other things: `tokens_per_s`)."""
    for kind in KINDS:
        if name == kind.suffix or name.endswith("_" + kind.suffix):
            if kind.suffix == "s" and name.endswith("_per_s"):
                return None
            return kind
    return None


class UnitError(ValueError):
    """A string that is no quantity of the field's unit; the message says what was expected, with examples."""


# --------------------------------------------------------------------------- pint, loaded at the first string

#: the registry: only the units of the table above, so that a string means one thing here
_DEFINITIONS = """
pico- = 1e-12 = p-
nano- = 1e-9 = n-
micro- = 1e-6 = µ- = μ- = u-
milli- = 1e-3 = m-
kilo- = 1e3 = k-
mega- = 1e6 = M-
giga- = 1e9 = G-
tera- = 1e12 = T-
peta- = 1e15 = P-
exa- = 1e18 = E-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
pebi- = 2**50 = Pi-
exbi- = 2**60 = Ei-
second = [time] = s = sec
minute = 60 * second = min
hour = 60 * minute = h = hr
day = 24 * hour
bit = [information] = b
byte = 8 * bit = B
bps = bit / second
Bps = byte / second
flop = [computation] = FLOP
FLOPS = flop / second
watt = [power] = W
"""
_LOCK = threading.RLock()
_REGISTRY: Any = None


def _registry() -> Any:
    """pint's registry of the units above, with exact decimal arithmetic (built once per process, ~15 ms)."""
    global _REGISTRY
    if _REGISTRY is None:
        with _LOCK:
            if _REGISTRY is None:
                import pint    # lazy: ~0.3 s and a few MB, only in a process that receives a unit string
                registry = pint.UnitRegistry(None, non_int_type=Decimal)
                registry.load_definitions(_DEFINITIONS.splitlines())
                _REGISTRY = registry
    return _REGISTRY


_DIMENSIONS = {
    "[information]": "an amount of data", "[information] / [time]": "a data rate", "[time]": "a time",
    "[computation]": "a FLOP count", "[computation] / [time]": "a FLOP rate", "[power]": "a power",
    "dimensionless": "a plain number",
}


@functools.lru_cache(maxsize=512)
def _factor(unit: str, suffix: str) -> Decimal | str:
    """How many of the field's unit one `unit` is (exact), or why a string with it is not one (a phrase)."""
    with _LOCK:                       # pint's parser fills caches of its own: one thread at a time (once per unit)
        return _factor_of(unit, _BY_SUFFIX[suffix])


def _factor_of(unit: str, kind: Kind) -> Decimal | str:
    ureg = _registry()
    try:
        parsed = ureg.parse_units(unit)
    except Exception:                 # pint's parser raises several kinds (undefined names, syntax, scaling factors)
        hint = "; kB is 1,000 bytes, KiB 1,024" if unit[:1] == "K" and unit[1:2] != "i" else ""
        return f"names no unit this service reads ({unit!r}{hint})"
    names = [str(n) for n in getattr(parsed, "_units", {})]
    if any(n.endswith(("bit", "byte")) and n.startswith(("milli", "micro", "nano", "pico")) for n in names):
        return f"is a fraction of a bit or byte ({unit!r}: mega is a capital M, as in Mbit or MB)"
    dims = str(parsed.dimensionality)
    if parsed.dimensionality != ureg.parse_units(kind.pint).dimensionality:
        return f"is {_DIMENSIONS.get(dims, dims)} ({unit!r})"
    try:
        return Decimal(ureg.Quantity(Decimal(1), parsed).to(kind.pint).magnitude)
    except Exception:                 # a factor beyond Decimal's range (`Kis^99999/s^99998`)
        return f"is out of range ({unit!r})"


def read(text: str, kind: Kind) -> tuple[int | float, bool]:
    """The number `text` ("80 GiB", "5 ms", "80") gives in the unit of `kind`, and whether it named a unit.

    Whole results are ints (so an integer field takes "4 KiB"), others floats; out of float range is inf, which
    the field's own bounds refuse. Raises UnitError saying what was expected."""
    m = _STRING.fullmatch(text) if len(text) <= MAX_CHARS else None
    if m is None:
        raise UnitError(_expected(kind, f"{_quote(text)} is not a number followed by a unit"))
    number, unit = m.group(1), m.group(2)
    factor: Decimal | str = _factor(unit.strip(), kind.suffix) if unit else Decimal(1)
    if isinstance(factor, str):
        raise UnitError(_expected(kind, f"{_quote(text)} {factor}"))
    try:
        value = Decimal(number) * factor
        if value == value.to_integral_value() and abs(value) < 2**63:
            return int(value), bool(unit)
        return float(value), bool(unit)
    except (ArithmeticError, OverflowError):      # beyond Decimal's exponents: out of range
        return (float("inf") if not number.startswith("-") else float("-inf")), bool(unit)


def _quote(text: str) -> str:
    return repr(text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + "…")


def _expected(kind: Kind, why: str) -> str:
    examples = " or ".join(f'"{e}"' for e in kind.examples)
    return f"{why}; this field is {kind.what}: give a number in {kind.word} or a string such as {examples}"


def shown(v: float) -> str:
    """A number in a note: whole numbers with thousands separators, others to 6 significant figures."""
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:.6g}"


def note(field: str, text: str, value: float, kind: Kind) -> str:
    """The line an answer states for a unit string it read: `memory_budget_bytes: '80 GiB' read as 85,899,345,920 bytes`."""
    return f"{field}: {text!r} read as {shown(value)} {kind.word}"


# --------------------------------------------------------------------------- implausible bare numbers

@dataclass(frozen=True)
class Plausible:
    """Bare numbers below `below` (and above zero) in the fields matching `fields` were probably meant in `meant`."""

    fields: tuple[str, ...]      # fnmatch patterns of field names
    below: float
    meant: tuple[str, ...]       # the units a person probably had in mind
    scale: str                   # the exponent that writes such a number in the field's unit ("e9")
    write: str                   # the unit of the string to suggest instead


#: the one table of bare numbers too small for their field: memory sizes and budgets under 10⁴ bytes (a person wrote
#: GB or GiB), bandwidths under 10⁴ bytes/s or bit/s (GB/s, Gbit/s), FLOP rates under 10⁶ (TFLOP/s). Only fields where
#: a small value is never meant: not per-element sizes (`element_bytes`, `dtype_bytes`, `bank_bytes`, `…_bytes_per_…`)
#: nor times. tests/calculators/test_units.py checks the fields it matches across every request model of the registry.
PLAUSIBLE: tuple[Plausible, ...] = (
    Plausible(("*memory*_bytes", "*budget_bytes", "*weight_bytes", "weights_bytes", "*_reserve_bytes"), 1e4,
              ("GB", "GiB"), "e9", "GiB"),
    Plausible(("*bytes_per_s",), 1e4, ("GB/s",), "e9", "GB/s"),
    Plausible(("*bits_per_s",), 1e4, ("Gbit/s", "Mbit/s"), "e9", "Gbit/s"),
    Plausible(("*flop_per_s",), 1e6, ("TFLOP/s",), "e12", "TFLOP/s"),
)


@functools.cache
def plausibility(name: str) -> Plausible | None:
    """The rule of PLAUSIBLE for a field name, None when none applies."""
    return next((p for p in PLAUSIBLE if any(fnmatch.fnmatchcase(name, pat) for pat in p.fields)), None)


def implausible(field: str, name: str, values: Any) -> str | None:
    """A warning when a bare number of field `name` (at `field`, its path in the request; a sweep: its first such
    point) is above zero and below its rule's bound; None otherwise. A list is checked at C speed first (its minimum)."""
    rule = plausibility(name)
    kind = unit_of(name)
    if rule is None or kind is None:
        return None
    if isinstance(values, list):
        try:
            if not values or min(values) >= rule.below:
                return None
        except TypeError:               # mixed with something that is not a number: its own validation answers
            return None
        v = next((x for x in values if type(x) in (int, float) and 0 < x < rule.below), None)
    else:
        v = values if type(values) in (int, float) and 0 < values < rule.below else None
    if v is None:
        return None
    n = shown(v).replace(",", "")
    meant = " or ".join(f"{n} {u}" for u in rule.meant)
    return (f"Warning: {field} = {n} looks like {meant}; {name} is in {kind.word}: write {n}{rule.scale} or "
            f"\"{n} {rule.write}\" (this answer reads it as {n} {kind.word})")


# --------------------------------------------------------------------------- reading a request body

#: a unit string is noted one by one for the first few points of a sweep, then counted
NOTED_POINTS = 3

#: (the field takes numbers only, …): `request._numbers_only`, handed in so that this module needs no request type
NumbersOnly = Callable[[type[BaseModel], str], tuple[bool, bool]]
#: an error found while reading: (its location in the body, the string, why it is no quantity of the field's unit)
Problem = tuple[tuple, str, str]


@functools.cache
def unit_plan(model: type[BaseModel], numbers_only: NumbersOnly) -> dict[str, tuple[Kind | None, tuple[type[BaseModel], ...]]]:
    """For each key a body may use (name and alias): the unit of a field that takes numbers only and whose name ends
    with a unit, or the request models a field holds (to read them too); keys with neither are left out."""
    plan: dict[str, tuple[Kind | None, tuple[type[BaseModel], ...]]] = {}
    for name, info in model.model_fields.items():
        for key in {name, info.alias or name}:
            kind = unit_of(key)
            if kind is not None and numbers_only(model, key)[0]:
                plan[key] = (kind, ())
            elif models := tuple(dict.fromkeys(_models_in(info.annotation))):
                plan[key] = (None, models)
    return plan


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


def path(loc: tuple) -> str:
    """`("candidates", 0, "rtt_s")` -> `candidates[0].rtt_s`, the field as a user wrote it."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def read_request(model: type[BaseModel], data: dict, numbers_only: NumbersOnly, lines: list[str] | None,
                 errors: list[Problem], recurse: bool = True, loc: tuple = ()) -> dict:
    """A request body with every unit string of `model`'s unit fields read into its number (a new dict when any is,
    else `data` itself). Lines for the strings read and warnings for implausible bare numbers go to `lines` (when
    given), strings that are no quantity of their field's unit to `errors`. With `recurse`, nested requests too."""
    plan = unit_plan(model, numbers_only)
    changed: dict[str, Any] = {}
    for key, v in data.items():
        entry = plan.get(key) if isinstance(key, str) else None
        if entry is None:
            continue
        kind, models = entry
        if kind is not None:
            new = _read_value(kind, key, v, (*loc, key), lines, errors)
        elif recurse:
            new = _read_nested(models, v, numbers_only, (*loc, key), lines, errors)
        else:
            continue
        if new is not v:
            changed[key] = new
    return {**data, **changed} if changed else data


def _read_value(kind: Kind, key: str, v: Any, loc: tuple, lines: list[str] | None, errors: list[Problem]) -> Any:
    """One unit field's value with its unit strings read (a scalar, or the items of a list): a line per string read
    (a sweep: its first few, then a count) and a warning when a bare number is implausible."""
    if isinstance(v, str):
        value, has_unit = _read_one(kind, v, loc, errors)
        if lines is not None and value is not v:
            if has_unit:
                lines.append(note(path(loc), v, value, kind))
            else:
                _warn(lines, loc, key, value)
        return value
    if not isinstance(v, list) or str not in set(map(type, v)):    # one pass in C over a 100,000-point sweep
        if lines is not None:
            _warn(lines, loc, key, v)
        return v
    out, bare, read_ = [], [], 0
    for i, x in enumerate(v):
        if not isinstance(x, str):
            out.append(x)
            bare.append(x)
            continue
        value, has_unit = _read_one(kind, x, (*loc, i), errors)
        out.append(value)
        if not has_unit:
            bare.append(value)
        elif value is not x:
            read_ += 1
            if lines is not None and read_ <= NOTED_POINTS:
                lines.append(note(path((*loc, i)), x, value, kind))
    if lines is not None:
        if read_ > NOTED_POINTS:
            lines.append(f"{path(loc)}: {read_ - NOTED_POINTS:,} more unit strings read the same way, in {kind.word}")
        _warn(lines, loc, key, bare)
    return out


def _read_one(kind: Kind, text: str, loc: tuple, errors: list[Problem]) -> tuple[Any, bool]:
    """(the number a unit string gives, whether it named a unit); (the string, False) and an error when it is none."""
    try:
        return read(text, kind)
    except UnitError as exc:
        errors.append((loc, text, str(exc)))
        return text, False


def _warn(lines: list[str], loc: tuple, key: str, values: Any) -> None:
    warning = implausible(path(loc), key, values)
    if warning:
        lines.append(warning)


def _read_nested(models: tuple[type[BaseModel], ...], v: Any, numbers_only: NumbersOnly, loc: tuple,
                 lines: list[str] | None, errors: list[Problem]) -> Any:
    """A nested request (or a list of them) with its unit strings read, when a model of `models` fits it."""
    if isinstance(v, dict):
        model = _fitting(models, v)
        return v if model is None else read_request(model, v, numbers_only, lines, errors, True, loc)
    if isinstance(v, list) and v and isinstance(v[0], dict):
        out = [_read_nested(models, x, numbers_only, (*loc, i), lines, errors) for i, x in enumerate(v)]
        return v if all(a is b for a, b in zip(out, v)) else out
    return v


def _fitting(models: tuple[type[BaseModel], ...], v: dict) -> type[BaseModel] | None:
    """The model of a union a dict is meant for: the first that takes all its keys and whose literal fields (a
    discriminator such as `kind`) agree with it; None when none does (its own validation then reads its strings)."""
    for model in models:
        fields = _fields_by_key(model)
        if all(k in fields for k in v) and all(
                typing.get_origin(fields[k]) is not typing.Literal or x in typing.get_args(fields[k])
                for k, x in v.items()):
            return model
    return None


@functools.cache
def _fields_by_key(model: type[BaseModel]) -> dict[str, Any]:
    """A model's field annotations by every key a body may use (name and alias)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        out[name] = out[info.alias or name] = info.annotation
    return out


# --------------------------------------------------------------------------- the JSON schema of a unit field

def with_unit_strings(prop: dict, kind: Kind) -> dict:
    """A field's JSON schema that also takes a unit string wherever it takes a number (scalars and the items of
    a sweep), with a description and an example saying so."""
    string = {"type": "string", "pattern": PATTERN, "maxLength": MAX_CHARS, "examples": list(kind.examples)}

    def widen(s: dict) -> list[dict]:
        if s.get("type") in ("number", "integer"):
            return [s, string]
        if s.get("type") == "array" and isinstance(s.get("items"), dict) and s["items"].get("type") in ("number", "integer"):
            return [{**s, "items": {"anyOf": [s["items"], string]}}]
        return [s]

    meta_keys = ("title", "description", "default", "examples", "deprecated")
    meta = {k: prop[k] for k in meta_keys if k in prop}
    body = {k: v for k, v in prop.items() if k not in meta_keys}
    members = [m for s in body["anyOf"] for m in widen(s)] if "anyOf" in body and len(body) == 1 else widen(body)
    if len(members) == 1:
        return prop                    # nothing numeric to widen
    examples = " or ".join(f'"{e}"' for e in kind.examples)
    hint = f"Also takes a string with a unit, such as {examples} (read as {kind.word})."
    meta["description"] = f"{meta['description'].rstrip()} {hint}" if meta.get("description") else hint
    return {"anyOf": members, **meta}
