"""The time of one model step on real hardware, the one way every calculator that needs it asks: the step model's
operations for one rank (`step_model`), their peak-rate bound and measured estimate (`step_eval`), and the step's
collectives over the link of the tensor-parallel group by the α–β ring model (`collective`).

The step time is kernels + communication, the way the deployment planner and parallel-split add them:

- bound: Σ kernels at the peak rates (`bound_of`) + the collectives over the link;
- measured: the measured kernels without their own all-reduce table (`measured_of` total − its `comm_s`) + the
  same collectives over the same link, so both estimates carry the same communication.

`tp` and `ep` may be arrays (each degree asked is its own operation list); batch, new tokens and context broadcast
with them. tp-overhead, serving-cost and speculative decoding use this, so they answer the same step time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from calculators.domain import Layout
from calculators.framework import Lookup, Result
from calculators.perf.collective import collective_cost, resolve_link
from calculators.perf.measured_tables import MeasuredSystem, Rates
from calculators.perf.step_eval import COMM_KINDS, StepEstimate, bound_of, measured_of
from calculators.perf.step_model import Split, StepOps, step_ops

#: ranks → (α per dependent round in seconds, one-way bandwidth per rank in bytes/s)
LinkRates = Callable[[int], tuple[float, float]]


@dataclass
class StepTimes:
    """One step's times over the broadcast shape of batch × tokens × context × tp × ep (seconds)."""

    kernels_bound_s: np.ndarray
    comm_s: np.ndarray
    kernels_measured_s: np.ndarray | None = None
    fallback_fraction: np.ndarray | None = None       # share of the measured kernels from ops with no table
    extrapolated_fraction: np.ndarray | None = None   # share of lookups outside the measured range
    framework: str | None = None
    version: str | None = None
    ops: list[StepOps] = field(default_factory=list)  # one operation list per (tp, ep) asked
    masks: list[np.ndarray] = field(default_factory=list)   # the points each operation list holds
    estimates: list[StepEstimate] = field(default_factory=list)

    @property
    def bound_s(self) -> np.ndarray:
        return self.kernels_bound_s + self.comm_s

    @property
    def measured_s(self) -> np.ndarray | None:
        return None if self.kernels_measured_s is None else self.kernels_measured_s + self.comm_s


def collectives_s(step: StepOps, link: LinkRates | None) -> np.ndarray:
    """Seconds of a step's collectives over `link`: all-reduces by the ring α–β, all-to-alls timed as all-reduces of
    the same bytes (the planner's rule), pipeline hand-offs as one point-to-point send. 0 without a link."""
    total = np.zeros(step.shape)
    if link is None:
        return total
    for op in step.ops:
        if op.kind not in COMM_KINDS:
            continue
        m = np.asarray(op.shape["bytes"], dtype=float)
        if op.kind == "p2p":
            alpha, bw = link(2)
            c = collective_cost("point_to_point", "ring", 2, m)
        else:
            gpus = int(op.shape.get("gpus", step.split.tp))
            if gpus <= 1:
                continue
            alpha, bw = link(gpus)
            c = collective_cost("all_reduce", "ring", gpus, m)
        total = total + op.count * (c["rounds"] * alpha + c["wire"] / bw)
    return total


def step_times(lay: Layout, rates: Rates, phase: str, batch: Any, new_tokens: Any, context_tokens: Any, tp: Any = 1,
               ep: Any = 1, weight_format: Any = None, kv_format: Any = None, system: MeasuredSystem | None = None,
               link: LinkRates | None = None) -> StepTimes:
    """Bound, measured (with `system`) and communication (with `link`) of one step, per point. Invalid splits raise
    the step model's `CalcInputError` naming `tp`; a missing measured table raises from `measured_of`."""
    b, p, s, t, e = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in (batch, new_tokens, context_tokens, tp, ep)])
    shape = b.shape
    kb, comm = np.zeros(shape), np.zeros(shape)
    km = np.zeros(shape) if system is not None else None
    fb, ex = np.zeros(shape), np.zeros(shape)
    out = StepTimes(kb, comm, km)
    for tv, ev in sorted({(float(x), float(y)) for x, y in zip(t.ravel(), e.ravel())}):
        mask = (t == tv) & (e == ev)
        ops = step_ops(lay, phase, b[mask], p[mask], s[mask], Split(tp=int(tv), ep=int(ev)), weight_format, kv_format)
        out.ops.append(ops)
        out.masks.append(mask)
        kb[mask] = bound_of(ops, rates).total_s
        comm[mask] = collectives_s(ops, link)
        if system is not None:
            est = measured_of(ops, system)
            out.estimates.append(est)
            km[mask] = np.asarray(est.total_s, dtype=float) - np.asarray(est.comm_s, dtype=float)
            fb[mask] = est.fallback_fraction
            ex[mask] = est.extrapolated_fraction
            out.framework, out.version = est.framework, est.version
    if system is not None:
        out.fallback_fraction, out.extrapolated_fraction = fb, ex
    return out


def tp_link(lookup: Lookup, res: Result, link_id: str | None, hardware: Any, tp: Any, loc: str = "link") -> tuple[LinkRates | None, str | None]:
    """The α–β of the tensor-parallel group's link, per rank count: the named link, else the hardware's first listed
    one (said in the assumptions); a measured all-reduce fit on this hardware where one exists (`resolve_link`).
    (None, None) when every degree is 1 or no link is known (said too)."""
    degrees = sorted({int(x) for x in np.atleast_1d(np.asarray(tp)).ravel() if int(x) > 1})
    if not degrees:
        return None, None
    lid = link_id or (hardware.links[0] if getattr(hardware, "links", None) else None)
    if lid is None:
        res.assume(f"{hardware.id} lists no link and none was given: the tensor-parallel all-reduces are not timed "
                   f"(give `{loc}`).")
        return None, None
    if link_id is None:
        res.assume(f"Link of the tensor-parallel group: {lid}, the first link {hardware.id} lists (give `{loc}` for another).")
    alpha, bw = resolve_link(lookup, res, lid, None, None, loc=loc, alpha_loc=loc, gpus=np.asarray(degrees),
                             hardware=hardware.id)
    a = np.broadcast_to(np.asarray(0.0 if alpha is None else alpha, dtype=float), (len(degrees),))
    w = np.broadcast_to(np.asarray(bw, dtype=float), (len(degrees),))
    table = {g: (float(x), float(y)) for g, x, y in zip(degrees, a, w)}

    def rates_of(gpus: int) -> tuple[float, float]:
        if gpus not in table:      # a collective over another rank count than the TP degrees (all-to-all over ep)
            a2, b2 = resolve_link(lookup, Result(inputs={}, outputs={}), lid, None, None, loc=loc,
                                  gpus=np.asarray([gpus]), hardware=hardware.id)
            table[gpus] = (float(np.ravel(0.0 if a2 is None else a2)[0]), float(np.ravel(b2)[0]))
        return table[gpus]

    return rates_of, lid


__all__ = ["LinkRates", "StepTimes", "collectives_s", "step_times", "tp_link"]
