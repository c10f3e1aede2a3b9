"""The calibration report as JSON: measured step estimates against their peak-rate bounds over a fixed grid, and
the leave-one-out error of the interpolation on the measured points (computed by `knowledge.calibration`)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from api.deps import get_store
from api.responses import FastJSONResponse
from knowledge.calibration import calibration_report
from knowledge.store import Store

router = APIRouter(tags=["measurements"])


class CalibrationStats(BaseModel):
    n: int
    median: float | None = None
    p90: float | None = Field(None, description="90th percentile.")
    min: float | None = None
    max: float | None = None


class CalibrationConfiguration(BaseModel):
    id: str
    system: str = Field(description="Measured system (h100_sxm …).")
    hardware: str = Field(description="Hardware record whose datasheet figures give the bound.")
    model: str
    kind: str = Field(description="dense or moe.")
    phase: str = Field(description="decode or prefill.")
    batch: int
    context_tokens: int = Field(description="decode: tokens cached per sequence before the step; prefill: prompt tokens.")
    tp: int
    weights_per_rank_bytes: float
    kv_per_rank_bytes: float
    usable_bytes: float = Field(description="Usable memory per device under the memory rule.")
    need_bytes: float
    bound_s: float = Field(description="Σ per-op peak-rate bounds (no communication).")
    measured_s: float = Field(description="Σ measured kernel times without the all-reduces.")
    allreduce_s: float
    total_s: float = Field(description="measured_s + allreduce_s.")
    ratio: float = Field(description="measured_s / bound_s.")
    extrapolated_fraction: float
    framework: str
    version: str
    roofline_s: float | None = Field(None, description="The roofline calculator's step time with devices = tp.")
    roofline_comparable: bool
    bound_over_roofline: float | None = None


class CalibrationSkipped(BaseModel):
    id: str
    system: str
    hardware: str
    model: str
    kind: str
    phase: str
    batch: int
    context_tokens: int
    tp: int
    weights_per_rank_bytes: float
    kv_per_rank_bytes: float
    usable_bytes: float
    need_bytes: float
    reason: str


class CalibrationReport(BaseModel):
    method: dict[str, str]
    not_modelled: list[str]
    grid: dict[str, Any]
    counts: dict[str, Any]
    summary: dict[str, Any] = Field(description="ratio (overall, by_system, by_kind, by_phase, by_model), "
                                                "extrapolated_fraction, roofline_cross_check: each n, median, p90, min, max.")
    leave_one_out: dict[str, Any] = Field(description="per_system → table, by_table, overall: n, median, p90, min, "
                                                      "max, points, errors.")
    configurations: list[CalibrationConfiguration]
    skipped: list[CalibrationSkipped]
    unusable_systems: list[dict[str, str]]
    provenance: dict[str, dict[str, str]]
    measured_source: dict[str, str]
    sources: list[str]
    cache_key: str = Field(description="sha256 of the grid, the measured tables' sha256s and the records used.")


@router.get("/calibration", response_model=CalibrationReport, summary="Calibration of the measured step estimate",
            description="Over a fixed grid (dense and MoE models, batch 1–256, context 1k–32k, TP 1–8, four systems) "
                        "each configuration's peak-rate bound, the measured estimate (vLLM kernels from NVIDIA "
                        "AIConfigurator's tables summed per op, no overlap), their ratio, the share of extrapolated "
                        "lookups and the roofline calculator's time; configurations that do not fit in memory are "
                        "listed with the reason. Plus the leave-one-out error of the interpolation on the measured "
                        "points of each table. Computed on the first request and cached per data version.")
def get_calibration(store: Store = Depends(get_store)) -> FastJSONResponse:
    return FastJSONResponse(calibration_report(store.lookup))
