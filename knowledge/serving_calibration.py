"""Efficiency factors of `serving-estimate`, fitted on the stored published benchmarks (issue #25, item 5), and their
error measured by leaving each source out.

The model. Real engines do not run at the step model's speed: kernels below the measured tables' rates (or far
below the peak rates where no kernels are measured), scheduling gaps, launch overheads. One factor k per
hardware × framework × basis of the step times ("measured" kernels or the peak-rate "bound") multiplies every step
time the estimate uses (decode, prefill, collectives; the floor `bound_tpot_s` is not scaled). Under a closed loop,
offline or a finite run, scaling every step time by k scales TPOT, TTFT and end-to-end latency by k and divides
throughput by k exactly (the batch and the KV slots do not move); under a Poisson load it does not (the rate is
fixed), so those points are estimated again with the factor.

The fit. A point asks for log k = the mean of log(measured TPOT / estimated TPOT) and log(estimated tokens/s per
device / measured), over the figures it publishes; a group's factor is exp of the median over its sources of each
source's median of its points' values (robust to a stray point, and each source one vote: a source's points share one
engine version and one sweep, so the source with the most points would otherwise set the factor that a different
source's runs are estimated with), fitted only where the group has at least MIN_POINTS points from at least
MIN_SOURCES sources (one publisher's runs share one engine version and set-up: a factor of them alone does not carry
to another's). Groups: hardware × framework × basis,
hardware × any framework × basis, then the devices of the hardware's architecture (as its record names it, e.g. CDNA 3
for MI300X and MI325X) × framework and × any framework (the estimate uses the first that exists). TTFT is not fitted on: the
estimate's TTFT errors are dominated by what the step model leaves out (queueing of bursts), not by step speed.

The validation. For each source S, factors are fitted on every other source and S's points are estimated with
them: a point is never estimated with a factor its own source took part in. Those errors are the validation
figures; a point whose hardware no other source measured (on enough points) keeps the uncalibrated estimate, and
its row says so.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from calculators.families.serving._benchmark_points import CALIBRATION, FAMILY, calibration_key, candidate_keys

#: the lookup kind that answers a factor by `calibration_key(hardware, framework, basis)`
KIND = CALIBRATION
#: points a group needs before it gets a factor
MIN_POINTS = 2
#: a factor rests on at least this many sources: one publisher's runs share its engine version and set-up, so a factor
#: fitted on them alone says how fast that publisher's engine was, not how fast another's will be
MIN_SOURCES = 2
#: the bases whose factors are applied (`auto`, the store's lookup, the validation figures). Factors of estimates on
#: measured kernels are fitted and reported but not applied: on the stored points they did not carry over from one
#: source to another (an offline trtllm-bench table asks for faster steps, the closed-loop runs of the same GPUs for
#: none), so leaving each source out made every measured-kernel source worse; the report prints both.
APPLIED = ("bound", "proxy")
#: the figures a factor is fitted on (TTFT is not: see the module docstring)
FITTED = ("tpot_s", "output_tokens_per_s_per_device")
METRICS = ("tpot_s", "output_tokens_per_s_per_device", "ttft_s")
MODEL = ("One factor k per hardware × framework × basis of the step times (measured kernels, a proxy device's "
         "measured kernels, or the peak-rate bound), else per hardware × any framework, else per architecture (all "
         "devices a hardware record names the same architecture, × framework, then any), multiplies every step "
         "time (decode, prefill, collectives; not the floor). Fitted as exp(median over the group's sources of each "
         "source's median log k; each source one vote), a point's log k being the mean of "
         f"log(measured / estimated TPOT) and log(estimated / measured tokens/s per device); only groups of ≥ "
         f"{MIN_POINTS} points from ≥ {MIN_SOURCES} sources get one. Validation: each source's points are estimated with factors fitted on the "
         "other sources only.")


def basis_kind(basis: str | None) -> str:
    """"bound", "proxy" or "measured": what an estimate's step times rest on (its `basis` text)."""
    text = basis or "bound"
    return "bound" if text.startswith("bound") else ("proxy" if text.startswith("proxy") else "measured")


