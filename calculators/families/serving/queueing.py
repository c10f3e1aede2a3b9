"""Queues, backlogs and throughput bounds: the book's arithmetic for waiting, pools and limits.

Four calculators share this module:
- `queueing`: mean waiting time of a Poisson arrival stream at c servers (M/D/c, M/M/c, M/G/c),
  with utilisation, Little's law and the servers needed for a target wait or utilisation;
- `backlog`: a fluid queue — arrivals above service for a while build a backlog, which then
  drains at (service − arrivals); buffers fill at the net growth rate;
- `capacity`: a throughput bound as the minimum over resources (rates consumed per request,
  or slots held for a time per request — Little's law), the bottleneck, and units needed;
- `remaining-time`: expected remaining duration given the time already elapsed, from history.
"""
from __future__ import annotations

import math


from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    aligned as _aligned, broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_s, FractionSweep,
    list_series, LIST_SEP, Lookup, MAX_LIST_LENGTH, NonNegFloat, NonNegFloatSweep, num, out, PosFloat, PosFloatSweep,
    PosIntSweep, Profile, quiet, request_inputs, Result, whole_numbers as _ints,
)
from calculators.framework import headline as hf
from calculators.families.serving._queueing_outputs import (
    BacklogOutputs, CapacityOutputs, QueueingOutputs, RemainingTimeOutputs,
)


#: largest server count the search for `servers_needed` tries
MAX_SERVERS_SEARCH = 10_000
#: largest Erlang work of one request: sweep points × servers (and × MAX_SERVERS_SEARCH for a wait target);
#: the recursion is a loop over servers, so this keeps a request well under a second
MAX_ERLANG_WORK = 10_000_000


# =========================================================================== queueing

class QueueingRequest(CalcRequest):
    """Poisson arrivals to `servers` identical servers with one FCFS queue."""

    arrival_rate_per_s: NonNegFloatSweep = Field(description="Mean arrival rate λ, requests/s. Sweepable.", examples=[7])
    service_s: PosFloatSweep = Field(description="Mean service time of one request at one server (the bottleneck stage), "
                                     "seconds. Sweepable.", examples=[0.125])
    servers: Annotated[int, Field(ge=1, le=MAX_SERVERS_SEARCH)] = Field(
        1, description=f"Identical servers sharing one queue (c), at most {MAX_SERVERS_SEARCH:,}.")
    service: Literal["deterministic", "exponential", "general"] = Field(
        "deterministic", description="Service-time distribution: deterministic (M/D/c), exponential (M/M/c) or general "
                                     "(M/G/c with `service_cv`).")
    service_cv: Annotated[float, Field(ge=0, le=1e3, allow_inf_nan=False)] | None = Field(None, description="Coefficient of variation of the service time "
                                           "(std/mean), for service = general.", examples=[0.5])
    extra_s: NonNegFloatSweep = Field(0.0, description="Time in the system outside this queue and its service (later "
                                      "pipeline stages, network), seconds. Sweepable.", examples=[0.1])
    target_wait_s: NonNegFloat | None = Field(None, description="Find the fewest servers whose mean queueing wait is at most this.")
    target_utilization: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="Find the fewest servers whose utilisation is at most this (0 < target ≤ 1).")


def _erlang_c(a: np.ndarray, c: int) -> np.ndarray:
    """Probability of waiting in M/M/c with offered load a = λ·S (valid where a < c)."""
    b = np.ones_like(a)
    for k in range(1, c + 1):  # Erlang B recursion: a loop over servers, vectorised over points
        b = a * b / (k + a * b)
    rho = a / c
    with np.errstate(divide="ignore", invalid="ignore"):
        return b / (1.0 - rho * (1.0 - b))


