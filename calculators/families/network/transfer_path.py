"""`transfer-path`: a payload over one or more plans of parallel paths (each a chain of hops), shared caps, concurrent
side loads, store-and-forward vs chunked pipelining, copies, rounds, a request rate and a deadline.
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_rate, fmt_s, list_series,
    Lookup, NonNegFloat, NonNegFloatSweep, num, out, Outputs, OutSweep, PosFloat, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.domain import link_spec
from calculators.perf import Label

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


#: a number, or one per point when `payload_bytes` or `rate_per_s` is swept (null where not finite: no rate limit,
#: or a zero rate with bytes to move)


class TransferPlanPathOut(Outputs):
    """One path of a plan (each of its `count` identical copies)."""

    label: str = Field(description="The path's label.")
    count: int = Field(description="Identical parallel copies of the path.")
    bytes_per_s: float | None = Field(description="Rate of one copy: its slowest hop, scaled down by the plan's caps, "
                                      "B/s (null: no limit).")
    share_bytes: OutSweep = Field(description="Bytes one copy carries (its share by rate, with imbalance), B.")
    latency_s: float | None = Field(description="Sum of its hop latencies, s.")
    time_s: OutSweep = Field(description="Time of one copy for its share, s.")
    slowest_hop: str = Field(description="The hop with the lowest rate.")


class TransferPlanLoadOut(Outputs):
    """A concurrent resource that carries its own bytes during each round."""

    label: str = Field(description="The load's label.")
    bytes: float | None = Field(description="Bytes it carries per round, B.")
    bytes_per_s: float | None = Field(description="Its rate, B/s (null: no limit).")
    time_s: float | None = Field(description="latency + bytes / rate, s (null: a zero rate).")


class TransferPlanOut(Outputs):
    """One plan: the payload over its parallel paths, capped, with its loads, copies and rounds."""

    label: str = Field(description="The plan's label (default: plan N).")
    payload_bytes: OutSweep = Field(description="Payload of one copy, B.")
    bytes_moved: OutSweep = Field(description="payload × copies, B.")
    copies: int = Field(description="Copies of the payload sent.")
    rounds: int = Field(description="Serially dependent repetitions of the whole transfer.")
    uncapped_bytes_per_s: float | None = Field(description="Σ count × path rate before caps, B/s (null: no limit).")
    aggregate_bytes_per_s: float | None = Field(description="min(uncapped, caps) / (1 + imbalance), B/s (null: no "
                                                "limit).")
    latency_s: float | None = Field(description="Largest path latency, s.")
    time_s: OutSweep = Field(description="One round: the slowest path, or a slower load, s.")
    total_time_s: OutSweep = Field(description="rounds × one round, s.")
    bottleneck: str = Field(description="What sets the time at the first point: a hop, a cap, a load, a latency, or "
                            "'all paths (bytes split by rate)'.")
    max_rate_per_s: OutSweep = Field(description="Payloads per second the aggregate rate carries, 1/s (null for an "
                                        "empty payload).")
    paths: list[TransferPlanPathOut] = Field(description="Its paths, in order.")
    loads: list[TransferPlanLoadOut] = Field(description="Its concurrent loads, in order (empty without loads).")
    required_bytes_per_s: OutSweep = Field(None, description="rate_per_s × bytes moved, B/s (with rate_per_s).")
    utilisation: OutSweep = Field(None, description="required / aggregate rate, a fraction (with rate_per_s).")
    sustainable: bool | list[bool] | None = Field(None, description="utilisation ≤ 1 (with rate_per_s).")
    meets_deadline: bool | list[bool] | None = Field(None, description="total time ≤ deadline_s (with deadline_s).")


class TransferPathOutputs(Outputs):
    """Outputs of transfer-path; lists where `payload_bytes` or `rate_per_s` is swept."""

    plans: list[TransferPlanOut] = Field(description="One entry per plan, in request order.")
    fastest: str | None = Field(description="Label of the plan with the shortest total time at the first point.")
    time_s: OutSweep = Field(description="Total time of the first plan, s.")


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


CALCULATORS = [


    Calculator(
        name="transfer-path",
        profile=Profile(2.8e-07, 195, 98),
        series=list_series("plans", "plans"),
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
        outputs_model=TransferPathOutputs,
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
]
