"""Coverage of the hardware catalogue (issue #26 item 6): every record states its memory, its memory bandwidth, a
dense BF16 (or FP16) peak and a dense FP8 peak, or names the missing one in `unknown` with a reason; `unknown`
never names a figure the record stores; and a serving calculator that refuses a record quotes that reason."""
from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from calculators.domain import hardware_spec
from calculators.framework import CalcInputError, ids_of
from knowledge.records.facts import Hardware
from tests.calculators.plain import compute as run

UNKNOWN_KEY = re.compile(r"^peak_([a-z0-9]+)_(dense|structured|unspecified)$")


def _dense(rec: dict, *precisions: str) -> bool:
    return any(str(p.get("input_precision")).upper() in precisions and p.get("sparsity") == "dense"
               and (p.get("flop_per_s") or {}).get("value") is not None for p in rec.get("peaks") or [])


def _stored(rec: dict, key: str) -> bool:
    """Whether the raw record stores the figure an `unknown` key names (read without the record model)."""
    m = UNKNOWN_KEY.match(key)
    if m is None:
        return isinstance(rec.get(key), dict) and rec[key].get("value") is not None
    return any(str(p.get("input_precision")).lower() == m.group(1) and p.get("sparsity") == m.group(2)
               for p in rec.get("peaks") or [])


REQUIRED = {
    "memory_bytes": lambda r: _stored(r, "memory_bytes"),
    "memory_bandwidth_bytes_per_s": lambda r: _stored(r, "memory_bandwidth_bytes_per_s"),
    "peak_bf16_dense": lambda r: _dense(r, "BF16", "FP16"),
    "peak_fp8_dense": lambda r: _dense(r, "FP8"),
}


@pytest.fixture(scope="module")
def records(lookup) -> list[dict]:
    ids = ids_of(lookup, "hardware")
    assert len(ids) > 150                                 # the whole catalogue, not an empty listing
    return [lookup("hardware", i) for i in ids]


def test_every_record_has_memory_bandwidth_bf16_and_fp8_dense_or_says_why_not(records):
    missing = []
    for rec in records:
        unknown = rec.get("unknown") or {}
        for key, present in REQUIRED.items():
            if not present(rec) and not str(unknown.get(key) or "").strip():
                missing.append(f"{rec['id']}: {key}")
    assert not missing, "no value and no reason: " + ", ".join(missing)


def test_unknown_never_names_a_stored_figure_and_every_reason_is_a_sentence(records):
    stated = 0
    for rec in records:
        for key, why in (rec.get("unknown") or {}).items():
            stated += 1
            assert not _stored(rec, key), f"{rec['id']} stores {key} and lists it as unknown"
            assert len(str(why).strip()) >= 20, f"{rec['id']}.unknown.{key} has no real reason: {why!r}"
    assert stated > 100                                   # the Apple, Ascend and Ampere records all say why


def test_the_record_model_refuses_an_unknown_that_has_a_value_an_empty_reason_or_a_stray_key():
    fp8 = {"input_precision": "FP8", "unit": "tensor", "sparsity": "dense",
           "flop_per_s": {"value": 1e15, "source": "s", "locator": "l"}}
    base = {"id": "x", "name": "x", "peaks": [fp8]}
    Hardware.model_validate({**base, "unknown": {"peak_fp8_structured": "the source prints no sparse rate"}})
    for bad, field in (({"peak_fp8_dense": "a reason"}, "stores"), ({"memory_bytes": " "}, "reason"),
                       ({"fp8": "a reason"}, "peak_<precision>")):
        with pytest.raises(ValidationError, match=field):
            Hardware.model_validate({**base, "unknown": bad})


def test_a_serving_calculator_refusing_a_record_quotes_its_reason(lookup):
    reason = lookup("hardware", "h20-sxm5-141gb")["unknown"]["memory_bandwidth_bytes_per_s"]
    with pytest.raises(CalcInputError) as exc:
        run("serving-estimate", {"model": "llama-3.1-8b", "hardware": "h20-sxm5-141gb", "tp": 1, "input_tokens": 1024,
                                 "output_tokens": 128, "concurrency": 1}, lookup)
    assert exc.value.loc == ("hardware",)
    assert "has no sourced per-device memory or bandwidth" in str(exc.value)
    assert reason in str(exc.value)
    # a missing peak row quotes its reason too
    with pytest.raises(CalcInputError, match="Ampere tensor cores take no FP8"):
        hardware_spec(lookup, "a100-80gb-sxm").peak("FP8")
