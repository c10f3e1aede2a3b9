"""The α–β cost of collectives: per operation and algorithm (ring, tree, direct) the dependent rounds, the bytes the
busiest rank serialises, the bus-bandwidth factor, and the link a request names resolved to α and β with their
provenance. Every calculator that prices communication (collective, tp-overhead, parallel-split, the planner)
uses this one model.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from calculators.domain import alpha_assumption, describe_fit, fit_for, link_spec, measured_link_fits
from calculators.framework import (
    CalcInputError, Lookup, Result, out,
)


Operation = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce", "point_to_point"]
Algorithm = Literal["ring", "tree", "direct"]
Label = Field(None, max_length=200, description="Name shown in the outputs.")

#: NCCL-style factor from algorithm bandwidth (M / t) to bus bandwidth, per operation (f = (p−1)/p).
BUS_FACTOR = {"all_reduce": "2(p−1)/p", "reduce_scatter": "(p−1)/p", "all_gather": "(p−1)/p",
              "all_to_all": "(p−1)/p", "broadcast": "1", "reduce": "1", "point_to_point": "1"}

FORMULAS = {
    ("all_reduce", "ring"): "2(p−1)·α + 2(p−1)/p · M / B",
    ("all_reduce", "tree"): "2⌈log₂p⌉·(α + M / B)  (binomial reduce then broadcast, whole message per level)",
    ("all_reduce", "direct"): "α + (p−1)·M / B  (one shot: every rank sends its buffer to every other rank)",
    ("reduce_scatter", "ring"): "(p−1)·α + (p−1)/p · M / B",
    ("reduce_scatter", "tree"): "⌈log₂p⌉·α + (p−1)/p · M / B  (recursive halving)",
    ("reduce_scatter", "direct"): "α + (p−1)/p · M / B",
    ("all_gather", "ring"): "(p−1)·α + (p−1)/p · M / B",
    ("all_gather", "tree"): "⌈log₂p⌉·α + (p−1)/p · M / B  (recursive doubling)",
    ("all_gather", "direct"): "α + (p−1)/p · M / B",
    ("all_to_all", "ring"): "(p−1)·α + (p−1)/p · M / B  (pairwise exchange, p−1 steps)",
    ("all_to_all", "tree"): "⌈log₂p⌉·(α + M / (2B))  (Bruck)",
    ("all_to_all", "direct"): "α + (p−1)/p · M / B  (all peers at once, sender NIC serialises)",
    ("broadcast", "ring"): "(p−2+c)·(α + M / (c·B))  (chain, c chunks pipelined)",
    ("broadcast", "tree"): "⌈log₂p⌉·(α + M / B)  (binomial tree)",
    ("broadcast", "direct"): "α + (p−1)·M / B  (root sends to each rank)",
    ("reduce", "ring"): "(p−2+c)·(α + M / (c·B))  (chain, c chunks pipelined)",
    ("reduce", "tree"): "⌈log₂p⌉·(α + M / B)  (binomial tree)",
    ("reduce", "direct"): "α + (p−1)·M / B  (root receives from each rank)",
    ("point_to_point", "ring"): "α + M / B",
    ("point_to_point", "tree"): "α + M / B",
    ("point_to_point", "direct"): "α + M / B",
}


ROUNDS = {
    ("all_reduce", "ring"): "2(p−1)", ("all_reduce", "tree"): "2⌈log₂p⌉", ("all_reduce", "direct"): "1",
    ("reduce_scatter", "ring"): "p−1", ("reduce_scatter", "tree"): "⌈log₂p⌉", ("reduce_scatter", "direct"): "1",
    ("all_gather", "ring"): "p−1", ("all_gather", "tree"): "⌈log₂p⌉", ("all_gather", "direct"): "1",
    ("all_to_all", "ring"): "p−1", ("all_to_all", "tree"): "⌈log₂p⌉", ("all_to_all", "direct"): "1",
    ("broadcast", "ring"): "p−2+c", ("broadcast", "tree"): "⌈log₂p⌉", ("broadcast", "direct"): "1",
    ("reduce", "ring"): "p−2+c", ("reduce", "tree"): "⌈log₂p⌉", ("reduce", "direct"): "1", "p2p": "1",
}


def chunk_bytes(op: str, alg: str, p, M, chunks: int = 1):
    """Size of the piece moved per round: M/p for ring reduce-scatter/all-gather/all-reduce and all-to-all blocks."""
    p = np.asarray(p, dtype=float)
    if op in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all") and alg != "direct":
        return np.asarray(M, dtype=float) / np.maximum(p, 1.0)
    if op in ("broadcast", "reduce") and alg == "ring":
        return np.asarray(M, dtype=float) / chunks + 0 * p
    return np.asarray(M, dtype=float) + 0 * p


def collective_cost(op: str, alg: str, p, M, chunks: int = 1) -> dict:
    """Rounds and bytes of one collective, element-wise over arrays of ranks `p` and bytes `M`.

    Returns `rounds` (α terms on the critical path), `wire` (bytes the busiest rank serialises,
    the β term), `sent` / `recv` (bytes the busiest rank sends / receives), `total` (bytes sent by
    all ranks together) and `bus_factor`. `M` is the full logical buffer: the per-rank input of an
    all-reduce, the whole gathered (or scattered) tensor of all-gather / reduce-scatter, the bytes
    each rank holds before an all-to-all (1/p of them stay local), the root's buffer for broadcast.
    """
    p = np.asarray(p, dtype=float)
    M = np.asarray(M, dtype=float)
    one = p > 1  # a single rank communicates nothing
    f = np.where(one, (p - 1.0) / np.maximum(p, 1.0), 0.0)
    L = np.where(one, np.ceil(np.log2(np.maximum(p, 1.0))), 0.0)
    z = np.zeros(np.broadcast(p, M).shape)
    c = float(chunks)
    if op == "point_to_point":
        r = {"rounds": 1.0 + z, "wire": M + z, "sent": M + z, "recv": M + z, "total": M + z, "bus_factor": 1.0 + z}
        return r
    if op == "all_reduce":
        if alg == "ring":
            r = dict(rounds=2 * (p - 1), wire=2 * f * M, sent=2 * f * M, recv=2 * f * M, total=2 * (p - 1) * M)
        elif alg == "tree":
            r = dict(rounds=2 * L, wire=2 * L * M, sent=L * M, recv=L * M, total=2 * (p - 1) * M)
        else:
            r = dict(rounds=one * 1.0, wire=(p - 1) * M, sent=(p - 1) * M, recv=(p - 1) * M, total=p * (p - 1) * M)
        r["bus_factor"] = 2 * f
    elif op in ("reduce_scatter", "all_gather"):
        rounds = {"ring": p - 1, "tree": L, "direct": one * 1.0}[alg]
        r = dict(rounds=rounds, wire=f * M, sent=f * M, recv=f * M, total=(p - 1) * M, bus_factor=f)
    elif op == "all_to_all":
        if alg == "tree":
            r = dict(rounds=L, wire=L * M / 2, sent=L * M / 2, recv=L * M / 2, total=p * L * M / 2)
        else:
            r = dict(rounds=p - 1 if alg == "ring" else one * 1.0, wire=f * M, sent=f * M, recv=f * M, total=(p - 1) * M)
        r["bus_factor"] = f
    else:  # broadcast / reduce (reduce mirrors broadcast: sends and receives swap)
        if alg == "ring":
            steps = np.where(one, p - 2 + c, 0.0)
            r = dict(rounds=steps, wire=steps * M / c, sent=one * M, recv=one * M, total=(p - 1) * M)
        elif alg == "tree":
            r = dict(rounds=L, wire=L * M, sent=L * M, recv=one * M, total=(p - 1) * M)
        else:
            r = dict(rounds=one * 1.0, wire=(p - 1) * M, sent=(p - 1) * M, recv=one * M, total=(p - 1) * M)
        if op == "reduce":
            r["sent"], r["recv"] = r["recv"], r["sent"]
        r["bus_factor"] = one * 1.0
    return {k: np.asarray(v, dtype=float) + z for k, v in r.items()}


def ring_allreduce_s(p, M, alpha, bw):
    """Ring all-reduce time 2(p−1)α + 2(p−1)/p·M/B (0 for a single rank); arrays broadcast."""
    c = collective_cost("all_reduce", "ring", p, M)
    return c["rounds"] * alpha + c["wire"] / bw


def resolve_link(lookup: Lookup, res: Result, link_id: str | None, alpha, bw, loc: str = "link",
                 alpha_loc: str = "alpha_s", need_alpha: bool = False, gpus=None, hardware: str | None = None):
    """α and one-way bandwidth: the request's numbers first, then a fit of measured all-reduces on the link's
    system (per GPU count, when `gpus` is given), then the link record's sourced figures.

    Returns (alpha, bandwidth); either may be None when nothing gives it, and both are arrays matching `gpus`
    when a measured fit is used with swept GPU counts. The α used is echoed in the inputs as `latency_s` with
    where it came from, and a link with no α at all says so loudly: α = 0 is never silent."""
    if link_id is None:
        if alpha is not None:
            res.inputs["latency_s"] = {"value": alpha, "basis": "given in the request"}
        return alpha, bw
    link = link_spec(lookup, link_id, loc)
    fits = measured_link_fits(lookup, link.id, hardware) if (alpha is None or bw is None) and gpus is not None else None
    if fits:
        g = np.asarray(gpus, dtype=np.int64)
        chosen = [fit_for(fits, int(p)) for p in np.atleast_1d(g).tolist()]
        a_arr = np.array([f.alpha_s for f, _ in chosen])
        b_arr = np.array([f.link_bytes_per_s for f, _ in chosen])
        shown = {}
        for f, exact in chosen:
            shown.setdefault(f.gpus, describe_fit(f, exact))
        src = chosen[0][0].source
        res.cite({"record": link.id, "field": "measured all-reduce fit", "value": None, "source": "aiconfigurator-core-0.12.0",
                  "locator": src.get("file"), "source_url": "https://pypi.org/project/aiconfigurator-core/0.12.0/"})
        if alpha is None:
            alpha = a_arr if g.ndim else float(a_arr[0])
            res.inputs["latency_s"] = {"value": out(alpha), "basis": "measured fit (" + src.get("system", "?") + ")",
                                       "file": src.get("file"), "sha256": src.get("sha256")}
        else:
            res.inputs["latency_s"] = {"value": alpha, "basis": "given in the request"}
        if bw is None:
            bw = b_arr if g.ndim else float(b_arr[0])
        res.assume(*(f"Link {link.id}: {text}." for text in shown.values()))
        return alpha, bw
    if bw is None:
        if link.one_way_bytes_per_s is None:
            raise CalcInputError(loc, f"link {link_id!r} has no sourced one_way_bytes_per_s")
        bw = link.one_way_bytes_per_s
        res.cite(link.provenance["one_way_bytes_per_s"])
    if alpha is not None:
        res.inputs["latency_s"] = {"value": alpha, "basis": "given in the request"}
    elif link.latency_s is not None:
        alpha = link.latency_s
        prov = link.provenance["latency_s"]
        res.cite(prov)
        res.inputs["latency_s"] = {"value": alpha, "basis": f"sourced on link {link.id}", "source": prov.get("source"),
                                   "locator": prov.get("locator")}
    elif need_alpha:
        raise CalcInputError(alpha_loc, f"link {link_id!r} has no sourced latency_s; give {alpha_loc} explicitly")
    else:
        res.inputs["latency_s"] = {"value": 0.0, "basis": f"ASSUMED: link {link.id} has no sourced latency"}
        res.assume(alpha_assumption(link, alpha_loc))
    return alpha, bw


# =========================================================================== collective
