"""serving-cost: the compendium page's four examples and the bandwidth method's invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run


def calc(body, lookup=no_lookup):
    return run("serving-cost", body, lookup)[2].outputs


def page(params, bits, mem_gb, price):
    return calc({"method": "page", "params": params, "weight_bytes_per_param": bits / 8, "memory_per_device_bytes": mem_gb * 1e9,
                 "price_per_device_hour_usd": price, "target_tokens_per_s": 1000})


@pytest.mark.parametrize("args, size, gpus, tps, replicas, total, cost_h, cost_m", [
    ((70e9, 16, 80, 8.0), 140, 3, 21, 47, 141, 1128, 311.11),   # Llama-70B FP16 on H100
    ((70e9, 8, 80, 8.0), 70, 2, 29, 35, 70, 560, 155.56),       # INT8 on H100
    ((70e9, 4, 80, 4.0), 35, 1, 29, 35, 35, 140, 38.89),        # INT4 on A100
    ((8e9, 4, 24, 1.0), 4, 1, 250, 4, 4, 4, 1.11),              # Llama-8B INT4 on A10G
])
def test_page_examples_print_as_the_page_would(args, size, gpus, tps, replicas, total, cost_h, cost_m):
    o = page(*args)
    assert f"{o['model_size_gb']:.0f}" == str(size)
    assert o["devices_per_replica"] == gpus and o["replicas"] == replicas and o["total_devices"] == total
    assert f"{o['tokens_per_s_per_replica']:.0f}" == str(tps)
    assert f"{o['cost_per_hour_usd']:.0f}" == str(cost_h)
    assert f"{o['cost_per_mtok_usd']:.2f}" == f"{cost_m:.2f}"


BASE = {"params": 70e9, "weight_bytes_per_param": 2, "kv_bytes_per_token": 327680, "memory_per_device_bytes": 80e9,
        "memory_bandwidth_bytes_per_s": 3.35e12, "price_per_device_hour_usd": 8.0, "target_tokens_per_s": 1000}


def test_bandwidth_method_by_hand():
    o = calc({**BASE, "batch": 16, "context_tokens": 4096})
    need = 140e9 + 16 * 327680 * 4096
    assert o["devices_per_replica"] == 3
    step = need / (3 * 3.35e12)
    assert o["tokens_per_s_per_replica"] == pytest.approx(16 / step)
    assert o["replicas"] == 2
    assert o["cost_per_mtok_usd"] == pytest.approx(48 / (2 * 16 / step * 3600) * 1e6)
    assert o["methods"]["page"]["total_devices"] == 141       # both methods side by side


def test_store_ids(lookup):
    o = calc({"model": "llama-3.1-70b", "hardware": "h100-sxm", "price_per_device_hour_usd": 3.0,
              "target_tokens_per_s": 5000, "batch": 32, "context_tokens": 2048}, lookup)
    assert o["kv_bytes_per_token"] == 80 * 2 * 8 * 128 * 2       # GQA, BF16
    assert o["devices_per_replica"] >= 2


@settings(max_examples=30)
@given(b=st.integers(1, 256))
def test_batch_amortises_weights(b):
    one = calc({**BASE, "batch": b, "context_tokens": 1024})["tokens_per_s_per_replica"]
    two = calc({**BASE, "batch": b + 1, "context_tokens": 1024})["tokens_per_s_per_replica"]
    devices = calc({**BASE, "batch": [b, b + 1], "context_tokens": 1024})["devices_per_replica"]
    if devices[0] == devices[1]:
        assert two > one


def test_sweep_matches_scalars():
    s = calc({**BASE, "batch": [1, 64], "context_tokens": [0, 8192]})
    for i, (b, c) in enumerate([(1, 0), (64, 8192)]):
        assert s["cost_per_mtok_usd"][i] == pytest.approx(calc({**BASE, "batch": b, "context_tokens": c})["cost_per_mtok_usd"])


def test_validation():
    with pytest.raises(ValidationError):
        calc({k: v for k, v in BASE.items() if k != "params"})
    with pytest.raises(ValidationError):
        calc({**BASE, "price_per_device_hour_usd": 0})
    with pytest.raises(CalcInputError):
        calc({k: v for k, v in BASE.items() if k != "memory_bandwidth_bytes_per_s"})
    assert calc({**{k: v for k, v in BASE.items() if k != "memory_bandwidth_bytes_per_s"}, "method": "page"})["replicas"] == 47


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_huge_model_page_counts_are_refused_not_overflowed():
    # With 1e30 parameters the page heuristic's int(x + 0.99) device count is ~3e19, beyond 64-bit JSON integers
    # (a 500). The page method now refuses it (422); the bandwidth method still answers, in floats.
    import orjson
    body = {"params": 1e30, "weight_bytes_per_param": 2, "kv_bytes_per_token": 327680, "memory_per_device_bytes": 80e9,
            "memory_bandwidth_bytes_per_s": 3.35e12, "price_per_device_hour_usd": 8.0, "target_tokens_per_s": 1000,
            "batch": [1, 16, 64], "context_tokens": 4096}
    _, _, r = run("serving-cost", body, no_lookup)
    o = orjson.loads(orjson.dumps(r.outputs, option=orjson.OPT_SERIALIZE_NUMPY))
    assert o["methods"]["page"] is None
    assert o["devices_per_replica"][0] == pytest.approx(2e30 / (80e9 * 0.9))
    with pytest.raises(CalcInputError) as e:
        calc({**body, "method": "page"})
    assert e.value.loc == ("params",)
    with pytest.raises(ValidationError):   # the le=8 bound used to be ignored (Field next to PosFloat)
        calc({**body, "weight_bytes_per_param": 9})


def test_price_defaults_to_the_stored_default_by_the_price_rule(lookup):
    """h200-sxm: the rule (newest on-demand offer per provider, none stale, lowest of those) is not the plain lowest
    stored on-demand price, which is an older Nebius offer."""
    from calculators.domain import choose_device_price
    from tests.conftest import PRICE_AS_OF

    body = {"model": "llama-3.1-70b", "hardware": "h200-sxm", "target_tokens_per_s": 1000, "batch": 8,
            "context_tokens": 4096}
    _, _, res = run("serving-cost", body, lookup)
    offers = lookup("gpu_prices", "h200-sxm")
    choice = choose_device_price(offers, PRICE_AS_OF)
    default = choice.best["device_usd_per_hour"]["value"]
    assert default > min(o["device_usd_per_hour"]["value"] for o in offers if o["pricing"] == "on-demand")
    assert res.inputs["price_per_device_hour_usd"] == default
    assert res.outputs["cost_per_hour_usd"] == pytest.approx(res.outputs["total_devices"] * default)
    said = next(a for a in res.assumptions if a.startswith("Price: "))
    assert choice.best["provider"] in said and choice.best["date"] in said and "months before" in said
    assert f"{len(choice.current) - 1} other current offers" in said
    assert any(s.get("record") == choice.best["id"] for s in res.sources)
    given = calc({**body, "price_per_device_hour_usd": 2 * default}, lookup)
    assert given["cost_per_hour_usd"] == pytest.approx(2 * res.outputs["cost_per_hour_usd"])


def test_price_is_required_without_hardware():
    body = {k: v for k, v in BASE.items() if k != "price_per_device_hour_usd"}
    with pytest.raises(ValidationError, match="price_per_device_hour_usd"):
        calc(body)


def test_default_batch_is_the_one_chosen_not_one(lookup):
    _, _, res = run("serving-cost", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "target_tokens_per_s": 1000,
                                     "context_tokens": 4096}, lookup)
    assert res.outputs["batch"] > 1
    assert f"batch {res.outputs['batch']:,.0f} (chosen" in res.headline


# --------------------------------------------------------------------------- a model on hardware: the step model

STEP = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "price_per_device_hour_usd": 3.0, "target_tokens_per_s": 1000,
        "context_tokens": 2048}


def plain(body, lookup):
    from tests.calculators.plain import compute
    return compute("serving-cost", body, lookup)[2].outputs


def test_step_model_decode_step_and_devices(lookup):
    o = plain({**STEP, "batch": [1, 64, 256]}, lookup)
    assert o["step_basis"] == "step model"
    assert o["step_time_s"] == pytest.approx([k + c for k, c in zip(o["kernel_time_s"], o["comm_time_s"])], rel=1e-12)
    # devices are TP degrees that split Llama's 64 heads, and grow with the batch's KV
    assert all(64 % d == 0 for d in o["devices_per_replica"])
    assert o["devices_per_replica"] == sorted(o["devices_per_replica"]) and o["devices_per_replica"][0] >= 2
    assert all(m > b for m, b in zip(o["measured_time_s"], o["step_time_s"]))
    assert o["measured_parts_s"]["allreduce"] == pytest.approx(o["comm_time_s"])    # the same link time in both
    assert o["tokens_per_s_per_replica"] == pytest.approx([b / t for b, t in zip([1, 64, 256], o["step_time_s"])])
    # a given TP is the replica's device count; a smaller weight format shortens the step
    four = plain({**STEP, "batch": 8, "tp": 4}, lookup)
    fp8 = plain({**STEP, "batch": 8, "tp": 4, "weight_format": "fp8"}, lookup)
    assert four["devices_per_replica"] == 4 and fp8["kernel_time_s"] < 0.7 * four["kernel_time_s"]
    assert fp8["weight_bytes"] == pytest.approx(four["weight_bytes"] / 2, rel=0.01)


def test_step_model_chooses_the_batch_within_the_target(lookup):
    o = plain({**STEP, "tpot_s": 0.03}, lookup)
    assert o["step_basis"] == "step model" and o["batch"] > 1 and o["step_time_s"] <= 0.03
    bigger = plain({**STEP, "batch": o["batch"] * 2}, lookup)        # twice the batch misses the target or needs more devices
    assert bigger["step_time_s"] > 0.03 or bigger["devices_per_replica"] > o["devices_per_replica"]


def test_bare_numbers_keep_the_formula(lookup):
    o = plain({**STEP, "weight_bytes_per_param": 2, "batch": 8}, lookup)
    assert o["step_basis"] == "bandwidth formula"
    bw = lookup("hardware", "h100-sxm")["memory_bandwidth_bytes_per_s"]["value"]
    assert o["step_time_s"] == pytest.approx(o["memory_per_replica_bytes"] / (o["devices_per_replica"] * bw))
    with pytest.raises(CalcInputError) as e:
        plain({**STEP, "weight_bytes_per_param": 2, "batch": 8, "ep": 2}, lookup)
    assert e.value.loc == ("ep",)
    with pytest.raises(CalcInputError) as e:                       # 70B in BF16 does not fit one H100
        plain({**STEP, "batch": 8, "tp": 1}, lookup)
    assert e.value.loc == ("tp",)
    with pytest.raises(CalcInputError) as e:
        plain({**STEP, "batch": 8, "tp": 3}, lookup)
    assert e.value.loc == ("tp",)
