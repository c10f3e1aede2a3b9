"""What a calculator is: the record each family module declares in its `CALCULATORS` list.

Kept apart from the registry so that family modules can import it without loading every other
family (the registry imports the families; the families import only this module).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from calculators.framework.limits import Profile, SeriesHook, WorkHook
from calculators.framework.lookup import Lookup
from calculators.framework.result import Result


@dataclass(frozen=True)
class Chart:
    """How the site draws a sweep of this calculator: y output(s) against x input."""

    x: str                      # request field swept along the x axis
    y: tuple[str, ...]          # output keys (lists) drawn as lines / stacked parts
    kind: str = "line"          # line | stacked-bar
    x_label: str = ""
    y_label: str = ""
    marker: str | None = None   # output key holding an x value to mark (e.g. a break-even)
    marker_label: str = ""      # the marker's name (default: the last part of its key)
    # units of the axes: "B" (bytes), "B/s", "bit/s", "s", "USD", "FLOP/s", "" (a count or ratio);
    # None infers them from the field and output names (`…_bytes`, `…_s`, `…_usd` …)
    x_unit: str | None = None
    y_unit: str | None = None
    base: str = "decimal"       # bytes on an axis: decimal (GB = 10⁹ B) or binary (GiB = 2³⁰ B)
    x_scale: str = "auto"       # linear | log | auto (log only for geometric x spanning ≥ 2 decades)
    limit: str | None = None    # output key of a y-value limit (a budget, a capacity): a level line
    limit_label: str = ""       # its name on the chart (default: the key)
    fits: str | None = None     # output key of booleans aligned with x: False points are drawn hollow, "does not fit"


@dataclass(frozen=True)
class Calculator:
    """One calculator: its URL name, request model, compute function, example and the cases behind it."""

    name: str                                   # URL name, e.g. "kv-cache"
    family: str                                 # derivation family it recomputes, e.g. "kv_sizing"
    title: str                                  # short human title
    summary: str                                # one or two sentences: what and why
    request_model: type[BaseModel]
    compute: Callable[[Any, Lookup], Result]
    example: dict                               # a full, valid request body
    cases: tuple[str, ...] = ()                 # slugs of the cases that explain the method
    sweepable: tuple[str, ...] = ()             # request fields that accept a list
    grid: tuple[str, ...] = ()                  # fields that become axes when a request asks for a grid (`grid: true`)
    outputs_model: type[BaseModel] | None = None
    chart: Chart | None = None
    families: tuple[str, ...] = ()              # further derivation families it covers
    description: str = ""                       # longer text for docs and the site (method, limits)
    extra_examples: tuple[dict, ...] = field(default_factory=tuple)
    # what the front ends need to know about this calculator, declared here rather than in tables keyed by name:
    profile: Profile | None = None              # cost of one point-evaluation (CPU s, peak B, answer B), measured by
                                                # benchmarks/bench_limits.py; None: limits.DEFAULT_PROFILE
    series: SeriesHook | None = None            # what it multiplies every point by (candidates, configurations …)
    work: WorkHook | None = None                # work its points do not count (Monte Carlo draws …), priced by limits
    mcp_tool: bool = False                      # offered as an MCP tool of its own (every one is reachable by `calculate`)
    compare: tuple[str, tuple[str, ...]] | None = None   # site sweep previews: one line per value of this request field
    page_section: str | None = None             # a site page section of its own (e.g. "planner")

    @property
    def operation_id(self) -> str:
        return self.name.replace("-", "_")
