"""Short number formats for one-sentence answers (`Result.headline`).

Steps spell numbers out in full (`core.fmt_bytes` gives the byte count, decimal and binary); a headline
wants the few significant figures a reader repeats: "21.5 GB (20.0 GiB)", "3.2 ms", "$1.23". Every helper
takes a scalar or a sweep (the first point is used), and None/NaN/inf, and never raises: a headline must be
writable for every request the model accepts.

    fmt_bytes(21.47e9)          -> "21.5 GB (20.0 GiB)"
    fmt_seconds(0.0032)         -> "3.2 ms"
    fmt_usd(1234.5)             -> "$1,234.50"  (fmt_usd(0.000012) -> "$0.000012")
    fmt_big(1e11)               -> "100 billion"
    fmt_count(26)               -> "26";  fmt_count(1.5e6) -> "1,500,000"
    fmt_num(0.12345)            -> "0.123"  (3 significant figures, thousands separators)
    fmt_rate(900e9)             -> "900 GB/s"
    fmt_flops(3.2e21)           -> "3.2e21 FLOP"
    fmt_flop_rate(989e12)       -> "989 TFLOP/s"
    fmt_pct(0.256)              -> "25.6%"
    plural(3, "request")        -> "3 requests"
    sweep_note(req_values)      -> " at the first of 12 points" or ""
    name_of(record)             -> the record's name (else id)
    get(outputs, "a", 0, "b")   -> a nested value or None
    first_value([True, False])  -> True (first point of any list)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["scalar", "n_points", "sweep_note", "fmt_num", "fmt_count", "fmt_bytes", "fmt_seconds",
           "fmt_usd", "fmt_rate", "fmt_flops", "fmt_flop_rate", "fmt_pct", "plural", "sentence", "name_of", "get", "fmt_big",
           "first_value"]

_DEC = ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
_BIN = ((2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def _first_point(x: Any) -> Any:
    """The first element of a sweep (a list, tuple or array, nested or not), without converting the rest;
    the value itself when it is not a sweep, None for an empty one."""
    while True:
        if isinstance(x, np.ndarray):
            if x.size == 0:
                return None
            return x.reshape(-1)[0] if x.ndim else x[()]
        if not isinstance(x, (list, tuple)):
            return x
        if not x:
            return None
        x = x[0]


def scalar(x: Any) -> float | None:
    """The first point of a sweep (or the value itself) as a float; None when absent or not a number. Only that
    point is read: a 100,000-point output is never converted to find it."""
    if x is None:
        return None
    v = _first_point(x)
    if v is None:      # an empty sweep has no point; a null point of a sweep is not a number (as NumPy reads it)
        return float("nan") if _is_list(x) and len(x) else None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _is_list(v: Any) -> bool:
    """A list, tuple or array of at least one dimension (a sweep's shape), checked without converting it."""
    return isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim > 0)


def n_points(*values: Any) -> int:
    """How many points a sweep has: the longest list among `values` (1 when all are scalars)."""
    n = 1
    for v in values:
        if _is_list(v):
            n = max(n, len(v))
    return n


def sweep_note(*values: Any) -> str:
    """" at the first of N points" when any of `values` is a list of more than one element, else ""."""
    n = n_points(*values)
    return f" at the first of {n:,} points" if n > 1 else ""


def _bad(x: float | None) -> str | None:
    if x is None or math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "unbounded" if x > 0 else "−unbounded"
    return None


def fmt_num(x: Any, sig: int = 3) -> str:
    """A number with `sig` significant figures and thousands separators (whole numbers kept whole up to 1e15)."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e15 or a < 1e-6:
        return f"{v:.{sig - 1}e}"
    if a >= 10 ** (sig - 1):
        return f"{round(v):,}"
    digits = max(sig - 1 - math.floor(math.log10(a)), 0)
    s = f"{v:,.{digits}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def fmt_count(x: Any) -> str:
    """A count: a whole number with thousands separators (fractions keep 3 significant figures)."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return fmt_num(v)


def fmt_bytes(x: Any, sig: int = 3) -> str:
    """Bytes as decimal and binary, both labelled: "21.5 GB (20.0 GiB)"; below 1 kB just "512 B"."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    if a < 1000:
        return f"{fmt_num(v, sig)} B"
    dec_f, dec_u = next(((f, u) for f, u in _DEC if a >= f), _DEC[-1])
    bin_f, bin_u = next(((f, u) for f, u in _BIN if a >= f), _BIN[-1])
    return f"{_fixed(v / dec_f, sig)} {dec_u} ({_fixed(v / bin_f, sig)} {bin_u})"


def _fixed(v: float, sig: int) -> str:
    """`sig` significant figures keeping trailing zeros (20.0, 1.50), thousands separators above."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10 ** (sig - 1):
        return f"{round(v):,}"
    digits = max(sig - 1 - math.floor(math.log10(a)), 0)
    return f"{v:,.{digits}f}"


