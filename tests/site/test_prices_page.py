"""The prices page shows GPU-hour rental prices as facts, beside the per-token prices."""
from __future__ import annotations

import re


def test_gpu_hour_prices_are_listed_with_their_values(client, catalog):
    html = client.get("/prices").text
    gpu = [p for p in catalog.records["price"] if isinstance(p.get("device_usd_per_hour"), dict)]
    assert len(gpu) >= 15
    section = html
    for p in gpu:
        row = re.search(rf'<tr id="{re.escape(p["id"])}".*?</tr>', section, re.S)
        assert row, p["id"]
        assert f'data-value="{p["device_usd_per_hour"]["value"]:g}"' in row.group(0).replace(".0\"", "\"")