def _ok(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def compared_metrics(load: str | None) -> tuple[str, ...]:
    """The figures a point of this load is compared on: under a Poisson load the tokens/s are the offered rate ×
    the output length (an input of the run, not something the estimate predicts), so only its latencies count."""
    return ("tpot_s", "ttft_s") if load == "poisson" else METRICS


def residual(row: dict) -> float | None:
    """The log k a compared point asks for (None when it has no fitted figure on both sides)."""
    pred, meas = row.get("predicted") or {}, row.get("measured") or {}
    logs = []
    if _ok(pred.get("tpot_s")) and _ok(meas.get("tpot_s")):
        logs.append(math.log(meas["tpot_s"] / pred["tpot_s"]))
    d = "output_tokens_per_s_per_device"
    if d in compared_metrics(row.get("load")) and _ok(pred.get(d)) and _ok(meas.get(d)):
        logs.append(math.log(pred[d] / meas[d]))
    return sum(logs) / len(logs) if logs else None


def _groups(row: dict) -> list[str]:
    return [k for k, _ in candidate_keys(row["hardware"], row["framework"], basis_kind(row.get("basis")),
                                         row.get("hardware_family"))]


def fit(rows: list[dict]) -> dict[str, dict]:
    """The factors of every group with ≥ MIN_POINTS compared points among `rows`, by `calibration_key`."""
    found: dict[str, list[tuple[dict, float]]] = {}
    for r in rows:
        if not r.get("compared") or not r.get("hardware"):
            continue
        v = residual(r)
        if v is None:
            continue
        for key in _groups(r):
            found.setdefault(key, []).append((r, v))
    out = {}
    for key, members in sorted(found.items()):
        by_source: dict[str, list[float]] = {}
        for r, v in members:
            by_source.setdefault(r["source"], []).append(v)
        if len(members) < MIN_POINTS or len(by_source) < MIN_SOURCES:
            continue
        hw, fw, b = key.rsplit("/", 2)
        logs = [v for _, v in members]
        # each source one vote: the median of the sources' own medians, so the source with the most points (one
        # engine version, one sweep) does not set the factor a different source's runs are estimated with
        log_k = statistics.median(statistics.median(vs) for vs in by_source.values())
        out[key] = {"id": key, "hardware": hw, "framework": None if fw == "*" else fw, "basis": b,
                    "factor": math.exp(log_k), "points": len(members),
                    "sources": sorted(by_source),
                    "point_ids": sorted(r["id"] for r, _ in members),
                    "spread": statistics.median(abs(v - log_k) for v in logs)}
    return out


def choose(factors: dict[str, dict], hardware: str, framework: str, basis: str, family: str | None = None) -> dict | None:
    """The factor the estimate uses for this deployment: hardware × framework, else hardware × any framework, else
    its architecture's devices × framework, else with any framework."""
    for key, _ in candidate_keys(hardware, framework, basis, family):
        if key in factors:
            return factors[key]
    return None


def group_of(f: dict) -> str:
    """What a factor's group is, in words."""
    if f["hardware"].startswith(FAMILY):
        return f"{f['hardware'].removeprefix(FAMILY)} devices" + (" × framework" if f["framework"] else "")
    return "hardware × framework" if f["framework"] else "hardware"


def scaled(predicted: dict, k: float) -> dict:
    """An uncalibrated estimate with every step time × k (exact for closed loops, offline and finite runs)."""
    out = dict(predicted)
    for m in ("tpot_s", "ttft_s"):
        if _ok(out.get(m)):
            out[m] = out[m] * k
    d = "output_tokens_per_s_per_device"
    if _ok(out.get(d)):
        out[d] = out[d] / k
    return out


def errors(predicted: dict, measured: dict, load: str | None = None) -> dict:
    return {m: predicted[m] / measured[m] - 1.0 for m in compared_metrics(load)
            if _ok(predicted.get(m)) and _ok(measured.get(m))}


def _why_none(row: dict, train: list[dict], source: str) -> str:
    hw, fw, b = row["hardware"], row["framework"], basis_kind(row.get("basis"))
    same_hw = [r for r in train if r.get("compared") and r["hardware"] == hw and basis_kind(r.get("basis")) == b
               and residual(r) is not None]
    if not same_hw:
        return (f"no factor in this fold: {hw} ({b} step times) is measured by no source but {source}, nor is any "
                "device of its architecture, so its points keep the uncalibrated estimate")
    n_src = len({r["source"] for r in same_hw})
    return (f"no factor in this fold: the other sources have {len(same_hw)} point(s) of {hw} ({b} step times) from "
            f"{n_src} source(s), and a factor needs ≥ {MIN_POINTS} points from ≥ {MIN_SOURCES} sources (nor does "
            "its architecture have them), so its points keep the uncalibrated estimate")


def applied(factors: dict[str, dict], bases: tuple[str, ...] = APPLIED) -> dict[str, dict]:
    """The factors of the bases that are applied."""
    return {k: f for k, f in factors.items() if f["basis"] in bases}


def leave_one_source_out(rows: list[dict], rerun: Callable[[dict, dict], dict | None] | None = None,
                         bases: tuple[str, ...] = APPLIED) -> dict[str, dict]:
    """Per compared row id: its estimate with the factors (of `bases`) fitted on every other source, or uncalibrated,
    saying why. `rerun(row, factor)` estimates a Poisson row again with the factor (its predicted figures; None:
    keep the scaled ones)."""
    compared = [r for r in rows if r.get("compared")]
    out = {}
    for source in sorted({r["source"] for r in compared}):
        train = [r for r in compared if r["source"] != source]
        factors = applied(fit(train), bases)
        for r in (r for r in compared if r["source"] == source):
            b = basis_kind(r.get("basis"))
            f = choose(factors, r["hardware"], r["framework"], b, r.get("hardware_family"))
            entry: dict[str, Any] = {"fold": f"fitted without {source}", "factor": None, "group": None,
                                     "fitted_on": {"points": 0, "sources": []}, "note": None}
            if f is None:
                pred = dict(r["predicted"])
                entry["note"] = (_why_none(r, train, source) if b in bases else
                                 f"not calibrated: factors of {b}-kernel estimates are reported, not applied")
            else:
                pred = scaled(r["predicted"], f["factor"])
                if r.get("load") == "poisson" and rerun is not None:
                    pred = rerun(r, f) or pred
                entry.update(factor=f["factor"], group=group_of(f),
                             fitted_on={"points": f["points"], "sources": f["sources"]})
            entry["predicted"], entry["errors"] = pred, errors(pred, r["measured"], r.get("load"))
            out[r["id"]] = entry
    return out


def _stat(errs: list[float]) -> dict:
    a = [abs(e) for e in errs]
    return {"n": len(a), "median_abs_error": statistics.median(a) if a else None,
            "within_25_percent": sum(e <= 0.25 for e in a) / len(a) if a else None}


def factor_errors(factors: dict[str, dict], loso: dict[str, dict]) -> None:
    """Give each factor its leave-one-source-out error: the errors of its group's points, each estimated without
    its own source (in place)."""
    for f in factors.values():
        entries = [loso[i] for i in f["point_ids"] if i in loso]
        f["leave_one_source_out"] = {m: _stat([e["errors"][m] for e in entries if m in e["errors"]]) for m in FITTED}


#: the issue's targets: (id, what, metric, statistic, comparison, threshold)
TARGETS = (
    ("tpot_median", "median |TPOT error|", "tpot_s", "median_abs_error", "<=", 0.15),
    ("tpot_within", "TPOT within ±25 %", "tpot_s", "within_25_percent", ">=", 0.70),
    ("tokens_median", "median |output tokens/s per device error|", "output_tokens_per_s_per_device",
     "median_abs_error", "<=", 0.20),
)


def targets(uncalibrated: dict, loso: dict) -> list[dict]:
    """The issue's targets over two `overall` tables, with whether each is met (the floor on every point too)."""
    out = []
    for ident, what, metric, stat, cmp, th in TARGETS:
        row: dict[str, Any] = {"id": ident, "what": what, "target": f"{'≤' if cmp == '<=' else '≥'} {th * 100:g} %",
                               "threshold": th}
        for name, table in (("uncalibrated", uncalibrated), ("leave_one_source_out", loso)):
            v = ((table or {}).get(metric) or {}).get(stat)
            row[name] = v
            row[f"met_{name}"] = None if v is None else bool(v <= th if cmp == "<=" else v >= th)
        out.append(row)
    b = (uncalibrated or {}).get("bound_below_measured") or {"n": 0, "holds": 0}
    every = bool(b["n"]) and b["holds"] == b["n"]
    out.append({"id": "bound", "what": "the floor bound_tpot_s at or below the measured TPOT", "target": "every point",
                "threshold": None, "uncalibrated": f"{b['holds']} of {b['n']}", "leave_one_source_out": f"{b['holds']} of {b['n']}",
                "met_uncalibrated": every, "met_leave_one_source_out": every})
    return out


__all__ = ["APPLIED", "FITTED", "applied", "compared_metrics", "group_of", "KIND", "MIN_POINTS", "MIN_SOURCES", "MODEL", "TARGETS", "basis_kind", "choose", "errors", "factor_errors",
           "fit", "leave_one_source_out", "residual", "scaled", "targets"]
