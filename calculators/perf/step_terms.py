"""Terms of a model step's work that the step-time calculators share: the (query, key) pairs of causal attention
(with a sliding window), and a MoE record's routed-expert split (the parameters of one expert, the MoE layers, E
and k), from its shapes or, where those overshoot the published totals, from the published counts.
"""
from __future__ import annotations

import numpy as np

from calculators.framework import Result, fact_value, num


def causal_pairs(p, s, window=None):
    """(query, key) pairs when p new tokens follow s cached ones; keys limited to `window` when given."""
    p = np.asarray(p, dtype=float)
    s = np.asarray(s, dtype=float)
    if window is None:
        return p * s + p * (p + 1) / 2
    w = float(window)
    cnt = np.clip(w - s, 0, p)                       # positions whose whole history fits in the window
    return cnt * s + cnt * (cnt + 1) / 2 + (p - cnt) * w


def moe_split(rec: dict) -> tuple[float, float, int, int] | None:
    """(routed expert params per MoE layer per expert, MoE layers, experts, top-k) from a record's moe facts."""
    moe = rec.get("moe")
    if not moe:
        return None
    d = fact_value(rec, "hidden_size", required=False)
    layers = fact_value(rec, "layers", required=False)
    if not d or not layers:
        return None
    e = int(fact_value(rec, "moe", "experts", required=False) or 0)
    k = int(fact_value(rec, "moe", "experts_per_token", required=False) or 0)
    f = fact_value(rec, "moe", "expert_ffn_size", required=False)
    dl = int(fact_value(rec, "moe", "dense_layers", required=False) or 0)
    if not (e and k and f):
        return None
    return 3.0 * d * f, float(layers - dl), e, k


def published_moe_split(rec: dict, res: Result, active: float, total: float, moe_layers: float, e: int, k: int,
                     routed: float) -> tuple[float, float, int, int] | None:
    """Per-expert size from the published counts when the record's shapes overshoot them (routed experts that work in
    a narrower latent than the hidden size, say): total − active = (E − k) × one expert's parameters over all MoE
    layers. None (every weight read) when the counts cannot give it either."""
    name = rec.get("id", "the model")
    if e > k and total > active > 0:
        per_expert_all_layers = (total - active) / (e - k)
        res.assume(f"{name}'s expert shapes (3·d·f per expert, {num(routed)} routed parameters) exceed its published "
                   f"total of {num(total)}: one expert's size is taken from the published counts instead, (total − "
                   f"active) / (E − k) = {num(per_expert_all_layers)} parameters over its {num(moe_layers)} MoE layers.")
        return per_expert_all_layers / moe_layers, moe_layers, e, k
    res.assume(f"{name}'s expert shapes exceed its published total and its counts do not give an expert's size: every "
               "weight is counted as read.")
    return None
