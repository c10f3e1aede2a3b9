"""Compatibility name for the site's charts, which now live in `api.site.charts` (data and extraction)
and `api.site.chart_layout` (geometry). Import from there in new code."""
from __future__ import annotations

from api.site.chart_layout import (
                             MAX_BARS,
                             MAX_POINTS,
                             compact,
                             layout,
                             table_rows,
                             ticks,
)
from api.site.charts import (
                             MISSING,
                             ChartData,
                             Series,
                             XField,
                             derived_bodies,
                             element_label,
                             extract,
                             extract_variants,
                             fan_out,
                             get_path,
                             is_sweep,
                             locate_x,
                             short_key,
                             sweep_values,
                             sweep_xs,
)

__all__ = ["MAX_BARS", "MAX_POINTS", "MISSING", "ChartData", "Series", "XField", "compact", "derived_bodies",
           "element_label", "extract", "extract_variants", "fan_out", "get_path", "is_sweep", "layout", "locate_x",
           "short_key", "sweep_values", "sweep_xs", "table_rows", "ticks"]
