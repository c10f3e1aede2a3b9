"""The one JSON encoder of the service: orjson with its NumPy option, so a sweep's output arrays are written once,
straight from their buffers (NaN and ±inf inside float arrays as null), never converted to lists first."""
from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from starlette.responses import Response


OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
INT64 = 2**63


def wide_ints_as_floats(value: Any) -> Any:
    """`value` with integers beyond 64 bits as floats: JSON numbers a client can parse (a count past 2^63
    is no longer exact in any client's number type anyway)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value) if not -INT64 <= value < INT64 else value
    if isinstance(value, dict):
        return {k: wide_ints_as_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wide_ints_as_floats(v) for v in value]
    return value


def _fallback(value: Any) -> Any:
    """What orjson's NumPy option does not write itself: a non-contiguous or 0-d array, an array of text or
    objects, a NumPy scalar of another kind (anything else is an error, as before)."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value.item()
        if value.dtype.kind in "fiub":
            return np.ascontiguousarray(value)
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def dumps(content: Any) -> bytes:
    """orjson (NumPy arrays written natively), retried with wide integers as floats when a value does not fit
    64 bits (orjson refuses them)."""
    try:
        return orjson.dumps(content, default=_fallback, option=OPTIONS)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
        return orjson.dumps(wide_ints_as_floats(content), default=_fallback, option=OPTIONS)


class FastJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)
