"""Sweeps and grids: broadcasting swept inputs, grid axes, and turning NumPy results into what the wire carries."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from pydantic import (BaseModel, Field)

from calculators.framework.errors import CalcInputError
from calculators.framework.request import MAX_SWEEP_POINTS

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

