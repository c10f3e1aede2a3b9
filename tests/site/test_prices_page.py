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


def _row(html: str, ident: str) -> str:
    row = re.search(rf'<tr id="{re.escape(ident)}".*?</tr>', html, re.S)
    assert row, ident
    return row.group(0)


def test_the_page_marks_stale_prices_and_each_devices_default(client, catalog):
    """The suite's reference date (tests/conftest.py PRICE_AS_OF, 2026-12-03): Nebius's 2025-10-22 H200 price and the
    2024 AWS capacity blocks are stale; h200-sxm's default is Hyperstack's newest on-demand offer."""
    html = client.get("/prices").text
    assert "Ages are counted to 2026-12-03" in html and "<th scope=\"col\">Region</th>" in html
    stale = _row(html, "nebius-h200-1gpu-on-demand-2025-10")
    assert 'data-stale="true"' in stale and '<span class="badge stale">stale</span>' in stale
    assert "2025-10-22" in stale and "(13 mo)" in stale and "<td>not stated by the source</td>" in stale
    aws = _row(html, "aws-p5-48xlarge-capacity-block-us-east-1-2024")
    assert 'data-stale="true"' in aws and "<td>US East (N. Virginia), us-east-1</td>" in aws
    fresh = _row(html, "nebius-hgx-h200-on-demand-2026-10-07")
    assert 'data-stale="false"' in fresh and "badge stale" not in fresh and 'data-default' not in fresh
    default = _row(html, "hyperstack-h200-sxm-on-demand-2026-08-26")
    assert 'data-default="true"' in default and '<span class="badge default">default</span>' in default
    assert html.count('data-default="true"') == len(
        {p["hardware"] for p in catalog.records["price"] if p.get("hardware") and p.get("pricing") == "on-demand"})


def test_the_json_twin_carries_the_same_marks(client):
    items = client.get("/api/v1/prices").json()["items"]
    assert items and all({"age_months", "stale", "default_for_device", "as_of"} <= set(p) for p in items)
    by_id = {p["id"]: p for p in items}
    assert by_id["nebius-h200-1gpu-on-demand-2025-10"]["stale"] is True
    assert by_id["nebius-h200-1gpu-on-demand-2025-10"]["age_months"] == 13
    assert by_id["hyperstack-h200-sxm-on-demand-2026-08-26"]["default_for_device"] is True
    defaults: dict[str, list[str]] = {}
    for p in items:
        if p["default_for_device"]:
            assert p["pricing"] == "on-demand" and not p["stale"], p["id"]
            defaults.setdefault(p["hardware"], []).append(p["id"])
    assert all(len(v) == 1 for v in defaults.values()) and "a100-40gb-sxm" not in defaults   # only a 2024 reserved price
    one = client.get("/api/v1/prices/nebius-h200-1gpu-on-demand-2025-10").json()
    assert one["stale"] is True and one["default_for_device"] is False
    assert client.get("/api/v1/prices/no-such-price").status_code == 404
