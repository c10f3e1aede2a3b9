"""The typed answers of `queueing`, `backlog`, `capacity` and `remaining-time`."""
from __future__ import annotations

from pydantic import Field

from calculators.framework import Outputs, OutSweep, OutCountSweep

#: a number, or one per point when an input is swept; null where it is infinite (an unstable queue, a rate of 0)
#: a whole count, or one per point; null where there is none (past 2^53 it is written as a float)


class QueueingOutputs(Outputs):
    """Outputs of queueing; lists where an input is swept. Null waits mean an unstable queue (ρ ≥ 1)."""

    model: str = Field(description="Kendall notation of the queue, e.g. M/D/1 or M/M/4.")
    utilisation: OutSweep = Field(description="ρ = λ·S / c, a fraction (≥ 1: unstable).")
    stable: bool | list[bool] = Field(description="ρ < 1: the queue does not grow without bound.")
    capacity_per_s: OutSweep = Field(description="Most requests the servers complete, c / S, requests/s.")
    headroom_per_s: OutSweep = Field(description="capacity − λ, requests/s (negative: overloaded).")
    prob_wait: OutSweep = Field(description="Probability an arrival waits (Erlang C; 1 when unstable).")
    wait_s: OutSweep = Field(description="Mean wait in the queue W_q, s (null when unstable).")
    response_s: OutSweep = Field(description="Mean time in the system, W_q + S + extra, s (null when unstable).")
    queue_length: OutSweep = Field(description="Mean requests waiting, λ·W_q (Little's law; null when unstable).")
    in_system: OutSweep = Field(description="Mean requests in the system, λ·T (null when unstable).")
    servers_needed: int | None | list[int | None] = Field(None, description="Fewest servers meeting target_wait_s and/or "
                                       "target_utilization (null when none within the search does).")


class BacklogOutputs(Outputs):
    """Outputs of backlog; lists where an input is swept. Rates and backlogs are in items (items/s)."""

    service_capacity_per_s: OutSweep = Field(description="Service during the period, servers × rate, items/s.")
    excess_rate_per_s: OutSweep = Field(description="λ − μ during the period, items/s (negative: no backlog forms).")
    backlog_items: OutSweep = Field(description="Backlog at the end of the period, max(λ − μ, 0) × duration, items.")
    drain_rate_per_s: OutSweep = Field(description="Net drain rate after the period, μ_after − λ_after, items/s.")
    drain_s: OutSweep = Field(description="Time to drain the backlog after the period, s (null: it never drains).")
    drain_s_no_arrivals: OutSweep = Field(description="Drain time if nothing new arrives, s (null without service).")
    recovery_s: OutSweep = Field(description="duration + drain_s: from the start of the period until the backlog is "
                                 "gone, s (null: never).")
    fill_s: OutSweep = Field(None, description="Time until the buffer fills, s (null: it never fills; with a buffer).")
    buffer_holds_backlog: bool | list[bool] | None = Field(None, description="The backlog fits the buffer (with a "
                                                           "buffer).")
    overflow_items: OutSweep = Field(None, description="Backlog beyond the buffer, items (with a buffer).")
    arrival_bytes_per_s: OutSweep = Field(None, description="Arrivals during the period, B/s (with item_bytes).")
    backlog_bytes: OutSweep = Field(None, description="Backlog at the end of the period, B (with item_bytes).")
    drain_bytes_per_s: OutSweep = Field(None, description="Net drain rate after the period, B/s (with item_bytes).")
    overflow_bytes: OutSweep = Field(None, description="Backlog beyond the buffer, B (with item_bytes and a buffer).")


class CapacityResourceOut(Outputs):
    """One resource's bound; the load fields need `arrival_rate_per_s`. Amounts are in the capacity's unit."""

    name: str = Field(description="The resource's label.")
    total_capacity: OutSweep = Field(description="units × capacity × efficiency, in the capacity's unit (per second "
                                     "for a consumed resource, held for a pool).")
    time_per_request_s: OutSweep = Field(description="Time one request takes on one unit (per_request / usable "
                                         "capacity), or the hold time of a pool, s.")
    max_rate_per_s: OutSweep = Field(description="Requests/s this resource sustains (null: unbounded, when a request "
                                     "uses none of it).")
    load: OutSweep = Field(None, description="Capacity used at the offered rate, λ × per_request (× hold_s).")
    utilisation: OutSweep = Field(None, description="load / total capacity, a fraction (null: infinite).")
    units_needed: OutSweep = Field(None, description="Units that carry the load, fractional.")
    whole_units_needed: OutCountSweep = Field(None, description="units_needed rounded up.")
    efficiency_needed: OutSweep = Field(None, description="Lowest efficiency that carries the load with the units "
                                        "given (> 1: impossible).")
    efficiency_loss_allowed: OutSweep = Field(None, description="1 − efficiency_needed.")
    headroom: OutSweep = Field(None, description="max_rate / λ − 1 (negative: overloaded; null at λ = 0).")


class CapacityOutputs(Outputs):
    """Outputs of capacity; lists where an input is swept."""

    resources: list[CapacityResourceOut] = Field(description="Each resource's bound, in request order.")
    max_rate_per_s: OutSweep = Field(description="Throughput bound, the smallest resource bound, requests/s.")
    interval_s: OutSweep = Field(description="1 / max_rate, s per request (null at a bound of 0).")
    bottleneck: str | list[str] = Field(description="The resource giving the bound (ties: the first listed).")
    utilisation: OutSweep = Field(None, description="λ / max_rate, a fraction (with arrival_rate_per_s).")
    headroom: OutSweep = Field(None, description="max_rate / λ − 1 (with arrival_rate_per_s; null at λ = 0).")
    fits: bool | list[bool] | None = Field(None, description="λ ≤ max_rate (with arrival_rate_per_s).")
    max_output_per_s: OutSweep = Field(None, description="Bound × output_per_request, in output units/s (with "
                                       "output_per_request).")
    time_per_output_s: OutSweep = Field(None, description="1 / max_output_per_s, s per output unit (with "
                                        "output_per_request).")


class RemainingTimeOutputs(Outputs):
    """Outputs of remaining-time; lists where `elapsed_s` is swept."""

    mean_s: float | None = Field(description="Mean past duration E[S], s.")
    naive_remaining_s: OutSweep = Field(description="max(E[S] − elapsed, 0), s.")
    conditional_remaining_s: OutSweep = Field(description="E[S − e | S > e] from the history, s (null when no past "
                                              "job ran longer).")
    survivor_fraction: OutSweep = Field(description="Share of past jobs that ran longer than the elapsed time.")
    survivors: int | list[int] = Field(description="Past jobs that ran longer than the elapsed time.")
