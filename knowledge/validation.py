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
measurement. Each row is first the uncalibrated estimate (`calibration: "none"`); then, beside it, the estimate with
efficiency factors fitted on every other source (`knowledge.serving_calibration`): the leave-one-source-out figures,
which are the validation's figures for the calibrated estimate. The factors fitted on all sources are what a store
answers `serving-estimate` (lookup kind "serving_calibration").

The report is computed once per store content and code and persisted beside the store (`<db>.validation/<key>.json`,
`cached_report`): the site, the API, `casebook validate` and the store's calibration factors all read that copy.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import statistics
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
import orjson

from calculators.families.serving._benchmark_points import FRAMEWORKS, hardware_family, measured_figures, request_of
from calculators.framework import CalcInputError, Lookup, limits, runner
from calculators.framework.limits import Overrun
from knowledge import serving_calibration as SC

log = logging.getLogger("casebook.validation")

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
    hardware_family: str | None = None
    date: str | None = None             # the run's date as published (YYYY-MM-DD), for the by_run_date table
    reason: str | None = None
    mapping: list[str] = field(default_factory=list)
    request: dict | None = None
    measured: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    basis: str | None = None
    bound_below_measured: bool | None = None
    loso: dict | None = None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _err(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None or not (meas > 0) or not math.isfinite(pred):
        return None
    return pred / meas - 1.0


def estimate(body: dict, lookup: Lookup) -> dict:
    """serving-estimate's outputs for `body`, without the nearest published run (the report compares them all), under
    the same cost check and CPU guard as any calculation."""
    calc = runner.REGISTRY["serving-estimate"]
    req = calc.request_model.model_validate(body)
    limits.check(calc, req)
    with limits.guard(), np.errstate(all="ignore"):
        return calc.compute(req, lookup, nearest=False).outputs


def _figures(o: dict) -> dict:
    return {"tpot_s": o["tpot_s"]["mean"], "ttft_s": o["ttft_s"]["mean"],
            "output_tokens_per_s_per_device": o["output_tokens_per_s_per_device"]}


def validate_point(point: dict, lookup: Lookup) -> Row:
    load = point.get("load") or {}
    base = dict(id=point["id"], source=point.get("source", "?"), model=point.get("model"),
                hardware=point.get("hardware"), framework=point.get("framework", "?"),
                load=next(iter(load), "?"), date=str(point["date"]) if point.get("date") else None,
                hardware_family=hardware_family(lookup, point["hardware"]) if point.get("hardware") else None)
    meas = measured_figures(point)
    body, kind, mapping = request_of(point, lookup)
    if body is None:
        return Row(**base, compared=False, reason=kind, measured=meas)
    body = {**body, "calibration": "none"}
    try:
        o = estimate(body, lookup)
    except (CalcInputError, runner.RunError, ValueError) as exc:
        detail = getattr(exc, "detail", None) or str(exc)
        return Row(**base, compared=False, reason=f"the estimate refuses it: {detail}", request=body, mapping=mapping,
                   measured=meas)
    except Overrun as exc:      # the CPU guard: this point is listed, the report goes on
        return Row(**base, compared=False, reason=f"the estimate ran past the CPU guard ({exc.limit_s:g} s)",
                   request=body, mapping=mapping, measured=meas)
    pred = _figures(o)
    errors = {k: _err(pred[k], meas[k]) for k in SC.compared_metrics(kind)}
    if kind == "poisson" and meas.get("output_tokens_per_s_per_device"):
        mapping.append("tokens/s not compared: at a fixed arrival rate they are the rate × the output length, an "
                       "input of the run")
    if not o.get("stable", True):
        mapping.append("the estimate cannot serve this arrival rate (unstable) although the run did: counted as "
                       "outside every error bound")
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


def summary(rows: list[Row], key: Callable[[Row], str] | None = None, calibrated: bool = False) -> dict[str, dict]:
    """Per group: compared points, median |error| and the share within ±25 % of TPOT, tokens/s per device, TTFT
    (`calibrated`: of the leave-one-source-out estimates; the floor is the same in both)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.compared:
            groups.setdefault(key(r) if key else "all", []).append(r)
    out = {}
    for g, rs in sorted(groups.items()):
        entry: dict[str, Any] = {"points": len(rs)}
        for metric in ("tpot_s", "output_tokens_per_s_per_device", "ttft_s"):
            errs = []
            for r in rs:
                e = ((r.loso or {}).get("errors") or {}) if calibrated else r.errors
                p = ((r.loso or {}).get("predicted") or {}) if calibrated else r.predicted
                if metric in e:
                    errs.append(abs(e[metric]))
                elif (metric in SC.compared_metrics(r.load) and r.measured.get(metric)
                      and (p or {}).get(metric) is None):
                    errs.append(math.inf)     # measured, but the estimate could not serve the run's load
            finite = [x for x in errs if math.isfinite(x)]
            med = statistics.median(errs) if errs else None
            entry[metric] = {"n": len(errs), "median_abs_error": med if med is None or math.isfinite(med) else None,
                             "within_25_percent": (sum(e <= WITHIN for e in errs) / len(errs)) if errs else None,
                             "unserved": len(errs) - len(finite)}
        checked = [r.bound_below_measured for r in rs if r.bound_below_measured is not None]
        entry["bound_below_measured"] = {"n": len(checked), "holds": sum(checked)}
        out[g] = entry
    return out


def run_half_of(r: Row) -> str:
    """The half-year a point was run in ("2025-H2"): the software it ran is that of its date, and the kernel tables
    are of one version, so this table shows how far an estimate drifts from runs of older engines."""
    if not r.date or not r.date[:4].isdigit():
        return "?"
    if len(r.date) < 7 or not r.date[5:7].isdigit():
        return r.date[:4]            # published with its year only
    return f"{r.date[:4]}-H{1 if int(r.date[5:7]) <= 6 else 2}"


def family_of(r: Row) -> str:
    m = (r.model or "").lower()
    for fam in ("llama", "deepseek", "qwen", "gpt-oss", "mixtral", "gemma", "kimi", "glm"):
        if m.startswith(fam):
            return fam
    return m.split("-")[0] or "?"


#: the by_* tables of a report: key -> (label, the row's group)
GROUPS: dict[str, tuple[str, Callable[[Row], str]]] = {
    "by_source": ("source", lambda r: r.source),
    "by_hardware": ("hardware", lambda r: r.hardware or "?"),
    "by_model_family": ("model family", family_of),
    "by_framework": ("framework", lambda r: r.framework),
    "by_load": ("load", lambda r: r.load),
    "by_run_date": ("run date", run_half_of),
}
METRICS = ("tpot_s", "output_tokens_per_s_per_device", "ttft_s")


def _empty_group() -> dict[str, Any]:
    stat = {"n": 0, "median_abs_error": None, "within_25_percent": None, "unserved": 0}
    return {"points": 0, **{m: dict(stat) for m in METRICS}, "bound_below_measured": {"n": 0, "holds": 0}}


def tables(rows: list[Row], calibrated: bool = False) -> dict[str, Any]:
    """`overall` and the by_* tables over `rows` (those not compared count nowhere)."""
    out: dict[str, Any] = {"overall": summary(rows, calibrated=calibrated).get("all") or _empty_group()}
    for name, (_, key) in GROUPS.items():
        out[name] = summary(rows, key, calibrated)
    return out


def calibrated_views(rows: list[Row]) -> dict[str, Any]:
    """The leave-one-source-out tables over `rows` and the issue's targets, uncalibrated beside calibrated."""
    loso = tables(rows, calibrated=True)
    return {"leave_one_source_out": loso,
            "targets": SC.targets(summary(rows).get("all") or _empty_group(), loso["overall"])}


def _rerun(lookup: Lookup) -> Callable[[dict, dict], dict | None]:
    """Estimate a row again with one factor (a Poisson load does not scale with the step times)."""
    def rerun(row: dict, factor: dict) -> dict | None:
        def with_factor(kind: str, ident: str):
            if kind == SC.KIND:
                if ident == factor["id"]:
                    return factor
                raise KeyError(ident)
            return lookup(kind, ident)
        try:
            return _figures(estimate({**row["request"], "calibration": "auto"}, with_factor))
        except (CalcInputError, runner.RunError, ValueError, Overrun):
            return None
    return rerun


def report(lookup: Lookup) -> dict:
    """Every point's row (uncalibrated, and estimated with factors fitted without its own source), the error tables
    by source, hardware, model family, framework and load of both, the issue's targets, and the factors fitted on
    every source with their leave-one-source-out errors."""
    rows = [validate_point(p, lookup) for p in points(lookup)]
    dicts = [r.as_dict() for r in rows]
    loso = SC.leave_one_source_out(dicts, _rerun(lookup))
    for r, d in zip(rows, dicts):
        r.loso = d["loso"] = loso.get(r.id)
    factors = SC.fit(dicts)
    every = SC.leave_one_source_out(dicts, _rerun(lookup), bases=("bound", "measured"))
    SC.factor_errors(factors, every)      # each factor's error as if applied, its group's points out of its fold
    trial = [Row(**{**r.as_dict(), "loso": every.get(r.id)}) for r in rows]
    return {
        "points": len(rows),
        "compared": sum(r.compared for r in rows),
        **tables(rows),
        **calibrated_views(rows),
        "calibration": {"model": SC.MODEL, "min_points": SC.MIN_POINTS, "applied_bases": list(SC.APPLIED),
                        "factors": factors, "applied": sorted(SC.applied(factors)),
                        "if_every_factor_applied": summary(trial, calibrated=True).get("all") or _empty_group()},
        "not_compared": {r.id: r.reason for r in rows if not r.compared},
        "rows": dicts,
    }


# --------------------------------------------------------------------------- the report persisted beside the store

#: layout of the persisted report (bumped when the cached shape changes: an old file is then simply not found)
FORMAT = "v2"
ROOT = Path(__file__).resolve().parents[1]
#: the code whose bytes key the cache: the validation, the calibration and everything `serving-estimate` runs
CODE = ("knowledge/validation.py", "knowledge/serving_calibration.py", "calculators")
_MEMORY: dict[str, bytes] = {}
_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the paths and bytes of the code that computes the report (read once per process)."""
    h = hashlib.sha256(FORMAT.encode())
    for entry in CODE:
        base = ROOT / entry
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(store) -> str:
    """The report's identity: the store's content hash and the code's digest."""
    return hashlib.sha256(f"{store.content_hash}|{code_digest()}".encode()).hexdigest()


def cache_dir(store) -> Path:
    """Where the report of the store at `store.path` is persisted: `<db>.validation/` beside it."""
    return store.path.with_name(store.path.name + ".validation")


def _read_persisted(path: Path) -> bytes | None:
    try:
        raw = path.read_bytes()
        data = orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("rows"), list) and isinstance(data.get("calibration"), dict)
    return raw if ok else None


