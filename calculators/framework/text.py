"""Numbers for humans in explanation steps: separators, significant figures, decimal and binary byte units."""
from __future__ import annotations

import math


from calculators.framework.request import GB, GIB, KB, KIB, MB, MIB, TB, TIB

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


#: between the items of a printed list of numbers. Numbers carry a comma every three digits, so ", " would run two
#: items together ("10,200,000,000, 652,800,000,000"); pages, Markdown and text answers all use this instead
LIST_SEP = "; "


def num_list(values, digits: int = 6) -> str:
    """Numbers for humans, one after another: `10,200,000,000; 652,800,000,000`."""
    return LIST_SEP.join(num(v, digits) for v in values)


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

