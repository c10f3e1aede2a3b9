"""The typed answer of `overlap-timeline`: makespan, bounds and per-stage times, buffers and what-ifs."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from calculators.framework import Outputs, OutSweep

#: a number, or one per point when `items` is swept (null where not finite)
#: how the makespan was found
OverlapMethod = Literal["closed form", "item-by-item timeline"]


class OverlapStageOut(Outputs):
    name: str = Field(description="The stage's name.")
    time_per_item_s: OutSweep = Field(description="Mean time of one item at this stage (÷ efficiency), s.")
    busy_s: OutSweep = Field(description="Work of the stage over all items, s.")
    lanes: int | None = Field(description="Items the stage works on at once (null: unlimited).")
    idle_s: OutSweep = Field(description="Makespan minus busy / lanes, s (null with unlimited lanes).")
    utilization: OutSweep = Field(description="busy / (lanes × makespan), a fraction (null with unlimited lanes or "
                                    "a zero makespan).")
    exposed_s: OutSweep = Field(description="How much this stage lengthens the makespan (0 = fully hidden), s.")
    slots: int | None = Field(description="Output buffers of the stage (null: unlimited).")
    slots_needed: OutSweep = Field(description="Buffers after this stage that keep the bottleneck busy (null for a "
                                     "stage nothing reads, or when no stage has a finite period).")


class OverlapWhatIfOut(Outputs):
    label: str = Field(description="Name of the variant.")
    total_s: OutSweep = Field(description="The variant's makespan, s.")
    saved_s: OutSweep = Field(description="Base makespan minus the variant's, s (negative: slower).")
    speedup: OutSweep = Field(description="Base makespan / the variant's (null when the variant takes no time).")
    ratio_to_base: OutSweep = Field(description="The variant's makespan / the base's (null when the base takes no "
                                      "time).")
    serial_s: OutSweep = Field(description="The variant's serial time, s.")
    critical_path_s: OutSweep = Field(description="The variant's critical path, s.")
    bottleneck_work_s: OutSweep = Field(description="The variant's busiest resource, s.")
    lower_bound_s: OutSweep = Field(description="The variant's lower bound, s.")
    throughput_items_per_s: OutSweep = Field(description="Items / the variant's makespan, items/s (null for a zero "
                                               "makespan).")
    exposed_s: dict[str, OutSweep] = Field(description="Exposed time of each stage in the variant, by stage name, s.")
    busy_s: dict[str, OutSweep] = Field(description="Work of each stage in the variant, by stage name, s.")
    first_start_s: dict[str, OutSweep] = Field(description="When the first item starts at each stage, by stage "
                                                 "name, s.")
    staging_bytes: float | None = Field(description="Configured staging memory of the variant, B.")
    staging_bytes_needed: OutSweep = Field(description="Staging memory with the buffers it needs, B.")
    fits_budget: bool | list[bool] | None = Field(None, description="The variant's makespan ≤ budget_s (with budget_s).")
    budget_margin_s: OutSweep = Field(None, description="budget_s − the variant's makespan, s (with budget_s).")


class OverlapTimelineOutputs(Outputs):
    """Outputs of overlap-timeline; lists where `items` is swept. Maps are keyed by stage (or resource) name."""

    items: int | list[int] = Field(description="Items through the stages.")
    mode: Literal["pipelined", "serial"] = Field(description="How the stages were run.")
    total_s: OutSweep = Field(description="Makespan: time until the last item leaves the last stage, s.")
    serial_s: OutSweep = Field(description="Time with one thing at a time, s.")
    speedup_vs_serial: OutSweep = Field(description="serial_s / total_s (1 for a zero makespan).")
    throughput_items_per_s: OutSweep = Field(description="items / total_s, items/s (null for a zero makespan).")
    critical_path_s: OutSweep = Field(description="Longest dependency chain of one item, s.")
    bottleneck_work_s: OutSweep = Field(description="Work of the busiest stage or shared resource ÷ its lanes, s.")
    lower_bound_s: OutSweep = Field(description="max(critical path, busiest resource): the ideal with full overlap, s.")
    gap_to_lower_bound_s: OutSweep = Field(description="total_s − lower_bound_s, s.")
    bottleneck_stage: str = Field(description="Stage with the most work per lane (at the first point).")
    resources: dict[str, OutSweep] = Field(description="Work of each named shared resource (its stages added up), s.")
    stages: list[OverlapStageOut] = Field(description="Per stage, in request order.")
    exposed_s: dict[str, OutSweep] = Field(description="How much each stage lengthens the makespan, by stage name, s.")
    first_start_s: dict[str, OutSweep] = Field(description="When the first item starts at each stage, by stage "
                                                 "name, s.")
    staging_bytes: float | None = Field(description="Memory of the configured buffer slots plus scratch, B.")
    staging_bytes_needed: OutSweep = Field(description="Memory of the buffers needed to keep the bottleneck busy, "
                                             "plus scratch, B.")
    method: OverlapMethod = Field(description="How the makespan was found.")
    fits_memory: bool | None = Field(None, description="staging_bytes ≤ memory_budget_bytes (with memory_budget_bytes).")
    fits_memory_with_needed_slots: bool | list[bool] | None = Field(
        None, description="staging_bytes_needed ≤ memory_budget_bytes (with memory_budget_bytes).")
    fits_budget: bool | list[bool] | None = Field(None, description="total_s ≤ budget_s (with budget_s).")
    budget_margin_s: OutSweep = Field(None, description="budget_s − total_s, s (with budget_s).")
    what_if: list[OverlapWhatIfOut] = Field(description="Variants, in request order.")
