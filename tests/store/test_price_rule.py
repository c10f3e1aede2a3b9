"""The default-price rule (issue #26 item 4): per provider the newest on-demand offer, offers over 12 months before
the reference date dropped, the lowest of the rest; every price has a region and an ISO date. Tests pass their own
reference date."""
from __future__ import annotations

import datetime as dt

import pytest

from calculators.domain import (
    PRICE_AS_OF_ENV, choose_device_price, months_old, price_as_of, price_date, stale_cutoff, stored_device_price,
)
from calculators.framework import Result
from knowledge import records as R
from tests.store.test_build import make_data, problems_of

AS_OF = dt.date(2026, 12, 1)


def offer(provider: str, usd: float, date: str, pricing: str = "on-demand", region: str = "not stated by the source",
          ident: str | None = None) -> dict:
    return {"id": ident or f"{provider}-{usd}-{date}-{pricing}".lower(), "provider": provider, "date": date,
            "pricing": pricing, "region": region, "hardware": "gpu-x",
            "device_usd_per_hour": {"value": usd, "source": "src-a", "locator": "row"}}


def value(choice) -> float | None:
    return choice.best["device_usd_per_hour"]["value"] if choice.best else None


def test_each_provider_counts_with_its_newest_offer_only():
    offers = [offer("A", 1.00, "2026-03-01"), offer("A", 3.00, "2026-10-01"), offer("B", 2.50, "2026-09-01")]
    choice = choose_device_price(offers, AS_OF)
    assert value(choice) == 2.50            # A's older $1.00 is superseded by A's newer $3.00
    assert sorted(o["device_usd_per_hour"]["value"] for o in choice.current) == [2.50, 3.00]
    only_a = choose_device_price(offers[:2], AS_OF)
    assert value(only_a) == 3.00            # newest, not lowest, within one provider
    same_day = choose_device_price([offer("A", 3.00, "2026-10-01"), offer("A", 2.00, "2026-10-01")], AS_OF)
    assert value(same_day) == 2.00 and len(same_day.current) == 1


def test_offers_older_than_12_months_are_dropped():
    assert stale_cutoff(AS_OF) == dt.date(2025, 12, 1)
    assert stale_cutoff(dt.date(2028, 2, 29)) == dt.date(2027, 2, 28)
    edge = [offer("A", 1.00, "2025-12-01"), offer("B", 0.50, "2025-11-30"), offer("C", 4.00, "2026-11-01")]
    choice = choose_device_price(edge, AS_OF)
    assert value(choice) == 1.00            # exactly 12 months old is still current; a day more is stale
    assert [o["provider"] for o in choice.stale] == ["B"]
    assert "1 stale provider offer dropped" in choice.basis()
    # a month or a year without a day counts from its first day, the oldest it can be
    assert price_date("2025-12") == dt.date(2025, 12, 1) and price_date("2024") == dt.date(2024, 1, 1)
    assert value(choose_device_price([offer("A", 1.0, "2025-11"), offer("B", 2.0, "2026-01")], AS_OF)) == 2.0


def test_the_lowest_of_the_providers_current_offers_is_the_default_and_the_basis_says_so():
    offers = [offer("A", 4.00, "2026-10-01"), offer("B", 3.20, "2026-08-15", region="us-east-1"),
              offer("C", 6.00, "2026-09-01"), offer("D", 1.00, "2026-09-01", pricing="spot"),
              offer("E", 0.90, "2026-09-01", pricing="reserved")]
    choice = choose_device_price(offers, AS_OF)
    assert value(choice) == 3.20            # spot and reserved are never a default
    basis = choice.basis()
    for part in ("B on-demand", "region us-east-1", "dated 2026-08-15", "3 months before 2026-12-01",
                 "2 other current offers", "$4.00–$6.00"):
        assert part in basis, (part, basis)


def test_no_current_offer_is_none_with_the_reason():
    old = [offer("A", 3.50, "2025-10-22"), offer("B", 2.00, "2024-05-01")]
    choice = choose_device_price(old, AS_OF)
    assert choice.best is None
    assert choice.why == ("the newest stored price, $3.50 from A dated 2025-10-22, is older than 12 months "
                          "(13 months before 2026-12-01): give price_per_device_hour_usd")
    assert "only reserved, spot offers" in choose_device_price(
        [offer("A", 1.0, "2026-11-01", "reserved"), offer("B", 1.0, "2026-11-01", "spot")], AS_OF).why
    assert choose_device_price([], AS_OF).why == "no stored price: give price_per_device_hour_usd"
    future = choose_device_price([offer("A", 1.0, "2027-01-05")], AS_OF)
    assert future.best is None and "dated after the reference date 2026-12-01" in future.why


