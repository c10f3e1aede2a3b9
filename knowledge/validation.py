"""Serving estimates against published measurements: `serving-estimate` recomputed for every stored benchmark point
(`knowledge/data/benchmarks/`), predicted beside measured, and the error distribution by source, hardware, model
family and framework (issue #25, item 4).

A point is compared when the store can describe its deployment: the model and the accelerator have store records,
the framework is vLLM, SGLang or TensorRT-LLM, the load is a closed loop, a Poisson rate (MLPerf's Server scenario is
one, at its target QPS) or offline, and the mean input and output lengths are published. Every other point is listed
with the reason it is not compared, so the coverage of the validation is as visible as its error.

How a point becomes a request is `calculators.families.serving._benchmark_points.request_of` (the rules are in its
docstring; each rule a row meets is listed in its `mapping`).

Errors are predicted / measured − 1: positive means the estimate is slower (TPOT) or faster (tokens/s) than the
measurement. Nothing is fitted here: these are the errors of the uncalibrated estimate.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from calculators.families.serving._benchmark_points import FRAMEWORKS, measured_figures, request_of
from calculators.framework import CalcInputError, Lookup, runner
from calculators.framework.limits import Overrun

#: the share of points within this error that the issue's target counts
WITHIN = 0.25


@dataclass
class Row:
    """One benchmark point: its request, or why there is none, and the predicted and measured figures."""

    id: str
    source: str
    model: str | None
    hardware: str | None
    framework: str
    load: str
    compared: bool
    reason: str | None = None
    mapping: list[str] = field(default_factory=list)
    request: dict | None = None
    measured: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    basis: str | None = None
    bound_below_measured: bool | None = None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _err(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None or not (meas > 0) or not math.isfinite(pred):
        return None
    return pred / meas - 1.0


def validate_point(point: dict, lookup: Lookup) -> Row:
    load = point.get("load") or {}
    base = dict(id=point["id"], source=point.get("source", "?"), model=point.get("model"),
                hardware=point.get("hardware"), framework=point.get("framework", "?"),
                load=next(iter(load), "?"))
    meas = measured_figures(point)
    body, kind, mapping = request_of(point, lookup)
    if body is None:
        return Row(**base, compared=False, reason=kind, measured=meas)
    try:
        _, _, res = runner.compute("serving-estimate", body, lookup)
    except (CalcInputError, runner.RunError) as exc:
        detail = getattr(exc, "detail", None) or str(exc)
        return Row(**base, compared=False, reason=f"the estimate refuses it: {detail}", request=body, mapping=mapping,
                   measured=meas)
    except Overrun as exc:      # the CPU guard: this point is listed, the report goes on
        return Row(**base, compared=False, reason=f"the estimate ran past the CPU guard ({exc.limit_s:g} s)",
                   request=body, mapping=mapping, measured=meas)
    o = res.outputs
    pred = {"tpot_s": o["tpot_s"]["mean"], "ttft_s": o["ttft_s"]["mean"],
            "output_tokens_per_s_per_device": o["output_tokens_per_s_per_device"]}
    errors = {k: _err(pred[k], meas[k]) for k in pred}
    bound = o.get("bound_tpot_s")
    below = None if (bound is None or meas["tpot_s"] is None) else bool(bound <= meas["tpot_s"])
    base["load"] = kind
    return Row(**base, compared=True, mapping=mapping, request=body, measured=meas, predicted=pred,
               errors={k: v for k, v in errors.items() if v is not None}, basis=o["basis"], bound_below_measured=below)


def points(lookup: Lookup) -> list[dict]:
    try:
        ids = lookup("ids", "benchmark")
    except KeyError:
        return []
    return [lookup("benchmark", i) for i in sorted(ids)]


def summary(rows: list[Row], key: Callable[[Row], str] | None = None) -> dict[str, dict]:
    """Per group: compared points, median |error| and the share within ±25 % of TPOT, tokens/s per device, TTFT."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.compared:
            groups.setdefault(key(r) if key else "all", []).append(r)
    out = {}
    for g, rs in sorted(groups.items()):
        entry: dict[str, Any] = {"points": len(rs)}
        for metric in ("tpot_s", "output_tokens_per_s_per_device", "ttft_s"):
            errs = [abs(r.errors[metric]) for r in rs if metric in r.errors]
            entry[metric] = {"n": len(errs), "median_abs_error": statistics.median(errs) if errs else None,
                             "within_25_percent": (sum(e <= WITHIN for e in errs) / len(errs)) if errs else None}
        checked = [r.bound_below_measured for r in rs if r.bound_below_measured is not None]
        entry["bound_below_measured"] = {"n": len(checked), "holds": sum(checked)}
        out[g] = entry
    return out


def family_of(r: Row) -> str:
    m = (r.model or "").lower()
    for fam in ("llama", "deepseek", "qwen", "gpt-oss", "mixtral", "gemma", "kimi", "glm"):
        if m.startswith(fam):
            return fam
    return m.split("-")[0] or "?"


def report(lookup: Lookup) -> dict:
    """Every point's row and the error tables by source, hardware, model family and framework."""
    rows = [validate_point(p, lookup) for p in points(lookup)]
    return {
        "points": len(rows),
        "compared": sum(r.compared for r in rows),
        "overall": summary(rows).get("all", {"points": 0}),
        "by_source": summary(rows, lambda r: r.source),
        "by_hardware": summary(rows, lambda r: r.hardware or "?"),
        "by_model_family": summary(rows, family_of),
        "by_framework": summary(rows, lambda r: r.framework),
        "by_load": summary(rows, lambda r: r.load),
        "not_compared": {r.id: r.reason for r in rows if not r.compared},
        "rows": [r.as_dict() for r in rows],
    }


__all__ = ["FRAMEWORKS", "Row", "family_of", "points", "report", "request_of", "summary", "validate_point"]
