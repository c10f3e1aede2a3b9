"""Unit strings in requests ("80 GiB", "20 Mbit/s", "5 ms") read into the SI number of the field's unit, refused with a
422 naming the field when they are none, and warnings for bare numbers too small for their unit (issue #28, item 3)."""
from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from pathlib import Path

import pytest

from calculators.framework import jsonable, units
from calculators.framework.registry import REGISTRY
from calculators.framework.request import _numbers_only
from calculators.framework.runner import RunError, compute, solve

ROOT = Path(__file__).resolve().parents[2]
KIND = {k.suffix: k for k in units.KINDS}


@pytest.mark.parametrize("text, suffix, si", [
    ("80 GiB", "bytes", 80 * 2**30),
    ("512 MB", "bytes", 512e6),
    ("4 KiB", "bytes", 4096),
    ("3.35 TB/s", "bytes_per_s", 3.35e12),
    ("900 GB/s", "bytes_per_s", 900e9),
    ("80 gigabytes per second", "bytes_per_s", 80e9),
    ("20 Mbit/s", "bytes_per_s", 20e6 / 8),            # bits into a bytes field: divided by 8
    ("20 Mbit/s", "bits_per_s", 20e6),
    ("400 Gbps", "bits_per_s", 400e9),
    ("12.5 GB/s", "bits_per_s", 12.5e9 * 8),
    ("5 ms", "s", 5e-3),
    ("20 µs", "s", 20e-6),
    ("2 h", "s", 7200),
    ("989 TFLOP/s", "flop_per_s", 989e12),
    ("989 TFLOPS", "flop_per_s", 989e12),
    ("6e23 FLOP", "flops", 6e23),
    ("700 W", "w", 700),
    ("1.2 kW", "w", 1200),
    ("80", "bytes", 80),                                # no unit: the number in the field's own unit
])
def test_a_unit_string_is_the_si_number_of_its_field(text, suffix, si):
    value, has_unit = units.read(text, KIND[suffix])
    assert value == si                                  # exact: "3.35 TB/s" is the float 3.35e12, not a rounding of it
    assert has_unit == (text != "80")


@pytest.mark.parametrize("text, suffix, says", [
    ("80 GiB", "s", "an amount of data"),
    ("5 ms", "bytes", "a time"),
    ("989 TFLOPs", "flop_per_s", "a FLOP count"),        # FLOPs (small s) is the count, FLOPS the rate
    ("80 KB", "bytes", "kB is 1,000 bytes, KiB 1,024"),  # ambiguous: refused
    ("100 mb/s", "bits_per_s", "mega is a capital M"),   # millibits
    ("eighty gigs", "bytes", "not a number followed by a unit"),
    ("80 GB each second", "bytes_per_s", "names no unit"),
])
def test_a_string_that_is_no_quantity_of_the_unit_says_what_was_expected(text, suffix, says):
    with pytest.raises(units.UnitError) as err:
        units.read(text, KIND[suffix])
    message = str(err.value)
    assert says in message and KIND[suffix].what in message and KIND[suffix].examples[0] in message


def _same_answer(name: str, body: dict, si: dict, lookup) -> tuple:
    """Compute `body` (with unit strings) and the same request with SI numbers: the inputs echoed and the outputs
    must be the same, the assumptions the same after the lines saying how the strings were read."""
    _, _, res = solve(name, body, lookup)
    _, _, ref = solve(name, {**body, **si}, lookup)
    assert jsonable(res.inputs) == jsonable(ref.inputs)
    assert jsonable(res.outputs) == jsonable(ref.outputs)
    assert res.headline == ref.headline
    read = len(res.assumptions) - len(ref.assumptions)
    assert read >= 1 and res.assumptions[read:] == ref.assumptions
    return res.assumptions[:read]


def test_kv_cache_budget_in_gib_is_the_budget_in_bytes(lookup):
    body = {"model": "qwen3-8b", "tokens": 32768, "memory_budget_bytes": "80 GiB"}
    notes = _same_answer("kv-cache", body, {"memory_budget_bytes": 80 * 2**30}, lookup)
    assert notes == ["memory_budget_bytes: '80 GiB' read as 85,899,345,920 bytes"]


def test_edge_transfer_uplink_in_mbit_per_s_and_times_in_ms(lookup):
    body = {**REGISTRY["edge-transfer"].example, "uplink_bits_per_s": "20 Mbit/s", "rtt_s": "80 ms"}
    notes = _same_answer("edge-transfer", body, {"uplink_bits_per_s": 20e6, "rtt_s": 0.08}, lookup)
    assert "uplink_bits_per_s: '20 Mbit/s' read as 20,000,000 bit/s" in notes
    assert "rtt_s: '80 ms' read as 0.08 s" in notes


