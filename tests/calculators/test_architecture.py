"""The architecture engine is the one source of KV bytes: every calculator that sizes a model's cache
agrees with kv-cache, for every stored model and every named KV format."""
from __future__ import annotations

import pytest

from calculators.framework import CalcInputError
from calculators.domain.formats import FORMATS
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
    # every record has a count: MiMo-V2-Flash's from its model card, the FP8 DeepSeek-V4 checkpoints those of the
    # releases they quantise (the ledger covers neither layout; knowledge/data/model-configs/manifest.yaml)
    assert NO_PARAMS == set()


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
                                       "weight_bytes": 1.0, "memory_bandwidth_bytes_per_s": 1e12}, LOOKUP)[2].outputs
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


def test_cache_and_written_bytes_agree_with_the_stream_by_stream_sizes():
    """The roofline's shortcut (full streams as one per-token coefficient) gives kv_sizes' totals and the bytes a
    step writes, for windows, compressed streams, state and several formats, point by point."""
    import numpy as np
    from calculators.domain.architecture import GroupSpec, StreamSpec, cache_bytes, kv_sizes, written_bytes
    from calculators.domain.formats import resolve_format
    groups = [GroupSpec("full", 20, (StreamSpec("kv", 1024, None, 1, 8),), 0, None, None),
              GroupSpec("window", 10, (StreamSpec("kv", 1024, 4096, 1, 8),), 0, None, None),
              GroupSpec("compressed", 6, (StreamSpec("c", 576, None, 4, None), StreamSpec("i", 128, 2048, 4, None)),
                        0, None, None),
              GroupSpec("linear", 12, (), 65536, 16, None)]
    s = np.array([0, 1, 3, 4095, 4096, 4097, 100_000])
    p = np.array([1, 1, 5, 1, 8192, 3, 1])
    state = resolve_format("fp32")
    for name in ("bf16", "fp8", "q4_0", "nvfp4"):
        fmt = resolve_format(name)
        for tokens in (s, s + p):
            assert np.allclose(cache_bytes(groups, fmt, state, tokens), kv_sizes(groups, fmt, state, tokens).bytes_per_request,
                               rtol=1e-15, atol=0)
        want = np.zeros(s.shape)
        for g in groups:                           # the definition, stream by stream
            for st in g.streams:
                new = (s + p) // st.ratio - s // st.ratio
                if st.window is not None:
                    new = np.minimum(new, st.window) if st.ratio > 1 else p
                want += g.count * fmt.entry_bytes(st.dim) * new
            want += g.count * state.entry_bytes(g.state_elements) if g.state_elements else 0
        assert np.allclose(written_bytes(groups, fmt, state, s, p), want, rtol=1e-15, atol=0), name


def test_a_model_record_is_read_once_and_cited_every_time(lookup):
    from calculators.domain.architecture import arch_from_record, groups_from_model, ledger
    from calculators.framework import Result
    rec = lookup("model", "qwen3-8b")
    r1, r2 = Result({}, {}), Result({}, {})
    a1, a2 = arch_from_record(rec, r1), arch_from_record(rec, r2)
    assert a1 is a2 and ledger(a1) is ledger(a2)
    assert r1.sources == r2.sources and {s["field"] for s in r1.sources} >= {"layers", "hidden_size", "kv_heads"}
    g1, g2 = groups_from_model(rec, r1), groups_from_model(rec, r2)
    assert g1 == g2 and g1 is not g2                  # each caller its own list of the shared specs
    copy = {**rec}
    assert arch_from_record(copy, None) is not a1 and arch_from_record(copy, None) == a1


def test_records_built_from_a_model_config_are_not_memoised():
    from calculators.domain.architecture import _DERIVED, arch_from_record, ledger, record_from_hf_config
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "torch_dtype": "bfloat16"}
    before = len(_DERIVED._entries)
    for _ in range(5):
        rec = record_from_hf_config(config)
        arch = arch_from_record(rec, None)
        assert ledger(arch) is ledger(arch)            # kept on the Arch itself, gone with it
    assert len(_DERIVED._entries) == before
