"""Phone keyboards on the calculator forms (issue #28): a field that takes a unit string ("80 GiB"), a list
("1, 2, 4") or an id needs letters or commas, so its input asks for the full keyboard (`inputmode="text"`); only a
field that takes one plain number asks for the decimal keypad. Checked on the rendered pages of calculators with unit
fields, and over every calculator's form fields."""
from __future__ import annotations

import re

import pytest

from api.site.forms import field_specs
from api.urls import urls
from calculators.framework.registry import REGISTRY

INPUT = re.compile(r'<input id="f-([^"]+)" name="[^"]+" type="text" inputmode="([a-z]+)"')


def _modes(html: str) -> dict[str, str]:
    return dict(INPUT.findall(html))


@pytest.mark.parametrize("name, text, decimal", [
    ("kv-cache", {"memory_budget_bytes", "weight_bytes", "runtime_reserve_bytes", "tokens", "model"},
     {"tp", "memory_utilization"}),
    ("edge-transfer", {"uplink_bits_per_s", "downlink_bits_per_s", "rtt_s"}, {"rounds"}),
])
def test_unit_fields_get_the_full_keyboard_and_plain_numbers_the_keypad(client, name, text, decimal):
    r = client.get(urls.calculator(name))
    assert r.status_code == 200
    modes = _modes(r.text)
    assert modes, "no text inputs found"
    assert {f: modes.get(f) for f in text} == {f: "text" for f in text}
    assert {f: modes.get(f) for f in decimal} == {f: "decimal" for f in decimal}


def test_no_field_that_takes_letters_or_commas_opens_the_keypad():
    checked = 0
    for calc in REGISTRY.values():
        for s in field_specs(calc):
            if s["widget"] != "input":
                continue
            takes_text = bool(set(s["kinds"]) - {"number", "integer"})     # a unit string, a list, an id, an enum
            assert s["numbers_only"] is not takes_text, (calc.name, s["name"], s["kinds"])
            checked += takes_text
    assert checked > 100        # the unit fields of the calculators (99 of them said "decimal" before)