def test_roofline_bandwidth_in_tb_per_s(lookup):
    body = {**REGISTRY["roofline"].example, "memory_bandwidth_bytes_per_s": "3.35 TB/s"}
    _same_answer("roofline", body, {"memory_bandwidth_bytes_per_s": 3.35e12}, lookup)


def test_a_sweep_of_unit_strings_and_numbers_mixed(lookup):
    body = {"model": "qwen3-8b", "tokens": 32768, "memory_budget_bytes": ["40 GiB", 60e9, "80 GiB"]}
    notes = _same_answer("kv-cache", body, {"memory_budget_bytes": [40 * 2**30, 60e9, 80 * 2**30]}, lookup)
    assert notes == ["memory_budget_bytes[0]: '40 GiB' read as 42,949,672,960 bytes",
                     "memory_budget_bytes[2]: '80 GiB' read as 85,899,345,920 bytes"]


def test_a_long_sweep_of_unit_strings_notes_the_first_few_and_counts_the_rest(lookup):
    body = {"model": "qwen3-8b", "tokens": 32768, "memory_budget_bytes": [f"{n} GiB" for n in range(10, 60)]}
    _, req, res = compute("kv-cache", body, lookup)
    assert req.memory_budget_bytes == [n * 2**30 for n in range(10, 60)]
    assert res.assumptions[units.NOTED_POINTS] == "memory_budget_bytes: 47 more unit strings read the same way, in bytes"


def test_a_nested_request_reads_its_unit_strings_and_names_the_path(lookup):
    body = {**REGISTRY["edge-transfer"].example, "compression": {"ratio": 4, "codec_s": "30 ms"}}
    notes = _same_answer("edge-transfer", body, {"compression": {"ratio": 4, "codec_s": 0.03}}, lookup)
    assert notes == ["compression.codec_s: '30 ms' read as 0.03 s"]


@pytest.mark.parametrize("name, change, field, says", [
    ("edge-transfer", {"rtt_s": "80 GiB"}, "rtt_s", "a time in seconds"),
    ("kv-cache", {"memory_budget_bytes": "lots"}, "memory_budget_bytes", "a size in bytes"),
    ("kv-cache", {"memory_budget_bytes": ["40 GiB", "80 GHz"]}, "memory_budget_bytes[1]", "a size in bytes"),
    ("edge-transfer", {"compression": {"ratio": 2, "codec_s": "5 MB"}}, "compression.codec_s", "a time in seconds"),
])
def test_a_bad_unit_string_is_a_422_naming_the_field(name, change, field, says, lookup):
    body = {**(REGISTRY[name].example if name == "edge-transfer" else {"model": "qwen3-8b", "tokens": 1024}), **change}
    with pytest.raises(RunError) as err:
        solve(name, body, lookup)
    assert err.value.status == 422
    (error,) = err.value.errors
    assert error.field == field and error.type == "unit_string"
    assert says in error.message and "such as" in error.message


def test_a_unit_string_out_of_the_fields_bounds_is_refused_by_the_bounds(lookup):
    with pytest.raises(RunError) as err:
        solve("edge-transfer", {**REGISTRY["edge-transfer"].example, "rtt_s": "-5 ms"}, lookup)
    assert [e.field for e in err.value.errors] == ["rtt_s"]


def test_fields_without_a_unit_take_no_unit_strings(lookup):
    with pytest.raises(RunError) as err:          # tokens is a count
        solve("kv-cache", {"model": "qwen3-8b", "tokens": "4 KiB"}, lookup)
    assert [e.field for e in err.value.errors] == ["tokens"]


@pytest.mark.parametrize("name, field, value, meant", [
    ("kv-cache", "memory_budget_bytes", 80, 'looks like 80 GB or 80 GiB; memory_budget_bytes is in bytes: write 80e9 '
                                             'or "80 GiB"'),
    ("kv-cache", "memory_budget_bytes", "80", "looks like 80 GB or 80 GiB"),     # a numeric string is a bare number
    ("kv-cache", "memory_budget_bytes", [80e9, 40], "memory_budget_bytes = 40 looks like 40 GB"),
    ("roofline", "memory_bandwidth_bytes_per_s", 3.35, 'looks like 3.35 GB/s; memory_bandwidth_bytes_per_s is in '
                                                       'bytes/s: write 3.35e9 or "3.35 GB/s"'),
    ("roofline", "peak_flop_per_s", 989, 'looks like 989 TFLOP/s; peak_flop_per_s is in FLOP/s: write 989e12'),
    ("edge-transfer", "uplink_bits_per_s", 20, "looks like 20 Gbit/s or 20 Mbit/s"),
])
def test_an_implausible_bare_number_is_answered_with_a_warning_naming_the_likely_unit(name, field, value, meant, lookup):
    body = REGISTRY[name].example if name != "kv-cache" else {"model": "qwen3-8b", "tokens": 1024}
    _, _, res = compute(name, {**body, field: value}, lookup)
    assert res.assumptions[0].startswith(f"Warning: {field} = ") and meant in res.assumptions[0]