def test_stored_device_price_cites_the_default_and_explains_none():
    offers = [offer("A", 3.0, "2026-10-01", ident="a-new"), offer("A", 1.0, "2025-06-01", ident="a-old")]
    lookup = lambda kind, ident: offers if (kind, ident) == ("gpu_prices", "gpu-x") else []   # noqa: E731
    res = Result({}, {})
    usd, basis = stored_device_price(lookup, "gpu-x", res, as_of=AS_OF)
    assert usd == 3.0 and "dated 2026-10-01" in basis and res.sources[0]["record"] == "a-new"
    res = Result({}, {})
    usd, why = stored_device_price(lookup, "gpu-x", res, as_of=dt.date(2027, 11, 1))
    assert usd is None and "is older than 12 months" in why and res.sources == []


def test_the_reference_date_is_the_setting_else_today(monkeypatch):
    monkeypatch.setenv(PRICE_AS_OF_ENV, "2027-03-04")
    assert price_as_of() == dt.date(2027, 3, 4)
    assert price_as_of(AS_OF) == AS_OF and price_as_of("2026-01-02") == dt.date(2026, 1, 2)
    monkeypatch.setenv(PRICE_AS_OF_ENV, "2027-03")
    with pytest.raises(ValueError, match=PRICE_AS_OF_ENV):
        price_as_of()
    monkeypatch.delenv(PRICE_AS_OF_ENV)
    before = dt.date.today()
    assert price_as_of() in (before, dt.date.today())
    assert months_old(dt.date(2026, 1, 31), dt.date(2026, 2, 28)) == 0
    assert months_old(dt.date(2026, 1, 15), dt.date(2026, 12, 15)) == 11


# --------------------------------------------------------------------------- the real store

def test_h200_defaults_to_the_newest_offers_not_nebius_2025_price(lookup):
    """The fact check: h200-sxm's default was $3.50, Nebius's October 2025 price, although the store holds Nebius's
    newer $4.50 (2026-10-07). By the rule, Nebius counts with $4.50 and the default is the lowest provider's newest."""
    offers = lookup("gpu_prices", "h200-sxm")
    on_demand = [o for o in offers if o["pricing"] == "on-demand"]
    old_rule = min(on_demand, key=lambda o: o["device_usd_per_hour"]["value"])
    assert (old_rule["provider"], old_rule["date"], old_rule["device_usd_per_hour"]["value"]) == ("Nebius", "2025-10-22", 3.5)
    choice = choose_device_price(offers, dt.date(2026, 12, 3))
    nebius = [o for o in choice.current if o["provider"] == "Nebius"]
    assert [o["device_usd_per_hour"]["value"] for o in nebius] == [4.5]
    assert value(choice) == 3.99 and choice.best["id"] == "hyperstack-h200-sxm-on-demand-2026-08-26"
    assert value(choice) == min(o["device_usd_per_hour"]["value"] for o in choice.current)
    assert all(o["id"] != old_rule["id"] for o in choice.current + choice.stale)
    # before the 2026 offers were read, the October 2025 price was the only one and current
    assert value(choose_device_price(offers, dt.date(2026, 8, 1))) == 3.5
    # a year after the newest offer, none is current
    late = choose_device_price(offers, dt.date(2027, 10, 8))
    assert late.best is None and "$4.50 from Nebius dated 2026-10-07, is older than 12 months" in late.why


def test_every_stored_price_has_a_region_and_an_iso_date(catalog):
    prices = catalog.records["price"]
    assert len(prices) >= 52
    for p in prices:
        assert p.get("region"), p["id"]
        assert price_date(p.get("date")) is not None, (p["id"], p.get("date"))


TOKEN = """
- id: tok-1
  name: X model API
  provider: X
  date: "2026-09-07"
  region: not stated by the source
  input_usd_per_mtok: {value: 1.0, source: src-a, locator: "Table 1", as_published: "$1"}
"""


@pytest.mark.parametrize("text, expected", [
    (TOKEN.replace("  region: not stated by the source\n", ""), "prices.yaml: tok-1: region: every price needs the region"),
    (TOKEN.replace('  date: "2026-09-07"\n', ""), "prices.yaml: tok-1: date: every price needs its date"),
    (TOKEN.replace('"2026-09-07"', '"Sept 2026"'), "prices.yaml: tok-1: date: 'Sept 2026' is not an ISO date"),
])
def test_the_build_refuses_a_price_without_region_or_iso_date(tmp_path, text, expected):
    assert problems_of(make_data(tmp_path, **{"prices.yaml": TOKEN})) == []
    problems = problems_of(make_data(tmp_path / "bad", **{"prices.yaml": text}))
    assert any(p.startswith(expected) for p in problems), problems


def test_a_record_model_refuses_a_gpu_price_without_region():
    rec = {**offer("A", 1.0, "2026-10-01"), "name": "A GPU", "hardware": None}
    R.Price.model_validate(rec)
    with pytest.raises(ValueError, match="region"):
        R.Price.model_validate({k: v for k, v in rec.items() if k != "region"})
