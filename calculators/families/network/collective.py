"""Collective communication and point-to-point transfers under the α–β model.

The book's method for moving data (cases `collective-paths-and-diagnosis`,
`network-planning-and-collectives`, `pcie-staging-and-numa`, `resource-sharing-and-placement`):
time ≈ dependent rounds × start-up latency α + bytes on the busiest sender ÷ effective one-way
bandwidth. Three calculators live here:

* `collective` — ring / tree / direct costs of all-reduce, reduce-scatter, all-gather, all-to-all,
  broadcast, reduce and point-to-point, with bytes on the wire per rank, algorithm and bus
  bandwidth, multi-NIC striping, and an optional serial sequence of further collectives.
* `transfer-path` — a payload over one or more plans of parallel paths (each a chain of hops),
  shared caps, concurrent side loads, store-and-forward vs chunked pipelining, copies, rounds,
  a request rate and a deadline.
* `inflight-window` — Little's law for request/response links: in-flight requests needed for a
  target bandwidth, and the bandwidth a window (or a serial service point) allows.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import headline as hf
from calculators.framework import Calculator, Chart
from calculators.perf.link_fit import fit_for
from calculators.domain.hardware import alpha_assumption, describe_fit, link_spec, measured_link_fits
from calculators.framework import (
    request_inputs,
    CalcInputError, CalcRequest, Lookup, NonNegFloat, NonNegFloatSweep, PosFloat, PosFloatSweep, PosIntSweep, Result, broadcast, first, fmt_bytes, fmt_rate, fmt_s, num, out,
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

class FollowUp(CalcRequest):
    """A further collective run after the main one, on the same link (a layer's communication plan)."""

    label: str | None = Label
    operation: Operation = Field(description="Collective operation.", examples=["all_to_all"])
    algorithm: Algorithm = Field("ring", description="ring | tree | direct (see the calculator description).")
    ranks: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(None, description="Participants; default: the main collective's ranks (first point).")
    message_bytes: NonNegFloat = Field(description="Full logical buffer M in bytes (same convention as the main field).", examples=[3072])
    count: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="How many identical collectives of this kind run one after another.")


class CollectiveRequest(CalcRequest):
    """One collective (repeated `count` times) on ranks joined by a link of latency α and bandwidth B."""

    operation: Operation = Field("all_reduce", description="all_reduce | reduce_scatter | all_gather | all_to_all | broadcast | reduce | point_to_point.")
    algorithm: Algorithm = Field("ring", description="ring (pairwise exchange for all_to_all, chain for broadcast/reduce), "
                                 "tree (binomial / recursive halving-doubling / Bruck), direct (one round, all peers at once).")
    ranks: PosIntSweep = Field(description="Number of participants p (ignored by point_to_point). Sweepable.", examples=[8])
    message_bytes: NonNegFloatSweep = Field(description="Full logical buffer M in bytes: all-reduce input per rank, whole gathered/scattered "
                                            "tensor, bytes each rank holds before an all-to-all, the root's broadcast buffer. Sweepable.",
                                            examples=[8192])
    alpha_s: NonNegFloatSweep | None = Field(None, description="Start-up latency α per dependent round, seconds. Default: the link's "
                                             "latency_s, else 0. Sweepable.", examples=[2e-6])
    bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Effective one-way bandwidth B of one rank's port, bytes/s "
                                                        "(not a bidirectional aggregate). Default: the link's one_way_bytes_per_s. "
                                                        "Without any bandwidth only byte counts are returned. Sweepable.",
                                                        examples=[50e9])
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id (e.g. nvlink4) supplying B and α when not given.", examples=["nvlink4"])
    nics: Annotated[int, Field(ge=1, le=1024)] = Field(1, description="Ports striped per rank; bandwidth becomes nics × B / (1 + nic_imbalance).")
    nic_imbalance: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = Field(0.0, description="Extra share carried by the busiest port: 0.2 = 20 % above an even split.")
    chunks: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Pipeline chunks for ring (chain) broadcast / reduce.")
    count: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Identical collectives run one after another (e.g. 2 per layer).")
    then: list[FollowUp] = Field(default_factory=list, max_length=50, description="Further collectives run serially after these, same link.")