@pytest.mark.parametrize("value", [0, 80e9, "80 GiB", [40e9, 80e9]])
def test_plausible_numbers_and_unit_strings_raise_no_warning(value, lookup):
    _, _, res = compute("kv-cache", {"model": "qwen3-8b", "tokens": 1024, "memory_budget_bytes": value}, lookup)
    assert not any(a.startswith("Warning:") for a in res.assumptions)


#: fields where a small number is meant: sizes of one element, value or bank, per-item sizes
SMALL_IS_MEANT = ("element_bytes", "dtype_bytes", "bank_bytes", "item_bytes", "row_bytes", "expert_id_bytes",
                  "*scale_bytes", "slot_bytes", "request_bytes", "*_bytes_per_param*", "*_bytes_per_value",
                  "*_bytes_per_token", "*_bytes_per_group", "*_bytes_per_element")


def _request_fields():
    """(model, key) of every field of every request model of the registry, nested ones included."""
    seen, todo, out = set(), [c.request_model for c in REGISTRY.values()], []
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            out.append((model, info.alias or name))
            todo.extend(units._models_in(info.annotation))
    return out


def test_the_plausibility_table_applies_only_to_unit_fields_where_small_numbers_are_never_meant():
    matched = {}
    for model, key in _request_fields():
        rule = units.plausibility(key)
        if rule is not None:
            matched.setdefault(units.PLAUSIBLE.index(rule), set()).add(key)
            assert units.unit_of(key) is not None and _numbers_only(model, key)[0], (model.__name__, key)
            assert units.unit_of(key).suffix != "s", key                      # a short time is a real time
            assert not any(fnmatch.fnmatchcase(key, p) for p in SMALL_IS_MEANT), key
    assert sorted(matched) == list(range(len(units.PLAUSIBLE)))          # every rule applies somewhere
    assert {"memory_budget_bytes", "runtime_reserve_bytes", "weight_bytes"} <= matched[0]


def test_rates_of_other_things_and_money_take_no_units():
    assert units.unit_of("rtt_s").suffix == "s" and units.unit_of("hbm_bandwidth_bytes_per_s").suffix == "bytes_per_s"
    assert [units.unit_of(n) for n in ("tokens_per_s", "arrival_rate_per_s", "price_per_device_hour_usd", "tokens")] \
        == [None] * 4


def test_pint_is_imported_at_the_first_unit_string_only():
    code = ("import sys\nfrom calculators.framework.runner import compute\n"
            "compute('kv-cache', {'architecture': {'layer_groups': [{'count': 2, 'streams': [{'dim': 256}]}]}, "
            "'tokens': 100, 'memory_budget_bytes': 1e9})\n"
            "before = 'pint' in sys.modules\n"
            "compute('kv-cache', {'architecture': {'layer_groups': [{'count': 2, 'streams': [{'dim': 256}]}]}, "
            "'tokens': 100, 'memory_budget_bytes': '1 GB'})\n"
            "print(before, 'pint' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_over_http_the_answer_echoes_si_and_the_openapi_document_offers_unit_strings(client):
    r = client.post("/api/v1/calculators/kv-cache",
                    json={"model": "qwen3-8b", "tokens": 4096, "memory_budget_bytes": "80 GiB"})
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["inputs"]["memory_budget_bytes"] == 80 * 2**30
    assert env["assumptions"][0] == "memory_budget_bytes: '80 GiB' read as 85,899,345,920 bytes"
    assert "memory_budget_bytes" in env["explanation_url"] and "GiB" not in env["explanation_url"]

    bad = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": 4096,
                                                            "memory_budget_bytes": "80 s"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    assert [(e["field"], e["type"]) for e in bad.json()["errors"]] == [("memory_budget_bytes", "unit_string")]

    doc = client.get("/openapi.json").json()
    comps = doc["components"]["schemas"]
    ref = doc["paths"]["/api/v1/calculators/kv-cache"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    prop = comps[ref["$ref"].rsplit("/", 1)[-1]]["properties"]["memory_budget_bytes"]
    strings = [m for m in prop["anyOf"] if m.get("type") == "string"]
    assert strings and strings[0]["pattern"] == units.PATTERN and "80 GiB" in strings[0]["examples"]
    arrays = [m for m in prop["anyOf"] if m.get("type") == "array"]
    assert {m["type"] for m in arrays[0]["items"]["anyOf"]} == {"number", "string"}
    assert "string with a unit" in prop["description"]
    assert json.dumps(comps).count(json.dumps(units.PATTERN)) > 10      # every unit field, not one

    page = client.get("/calculators/kv-cache", params={"model": "qwen3-8b", "tokens": "4096",
                                                       "memory_budget_bytes": "40 GiB, 80 GiB"})
    assert page.status_code == 200 and "read as 85,899,345,920 bytes" in page.text     # the site's form takes them too
