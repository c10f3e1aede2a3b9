"""Helpers the four RL calculators of this package share."""
from __future__ import annotations

import numpy as np

from calculators.framework import headline as hf
from calculators.framework import out


def rl_out(x):
    """`out`, with a fast path for finite numeric arrays (large sweeps)."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "fiu" and np.isfinite(x).all():
        return x.tolist()
    return out(x)


def join(parts: list[str]) -> str:
    """The non-empty parts as one sentence."""
    return hf.sentence("; ".join(p for p in parts if p))


