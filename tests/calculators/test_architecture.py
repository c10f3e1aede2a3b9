"""The architecture engine is the one source of KV bytes: every calculator that sizes a model's cache
agrees with kv-cache, for every stored model and every named KV format."""
from __future__ import annotations

import pytest

from calculators.core import CalcInputError
from calculators.formats import FORMATS
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)
from knowledge.loader import catalog_lookup, default_catalog

CATALOG = default_catalog()
LOOKUP = catalog_lookup(CATALOG)
MODELS = sorted(m["id"] for m in CATALOG.records["model"] if m.get("layer_groups"))
#: models whose size is neither published nor computable from their shapes here (the importer says why)
NO_PARAMS = {m["id"] for m in CATALOG.records["model"] if "params_active" not in m and "params_total" not in m}
TOKENS = 4099  # not a multiple of any block, page or compression ratio


def kv_cache_bytes(model: str, fmt: str, tokens: int = TOKENS) -> float:
    return run("kv-cache", {"model": model, "tokens": tokens, "kv_format": fmt}, LOOKUP)[2].outputs["bytes_per_request"]


def test_every_stored_model_is_covered():
    assert len(MODELS) >= 50
    assert NO_PARAMS == {"mimo-v2-flash"}


def kv_of(name: str, body: dict, key: str, want: float) -> float:
    """The calculator's KV bytes; a model with no parameter count must be refused (FLOPs and weights need it)."""
    if body["model"] in NO_PARAMS:
        with pytest.raises(CalcInputError) as e:
            run(name, body, LOOKUP)
        assert e.value.loc == ("model",) and "params" in e.value.message
        return want
    return run(name, body, LOOKUP)[2].outputs[key]


@pytest.mark.parametrize("model", MODELS)
def test_five_calculators_agree_on_kv_bytes(model):
    for fmt in FORMATS:
        want = kv_cache_bytes(model, fmt)
        assert want > 0
        roof = kv_of("roofline", {"model": model, "phase": "decode", "tokens": 1, "context_tokens": TOKENS - 1,
                                  "kv_format": fmt, "peak_flop_per_s": 1e15, "memory_bandwidth_bytes_per_s": 1e12},
                     "kv_cache_bytes", want)
        split = run("parallel-split", {"model": model, "tp": [1], "context_tokens": TOKENS, "kv_format": fmt,
                                       "weight_bytes": 1.0, "hbm_bandwidth_bytes_per_s": 1e12}, LOOKUP)[2].outputs
        prefix = run("prefix-cache", {"model": model, "prefix_tokens": TOKENS, "kv_format": fmt}, LOOKUP)[2].outputs
        cost = kv_of("serving-cost", {"model": model, "context_tokens": TOKENS, "kv_format": fmt,
                                      "memory_per_device_bytes": 1e15, "memory_bandwidth_bytes_per_s": 1e12,
                                      "price_per_device_hour_usd": 1, "target_tokens_per_s": 1},
                     "kv_bytes_per_sequence", want)
        got = {"roofline": roof, "parallel-split": split["kv_bytes"],
               "prefix-cache": prefix["cache_entry_bytes"], "serving-cost": cost}
        for name, value in got.items():
            assert value == pytest.approx(want, rel=1e-12), f"{model} {fmt}: {name} {value} != kv-cache {want}"


def test_window_and_ratio_together_count_entries():
    """A compressed stream with a window keeps min(floor(N / ratio), window) entries in every calculator."""
    arch = {"layer_groups": [{"count": 2, "streams": [{"dim": 64, "window": 100, "ratio": 4}]}]}
    o = run("kv-cache", {"architecture": arch, "tokens": [100, 400, 4000], "kv_format": "bf16"})[2].outputs
    assert o["bytes_per_request"] == [2 * 64 * 2 * 25, 2 * 64 * 2 * 100, 2 * 64 * 2 * 100]