def fmt_seconds(x: Any, sig: int = 3) -> str:
    """A duration in the unit that fits: µs, ms, s, min, h or days."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{fmt_num(v * 1e6, sig)} µs"
    if a < 1:
        return f"{fmt_num(v * 1e3, sig)} ms"
    if a < 120:
        return f"{fmt_num(v, sig)} s"
    if a < 7200:
        return f"{fmt_num(v / 60, sig)} min"
    if a < 86400 * 3:
        return f"{fmt_num(v / 3600, sig)} h"
    return f"{fmt_num(v / 86400, sig)} days"


def fmt_usd(x: Any) -> str:
    """Dollars: cents from $1 up ("$1,234.50"), 2 significant figures below ("$0.0012")."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    sign = "−" if v < 0 else ""
    a = abs(v)
    if a == 0:
        return "$0"
    if a >= 1:
        return f"{sign}${a:,.2f}"
    digits = max(1 - math.floor(math.log10(a)), 2)
    return f"{sign}${a:.{digits}f}"


def fmt_rate(x: Any, sig: int = 3) -> str:
    """Bytes per second, decimal: "900 GB/s" (binary readings are not used for rates)."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    if a < 1000:
        return f"{fmt_num(v, sig)} B/s"
    f, u = next(((f, u) for f, u in _DEC if a >= f), _DEC[-1])
    return f"{fmt_num(v / f, sig)} {u}/s"


def fmt_flops(x: Any, sig: int = 3) -> str:
    """A FLOP count: "3.2e21 FLOP" above a PFLOP, else "45.1 TFLOP"/"12 GFLOP"."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    if a >= 1e18:
        m, e = f"{v:.{sig - 1}e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)} FLOP"
    for f, u in ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if a >= f:
            return f"{fmt_num(v / f, sig)} {u}"
    return f"{fmt_num(v, sig)} FLOP"


def fmt_flop_rate(x: Any, sig: int = 3) -> str:
    """A FLOP rate: "989 TFLOP/s"."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    for f, u in ((1e18, "EFLOP/s"), (1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s")):
        if a >= f:
            return f"{fmt_num(v / f, sig)} {u}"
    return f"{fmt_num(v, sig)} FLOP/s"


def fmt_pct(x: Any, sig: int = 3) -> str:
    """A fraction as a percentage: 0.256 -> "25.6%"."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    return f"{fmt_num(v * 100, sig)}%"


def plural(x: Any, word: str, plural_word: str | None = None) -> str:
    """"1 request", "3 requests" (the count formatted by `fmt_count`)."""
    v = scalar(x)
    one = v is not None and not math.isnan(v) and v == 1
    return f"{fmt_count(v)} {word if one else (plural_word or word + 's')}"


def sentence(text: str) -> str:
    """One sentence: whitespace collapsed, first letter capitalised, ending in '.', '?' or '!'."""
    s = " ".join(str(text).split())
    if not s:
        return s
    s = s[0].upper() + s[1:]
    return s if s.endswith((".", "?", "!")) else s + "."


def name_of(record: Any, default: str = "the model") -> str:
    """A store record's display name (its `name`, else its `id`), or `default` when there is no record."""
    if isinstance(record, dict):
        return str(record.get("name") or record.get("id") or default)
    return default


def get(outputs: Any, *path: Any) -> Any:
    """outputs[path…] or None when any step is missing (dict keys or list indices); never raises."""
    node = outputs
    for key in path:
        if isinstance(node, dict):
            node = node.get(key)
        elif _is_list(node) and isinstance(key, int) and -len(node) <= key < len(node):
            node = node[key]
        else:
            return None
        if node is None:
            return None
    return node


def first_value(x: Any) -> Any:
    """The first element of a list (any type: bools, strings, dicts), the value itself otherwise."""
    if isinstance(x, np.ndarray):
        if x.size == 0:
            return None
        x = (x.reshape(-1)[0] if x.ndim else x[()]).item() if x.dtype.kind != "O" else x.reshape(-1)[0]
    while isinstance(x, (list, tuple)):
        if not x:
            return None
        x = x[0]
    return x


def fmt_big(x: Any, sig: int = 3) -> str:
    """A large count in words: 1.5e6 -> "1.5 million", 1e11 -> "100 billion", 2e12 -> "2 trillion"; below a million
    as `fmt_num` (thousands separators)."""
    v = scalar(x)
    if (b := _bad(v)) is not None:
        return b
    a = abs(v)
    for f, u in ((1e15, "quadrillion"), (1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if a >= f:
            return f"{fmt_num(v / f, sig)} {u}"
    return fmt_num(v, max(sig, len(str(int(a)))))
