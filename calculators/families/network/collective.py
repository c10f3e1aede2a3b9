"""`collective`: the time, rounds and bytes on the wire per rank of ring / tree / direct all-reduce, reduce-scatter,
all-gather, all-to-all, broadcast, reduce and point-to-point under the α–β model (cases
`collective-paths-and-diagnosis`, `network-planning-and-collectives`, `pcie-staging-and-numa`): time ≈ dependent
rounds × start-up latency α + bytes on the busiest sender ÷ effective one-way bandwidth, with algorithm and bus
bandwidth, multi-NIC striping and an optional serial sequence of further collectives.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_rate, fmt_s, list_series, Lookup, NonNegFloat,
    NonNegFloatSweep, num, out, Outputs, OutSweep, PosFloatSweep, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.perf import BUS_FACTOR, FORMULAS, ROUNDS, Algorithm, Label, Operation, chunk_bytes, collective_cost, resolve_link

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
    link_alpha_s: NonNegFloatSweep | None = Field(None, description="Start-up latency α per dependent round, seconds. Default: the link's "
                                             "latency_s, else 0. Sweepable.", examples=[2e-6])
    link_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Effective one-way bandwidth B of one rank's port, bytes/s "
                                                        "(not a bidirectional aggregate). Default: the link's one_way_bytes_per_s. "
                                                        "Without any bandwidth only byte counts are returned. Sweepable.",
                                                        examples=[50e9])
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id (e.g. nvlink4) supplying B and α when not given.", examples=["nvlink4"])
    nics: Annotated[int, Field(ge=1, le=1024)] = Field(1, description="Ports striped per rank; bandwidth becomes nics × B / (1 + nic_imbalance).")
    nic_imbalance: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = Field(0.0, description="Extra share carried by the busiest port: 0.2 = 20 % above an even split.")
    chunks: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Pipeline chunks for ring (chain) broadcast / reduce.")
    count: Annotated[int, Field(ge=1, le=1_000_000)] = Field(1, description="Identical collectives run one after another (e.g. 2 per layer).")
    then: list[FollowUp] = Field(default_factory=list, max_length=50, description="Further collectives run serially after these, same link.")


#: a number, or one per point when an input is swept (null where not finite, e.g. a time without a bandwidth)
#: which term of the α–β time is larger at each point
CollectiveTerm = Literal["latency", "bandwidth"]


class CollectiveFollowUpOut(Outputs):
    """One `then` entry: a further collective run serially after the main ones."""

    label: str = Field(description="Its label (default: operation ×count).")
    operation: str = Field(description="Collective operation.")
    algorithm: str = Field(description="ring, tree or direct.")
    ranks: int = Field(description="Participants (2 for point_to_point).")
    count: int = Field(description="Identical collectives of this kind in a row.")
    rounds: float | None = Field(description="Dependent rounds of one, a whole count.")
    sent_bytes_per_rank: float | None = Field(description="Bytes the busiest rank sends in one, B.")
    time_s: OutSweep = Field(description="Time of one, s (null without a bandwidth).")
    total_time_s: OutSweep = Field(description="count × time_s, s.")
    sent_bytes_per_rank_total: float | None = Field(description="count × sent bytes per rank, B.")


class CollectiveOutputs(Outputs):
    """Outputs of collective (α–β model) for one main collective; lists where an input is swept. Times are null
    without a bandwidth (byte counts and rounds only)."""

    time_s: OutSweep = Field(description="One collective, rounds × α + wire bytes / effective bandwidth, s.")
    latency_part_s: OutSweep = Field(description="rounds × α, s.")
    bandwidth_part_s: OutSweep = Field(description="Bytes the busiest rank serialises / effective bandwidth, s.")
    rounds: OutSweep = Field(description="Dependent rounds on the critical path, a whole count.")
    sent_bytes_per_rank: OutSweep = Field(description="Bytes the busiest rank sends, B.")
    received_bytes_per_rank: OutSweep = Field(description="Bytes the busiest rank receives, B.")
    total_sent_bytes: OutSweep = Field(description="Bytes sent by all ranks together, B.")
    chunk_bytes: OutSweep = Field(description="Bytes of one message of the algorithm, B.")
    effective_bandwidth_bytes_per_s: OutSweep = Field(description="nics × B / (1 + nic_imbalance), B/s (null "
                                                           "without a bandwidth).")
    algorithm_bandwidth_bytes_per_s: OutSweep = Field(description="M / time, B/s.")
    bus_bandwidth_bytes_per_s: OutSweep = Field(description="Algorithm bandwidth × the operation's bus factor "
                                                     "(nccl-tests busbw), B/s.")
    dominant: CollectiveTerm | list[CollectiveTerm] | None = Field(description="'latency' or 'bandwidth', the larger "
                                                                   "part (null without a bandwidth).")
    count: int = Field(description="Main collectives run one after another.")
    main_time_s: OutSweep = Field(description="count × time_s, s.")
    main_sent_bytes_per_rank: OutSweep = Field(description="count × sent bytes per rank, B.")
    then: list[CollectiveFollowUpOut] = Field(description="The follow-up collectives, in order (empty without `then`).")
    total_time_s: OutSweep = Field(description="Main collectives + follow-ups, run serially, s.")
    total_sent_bytes_per_rank: OutSweep = Field(description="Bytes the busiest rank sends over the whole "
                                                     "sequence, B.")


def _dominant(lat, bwp):
    return np.where(lat >= bwp, "latency", "bandwidth")


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_collective(req: CollectiveRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    alpha, bw = resolve_link(lookup, res, req.link, req.link_alpha_s, req.link_bandwidth_bytes_per_s, alpha_loc="link_alpha_s",
                             gpus=req.ranks)
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
    n = hf.n_points(req.ranks, req.message_bytes, req.link_alpha_s, req.link_bandwidth_bytes_per_s)
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


CALCULATORS = [
    Calculator(
        name="collective",
        profile=Profile(6.7e-07, 755, 240),
        series=list_series("then", "collectives"),
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
        outputs_model=CollectiveOutputs,
        example={"operation": "all_reduce", "algorithm": "ring", "ranks": 8, "message_bytes": [8192, 8388608],
                 "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 50e9},
        cases=("collective-paths-and-diagnosis", "network-planning-and-collectives", "pcie-staging-and-numa",
               "parallel-switching-and-state", "training-compute"),
        sweepable=("ranks", "message_bytes", "link_alpha_s", "link_bandwidth_bytes_per_s"),
        chart=Chart(x="message_bytes", y=("latency_part_s", "bandwidth_part_s"), kind="stacked-bar",
                    x_label="message (bytes)", y_label="seconds"),
    ),
]
