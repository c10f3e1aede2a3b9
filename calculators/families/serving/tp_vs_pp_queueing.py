"""`tp-vs-pp-queueing`: the book's M/D/1 comparison (case `chunking-and-state-transfer`): TP shortens each request's
service time by a speed-up K, PP keeps the latency but lets s requests be in flight, so TP wins at low load and PP
(higher capacity) wins near saturation.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcRequest, Calculator, Chart, first, fmt_s, Lookup, NonNegFloat, NonNegFloatSweep, num, out,
    OutNum, Outputs, OutSweep, PosFloat, Profile, request_inputs, Result,
)
from calculators.framework import headline as H




class QueueCandidateOut(Outputs):
    name: Literal["tp", "pp", "replicas"]
    capacity_per_s: OutNum = Field(description="Requests per second the group can serve.")
    service_s: OutNum = Field(description="Service time at the bottleneck, s.")
    mean_time_s: OutSweep = Field(description="Mean completion time, s (null when unstable).")
    utilisation: OutSweep = Field(description="λ × service time.")
    stable: bool | list[bool]


class TpVsPpOutputs(Outputs):
    """Outputs of tp-vs-pp-queueing; lists when the arrival rate is swept."""

    candidates: list[QueueCandidateOut]
    tp_mean_time_s: OutSweep
    pp_mean_time_s: OutSweep
    replicas_mean_time_s: OutSweep
    best: str | None | list[str | None] = Field(description="Layout with the least mean time (null when all are unstable).")


class TpVsPpRequest(CalcRequest):
    """Same-length requests arriving at random, served FCFS by one group of devices."""

    service_s: PosFloat = Field(description="Service time D of one request on one device, seconds.", examples=[0.2])
    tp_speedup: PosFloat = Field(description="Speed-up K of tensor parallelism over one device (K < devices in practice).", examples=[1.6])
    devices: Annotated[int, Field(ge=1, le=100_000)] = Field(2, description="Devices in the group: TP degree, PP stages and replica count alike.")
    handoff_s: NonNegFloat = Field(0.0, description="Time of one stage hand-off in the pipeline, seconds.")
    arrival_rate_per_s: NonNegFloatSweep = Field(description="Mean arrival rate λ (Poisson), requests/s. Sweepable.", examples=[[1, 7]])


def _md1(lam, S, servers_split: float = 1.0):
    """Mean wait of an M/D/1 queue with service S and arrival rate lam (inf when unstable)."""
    rho = lam * S
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(rho < 1, lam * S * S / (2 * np.where(rho < 1, 1 - rho, 1.0)), np.inf)
    return w, rho


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_queueing(req: TpVsPpRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    lam = broadcast({"arrival_rate_per_s": req.arrival_rate_per_s})["arrival_rate_per_s"]
    D, K, n, h = req.service_s, req.tp_speedup, req.devices, req.handoff_s
    S_tp = D / K
    S_pp = D / n
    w_tp, rho_tp = _md1(lam, S_tp)
    w_pp, rho_pp = _md1(lam, S_pp)
    w_rep, rho_rep = _md1(lam / n, D)
    t_tp = S_tp + w_tp
    t_pp = D + (n - 1) * h + w_pp
    t_rep = D + w_rep
    l0 = first(lam)
    res.step("TP service and capacity", "S = D / K; capacity = K / D", f"{fmt_s(D)} / {num(K)}", S_tp, "s")
    res.step("TP mean time (M/D/1)", "T = D/K + λ(D/K)² / [2(1 − λD/K)]", f"λ = {num(l0)}/s, S = {fmt_s(S_tp)}", t_tp, "s")
    res.step("PP mean time (M/D/1 at the bottleneck stage)", "T = D + (s−1)·t_h + λ(D/s)² / [2(1 − λD/s)]; capacity = s / D",
             f"λ = {num(l0)}/s, s = {n}, D/s = {fmt_s(S_pp)}", t_pp, "s")
    res.step("replicas mean time (random split)", "T = D + (λ/n)D² / [2(1 − λD/n)]; capacity = n / D", f"λ/n = {num(l0 / n)}/s", t_rep, "s")
    names = ("tp", "pp", "replicas")
    times = np.stack([np.broadcast_to(t, lam.shape) for t in (t_tp, t_pp, t_rep)])
    best = np.where(np.isfinite(np.min(times, axis=0)), np.asarray(names)[np.argmin(times, axis=0)], None)
    cands = [
        {"name": "tp", "capacity_per_s": out(K / D), "service_s": out(S_tp), "mean_time_s": out(t_tp), "utilisation": out(rho_tp), "stable": out(rho_tp < 1)},
        {"name": "pp", "capacity_per_s": out(n / D), "service_s": out(S_pp), "mean_time_s": out(t_pp), "utilisation": out(rho_pp), "stable": out(rho_pp < 1)},
        {"name": "replicas", "capacity_per_s": out(n / D), "service_s": D, "mean_time_s": out(t_rep), "utilisation": out(rho_rep), "stable": out(rho_rep < 1)},
    ]
    res.outputs = {"candidates": cands, "tp_mean_time_s": out(t_tp), "pp_mean_time_s": out(t_pp), "replicas_mean_time_s": out(t_rep),
                   "best": best.tolist()}
    b0 = best.reshape(-1)[0] if best.size else None
    times0 = {k: H.scalar(v) for k, v in (("TP", t_tp), ("PP", t_pp), ("replicas", t_rep))}
    shown = ", ".join(f"{k} {H.fmt_seconds(v) if v is not None and np.isfinite(v) else 'unstable'}" for k, v in times0.items())
    note = H.sweep_note(req.arrival_rate_per_s)
    if b0 is None:
        res.headline = H.sentence(f"At {H.fmt_num(l0)} req/s every layout is overloaded on {n} devices{note}")
    else:
        label = {"tp": "tensor parallelism gives", "pp": "pipeline stages give", "replicas": "independent replicas give"}[str(b0)]
        res.headline = H.sentence(f"At {H.fmt_num(l0)} req/s {label} the shortest mean completion time on {n} "
                                  f"devices ({shown}){note}")
    res.assume(
        "Poisson arrivals, identical requests (deterministic service), FCFS, one queue per server: M/D/1 mean values, not tails.",
        "PP stages are balanced (D / s each); only the first stage queues, later stages receive requests already spaced by D / s.",
        "Replicas need the whole model to fit on one device; arrivals are split at random between them.",
        "An unstable queue (utilisation ≥ 1) has no finite mean time (null).",
    )
    return res


CALCULATORS = [


    Calculator(
        name="tp-vs-pp-queueing",
        profile=Profile(7.7e-07, 704, 198),
        family="parallel_split",
        families=("queueing",),
        title="TP vs PP vs replicas under random arrivals (M/D/1)",
        summary="Mean completion time and capacity of tensor parallelism (faster service), pipeline stages (more requests "
                "in flight) and independent replicas for the same devices, as the arrival rate grows.",
        description="TP: T = D/K + λ(D/K)²/[2(1−λD/K)], capacity K/D. PP with s balanced stages: T = D + (s−1)t_h + "
                    "λ(D/s)²/[2(1−λD/s)], capacity s/D. Replicas: each an M/D/1 at λ/n. Means only.",
        request_model=TpVsPpRequest,
        outputs_model=TpVsPpOutputs,
        compute=compute_queueing,
        example={"service_s": 0.2, "tp_speedup": 1.6, "devices": 2, "arrival_rate_per_s": [1, 3, 5, 7]},
        cases=("chunking-and-state-transfer", "model-parallelism"),
        sweepable=("arrival_rate_per_s",),
        chart=Chart(x="arrival_rate_per_s", y=("tp_mean_time_s", "pp_mean_time_s", "replicas_mean_time_s"),
                    x_label="arrivals per second", y_label="mean completion time (s)"),
    ),
]