def _wait(a: np.ndarray, service: np.ndarray, c: int, factor: float) -> np.ndarray:
    """Mean queueing wait W_q = C(c, a) · S / (c − a) · (1 + cv²)/2, inf when a ≥ c."""
    stable = a < c
    a_s = np.where(stable, a, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _erlang_c(a_s, c) * service / (c - a_s) * factor
    return np.where(stable, w, np.inf)


@quiet
def queueing_compute(req: QueueingRequest, lookup: Lookup) -> Result:
    x = _aligned(broadcast({"arrival_rate_per_s": req.arrival_rate_per_s, "service_s": req.service_s,
                            "extra_s": req.extra_s}))
    res = Result(inputs=request_inputs(req), outputs={})
    if req.service == "general" and req.service_cv is None:
        raise CalcInputError("service_cv", "service = general needs the service-time coefficient of variation")
    cv = {"deterministic": 0.0, "exponential": 1.0}.get(req.service, req.service_cv)
    if req.service != "general" and req.service_cv is not None and req.service_cv != cv:
        raise CalcInputError("service_cv", f"{req.service} service has cv = {cv:g}; use service = general for another cv")
    factor = (1.0 + cv * cv) / 2.0
    c = req.servers
    lam, s = x["arrival_rate_per_s"], x["service_s"]
    points = int(np.size(lam))
    if points * c > MAX_ERLANG_WORK:
        raise CalcInputError("servers", f"{points:,} sweep points × {c:,} servers exceeds {MAX_ERLANG_WORK:,} steps of the "
                             "Erlang recursion; lower the servers or the sweep", status=413)
    if req.target_wait_s is not None and points * MAX_SERVERS_SEARCH > MAX_ERLANG_WORK:
        raise CalcInputError("target_wait_s", f"the servers search tries up to {MAX_SERVERS_SEARCH:,} servers per point; a "
                             f"sweep of {points:,} points exceeds {MAX_ERLANG_WORK:,} steps (at most "
                             f"{MAX_ERLANG_WORK // MAX_SERVERS_SEARCH:,} points)", status=413)
    letter = {"deterministic": "D", "exponential": "M", "general": "G"}[req.service]
    model = f"M/{letter}/{c}"

    a = res.step("offered load", "a = λ × S", f"{num(first(lam))} /s × {num(first(s))} s", lam * s, "busy servers")
    rho = res.step("utilisation", "ρ = λ·S / c", f"{num(first(a))} / {c}", a / c, "fraction")
    cap = res.step("capacity", "c / S", f"{c} / {num(first(s))} s", c / s, "requests/s")
    wq = _wait(a, s, c, factor)
    if c == 1:
        res.step("mean wait in queue (Pollaczek–Khinchine)", "W_q = λ·S² · (1 + cv²) / (2·(1 − ρ))",
                 f"{num(first(lam))} × {num(first(s))}² × {num(1 + cv * cv)} / (2 × (1 − {num(first(rho))}))", wq, "s")
    else:
        res.step("mean wait in queue (Erlang C × (1 + cv²)/2)", "W_q = C(c, a) · S / (c − a) · (1 + cv²)/2",
                 f"C({c}, {num(first(a))}) × {num(first(s))} / ({c} − {num(first(a))}) × {num(factor)}", wq, "s")
    t = wq + s + x["extra_s"]
    res.step("mean time in system", "T = W_q + S + extra", f"{fmt_s(first(wq)) if np.isfinite(first(wq)) else '∞'} + "
             f"{fmt_s(first(s))} + {fmt_s(first(x['extra_s']))}", t, "s")
    lq = np.where(np.isfinite(wq), lam * np.where(np.isfinite(wq), wq, 0.0), np.inf)
    res.step("Little's law", "L = λ × T; L_q = λ × W_q", f"{num(first(lam))} × {num(first(t))}", lam * t, "requests")
    stable = a < c
    with np.errstate(divide="ignore", invalid="ignore"):
        p_wait = np.where(stable, _erlang_c(np.where(stable, a, 0.0), c), 1.0)
    outputs = {
        "model": model,
        "utilisation": out(rho), "stable": out(stable) if np.ndim(stable) else bool(stable),
        "capacity_per_s": out(cap), "headroom_per_s": out(cap - lam),
        "prob_wait": out(p_wait), "wait_s": out(wq), "response_s": out(t),
        "queue_length": out(lq), "in_system": out(np.where(np.isfinite(t), lam * np.where(np.isfinite(t), t, 0.0), np.inf)),
    }

    if req.target_wait_s is not None or req.target_utilization is not None:
        need = np.ones_like(a)
        if req.target_utilization is not None:
            with np.errstate(invalid="ignore"):
                need = np.maximum(need, np.ceil(a / req.target_utilization - 1e-9))
        found = np.full(a.shape, np.nan)
        if req.target_wait_s is not None:
            b = np.ones_like(a)
            todo = a < MAX_SERVERS_SEARCH  # beyond the search range the answer stays null
            for k in range(1, MAX_SERVERS_SEARCH + 1):
                b = a * b / (k + a * b)  # Erlang B for k servers
                ok_k = (a < k) & (k >= need)
                if np.any(ok_k & todo):
                    with np.errstate(divide="ignore", invalid="ignore"):
                        cq = b / (1.0 - (a / k) * (1.0 - b))
                        w = cq * s / (k - a) * factor
                    hit = todo & ok_k & (w <= req.target_wait_s + 1e-15)
                    found = np.where(hit, k, found)
                    todo &= ~hit
                if not np.any(todo):
                    break
        else:
            found = np.where(need <= MAX_SERVERS_SEARCH, need, np.nan)
            # ρ ≤ target < 1 is stable except at target 1 with a whole number of servers
            found = np.where(a < found, found, found + 1)
        outputs["servers_needed"] = _ints(found)
        res.step("servers needed", "fewest c with ρ ≤ target and W_q ≤ target", f"targets: utilisation "
                 f"{num(req.target_utilization) if req.target_utilization else '—'}, wait "
                 f"{fmt_s(req.target_wait_s) if req.target_wait_s is not None else '—'}", found, "servers")
    res.outputs = outputs
    res.assume(
        "Poisson arrivals, one FCFS queue, identical servers, mean values only (no percentiles).",
        "Service is deterministic (cv 0), exponential (cv 1) or general with the given cv; for c > 1 and cv ≠ 1 the "
        "wait is the Allen–Cunneen approximation W_q(M/M/c) × (1 + cv²)/2 (exact for c = 1: Pollaczek–Khinchine).",
        "`extra_s` adds time outside this queue (e.g. the other stages of a balanced pipeline, where no second queue forms).",
        "ρ ≥ 1 is unstable: waits are reported as null (infinite).",
    )
    res.headline = _queueing_headline(req, outputs)
    return res


def _queueing_headline(req: QueueingRequest, o: dict) -> str:
    """Utilisation, mean wait and response time (a sweep: its first point)."""
    n = hf.n_points(req.arrival_rate_per_s, req.service_s, req.extra_s)
    servers = f" with {req.servers} servers" if req.servers > 1 else ""
    text = (f"An {o.get('model')} queue{servers} at {hf.fmt_num(req.arrival_rate_per_s)} arrivals/s and "
            f"{hf.fmt_seconds(req.service_s)} of service runs at {hf.fmt_pct(o.get('utilisation'))} utilisation")
    wait = hf.scalar(o.get("wait_s"))
    if hf.first_value(o.get("stable")) and wait is not None and math.isfinite(wait):
        text += (f": requests wait {hf.fmt_seconds(wait)} on average and take {hf.fmt_seconds(o.get('response_s'))} "
                 "in all")
    else:
        text += ", which is unstable: the queue grows without bound"
    if o.get("servers_needed") is not None:
        need = hf.scalar(o["servers_needed"])
        text += (f"; meeting the target needs {hf.plural(need, 'server')}" if need is not None and math.isfinite(need)
                 else "; no server count within the search meets the target")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== backlog

class BacklogRequest(CalcRequest):
    """A period where arrivals exceed service, then recovery. Rates are items/s (requests, tokens, bytes, events)."""

    arrival_rate_per_s: NonNegFloatSweep = Field(description="Arrivals during the period, items/s. Sweepable.", examples=[7471.2])
    service_rate_per_s: NonNegFloatSweep = Field(0.0, description="Service per server during the period, items/s "
                                                 "(0 = outage). Sweepable.", examples=[2048])
    servers: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Servers, each serving service_rate_per_s (at most 1e9).", examples=[3])
    duration_s: NonNegFloatSweep = Field(0.0, description="Length of the period, seconds. Sweepable.", examples=[60])
    after_arrival_rate_per_s: NonNegFloatSweep | None = Field(None, description="Arrivals after the period, items/s. "
                                                              "Omitted: arrivals continue at the same rate.", examples=[0])
    after_service_rate_per_s: NonNegFloatSweep | None = Field(None, description="Total service after the period, "
                                                              "items/s. Omitted: servers × service_rate_per_s.")
    buffer_items: NonNegFloatSweep | None = Field(None, description="Buffer capacity, items. Sweepable.")
    buffer_bytes: NonNegFloatSweep | None = Field(None, description="Buffer capacity, bytes (needs item_bytes). Sweepable.")
    item_bytes: PosFloat | None = Field(None, description="Bytes per item, to report rates and backlog in bytes.")


@quiet
def backlog_compute(req: BacklogRequest, lookup: Lookup) -> Result:
    named = {"arrival_rate_per_s": req.arrival_rate_per_s, "service_rate_per_s": req.service_rate_per_s,
             "duration_s": req.duration_s}
    for k in ("after_arrival_rate_per_s", "after_service_rate_per_s", "buffer_items", "buffer_bytes"):
        if getattr(req, k) is not None:
            named[k] = getattr(req, k)
    if req.buffer_items is not None and req.buffer_bytes is not None:
        raise CalcInputError("buffer_bytes", "give buffer_items or buffer_bytes, not both")
    if req.buffer_bytes is not None and req.item_bytes is None:
        raise CalcInputError("item_bytes", "buffer_bytes needs item_bytes")
    x = _aligned(broadcast(named))
    res = Result(inputs=request_inputs(req), outputs={})
    lam, d = x["arrival_rate_per_s"], x["duration_s"]
    mu = res.step("service capacity during the period", "servers × rate", f"{req.servers} × {num(first(x['service_rate_per_s']))}",
                  req.servers * x["service_rate_per_s"], "items/s")
    excess = res.step("excess rate", "λ − μ", f"{num(first(lam))} − {num(first(mu))}", lam - mu, "items/s")
    growth = np.maximum(excess, 0.0)
    backlog = res.step("backlog at the end of the period", "max(λ − μ, 0) × duration",
                       f"{num(first(growth))} × {num(first(d))} s", growth * d, "items")
    lam2 = x.get("after_arrival_rate_per_s", lam)
    mu2 = x.get("after_service_rate_per_s", mu)
    net = res.step("net drain rate after the period", "μ_after − λ_after", f"{num(first(mu2))} − {num(first(lam2))}",
                   mu2 - lam2, "items/s")
    with np.errstate(divide="ignore", invalid="ignore"):
        drain = np.where(backlog == 0, 0.0, np.where(net > 0, backlog / np.where(net > 0, net, 1.0), np.inf))
        drain_alone = np.where(backlog == 0, 0.0, np.where(mu2 > 0, backlog / np.where(mu2 > 0, mu2, 1.0), np.inf))
    res.step("drain time", "backlog / (μ_after − λ_after)", f"{num(first(backlog))} / {num(first(net))}", drain, "s")
    res.step("drain time with no new arrivals", "backlog / μ_after", f"{num(first(backlog))} / {num(first(mu2))}",
             drain_alone, "s")
    ib = req.item_bytes
    outputs = {
        "service_capacity_per_s": out(mu), "excess_rate_per_s": out(excess), "backlog_items": out(backlog),
        "drain_rate_per_s": out(net), "drain_s": out(drain), "drain_s_no_arrivals": out(drain_alone),
        "recovery_s": out(d + drain),
    }
    buf = None
    if "buffer_items" in x:
        buf = x["buffer_items"]
    elif "buffer_bytes" in x:
        buf = x["buffer_bytes"] / ib
    if buf is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            fill = np.where(growth > 0, buf / np.where(growth > 0, growth, 1.0), np.inf)
        res.step("time to fill the buffer", "buffer / (λ − μ)", f"{num(first(buf))} / {num(first(growth))}", fill, "s")
        outputs["fill_s"] = out(fill)
        holds = backlog <= buf
        outputs["buffer_holds_backlog"] = out(holds) if np.ndim(holds) else bool(holds)
        outputs["overflow_items"] = out(np.maximum(backlog - buf, 0.0))
    if ib is not None:
        outputs.update({"arrival_bytes_per_s": out(lam * ib), "backlog_bytes": out(backlog * ib),
                        "drain_bytes_per_s": out(net * ib)})
        if buf is not None:
            outputs["overflow_bytes"] = out(np.maximum(backlog - buf, 0.0) * ib)
    res.outputs = outputs
    res.assume(
        "Fluid model: work arrives and is served at constant rates; no per-request latency, batching or percentiles.",
        "The backlog starts empty; during the period it grows at max(λ − μ, 0).",
        "Drain time is null (never) when service after the period does not exceed arrivals after it.",
    )
    res.headline = _backlog_headline(req, outputs)
    return res


def _backlog_headline(req: BacklogRequest, o: dict) -> str:
    """Backlog at the end of the period and how long it takes to drain (a sweep: its first point)."""
    n = hf.n_points(req.arrival_rate_per_s, req.service_rate_per_s, req.duration_s, req.after_arrival_rate_per_s,
                    req.after_service_rate_per_s, req.buffer_items, req.buffer_bytes)
    text = (f"Arrivals of {hf.fmt_num(req.arrival_rate_per_s)} items/s against {hf.fmt_num(o.get('service_capacity_per_s'))} "
            f"items/s of service for {hf.fmt_seconds(req.duration_s)}")
    backlog = hf.scalar(o.get("backlog_items")) or 0.0
    if backlog <= 0:
        text += " leave no backlog"
    else:
        text += f" leave a backlog of {hf.fmt_num(backlog)} items"
        if o.get("backlog_bytes") is not None:
            text += f" ({hf.fmt_bytes(o['backlog_bytes'])})"
        drain = hf.scalar(o.get("drain_s"))
        text += (f", which drains {hf.fmt_seconds(drain)} after the period ends" if drain is not None and math.isfinite(drain)
                 else ", which never drains at the rates after the period")
    if "buffer_holds_backlog" in o:
        text += ("; the buffer holds it" if hf.first_value(o["buffer_holds_backlog"])
                 else f"; the buffer overflows by {hf.fmt_num(o.get('overflow_items'))} items after {hf.fmt_seconds(o.get('fill_s'))}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== capacity

class Resource(CalcRequest):
    """One resource every request uses: consumed at a rate, or held for `hold_s` (Little's law)."""

    name: str = Field(min_length=1, max_length=100, description="Label (e.g. link, cpu, kv slots).", examples=["link"])
    units: PosIntSweep = Field(1, description="Identical units of this resource (cards, cores, tags). Sweepable.", examples=[1])
    capacity: PosFloatSweep = Field(1.0, description="Per unit: amount per second for a consumed resource (bytes/s, "
                                    "tokens/s, core-seconds per second = 1), or amount held for a pool (bytes, slots). "
                                    "Sweepable.", examples=[11e9])
    efficiency: FractionSweep = Field(1.0, description="Fraction of the capacity that is usable (e.g. 0.98 after a 2 % "
                                      "per-core loss). Sweepable.")
    per_request: NonNegFloatSweep = Field(1.0, description="Amount one request uses, in the capacity's unit (bytes, "
                                          "core-seconds, images, slots). Sweepable.", examples=[1207959552])
    hold_s: NonNegFloatSweep | None = Field(None, description="Seconds the amount stays held per request (pool / "
                                            "concurrency resource). Omitted: a consumed, rate resource. Sweepable.")


class CapacityRequest(CalcRequest):
    """Requests that each use every listed resource; the smallest bound wins."""

    resources: list[Resource] = Field(min_length=1, max_length=20, description="Resources each request uses.")
    arrival_rate_per_s: NonNegFloatSweep | None = Field(None, description="Offered rate (requests/s) to compare with the "
                                                        "bounds. Sweepable.", examples=[8])
    output_per_request: PosFloatSweep | None = Field(None, description="Output per request (bytes, tokens) to express the "
                                                     "bound as output per second. Sweepable.")
    output_unit: str = Field("", max_length=40, description="Label of that output (e.g. B, tokens).")


@quiet
def capacity_compute(req: CapacityRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    names = [r.name for r in req.resources]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise CalcInputError(("resources", i, "name"), f"duplicate resource {n!r}")
    named = {}
    for i, r in enumerate(req.resources):
        for k in ("units", "capacity", "efficiency", "per_request", "hold_s"):
            v = getattr(r, k)
            if v is not None:
                named[f"resources.{i}.{k}"] = v
    if req.arrival_rate_per_s is not None:
        named["arrival_rate_per_s"] = req.arrival_rate_per_s
    if req.output_per_request is not None:
        named["output_per_request"] = req.output_per_request
    try:
        x = _aligned(broadcast(named))
    except CalcInputError as e:
        loc = str(e.loc[0]).split(".")
        raise CalcInputError(tuple(int(p) if p.isdigit() else p for p in loc), e.message, e.status) from None
    lam = x.get("arrival_rate_per_s")
    rows, bounds = [], []
    for i, r in enumerate(req.resources):
        g = lambda k: x[f"resources.{i}.{k}"]  # noqa: E731
        held = r.hold_s is not None
        per_unit = g("capacity") * g("efficiency")
        total = g("units") * per_unit
        demand = g("per_request") * (g("hold_s") if held else 1.0)     # capacity-units per request/s
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(demand > 0, total / np.where(demand > 0, demand, 1.0), np.inf)
            t_one = np.where(per_unit > 0, g("per_request") / np.where(per_unit > 0, per_unit, 1.0), np.inf) \
                if not held else g("hold_s") + 0.0 * total
        if held:
            res.step(f"{r.name}: bound (Little's law)", "units·capacity·eff / (per_request · hold)",
                     f"{num(first(g('units')))} × {num(first(g('capacity')))} × {num(first(g('efficiency')))} / "
                     f"({num(first(g('per_request')))} × {num(first(g('hold_s')))} s)", bound, "requests/s")
        else:
            res.step(f"{r.name}: bound", "units·capacity·eff / per_request",
                     f"{num(first(g('units')))} × {num(first(g('capacity')))} × {num(first(g('efficiency')))} / "
                     f"{num(first(g('per_request')))}", bound, "requests/s")
        row = {"name": r.name, "total_capacity": out(total), "time_per_request_s": out(t_one), "max_rate_per_s": out(bound)}
        if lam is not None:
            load = lam * demand
            with np.errstate(divide="ignore", invalid="ignore"):
                util = np.where(total > 0, load / np.where(total > 0, total, 1.0), np.where(load > 0, np.inf, 0.0))
                units_needed = np.where(per_unit > 0, load / np.where(per_unit > 0, per_unit, 1.0),
                                        np.where(load > 0, np.inf, 0.0))
                raw = g("units") * g("capacity")
                eff_needed = load / raw
                headroom = np.where(lam > 0, bound / np.where(lam > 0, lam, 1.0) - 1.0, np.inf)
            row.update({"load": out(load), "utilisation": out(util), "units_needed": out(units_needed),
                        "whole_units_needed": _ints(np.ceil(units_needed - 1e-9)), "efficiency_needed": out(eff_needed),
                        "efficiency_loss_allowed": out(1.0 - eff_needed), "headroom": out(headroom)})
        rows.append(row)
        bounds.append(bound)
    shape = np.broadcast_shapes(*[np.shape(b) for b in bounds])
    stack = np.stack([np.broadcast_to(b, shape) for b in bounds])
    idx = np.argmin(stack, axis=0)
    best = np.min(stack, axis=0)
    bottleneck = [names[i] for i in np.ravel(idx)] if np.ndim(idx) else names[int(idx)]
    res.step("throughput bound", "min over resources", LIST_SEP.join(f"{n} {num(first(b))}" for n, b in zip(names, bounds)),
             best, "requests/s")
    with np.errstate(divide="ignore"):
        interval = np.where(best > 0, 1.0 / np.where(best > 0, best, 1.0), np.inf)
    outputs = {"resources": rows, "max_rate_per_s": out(best), "interval_s": out(interval),
               "bottleneck": bottleneck}
    if lam is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            util = np.where(best > 0, lam / np.where(best > 0, best, 1.0), np.where(lam > 0, np.inf, 0.0))
            headroom = np.where(lam > 0, best / np.where(lam > 0, lam, 1.0) - 1.0, np.inf)
        fits = lam <= best * (1 + 1e-12)
        outputs.update({"utilisation": out(util), "headroom": out(headroom),
                        "fits": out(fits) if np.ndim(fits) else bool(fits)})
        res.step("utilisation of the bottleneck", "λ / bound", f"{num(first(lam))} / {num(first(best))}", util, "fraction")
    if "output_per_request" in x:
        o = best * x["output_per_request"]
        with np.errstate(divide="ignore"):
            per_out = np.where(o > 0, 1.0 / np.where(o > 0, o, 1.0), np.inf)
        res.step("bound as output", "bound × output_per_request", f"{num(first(best))} × {num(first(x['output_per_request']))}",
                 o, f"{req.output_unit or 'output'}/s")
        outputs["max_output_per_s"] = out(o)
        outputs["time_per_output_s"] = out(per_out)
    res.outputs = outputs
    res.assume(
        "Every request uses every listed resource; the throughput bound is the smallest per-resource bound (mean rates, "
        "no tail latency, no burst margin).",
        "A consumed resource serves units·capacity·efficiency per second; a held resource (hold_s given) has that much "
        "in flight, so by Little's law it sustains capacity / (per_request × hold_s) requests/s.",
        "units_needed = load / (capacity × efficiency) per unit; efficiency_needed is the lowest efficiency that carries "
        "the offered rate with the given units.",
    )
    res.headline = _capacity_headline(req, outputs)
    return res


def _capacity_headline(req: CapacityRequest, o: dict) -> str:
    """The throughput bound, its bottleneck and whether the offered rate fits (a sweep: its first point)."""
    n = hf.n_points(o.get("max_rate_per_s"), req.arrival_rate_per_s, req.output_per_request)
    text = (f"The bottleneck is {hf.first_value(o.get('bottleneck'))}, capping throughput at "
            f"{hf.fmt_num(o.get('max_rate_per_s'))} requests/s (one every {hf.fmt_seconds(o.get('interval_s'))})")
    if o.get("max_output_per_s") is not None:
        text += f", {hf.fmt_num(o['max_output_per_s'])} {req.output_unit or 'output'}/s"
    if "fits" in o:
        text += (f"; the offered {hf.fmt_num(req.arrival_rate_per_s)} requests/s run it at {hf.fmt_pct(o.get('utilisation'))} "
                 f"and {'fit' if hf.first_value(o['fits']) else 'do not fit'}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# =========================================================================== remaining time

class RemainingTimeRequest(CalcRequest):
    """Past durations of similar jobs, and how long the current one has run."""

    history_s: Annotated[list[NonNegFloat], Field(min_length=1, max_length=MAX_LIST_LENGTH)] = Field(
        description="Durations of past jobs, seconds (repeat values as needed).", examples=[[1, 1, 1, 1, 1, 1, 1, 1, 1, 100]])
    elapsed_s: NonNegFloatSweep = Field(0.0, description="Time the current job has already run, seconds. Sweepable.",
                                        examples=[10])


@quiet
def remaining_compute(req: RemainingTimeRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    h = np.sort(np.asarray(req.history_s, dtype=float))
    e = np.asarray(req.elapsed_s, dtype=float)
    n = h.size
    mean = res.step("mean duration", "E[S]", f"{num(h.sum())} / {n}", h.mean(), "s")
    naive = res.step("naive remaining", "max(E[S] − e, 0)", f"{num(mean)} − {num(first(e))}", np.maximum(mean - e, 0.0), "s")
    # histories longer than e: suffix sums over the sorted samples
    suffix = np.concatenate([np.cumsum(h[::-1])[::-1], [0.0]])
    k = np.searchsorted(h, e, side="right")           # first index with S > e
    count = n - k
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(count > 0, suffix[k] / np.where(count > 0, count, 1) - e, np.nan)
    res.step("conditional remaining", "E[S − e | S > e]", f"mean of the {num(first(count))} histories longer than "
             f"{num(first(e))} s, minus {num(first(e))}", cond, "s")
    res.outputs = {"mean_s": float(mean), "naive_remaining_s": out(naive), "conditional_remaining_s": out(cond),
                   "survivor_fraction": out(count / n), "survivors": _ints(count)}
    res.assume(
        "The history is representative of the current job (same kind of work); only histories longer than the elapsed "
        "time are used, as in conditional sampling.",
        "Null when no history is longer than the elapsed time.",
    )
    res.headline = _remaining_headline(req, res.outputs)
    return res


def _remaining_headline(req: RemainingTimeRequest, o: dict) -> str:
    """Expected remaining time given the elapsed time (a sweep: its first point)."""
    n = hf.n_points(req.elapsed_s)
    cond = hf.scalar(o.get("conditional_remaining_s"))
    text = f"After {hf.fmt_seconds(req.elapsed_s)}, "
    if cond is None or not math.isfinite(cond):
        text += (f"no past job of the {len(req.history_s):,} ran longer, so the history gives no remaining time "
                 f"(the naive mean says {hf.fmt_seconds(o.get('naive_remaining_s'))})")
    else:
        text += (f"a job is expected to need {hf.fmt_seconds(cond)} more (from the {hf.fmt_count(o.get('survivors'))} of "
                 f"{len(req.history_s):,} past jobs that ran longer), not the naive {hf.fmt_seconds(o.get('naive_remaining_s'))}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="queueing",
        profile=Profile(6.4e-07, 416, 113),
        family="queueing",
        title="Queue waiting time (M/D/c, M/M/c, M/G/c)",
        summary="Mean wait and time in system for Poisson arrivals at c servers, with utilisation, Little's law, "
                "capacity and the servers needed for a target wait or utilisation.",
        description="a = λS, ρ = a/c. c = 1: Pollaczek–Khinchine W_q = λS²(1 + cv²)/(2(1 − ρ)) (M/D/1: cv = 0, M/M/1: "
                    "cv = 1). c > 1: Erlang C × S/(c − a), times (1 + cv²)/2 (Allen–Cunneen approximation, exact for "
                    "M/M/c). T = W_q + S + extra; L = λT. Compare tensor-parallel (one faster server) with a balanced "
                    "pipeline (bottleneck stage S/2, extra = the other stage) as in the book. Limits: means only, "
                    "FCFS, stationary Poisson arrivals.",
        request_model=QueueingRequest,
        compute=queueing_compute,
        outputs_model=QueueingOutputs,
        example={"arrival_rate_per_s": [1, 7, 1, 7], "service_s": [0.125, 0.125, 0.1, 0.1],
                 "extra_s": [0, 0, 0.1, 0.1], "service": "deterministic"},
        cases=("chunking-and-state-transfer",),
        sweepable=("arrival_rate_per_s", "service_s", "extra_s"),
        chart=Chart(x="arrival_rate_per_s", y=("response_s",), x_label="arrival rate (requests/s)",
                    y_label="mean time in system (s)"),
        families=("scheduling",),
    ),
    Calculator(
        name="backlog",
        profile=Profile(9.6e-07, 625, 166),
        family="queueing",
        title="Backlog growth and drain (fluid queue)",
        summary="When arrivals exceed service for a while, how much work piles up, when a buffer fills, and how long "
                "the backlog takes to drain afterwards.",
        description="backlog = max(λ − c·μ, 0) × duration; buffer fill time = buffer / (λ − c·μ); drain = backlog / "
                    "(μ_after − λ_after), and backlog / μ_after if nothing new arrives. Items may be requests, tokens, "
                    "decode steps, events or bytes; item_bytes converts. Limits: constant rates, no per-request latency.",
        request_model=BacklogRequest,
        compute=backlog_compute,
        outputs_model=BacklogOutputs,
        example={"arrival_rate_per_s": 7471.2, "service_rate_per_s": 2048, "servers": 3, "duration_s": 60,
                 "after_arrival_rate_per_s": 0},
        cases=("workload-and-provisioning", "evaluation-and-agent-records", "cache-events-and-routing"),
        sweepable=("arrival_rate_per_s", "service_rate_per_s", "duration_s", "after_arrival_rate_per_s",
                   "after_service_rate_per_s", "buffer_items", "buffer_bytes"),
        chart=Chart(x="duration_s", y=("backlog_items",), x_label="overload duration (s)", y_label="backlog (items)"),
    ),
    Calculator(
        name="capacity",
        profile=Profile(4.7e-07, 360, 115),
        series=list_series("resources", "resources"),
        family="scheduling",
        title="Throughput bound over resources",
        summary="Each resource caps the request rate at capacity ÷ use per request (or slots ÷ hold time, by Little's "
                "law); the smallest cap is the bound, the resource giving it the bottleneck.",
        description="Consumed resource: bound = units·capacity·efficiency / per_request. Held resource (hold_s): bound = "
                    "units·capacity·efficiency / (per_request·hold_s). With an offered rate λ: load = λ·per_request·"
                    "hold, utilisation, units needed (pool sizing, in-flight requests), efficiency needed and headroom. "
                    "Limits: mean rates; every request uses every resource; no tail latency or burst margin.",
        request_model=CapacityRequest,
        compute=capacity_compute,
        outputs_model=CapacityOutputs,
        example={"resources": [{"name": "encode", "units": 1, "capacity": 12, "per_request": 4},
                               {"name": "prefill+decode", "units": 3, "capacity": 4, "per_request": 1},
                               {"name": "link", "capacity": 300e6, "per_request": 32768000}],
                 "arrival_rate_per_s": 3},
        cases=("multimodal-stage-placement", "workload-and-provisioning", "host-policy-and-dispatch",
               "remote-ordering-and-completion", "programmable-nic"),
        sweepable=("arrival_rate_per_s", "output_per_request", "units", "capacity", "efficiency", "per_request", "hold_s"),
        chart=Chart(x="arrival_rate_per_s", y=("utilisation",), x_label="offered rate (requests/s)",
                    y_label="bottleneck utilisation"),
        families=("queueing", "edge_transfer"),
    ),
    Calculator(
        name="remaining-time",
        profile=Profile(5e-07, 375, 39),
        family="scheduling",
        title="Expected remaining time given elapsed time",
        summary="From past durations, the expected remaining time of a job that has already run e seconds: "
                "E[S − e | S > e], not E[S] − e.",
        description="Sort the history; keep the samples longer than e; remaining = their mean − e. A heavy tail makes "
                    "a job that has already run long likely to run much longer. Limits: the history must describe "
                    "the same kind of job.",
        request_model=RemainingTimeRequest,
        compute=remaining_compute,
        outputs_model=RemainingTimeOutputs,
        example={"history_s": [1, 1, 1, 1, 1, 1, 1, 1, 1, 100], "elapsed_s": 10},
        cases=("reward-deadlines-and-feedback",),
        sweepable=("elapsed_s",),
        chart=Chart(x="elapsed_s", y=("conditional_remaining_s", "naive_remaining_s"), x_label="elapsed (s)",
                    y_label="expected remaining (s)"),
    ),
]
