"""The price rule's marks on listed prices: how old each price is, whether it is stale, and which GPU-hour offer is
its device's default (`calculators.domain.choose_device_price`, the rule the calculators apply), shared by
/prices and /api/v1/prices."""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable

from calculators.domain import choose_device_price, months_old, price_as_of, price_date, stale_cutoff
from knowledge.store import Store


def mark_prices(store: Store, items: Iterable[dict], as_of: dt.date | str | None = None) -> list[dict[str, Any]]:
    """Copies of `items` with `as_of` (the reference date), `age_months` (whole months from the price's date to it),
    `stale` (dated more than 12 months before it) and `default_for_device` (the GPU-hour offer the calculators
    default to for its hardware)."""
    day = price_as_of(as_of)
    cutoff = stale_cutoff(day)
    defaults: dict[str, str | None] = {}
    out = []
    for p in items:
        d = price_date(p.get("date"))
        hw = p.get("hardware")
        default = False
        if hw and isinstance(p.get("device_usd_per_hour"), dict):
            if hw not in defaults:
                best = choose_device_price(store.lookup("gpu_prices", hw), day).best
                defaults[hw] = best.get("id") if best else None
            default = defaults[hw] == p.get("id")
        out.append({**p, "as_of": day.isoformat(), "age_months": months_old(d, day) if d else None,
                    "stale": bool(d and d < cutoff), "default_for_device": default})
    return out
