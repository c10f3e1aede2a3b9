"""Typed hardware and link specs, the memory rule and the formats table, as every calculator reads them."""
from __future__ import annotations

import pytest

from calculators.framework import GIB, CalcInputError
from calculators.domain.formats import FORMATS, resolve_format
from calculators.framework.runner import compute as run
from calculators.framework.runner import solve
from calculators.domain.hardware import DEFAULT_MEMORY_UTILIZATION, hardware_spec, link_spec, usable_memory_bytes
from knowledge.loader import catalog_lookup, default_catalog

CATALOG = default_catalog()
LOOKUP = catalog_lookup(CATALOG)
HARDWARE = {h["id"]: h for h in CATALOG.records["hardware"]}


def total_or_device(rec: dict, name: str) -> float:
    """A record's figure per device, from first principles: totals divide by the device count."""
    fact = rec[name]
    devices = rec.get("devices_in_scope") or 1
    per = fact.get("per") or ("device" if rec.get("scope") == "device" else "total")
    return fact["value"] / devices if per == "total" else fact["value"]


def test_every_record_has_a_scope_and_a_device_count():
    for rec in CATALOG.records["hardware"]:
        spec = hardware_spec(LOOKUP, rec["id"])
        assert spec.scope in ("device", "node", "rack", "pod"), rec["id"]
        assert spec.devices >= 1
        if spec.devices > 1:
            assert not spec.is_device and str(spec.devices) in spec.describe_scope()


def test_a_rack_is_read_as_its_devices():
    rack = HARDWARE["gb200-nvl72"]
    spec = hardware_spec(LOOKUP, "gb200-nvl72")
    assert spec.devices == 72 and spec.scope == "rack"
    assert spec.memory_bytes == pytest.approx(total_or_device(rack, "memory_bytes"))
    assert spec.memory_bytes < 200 * GIB          # one Blackwell GPU, not 13 TB
    w = run("weight-memory", {"model": "llama-3.1-70b", "hardware": "gb200-nvl72"}, LOOKUP)[2]
    assert w.outputs["devices"] == 72
    assert w.outputs["memory_per_device_bytes"] == pytest.approx(spec.memory_bytes)
    assert any("rack of 72 devices" in a for a in w.assumptions)


def test_a_rack_gemm_runs_at_one_device_peak():
    rack = HARDWARE["gb200-nvl72"]
    bf16 = next(p for p in rack["peaks"] if p["input_precision"] == "BF16" and p["sparsity"] == "dense")
    per_device = bf16["flop_per_s"]["value"] / 72 if (bf16["flop_per_s"].get("per") or "total") == "total" else bf16["flop_per_s"]["value"]
    r = run("roofline", {"operation": {"kind": "gemm", "m": 8192, "k": 8192, "n": 8192}, "hardware": "gb200-nvl72",
                         "precision": "BF16"}, LOOKUP)[2]
    assert r.outputs["compute_time_s"] == pytest.approx(2 * 8192**3 / per_device)
    assert per_device < 5e15                       # a GPU's rate, not the rack's 180 PFLOP/s


def test_h100_holds_80_gib():
    spec = hardware_spec(LOOKUP, "h100-sxm")
    assert spec.memory_bytes == 80 * GIB == 85_899_345_920
    assert HARDWARE["h100-sxm"]["memory_bytes"]["as_published"].replace(" ", "").upper().startswith("80GB")


def test_the_memory_rule_is_one_function():
    assert DEFAULT_MEMORY_UTILIZATION == 0.9
    assert usable_memory_bytes(80 * GIB) == pytest.approx(0.9 * 80 * GIB)
    assert usable_memory_bytes(80 * GIB, 1.0, 2 * GIB) == 78 * GIB
    assert usable_memory_bytes(1.0, 0.5, 10.0) == 0.0      # never negative
    # the same usable bytes in every calculator that asks whether something fits
    w = run("weight-memory", {"params": 1e9, "hardware": "h100-sxm"}, LOOKUP)[2].outputs["usable_per_device_bytes"]
    k = run("kv-cache", {"model": "qwen3-8b", "tokens": 1, "hardware": "h100-sxm", "weight_bytes": 0}, LOOKUP)[2]
    assert w == pytest.approx(usable_memory_bytes(80 * GIB))
    assert k.outputs["memory_budget_bytes"] == pytest.approx(w)