def _persist(directory: Path, key: str, raw: bytes) -> None:
    """Write the report into `directory` (a temporary file renamed into place) and remove older reports there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, 0o644)        # as readable as the store beside it (mkstemp makes 0600)
        os.replace(tmp, directory / f"{key}.json")
        for old in directory.glob("*.json"):      # (the lock file is no .json)
            if old.name != f"{key}.json":
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("validation report not persisted in %s (%s): it is kept in memory only", directory, exc)


@contextmanager
def _across_processes(directory: Path) -> Iterator[None]:
    """An exclusive lock on `<directory>/.lock` (fcntl), so that workers started together compute the report once;
    no lock (each computes) where the directory cannot be written or fcntl is missing."""
    try:
        import fcntl
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                 # closing releases the lock


def cached_report(store) -> dict:
    """The report of `store` (an open `knowledge.store.Store`), computed at most once per store content and code in
    a process, else read from memory or from its persisted copy beside the store. A fresh dict each call."""
    key = cache_key(store)
    raw = _MEMORY.get(key)
    if raw is None:
        with _LOCK:
            raw = _MEMORY.get(key)
            if raw is None:
                directory = cache_dir(store)
                with _across_processes(directory):      # the other workers wait for one computation, then read it
                    raw = _read_persisted(directory / f"{key}.json")
                    if raw is None:
                        raw = orjson.dumps(report(store.lookup), option=orjson.OPT_SERIALIZE_NUMPY)
                        _persist(directory, key, raw)
                _MEMORY[key] = raw
    data = orjson.loads(raw)
    data["cache_key"] = key
    return data


def clear_cache() -> None:
    """Forget the reports read or computed in this process (their persisted copies stay)."""
    with _LOCK:
        _MEMORY.clear()


def store_factors(store) -> dict[str, dict]:
    """The factors fitted on every stored benchmark of `store`, by `calibration_key` (what its lookup kind
    "serving_calibration" answers). The report is computed (or read) on a thread of its own, so the calculation that
    asked is not charged its CPU time; a failure leaves the estimate uncalibrated ({}), logged."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["factors"] = cached_report(store)["calibration"]["factors"]
        except Exception as exc:       # noqa: BLE001 - no factors rather than a failed calculation
            log.warning("serving calibration factors unavailable (%s: %s): estimates stay uncalibrated",
                        type(exc).__name__, exc)
    t = threading.Thread(target=work, name="casebook-validation", daemon=True)
    t.start()
    t.join()
    return box.get("factors") or {}


__all__ = ["FRAMEWORKS", "GROUPS", "METRICS", "Row", "cache_dir", "cache_key", "cached_report", "calibrated_views",
           "clear_cache", "code_digest", "estimate", "family_of", "points", "run_half_of", "report", "request_of", "store_factors",
           "summary", "tables", "validate_point"]
