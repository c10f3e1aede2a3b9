"""Utilisation from counters, and how many instances fit a memory budget.

Two calculators:
- `utilization-split`: a counter window T, the time a unit was active A and the useful work it did S (in
  time at full rate) give U = S/T = (S/A)·(A/T): efficiency while active times active share, so the same U can
  hide a busy-but-slow or an idle-but-fast unit.
- `instance-fit`: memory per instance (sandbox, environment, replica) under different placements — the sum of
  the parts kept locally plus a fixed overhead — the total for N instances, and how many fit a budget.
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from calculators.framework import (
    aligned, broadcast, CalcInputError, CalcRequest, Calculator, first, LIST_SEP, Lookup, NonNegFloat, NonNegFloatSweep, num,
    out, Outputs, OutSweep, PosFloat, PosFloatSweep, PosInt, Profile, quiet, request_inputs, Result,
)
from calculators.framework import headline as hf


# =========================================================================== utilisation split

class UtilizationRequest(CalcRequest):
    window_s: PosFloatSweep = Field(description="Counter window T, s. Sweepable.", examples=[100e-6])
    active_s: NonNegFloatSweep = Field(description="Time the unit was active (issuing work) in the window, s. Sweepable.",
                                       examples=[[40e-6, 80e-6]])
    useful_s: NonNegFloatSweep = Field(description="Useful work in the window, expressed as seconds at the unit's full "
                                       "rate (work done / peak rate). Sweepable.", examples=[40e-6])


@quiet
def utilization_compute(req: UtilizationRequest, lookup: Lookup) -> Result:
    x = aligned(broadcast({"T": req.window_s, "A": req.active_s, "S": req.useful_s}))
    T, A, S = x["T"], x["A"], x["S"]
    if np.any(A > T * (1 + 1e-12)):
        raise CalcInputError("active_s", "active time cannot exceed the window")
    if np.any(S > A * (1 + 1e-12)):
        raise CalcInputError("useful_s", "useful time at full rate cannot exceed the active time")
    res = Result(inputs=request_inputs(req), outputs={})
    R = res.step("active share", "R = A / T", f"{num(first(A))} / {num(first(T))}", A / T, "fraction")
    E = res.step("efficiency while active", "E = S / A", f"{num(first(S))} / {num(first(A))}",
                 np.where(A > 0, S / np.where(A > 0, A, 1.0), np.nan), "fraction")
    U = res.step("utilisation", "U = S / T = E × R", f"{num(first(S))} / {num(first(T))}", S / T, "fraction")
    res.outputs = {"active_fraction": out(R), "efficiency_while_active": out(E), "utilization": out(U),
                   "idle_s": out(T - A), "slow_active_s": out(A - S)}
    res.assume("Active and useful times come from counters over the same window; useful time is work divided by the "
               "unit's peak rate. Efficiency is undefined (null) when the unit was never active.")
    res.headline = hf.sentence(f"Utilisation {hf.fmt_pct(first(U))} = active {hf.fmt_pct(first(R))} of the window × "
                               f"{hf.fmt_pct(first(E))} efficient while active"
                               f"{hf.sweep_note(req.window_s, req.active_s, req.useful_s)}")
    return res


# =========================================================================== instance fit

class Placement(CalcRequest):
    name: str = Field(min_length=1, max_length=100, description="Label of the placement.", examples=["full copy"])
    local_bytes: list[NonNegFloat] = Field(min_length=1, max_length=100, description="Parts kept locally per "
                                           "instance, bytes (private data, localised hot pages …).",
                                           examples=[[2147483648]])


class InstanceFitRequest(CalcRequest):
    placements: list[Placement] = Field(min_length=1, max_length=50)
    overhead_bytes: NonNegFloat = Field(0.0, description="Fixed bytes per instance besides its data (page tables, "
                                        "runtime), bytes.", examples=[4194304])
    instances: PosInt = Field(description="Instances to host.", examples=[100])
    memory_budget_bytes: PosFloat = Field(description="Local memory budget, bytes (`shared_bytes` are taken out of it first).", examples=[68719476736])
    shared_bytes: NonNegFloat = Field(0.0, description="Bytes held once for all instances (a shared template), "
                                      "counted in the budget.", examples=[0])


@quiet
def fit_compute(req: InstanceFitRequest, lookup: Lookup) -> Result:
    if req.shared_bytes >= req.memory_budget_bytes:
        raise CalcInputError("shared_bytes", "the shared part alone fills the budget")
    res = Result(inputs=request_inputs(req), outputs={})
    free = req.memory_budget_bytes - req.shared_bytes
    rows = []
    for p in req.placements:
        per = res.step(f"{p.name}: per instance", "Σ local parts + overhead",
                       " + ".join(num(b) for b in p.local_bytes) + f" + {num(req.overhead_bytes)}",
                       sum(p.local_bytes) + req.overhead_bytes, "B")
        total = res.step(f"{p.name}: total", "instances × per instance (+ shared)",
                         f"{req.instances} × {num(per)} + {num(req.shared_bytes)}", req.instances * per + req.shared_bytes, "B")
        ratio = free / per if per > 0 else math.inf
        fit = math.floor(ratio + 1e-12) if math.isfinite(ratio) else None   # None: no bound (a subnormal size overflows)
        res.step(f"{p.name}: instances that fit", "floor((budget − shared) / per instance)", f"floor({num(free)} / {num(per)})",
                 fit, "instances")
        rows.append({"name": p.name, "per_instance_bytes": per, "total_bytes": total, "max_instances": fit,
                     "fits": total <= req.memory_budget_bytes})
    res.outputs = out({"placements": rows})
    res.assume("Every instance holds its local parts plus the fixed overhead; shared parts are held once. Other "
               "processes, page-table growth, over-prefetch and reclaim are not modelled.")
    best = max(rows, key=lambda r: r["max_instances"] or 0)
    res.headline = hf.sentence(f"{best['name']} needs {hf.fmt_bytes(best['per_instance_bytes'])} per instance and fits "
                               f"{hf.fmt_count(best['max_instances'])} in {hf.fmt_bytes(req.memory_budget_bytes)}; "
                               + LIST_SEP.join(f"{r['name']}: {hf.fmt_count(r['max_instances'])}" for r in rows if r is not best))
    return res


# =========================================================================== outputs

#: a number, or one per point when an input is swept (null where undefined)


class UtilizationSplitOutputs(Outputs):
    """Outputs of utilization-split; lists where an input is swept."""

    active_fraction: OutSweep = Field(description="R = A / T, share of the window the unit was active.")
    efficiency_while_active: OutSweep = Field(description="E = S / A (null when the unit was never active).")
    utilization: OutSweep = Field(description="U = S / T = E × R.")
    idle_s: OutSweep = Field(description="T − A, time the unit was idle, s.")
    slow_active_s: OutSweep = Field(description="A − S, active time beyond the useful work at full rate, s.")


class InstanceFitPlacementOut(Outputs):
    name: str = Field(description="The placement's label.")
    per_instance_bytes: float | None = Field(description="Local parts + overhead of one instance, B.")
    total_bytes: float | None = Field(description="instances × per instance + shared, B.")
    max_instances: int | None = Field(description="Whole instances the budget holds, floor((budget − shared) / per "
                                      "instance) (null when an instance takes no bytes).")
    fits: bool = Field(description="total_bytes ≤ memory_budget_bytes.")


class InstanceFitOutputs(Outputs):
    """Outputs of instance-fit."""

    placements: list[InstanceFitPlacementOut] = Field(description="Each placement, in request order.")


CALCULATORS = [
    Calculator(
        name="utilization-split",
        profile=Profile(1.1e-06, 611, 147),
        family="other",
        title="Utilisation as active share × efficiency",
        summary="Splits a counter utilisation U = S/T into the share of the window a unit was active (A/T) and its "
                "efficiency while active (S/A), so the same U tells a busy-but-slow unit from an idle-but-fast one.",
        description="R = A/T, E = S/A, U = S/T = E·R, where S is the useful work expressed in seconds at the unit's "
                    "peak rate. Limits: counters must define 'active' the same way and share the window.",
        request_model=UtilizationRequest,
        compute=utilization_compute,
        outputs_model=UtilizationSplitOutputs,
        example={"window_s": 100e-6, "active_s": [40e-6, 80e-6], "useful_s": 40e-6},
        cases=("component-utilization-and-overlap",),
        sweepable=("window_s", "active_s", "useful_s"),
    ),
    Calculator(
        name="instance-fit",
        family="other",
        title="Memory per instance and how many fit",
        summary="Per-instance memory under different placements (full copy, touched pages only, shared read-only), the "
                "total for N instances, and the whole number of instances a local budget holds.",
        description="per instance = Σ local parts + overhead; total = N × per instance + shared; fit = floor((budget − "
                    "shared) / per instance). Limits: no other processes, page-table growth, reclaim or CPU limits.",
        request_model=InstanceFitRequest,
        compute=fit_compute,
        outputs_model=InstanceFitOutputs,
        example={"placements": [{"name": "full copy", "local_bytes": [2147483648]},
                                {"name": "shared read-only", "local_bytes": [134217728]}],
                 "overhead_bytes": 4194304, "instances": 100, "memory_budget_bytes": 68719476736},
        cases=("snapshot-residency-and-first-use",),
    ),
]