def test_two_h100_serve_a_70b_fp16_model():
    """The compendium's claim: 70B parameters in 16-bit fit on two 80 GB GPUs (with 10 % left to the runtime)."""
    o = run("weight-memory", {"model": "llama-3.1-70b", "format": "bf16", "hardware": "h100-sxm", "devices": 2}, LOOKUP)[2].outputs
    assert o["fits"] is True and o["remaining_per_device_bytes"] > 0


def test_format_names_are_case_insensitive_and_shared():
    assert resolve_format("FP8") is FORMATS["fp8"] and resolve_format("bfloat16") is FORMATS["bf16"]
    a = run("kv-cache", {"model": "qwen3-8b", "tokens": 1000, "kv_format": "Q4_K"}, LOOKUP)[2].outputs["bytes_per_request"]
    b = run("weight-memory", {"params": 1000 * 36 * 2048, "format": "q4_k"}, LOOKUP)[2].outputs["bytes_total"]
    assert a == 36 * 1000 * FORMATS["q4_k"].entry_bytes(2048)
    assert b > 0
    with pytest.raises(CalcInputError):
        resolve_format("int3")


def test_weights_default_to_the_published_format():
    v3 = run("weight-memory", {"model": "deepseek-v3"}, LOOKUP)[2]
    bf16 = run("weight-memory", {"model": "deepseek-v3", "format": "bf16"}, LOOKUP)[2]
    assert v3.outputs["bytes_total"] == pytest.approx(bf16.outputs["bytes_total"] / 2)   # FP8 as shipped
    assert any("published" in a and "fp8" in a for a in v3.assumptions)


def test_a_link_without_latency_says_alpha_is_assumed():
    missing = [l["id"] for l in CATALOG.records["link"] if not isinstance(l.get("latency_s"), dict)]
    assert missing, "every link has a latency: pick another test"
    lid = missing[0]
    assert link_spec(LOOKUP, lid).latency_s is None
    r = run("collective", {"operation": "all_reduce", "ranks": 8, "message_bytes": 1e6, "link": lid}, LOOKUP)[2]
    assert r.inputs["latency_s"]["value"] == 0.0 and "ASSUMED" in r.inputs["latency_s"]["basis"]
    assert any(a.startswith("α NOT SOURCED") for a in r.assumptions)
    given = run("collective", {"operation": "all_reduce", "ranks": 8, "message_bytes": 1e6, "link": lid, "link_alpha_s": 2e-6},
                LOOKUP)[2]
    assert given.inputs["latency_s"] == {"value": 2e-6, "basis": "given in the request"}


def test_unknown_hardware_is_a_422_naming_the_field():
    with pytest.raises(Exception) as e:
        solve("weight-memory", {"params": 1e9, "hardware": "h100"}, LOOKUP)
    assert e.value.status == 422 and e.value.errors[0].field == "hardware"


def test_a_record_is_read_per_device_once_and_a_changed_copy_anew(lookup):
    """spec_from_record caches by the record's identity (store records never change): the same record gives the
    same immutable spec; a modified copy (a what-if) is read again and keeps its own figures."""
    import copy

    from calculators.domain.hardware import spec_from_record

    rec = lookup("hardware", "h100-sxm")
    first = spec_from_record(rec)
    assert spec_from_record(rec) is first
    changed = copy.deepcopy(rec)
    changed["memory_bandwidth_bytes_per_s"]["value"] = first.memory_bandwidth_bytes_per_s / 2
    other = spec_from_record(changed)
    assert other is not first
    assert other.memory_bandwidth_bytes_per_s == first.memory_bandwidth_bytes_per_s / 2
    assert spec_from_record(rec).memory_bandwidth_bytes_per_s == first.memory_bandwidth_bytes_per_s
