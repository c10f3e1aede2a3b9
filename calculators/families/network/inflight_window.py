"""`inflight-window`: Little's law for request/response links: the requests that must be in flight for a target
bandwidth, and the bandwidth a window (or a serial service point) and the line rate allow.
"""
from __future__ import annotations


import numpy as np
from typing import Literal

from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_rate, fmt_s, LIST_SEP, Lookup,
    NonNegFloatSweep, num, out, Outputs, OutSweep, PosFloatSweep, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf


class InflightRequest(CalcRequest):
    request_bytes: PosFloatSweep = Field(description="Bytes carried by one request (m), e.g. a 256 B read. Sweepable.", examples=[256])
    completion_s: PosFloatSweep = Field(description="Time from issue to completion of one request (T), seconds. Sweepable.", examples=[2e-6])
    target_bytes_per_s: PosFloatSweep | None = Field(None, description="Bandwidth to reach; gives the in-flight requests needed. Sweepable.",
                                                      examples=[40e9])
    window: PosIntSweep | None = Field(None, description="Requests allowed in flight (tags, credits, queue slots). Sweepable.", examples=[128])
    link_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Line rate of the link, bytes/s. Sweepable.", examples=[40e9])
    service_s: PosFloatSweep | None = Field(None, description="Initiation interval τ of a strictly serial point every request passes, seconds. Sweepable.")
    transfer_bytes: NonNegFloatSweep | None = Field(None, description="Bytes to move at the resulting bound (gives a time). Sweepable.")


#: a number, or one per point when an input is swept (null where not finite)
#: which bound is the smallest at each point
InflightLimiter = Literal["link", "window", "serial"]


class InflightWindowOutputs(Outputs):
    """Outputs of inflight-window (Little's law); lists where an input is swept. The requirement needs
    target_bytes_per_s; the bound needs a window, a line rate or a serial service time."""

    required_inflight_exact: OutSweep = Field(None, description="target × completion time / request bytes, "
                                                 "requests (fractional).")
    required_inflight: int | float | None | list[int | float | None] = Field(
        None, description="Requests that must be in flight, the exact figure rounded up (a whole count; a float past "
                          "2^62).")
    bytes_in_flight: OutSweep = Field(None, description="target × completion time, B.")
    window_bound_bytes_per_s: OutSweep = Field(None, description="window × request bytes / completion time, B/s "
                                                  "(with window).")
    serial_bound_bytes_per_s: OutSweep = Field(None, description="request bytes / service time, B/s (with "
                                                  "service_s).")
    bound_bytes_per_s: OutSweep = Field(None, description="Achievable bandwidth, the smallest of the line rate, "
                                           "window and serial bounds, B/s.")
    requests_per_s: OutSweep = Field(None, description="bound / request bytes, requests/s.")
    limiter: InflightLimiter | list[InflightLimiter] | None = Field(None, description="Which bound is the smallest.")
    meets_target: bool | list[bool] | None = Field(None, description="The bound reaches target_bytes_per_s (with a "
                                                   "target).")
    transfer_time_s: OutSweep = Field(None, description="transfer_bytes / bound, s (with transfer_bytes).")


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute_inflight(req: InflightRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    named = {"request_bytes": req.request_bytes, "completion_s": req.completion_s}
    for k in ("target_bytes_per_s", "window", "link_bandwidth_bytes_per_s", "service_s", "transfer_bytes"):
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
    if "link_bandwidth_bytes_per_s" in x:
        bounds["link"] = x["link_bandwidth_bytes_per_s"]
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
                 LIST_SEP.join(fmt_rate(first(bounds[k])) for k in names), bound, "B/s")
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
        raise CalcInputError("target_bytes_per_s", "give target_bytes_per_s, window, link_bandwidth_bytes_per_s or service_s")
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
    n = hf.n_points(req.request_bytes, req.completion_s, req.target_bytes_per_s, req.window, req.link_bandwidth_bytes_per_s,
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
        name="inflight-window",
        profile=Profile(6.5e-07, 699, 110),
        family="network",
        families=("queueing", "roofline"),
        title="In-flight requests and window bound (Little's law)",
        summary="Requests that must be in flight to reach a bandwidth, and the bandwidth a window, a serial service point "
                "and the line rate allow for requests of m bytes completing in T.",
        description="N = ⌈B·T/m⌉; B_window = W·m/T; B_serial = m/τ; achievable = min(line rate, window, serial). "
                    "Steady state only; extra concurrency can raise T through queueing.",
        request_model=InflightRequest,
        compute=compute_inflight,
        outputs_model=InflightWindowOutputs,
        example={"request_bytes": 256, "completion_s": 2e-6, "target_bytes_per_s": 40e9, "window": 128, "link_bandwidth_bytes_per_s": 40e9},
        cases=("collective-paths-and-diagnosis", "remote-ordering-and-completion", "memory-bandwidth-and-concurrency"),
        sweepable=("request_bytes", "completion_s", "target_bytes_per_s", "window", "link_bandwidth_bytes_per_s", "service_s", "transfer_bytes"),
        chart=Chart(x="window", y=("bound_bytes_per_s",), x_label="requests in flight", y_label="bytes/s"),
    ),
]