def _dominant(lat, bwp):
    return np.where(lat >= bwp, "latency", "bandwidth")


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_collective(req: CollectiveRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    alpha, bw = resolve_link(lookup, res, req.link, req.alpha_s, req.bandwidth_bytes_per_s, gpus=req.ranks)
    alpha_given = alpha is not None
    x = broadcast({"ranks": req.ranks, "message_bytes": req.message_bytes,
                   "alpha_s": 0.0 if alpha is None else alpha, "bandwidth_bytes_per_s": np.nan if bw is None else bw})
    p, M, a, B = x["ranks"], x["message_bytes"], x["alpha_s"], x["bandwidth_bytes_per_s"]
    if req.operation == "point_to_point":
        p = 2.0 + 0.0 * p
    Beff = B * req.nics / (1.0 + req.nic_imbalance)
    c = collective_cost(req.operation, req.algorithm, p, M, req.chunks)
    lat = c["rounds"] * a
    with np.errstate(divide="ignore", invalid="ignore"):
        bwp = c["wire"] / Beff
    t = lat + bwp
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(t > 0, M / np.where(t > 0, t, 1.0), np.nan)
    busbw = algbw * c["bus_factor"]

    p0, M0 = first(p), first(M)
    op, alg = req.operation, req.algorithm
    res.step("rounds on the critical path", "rounds = " + ROUNDS[(op, alg) if op != "point_to_point" else "p2p"],
             f"p = {num(p0)}" + (f", c = {req.chunks}" if alg == "ring" and op in ("broadcast", "reduce") else ""), c["rounds"], "rounds")
    res.step("bytes on the wire (busiest rank sends)", f"{op} {alg}: sent bytes per rank", f"M = {fmt_bytes(M0)}, p = {num(p0)}",
             c["sent"], "B")
    if bw is not None:
        if req.nics > 1 or req.nic_imbalance:
            res.step("striped bandwidth", "B_eff = nics × B / (1 + imbalance)",
                     f"{req.nics} × {fmt_rate(first(B))} / (1 + {num(req.nic_imbalance)})", Beff, "B/s")
        res.step(f"{op.replace('_', '-')} time ({alg})", "t = " + FORMULAS[(op, alg)],
                 f"{num(first(c['rounds']))} × {fmt_s(first(a))} + {fmt_bytes(first(c['wire']))} / {fmt_rate(first(Beff))}", t, "s")
        res.step("bus bandwidth", f"busbw = (M / t) × {BUS_FACTOR[op]}", f"{fmt_bytes(M0)} / {fmt_s(first(t))} × {num(first(c['bus_factor']))}",
                 busbw, "B/s")

    total_t = t * req.count
    total_sent = c["sent"] * req.count
    thens = []
    for i, fu in enumerate(req.then):
        pp = 2.0 if fu.operation == "point_to_point" else float(fu.ranks if fu.ranks is not None else p0)
        cf = collective_cost(fu.operation, fu.algorithm, pp, fu.message_bytes, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            tf = cf["rounds"] * a + cf["wire"] / Beff
        total_t = total_t + tf * fu.count
        total_sent = total_sent + cf["sent"] * fu.count
        thens.append({"label": fu.label or f"{fu.operation} ×{fu.count}", "operation": fu.operation, "algorithm": fu.algorithm,
                      "ranks": int(pp), "count": fu.count, "rounds": out(cf["rounds"]),
                      "sent_bytes_per_rank": out(cf["sent"]), "time_s": out(tf), "total_time_s": out(tf * fu.count),
                      "sent_bytes_per_rank_total": out(cf["sent"] * fu.count)})
    if req.count > 1 or req.then:
        res.step("whole sequence", "T = count × t + Σ follow-ups (serial)", f"{req.count} × {fmt_s(first(t)) if bw is not None else '—'}"
                 + "".join(f" + {th['count']} × {th['label']}" for th in thens), total_t if bw is not None else total_sent,
                 "s" if bw is not None else "B")

    res.outputs = {
        "time_s": out(t),
        "latency_part_s": out(lat if bw is not None else lat * np.nan),
        "bandwidth_part_s": out(bwp),
        "rounds": out(c["rounds"]),
        "sent_bytes_per_rank": out(c["sent"]),
        "received_bytes_per_rank": out(c["recv"]),
        "total_sent_bytes": out(c["total"]),
        "chunk_bytes": out(chunk_bytes(op, alg, p, M, req.chunks)),
        "effective_bandwidth_bytes_per_s": out(Beff),
        "algorithm_bandwidth_bytes_per_s": out(algbw),
        "bus_bandwidth_bytes_per_s": out(busbw),
        "dominant": (out(_dominant(lat, bwp)) if np.ndim(t) else str(_dominant(lat, bwp))) if bw is not None else None,
        "count": req.count,
        "main_time_s": out(t * req.count),
        "main_sent_bytes_per_rank": out(c["sent"] * req.count),
        "then": thens,
        "total_time_s": out(total_t),
        "total_sent_bytes_per_rank": out(total_sent),
    }
    res.assume(
        "α–β model: each dependent round costs α; the busiest rank serialises its bytes at the one-way bandwidth B. "
        "Reduction arithmetic, memory traffic, congestion and protocol overhead are not counted.",
        "M is the full logical buffer (nccl-tests 'size' convention); the bytes that cross each physical link depend on the algorithm.",
        "All ranks and paths sustain B at the same time; a shared switch port, PCIe bridge or NIC would lower it.",
    )
    if alg == "tree" and op in ("reduce_scatter", "all_gather"):
        res.assume("Recursive halving / doubling is exact for a power-of-two p; other p are approximated with ⌈log₂p⌉ rounds.")
    if not alpha_given:
        res.assume("No α given and none on the link: start-up latency taken as 0 (a pure bandwidth bound).")
    if bw is None:
        res.assume("No bandwidth given: byte counts and rounds only, times are null.")
    if req.then:
        res.assume("Follow-up collectives run serially after the main ones (no overlap), on the same link and α.")
    res.assume("A collective library may choose another algorithm (tree, NVLS, CollNet) than the one modelled here.")
    res.headline = _collective_headline(req, res.outputs, bw is not None)
    return res


def _collective_headline(req: CollectiveRequest, o: dict, timed: bool) -> str:
    """One collective's time and what bounds it (a sweep: its first point)."""
    n = hf.n_points(req.ranks, req.message_bytes, req.alpha_s, req.bandwidth_bytes_per_s)
    op = req.operation.replace("_", "-")
    ranks = "2 ranks" if req.operation == "point_to_point" else hf.plural(req.ranks, "rank")
    what = (f"A point-to-point transfer of {hf.fmt_bytes(req.message_bytes)}" if req.operation == "point_to_point"
            else f"A {req.algorithm} {op} of {hf.fmt_bytes(req.message_bytes)} over {ranks}")
    if req.link:
        what += f" on {req.link}"
    if timed:
        text = (f"{what} takes {hf.fmt_seconds(o.get('time_s'))} ({hf.first_value(o.get('dominant')) or 'no'}-bound, "
                f"{hf.plural(o.get('rounds'), 'round')}, bus bandwidth {hf.fmt_rate(o.get('bus_bandwidth_bytes_per_s'))})")
        if req.count > 1 or req.then:
            text += f"; the whole sequence takes {hf.fmt_seconds(o.get('total_time_s'))}"
    else:
        text = (f"{what} sends {hf.fmt_bytes(o.get('sent_bytes_per_rank'))} per rank in {hf.plural(o.get('rounds'), 'round')} "
                "(no bandwidth given, so no time)")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== transfer-path

class Rate(CalcRequest):
    """A bandwidth given once: bytes/s, bits/s or a link id."""

    bytes_per_s: PosFloat | None = Field(None, description="Effective one-way rate in bytes/s (25 GB/s = 25e9).")
    bits_per_s: PosFloat | None = Field(None, description="Rate in bit/s (50 Gbit/s = 50e9); divided by 8.")
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id supplying one_way_bytes_per_s (and latency_s for hops).")

    @model_validator(mode="after")
    def _one(self):
        if sum(v is not None for v in (self.bytes_per_s, self.bits_per_s, self.link)) > 1:
            raise ValueError("give only one of bytes_per_s, bits_per_s, link")
        return self


class Hop(Rate):
    """One stage of a path (a link, a copy engine, a bridge)."""

    label: str | None = Label
    latency_s: NonNegFloat | None = Field(None, description="Start-up / propagation latency of this hop, seconds (default: link latency or 0).")
    count: Annotated[int, Field(ge=1, le=10_000)] = Field(1, description="Identical hops in series (e.g. 15 mesh hops).")


class Path(CalcRequest):
    label: str | None = Label
    count: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Identical parallel copies of this path (e.g. 3 NICs).")
    hops: list[Hop] = Field(min_length=1, max_length=50, description="Hops in series; the slowest sets the path's rate.")


class Cap(Rate):
    """A resource every path of the plan crosses (shared PCIe, fabric): caps the aggregate rate."""

    label: str | None = Label


class Load(Rate):
    """Another resource that must carry its own bytes while the transfer runs (its bound is bytes / rate)."""

    label: str | None = Label
    bytes: NonNegFloat = Field(description="Bytes this resource carries during one round.", examples=[100663296])
    latency_s: NonNegFloat = Field(0.0, description="Start-up latency of this resource, seconds.")


class Plan(CalcRequest):
    label: str | None = Label
    payload_bytes: NonNegFloat | None = Field(None, description="Overrides the top-level payload for this plan, bytes.")
    copies: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Copies of the payload sent (fan-out from one sender): bytes × copies.")
    rounds: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Serially dependent repetitions of the whole transfer.")
    paths: list[Path] = Field(min_length=1, max_length=50, description="Parallel paths; bytes are split in proportion to their rates.")
    caps: list[Cap] = Field(default_factory=list, max_length=50, description="Shared resources capping the summed rate.")
    loads: list[Load] = Field(default_factory=list, max_length=50, description="Concurrent resources with their own byte counts.")
    imbalance: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = Field(0.0, description="Busiest stripe carries (1 + imbalance) × its fair share (needs ≥ 2 stripes).")
    chunks: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(None, description="None: ideal streaming (Σ latency + bytes / slowest rate). "
                                  "1: store-and-forward (each hop waits for the whole payload). c > 1: pipelined in c chunks.")


class TransferPathRequest(CalcRequest):
    payload_bytes: NonNegFloatSweep = Field(0.0, description="Bytes to move (0 = rates only). Sweepable.", examples=[1207959552])
    plans: list[Plan] = Field(min_length=1, max_length=50, description="Alternatives to compare, each a set of parallel paths.")
    rate_per_s: NonNegFloatSweep | None = Field(None, description="Requested transfers per second (sustained demand). Sweepable.")
    deadline_s: NonNegFloat | None = Field(None, description="Time budget for one plan's total time, seconds.")


def _rate(lookup: Lookup, res: Result, r: Rate, loc) -> tuple[float, float | None]:
    """(bytes/s or inf, latency from the link or None)."""
    if r.bytes_per_s is not None:
        return np.float64(r.bytes_per_s), None
    if r.bits_per_s is not None:  # may underflow to 0 for denormal input: numpy turns x / 0 into inf, not an exception
        return np.float64(r.bits_per_s) / 8.0, None
    if r.link is not None:
        where = ".".join(map(str, loc + ("link",)))
        link = link_spec(lookup, r.link, where)
        if link.one_way_bytes_per_s is None:
            raise CalcInputError(where, f"link {r.link!r} has no sourced one_way_bytes_per_s")
        res.cite(link.provenance["one_way_bytes_per_s"])
        if link.latency_s is not None:
            res.cite(link.provenance["latency_s"])
        return np.float64(link.one_way_bytes_per_s), link.latency_s
    return np.float64(np.inf), None


def _label(obj, default: str) -> str:
    return obj.label or default


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_transfer_path(req: TransferPathRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    x = broadcast({"payload_bytes": req.payload_bytes, **({"rate_per_s": req.rate_per_s} if req.rate_per_s is not None else {})})
    base_payload = x["payload_bytes"]
    plans_out = []
    firsts = []
    for i, plan in enumerate(req.plans):
        ploc = ("plans", i)
        name = _label(plan, f"plan {i + 1}")
        P = (base_payload * 0 + plan.payload_bytes if plan.payload_bytes is not None else base_payload) * plan.copies
        # ---- paths: rate = slowest hop, latency = sum of hop latencies
        hops_all, path_bw, path_lat, path_cnt, path_names, slow_hop = [], [], [], [], [], []
        for j, path in enumerate(plan.paths):
            hops = []  # (rate, latency, label, identical hops in series)
            for k, hop in enumerate(path.hops):
                bw, link_lat = _rate(lookup, res, hop, ploc + ("paths", j, "hops", k))
                lat = hop.latency_s if hop.latency_s is not None else (link_lat or 0.0)
                hops.append((bw, lat, _label(hop, hop.link or f"hop {k + 1}"), hop.count))
            bws = [h[0] for h in hops]
            path_bw.append(min(bws))
            path_lat.append(float(sum(h[1] * h[3] for h in hops)))
            slow_hop.append(hops[int(np.argmin(bws))][2])
            path_cnt.append(path.count)
            path_names.append(_label(path, f"path {j + 1}"))
            hops_all.append(hops)
        weights = [c * b for c, b in zip(path_cnt, path_bw)]
        uncapped = float(sum(weights))
        cap_vals = [(_rate(lookup, res, cap, ploc + ("caps", m))[0], _label(cap, cap.link or f"cap {m + 1}")) for m, cap in enumerate(plan.caps)]
        cap_min = min([v for v, _ in cap_vals], default=np.inf)
        binding_cap = min(cap_vals, key=lambda t: t[0])[1] if cap_vals and cap_min < uncapped else None
        scale = min(1.0, cap_min / uncapped) if np.isfinite(uncapped) and uncapped > 0 else 1.0
        inf_stripes = sum(c for c, b in zip(path_cnt, path_bw) if np.isinf(b)) or 1
        stripes = sum(path_cnt)
        imb = plan.imbalance if stripes > 1 else 0.0
        aggregate = min(uncapped, cap_min) / (1.0 + imb)
        # ---- per path copy: its share of bytes and its time
        path_times, paths_out = [], []
        for j, hops in enumerate(hops_all):
            if np.isinf(uncapped):  # a path without any rate limit carries everything
                share = P / inf_stripes if np.isinf(path_bw[j]) else P * 0.0
            elif uncapped == 0:  # every path has a zero rate: nothing moves (infinite time when bytes > 0)
                share = P / stripes
            else:
                share = P * (path_bw[j] / uncapped) * (1.0 + imb)
            # an unlimited hop costs nothing, unless the whole path is unlimited: then only the caps limit it
            rates = [h[0] * scale if np.isfinite(h[0]) else (cap_min / inf_stripes if np.isinf(uncapped) else np.inf) for h in hops]
            with np.errstate(divide="ignore", invalid="ignore"):
                if plan.chunks is None:
                    tp = path_lat[j] + np.where(share > 0, share / (min(rates)), 0.0)
                else:
                    stages = [h[1] + np.where(share > 0, share / plan.chunks / r, 0.0) for h, r in zip(hops, rates)]
                    tp = sum(st * h[3] for st, h in zip(stages, hops)) + (plan.chunks - 1) * np.maximum.reduce(stages)
            path_times.append(tp)
            paths_out.append({"label": path_names[j], "count": path_cnt[j], "bytes_per_s": out(path_bw[j] * scale),
                              "share_bytes": out(share), "latency_s": path_lat[j], "time_s": out(tp), "slowest_hop": slow_hop[j]})
        load_times, loads_out = [], []
        for m, ld in enumerate(plan.loads):
            bw, _ = _rate(lookup, res, ld, ploc + ("loads", m))
            with np.errstate(divide="ignore", invalid="ignore"):
                tl = ld.latency_s + (ld.bytes / bw if ld.bytes > 0 else 0.0)
            load_times.append(tl)
            loads_out.append({"label": _label(ld, ld.link or f"load {m + 1}"), "bytes": ld.bytes, "bytes_per_s": out(bw), "time_s": out(tl)})
        path_max = np.maximum.reduce(path_times) if len(path_times) > 1 else path_times[0]
        one_round = path_max
        load_max = max(load_times) if load_times else -1.0
        if load_times:
            one_round = np.maximum(path_max, load_max)
        total = one_round * plan.rounds
        # ---- bottleneck (first point)
        jslow = int(np.argmax([first(t) for t in path_times]))
        if load_times and load_max > first(path_max):
            bottleneck = loads_out[int(np.argmax(load_times))]["label"]
        elif first(P) == 0 or (path_lat[jslow] > 0 and first(path_times[jslow]) == path_lat[jslow]):
            bottleneck = f"latency of {path_names[jslow]}" if path_lat[jslow] > 0 else "none"
        elif binding_cap is not None:
            bottleneck = binding_cap
        else:
            bottleneck = slow_hop[jslow] if len(plan.paths) == 1 else "all paths (bytes split by rate)"
        with np.errstate(divide="ignore", invalid="ignore"):
            max_rate = np.where(P > 0, aggregate / np.where(P > 0, P, 1.0), np.inf)
        entry = {"label": name, "payload_bytes": out(P / plan.copies), "bytes_moved": out(P), "copies": plan.copies,
                 "rounds": plan.rounds, "uncapped_bytes_per_s": out(uncapped), "aggregate_bytes_per_s": out(aggregate),
                 "latency_s": out(max(path_lat)), "time_s": out(one_round), "total_time_s": out(total),
                 "bottleneck": bottleneck, "max_rate_per_s": out(max_rate), "paths": paths_out, "loads": loads_out}
        if req.rate_per_s is not None:
            need = x["rate_per_s"] * P
            with np.errstate(divide="ignore", invalid="ignore"):
                util = need / aggregate
            entry["required_bytes_per_s"] = out(need)
            entry["utilisation"] = out(util)
            entry["sustainable"] = out(util <= 1.0)
        if req.deadline_s is not None:
            entry["meets_deadline"] = out(total <= req.deadline_s)
        plans_out.append(entry)
        firsts.append(first(total))
        # ---- steps for this plan (first point)
        terms = " + ".join(f"{c} × {fmt_rate(b)}" if c > 1 else fmt_rate(b) for c, b in zip(path_cnt, path_bw))
        sub = f"min({terms}{''.join(', ' + fmt_rate(v) for v, _ in cap_vals)})" + (f" / (1 + {num(imb)})" if imb else "")
        res.step(f"{name}: aggregate rate", "B = min(Σ count × min(hop rates), caps) / (1 + imbalance)", sub, aggregate, "B/s")
        if plan.chunks is None:
            form, sub = "t = Σ hop latency + bytes / B", f"{fmt_s(max(path_lat))} + {fmt_bytes(first(P))} / {fmt_rate(aggregate)}"
        elif plan.chunks == 1:
            form, sub = "t = Σ_hops (latency + bytes / rate)  (store-and-forward)", f"{sum(h[3] for h in hops_all[jslow])} hops, {fmt_bytes(first(P))}"
        else:
            form = "t = Σ stages + (c − 1) × max stage, stage = latency + (bytes / c) / rate"
            sub = f"c = {plan.chunks}, {sum(h[3] for h in hops_all[jslow])} hops, {fmt_bytes(first(P))}"
        if load_times:
            form += "; one round = max(path time, load bytes / load rate)"
        if plan.rounds > 1:
            form += f"; total = {plan.rounds} rounds × one round"
        res.step(f"{name}: time", form, sub, total, "s")
    fastest = req.plans[int(np.argmin(firsts))] if firsts else None
    res.outputs = {"plans": plans_out, "fastest": (fastest.label or f"plan {int(np.argmin(firsts)) + 1}") if fastest else None,
                   "time_s": plans_out[0]["total_time_s"]}
    res.assume(
        "Transfer time ≈ latency + bytes ÷ effective one-way rate; a chain of hops streams at its slowest hop unless "
        "`chunks` asks for store-and-forward (1) or pipelined chunks (c > 1, each chunk pays every hop's latency).",
        "Parallel paths split the bytes in proportion to their rates and finish together; caps scale every path down alike.",
        "Loads are other resources busy at the same time (e.g. DRAM, inter-socket link); a round lasts at least as long as the slowest.",
        "Rates are effective one-way rates; bit/s are divided by 8 (decimal units). Queueing, congestion and protocol overhead are not counted.",
    )
    res.headline = _transfer_headline(req, plans_out, firsts)
    return res


def _transfer_headline(req: TransferPathRequest, plans: list[dict], firsts: list[float]) -> str:
    """The fastest plan, its time and rate, against the slowest (a sweep: its first point)."""
    n = hf.n_points(req.payload_bytes, req.rate_per_s)
    if not plans:
        return hf.sentence(f"No transfer plan was given for {hf.fmt_bytes(req.payload_bytes)}")
    i = int(np.argmin(firsts))
    best = plans[i]
    text = (f"Moving {hf.fmt_bytes(req.payload_bytes)} is fastest with \u201c{best['label']}\u201d: "
            f"{hf.fmt_seconds(best.get('total_time_s'))} at {hf.fmt_rate(best.get('aggregate_bytes_per_s'))} "
            f"(bottleneck: {best.get('bottleneck')})")
    if len(plans) > 1:
        j = int(np.argmax(firsts))
        text += (f", against {hf.fmt_seconds(plans[j].get('total_time_s'))} for \u201c{plans[j]['label']}\u201d, "
                 f"the slowest of {len(plans)} plans")
    if req.rate_per_s is not None and "sustainable" in best:
        ok = hf.first_value(best["sustainable"])
        text += (f"; at {hf.fmt_num(req.rate_per_s)} transfers/s it runs at {hf.fmt_pct(best.get('utilisation'))} of its rate"
                 f"{'' if ok else ', which is not sustainable'}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== inflight-window

class InflightRequest(CalcRequest):
    request_bytes: PosFloatSweep = Field(description="Bytes carried by one request (m), e.g. a 256 B read. Sweepable.", examples=[256])
    completion_s: PosFloatSweep = Field(description="Time from issue to completion of one request (T), seconds. Sweepable.", examples=[2e-6])
    target_bytes_per_s: PosFloatSweep | None = Field(None, description="Bandwidth to reach; gives the in-flight requests needed. Sweepable.",
                                                      examples=[40e9])
    window: PosIntSweep | None = Field(None, description="Requests allowed in flight (tags, credits, queue slots). Sweepable.", examples=[128])
    link_bytes_per_s: PosFloatSweep | None = Field(None, description="Line rate of the link, bytes/s. Sweepable.", examples=[40e9])
    service_s: PosFloatSweep | None = Field(None, description="Initiation interval τ of a strictly serial point every request passes, seconds. Sweepable.")
    transfer_bytes: NonNegFloatSweep | None = Field(None, description="Bytes to move at the resulting bound (gives a time). Sweepable.")


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_inflight(req: InflightRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    named = {"request_bytes": req.request_bytes, "completion_s": req.completion_s}
    for k in ("target_bytes_per_s", "window", "link_bytes_per_s", "service_s", "transfer_bytes"):
        v = getattr(req, k)
        if v is not None:
            named[k] = v
    x = broadcast(named)
    m, T = x["request_bytes"], x["completion_s"]
    o: dict = {}
    bounds = {}
    if "target_bytes_per_s" in x:
        exact = x["target_bytes_per_s"] * T / m
        need = np.ceil(exact - 1e-9 * np.maximum(exact, 1.0))
        res.step("in-flight requests needed", "N = ⌈B_target × T / m⌉ (Little's law)",
                 f"⌈{fmt_rate(first(x['target_bytes_per_s']))} × {fmt_s(first(T))} / {num(first(m))} B⌉ = ⌈{num(first(exact))}⌉", need, "requests")
        o["required_inflight_exact"] = out(exact)
        o["required_inflight"] = out(need.astype(np.int64) if np.all(np.isfinite(need)) and np.all(need < 2**62) else need)
        o["bytes_in_flight"] = out(x["target_bytes_per_s"] * T)
    if "link_bytes_per_s" in x:
        bounds["link"] = x["link_bytes_per_s"]
    if "window" in x:
        wb = x["window"] * m / T
        res.step("window bound", "B_window = W × m / T", f"{num(first(x['window']))} × {num(first(m))} B / {fmt_s(first(T))}", wb, "B/s")
        bounds["window"] = wb
        o["window_bound_bytes_per_s"] = out(wb)
    if "service_s" in x:
        sb = m / x["service_s"]
        res.step("serial service bound", "B_serial = m / τ", f"{num(first(m))} B / {fmt_s(first(x['service_s']))}", sb, "B/s")
        bounds["serial"] = sb
        o["serial_bound_bytes_per_s"] = out(sb)
    if bounds:
        names = list(bounds)
        shape = np.broadcast_shapes(*(np.shape(v) for v in x.values()))
        stacked = np.stack([np.broadcast_to(bounds[k], shape) for k in names])
        bound = np.min(stacked, axis=0)
        lim = np.asarray(names)[np.argmin(stacked, axis=0)]
        res.step("achievable bandwidth", "B = min(" + ", ".join(names) + ")",
                 ", ".join(fmt_rate(first(bounds[k])) for k in names), bound, "B/s")
        o["bound_bytes_per_s"] = out(bound)
        o["requests_per_s"] = out(bound / m)
        o["limiter"] = out(lim) if np.ndim(lim) else str(lim)
        if "target_bytes_per_s" in x:
            o["meets_target"] = out(bound >= x["target_bytes_per_s"] * (1 - 1e-12))
        if "transfer_bytes" in x:
            tt = x["transfer_bytes"] / bound
            res.step("transfer time at the bound", "t = bytes / B", f"{fmt_bytes(first(x['transfer_bytes']))} / {fmt_rate(first(bound))}", tt, "s")
            o["transfer_time_s"] = out(tt)
    if not o:
        raise CalcInputError("target_bytes_per_s", "give target_bytes_per_s, window, link_bytes_per_s or service_s")
    res.outputs = o
    res.assume(
        "Little's law: bandwidth = requests in flight × bytes per request ÷ completion time, in steady state.",
        "Completion time is taken as fixed; adding requests may add queueing, so a larger window does not guarantee the old latency.",
        "A window allocated is not a window used: if the issuer waits for each completion, the effective window is 1.",
    )
    res.headline = _inflight_headline(req, o)
    return res


def _inflight_headline(req: InflightRequest, o: dict) -> str:
    """Requests in flight needed and the bandwidth the window allows (a sweep: its first point)."""
    n = hf.n_points(req.request_bytes, req.completion_s, req.target_bytes_per_s, req.window, req.link_bytes_per_s,
                    req.service_s, req.transfer_bytes)
    per = f"{hf.fmt_bytes(req.request_bytes)} requests completing in {hf.fmt_seconds(req.completion_s)}"
    parts = []
    if o.get("required_inflight") is not None:
        parts.append(f"reaching {hf.fmt_rate(req.target_bytes_per_s)} with {per} needs "
                     f"{hf.plural(o['required_inflight'], 'request')} in flight")
    if o.get("bound_bytes_per_s") is not None:
        lim = hf.first_value(o.get("limiter"))
        got = f"the {lim} bound allows {hf.fmt_rate(o['bound_bytes_per_s'])}"
        if "meets_target" in o:
            got += " (meets the target)" if hf.first_value(o["meets_target"]) else " (short of the target)"
        if o.get("transfer_time_s") is not None:
            got += f", so {hf.fmt_bytes(req.transfer_bytes)} takes {hf.fmt_seconds(o['transfer_time_s'])}"
        parts.append(got if parts else f"with {per}, {got}")
    text = "; ".join(parts) or f"{per}"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)



CALCULATORS = [
    Calculator(
        name="collective",
        family="collective",
        families=("network",),
        title="Collective communication cost (α–β)",
        summary="Time, rounds and bytes on the wire per rank of ring, tree or direct all-reduce, reduce-scatter, all-gather, "
                "all-to-all, broadcast, reduce and point-to-point, with algorithm/bus bandwidth and multi-NIC striping.",
        description="t = rounds·α + bytes serialised by the busiest rank ÷ B. Ring all-reduce: 2(p−1)α + 2(p−1)/p·M/B; "
                    "reduce-scatter / all-gather: (p−1)α + (p−1)/p·M/B; tree variants use ⌈log₂p⌉ rounds; direct uses one "
                    "round with all peers at once. M is the full logical buffer (nccl-tests convention). `then` appends further "
                    "collectives run serially on the same link (a layer's communication plan); `count` repeats the main one. "
                    "Limits: no congestion, reduction arithmetic, protocol overhead or algorithm selection by the library.",
        request_model=CollectiveRequest,
        compute=compute_collective,
        example={"operation": "all_reduce", "algorithm": "ring", "ranks": 8, "message_bytes": [8192, 8388608],
                 "alpha_s": 2e-6, "bandwidth_bytes_per_s": 50e9},
        cases=("collective-paths-and-diagnosis", "network-planning-and-collectives", "pcie-staging-and-numa",
               "parallel-switching-and-state", "training-compute"),
        sweepable=("ranks", "message_bytes", "alpha_s", "bandwidth_bytes_per_s"),
        chart=Chart(x="message_bytes", y=("latency_part_s", "bandwidth_part_s"), kind="stacked-bar",
                    x_label="message (bytes)", y_label="seconds"),
    ),
    Calculator(
        name="transfer-path",
        family="network",
        title="Transfer over paths, relays and shared resources",
        summary="Time to move a payload over parallel paths of hops (multi-NIC striping, relays, GPU→host→NIC staging), "
                "with shared caps, concurrent loads, store-and-forward vs pipelined chunks, copies, rounds, rate and deadline.",
        description="Each path streams at its slowest hop; parallel paths add up and are capped by shared resources: "
                    "B = min(Σ count·min(hops), caps)/(1+imbalance); t = latency + bytes/B (or store-and-forward / c-chunk "
                    "pipelining per hop). A round lasts at least bytes/rate on every concurrent load. Plans are alternatives "
                    "compared on the same payload; `max_rate_per_s` is how many payloads per second the plan can carry.",
        request_model=TransferPathRequest,
        compute=compute_transfer_path,
        example={"payload_bytes": 1207959552, "plans": [
            {"label": "one NIC", "paths": [{"hops": [{"label": "NIC", "bytes_per_s": 40e9}]}]},
            {"label": "three NICs behind shared PCIe", "paths": [{"count": 3, "hops": [{"label": "NIC", "bytes_per_s": 40e9}]}],
             "caps": [{"label": "GPU PCIe", "bytes_per_s": 45e9}]},
            {"label": "direct + relay", "paths": [{"label": "direct", "hops": [{"label": "NIC", "bytes_per_s": 40e9}]},
                                                  {"label": "relay", "hops": [{"label": "relay interconnect", "bytes_per_s": 60e9},
                                                                              {"label": "borrowed NICs", "bytes_per_s": 80e9}]}]}]},
        cases=("resource-sharing-and-placement", "pcie-staging-and-numa", "weight-handoff", "multimodal-stage-placement"),
        sweepable=("payload_bytes", "rate_per_s"),
        chart=Chart(x="payload_bytes", y=("time_s",), x_label="payload (bytes)", y_label="seconds (first plan)"),
    ),
    Calculator(
        name="inflight-window",
        family="network",
        families=("queueing", "roofline"),
        title="In-flight requests and window bound (Little's law)",
        summary="Requests that must be in flight to reach a bandwidth, and the bandwidth a window, a serial service point "
                "and the line rate allow for requests of m bytes completing in T.",
        description="N = ⌈B·T/m⌉; B_window = W·m/T; B_serial = m/τ; achievable = min(line rate, window, serial). "
                    "Steady state only; extra concurrency can raise T through queueing.",
        request_model=InflightRequest,
        compute=compute_inflight,
        example={"request_bytes": 256, "completion_s": 2e-6, "target_bytes_per_s": 40e9, "window": 128, "link_bytes_per_s": 40e9},
        cases=("collective-paths-and-diagnosis", "remote-ordering-and-completion", "memory-bandwidth-and-concurrency"),
        sweepable=("request_bytes", "completion_s", "target_bytes_per_s", "window", "link_bytes_per_s", "service_s", "transfer_bytes"),
        chart=Chart(x="window", y=("bound_bytes_per_s",), x_label="requests in flight", y_label="bytes/s"),
    ),
]
