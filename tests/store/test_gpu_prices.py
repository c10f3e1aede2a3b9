"""GPU-hour rental prices: enough dated, sourced, located prices for the deployment planner, none of them $0,
and the rules of a GPU-hour price refuse with the record and field named."""
from __future__ import annotations

import pytest

from knowledge import records as R
from knowledge.loader import FILES
from knowledge.records.facts import PRICINGS
from tests.store.test_build import make_data, problems_of

DEVICES = {"h100-sxm", "h200-sxm", "b200-sxm", "a100-80gb-sxm", "mi300x"}


@pytest.fixture(scope="module")
def gpu_prices(catalog):
    rows = [r for r in catalog.records["price"] if isinstance(r, dict) and "device_usd_per_hour" in r]
    return [(r, R.Price.model_validate(r)) for r in rows]


def test_every_prices_file_is_read(catalog):
    assert FILES["price"] == "prices*.yaml"
    files = {catalog.file_of(r) for r in catalog.records["price"]}
    assert {"prices.yaml", "prices-gpu.yaml"} <= files


def test_at_least_15_gpu_hour_prices_from_3_providers(gpu_prices):
    assert len(gpu_prices) >= 15
    assert len({p.provider for _, p in gpu_prices}) >= 3


def test_each_price_is_dated_sourced_located_and_bought_somehow(catalog, gpu_prices):
    sources = catalog.by_id("source")
    for raw, p in gpu_prices:
        assert p.date and p.region and p.pricing in PRICINGS and p.provider, p.id
        for name in ("device_usd_per_hour", "instance_usd_per_hour"):
            fact = getattr(p, name)
            if fact is None:
                continue
            assert fact.source in sources and sources[fact.source].get("url"), (p.id, name)
            assert fact.locator and fact.as_published, (p.id, name)
        if p.pricing in ("reserved", "committed"):
            assert p.commitment, p.id


def test_no_price_is_zero_and_instance_prices_agree(gpu_prices):
    for _, p in gpu_prices:
        assert p.device_usd_per_hour.value > 0, p.id
        if p.instance_usd_per_hour is not None:
            n = p.devices_per_instance
            assert n and p.instance_usd_per_hour.value == pytest.approx(p.device_usd_per_hour.value * n, rel=5e-3), p.id


def test_hardware_references_resolve_and_cover_the_planner_devices(catalog, gpu_prices):
    hardware = catalog.by_id("hardware")
    linked = {p.hardware for _, p in gpu_prices if p.hardware}
    assert linked <= set(hardware)
    assert DEVICES <= linked, DEVICES - linked
    # the L40S has no hardware record: its prices name it instead
    l40s = [p for _, p in gpu_prices if "L40S" in (p.model or "").upper()]
    assert l40s and all(p.hardware is None for p in l40s)


def test_on_demand_and_spot_and_reserved_prices_are_all_present(gpu_prices):
    assert {"on-demand", "spot", "reserved"} <= {p.pricing for _, p in gpu_prices}


GOOD = """
- id: gpu-1
  name: X H100, on-demand
  provider: X
  hardware: gpu-x
  date: "2026-09-20"
  pricing: on-demand
  region: us-east-1
  instance: 8x GPU X
  devices_per_instance: 8
  instance_usd_per_hour: {value: 24.0, source: src-a, locator: "Table 1", as_published: "$24.00 per hour"}
  device_usd_per_hour: {value: 3.0, source: src-a, locator: "Table 1", as_published: "$24.00 per hour"}
"""


def _prices(text: str) -> dict[str, str]:
    """The test data set (source src-a, hardware gpu-x) plus a GPU-price file."""
    return {"prices-gpu.yaml": text}


def test_a_good_gpu_price_builds(tmp_path):
    assert problems_of(make_data(tmp_path, **_prices(GOOD))) == []


@pytest.mark.parametrize("text, expected", [
    (GOOD.replace("value: 3.0", "value: 0").replace("value: 24.0", "value: 0"),
     "prices-gpu.yaml: gpu-1: device_usd_per_hour: a GPU-hour price must be > 0"),
    (GOOD.replace("value: 3.0", "value: 3.5"), "prices-gpu.yaml: gpu-1: device_usd_per_hour: 3.5 x 8 devices = 28.0000"),
    (GOOD.replace("  devices_per_instance: 8\n", ""),
     "prices-gpu.yaml: gpu-1: devices_per_instance: an instance price needs the device count"),
    (GOOD.replace("  region: us-east-1\n", ""), "prices-gpu.yaml: gpu-1: region: every price needs the region"),
    (GOOD.replace('  date: "2026-09-20"\n', ""), "prices-gpu.yaml: gpu-1: date: every price needs its date"),
    (GOOD.replace('date: "2026-09-20"', 'date: "20 Sep 2026"'), "prices-gpu.yaml: gpu-1: date: '20 Sep 2026' is not an ISO date"),
    (GOOD.replace('date: "2026-09-20"', 'date: "2026-09-31"'), "prices-gpu.yaml: gpu-1: date: '2026-09-31' is not an ISO date"),
    (GOOD.replace("  pricing: on-demand\n", ""), "prices-gpu.yaml: gpu-1: pricing: a GPU-hour price needs it"),
    (GOOD.replace("pricing: on-demand", "pricing: cheap"), "prices-gpu.yaml: gpu-1: pricing: must be one of"),
    (GOOD.replace("pricing: on-demand", "pricing: reserved"),
     "prices-gpu.yaml: gpu-1: commitment: a reserved price needs the term bought"),
    (GOOD.replace("hardware: gpu-x", "hardware: gpu-nope"),
     "prices-gpu.yaml: gpu-1: hardware: reference to unknown hardware 'gpu-nope'"),
    (GOOD.replace('{value: 3.0, source: src-a, locator: "Table 1", as_published: "$24.00 per hour"}', "3.0"),
     "prices-gpu.yaml: gpu-1: device_usd_per_hour: fact has no source"),
    (GOOD.replace('  device_usd_per_hour: {value: 3.0, source: src-a, locator: "Table 1", as_published: "$24.00 per hour"}\n', ""),
     "prices-gpu.yaml: gpu-1: device_usd_per_hour: an instance price needs the per-device price it implies"),
])
def test_gpu_price_rules_refuse_with_the_field_named(tmp_path, text, expected):
    problems = problems_of(make_data(tmp_path, **_prices(text)))
    assert any(p.startswith(expected) for p in problems), problems


def test_token_prices_need_no_gpu_fields_but_a_region_and_a_date():
    token = {"id": "t", "name": "T", "date": "2026-09", "region": "not stated by the source",
             "input_usd_per_mtok": {"value": 1.0, "source": "s", "locator": "x"}}
    p = R.Price.model_validate(token)
    assert p.device_usd_per_hour is None and p.pricing is None
    with pytest.raises(ValueError, match="GPU-rental fields need device_usd_per_hour"):
        R.Price.model_validate({**token, "pricing": "on-demand"})
    for missing in ("region", "date"):
        with pytest.raises(ValueError, match=f"every price needs"):
            R.Price.model_validate({k: v for k, v in token.items() if k != missing})
