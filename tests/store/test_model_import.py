"""model_import: the imported records are exactly what the importer makes of the kept config files, and every
model's config provenance (sha256) matches the bytes in knowledge/data/model-configs/."""
from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from calculators.framework import CalcInputError
from calculators.domain.hf_config import record_from_config
from calculators.framework.runner import compute as run
from knowledge.model_import import CONFIG_DIR, build_record, from_manifest_entry, main

#: hand-written records for which no config file is kept (no verbatim copy was available offline)
NO_CONFIG = {"qwen3-14b", "mistral-7b", "gemma-3-27b", "deepseek-r1-distill-llama-70b"}


@pytest.fixture(scope="module")
def models(catalog) -> dict[str, dict]:
    return catalog.by_id("model")


@pytest.fixture(scope="module")
def sources(catalog) -> dict[str, dict]:
    return catalog.by_id("source")


@pytest.fixture(scope="module")
def manifest() -> list[dict]:
    return yaml.safe_load((CONFIG_DIR / "manifest.yaml").read_text(encoding="utf-8"))


def test_at_least_fifty_models_and_provenance_everywhere_but_the_named_exceptions(models):
    assert len(models) >= 50
    missing = {i for i, m in models.items() if not m.get("config_provenance")}
    assert missing == NO_CONFIG


def test_every_config_provenance_hash_matches_the_kept_file(models):
    for mid, m in models.items():
        p = m.get("config_provenance")
        if not p:
            continue
        f = CONFIG_DIR / p["file"]
        assert f.is_file(), mid
        assert hashlib.sha256(f.read_bytes()).hexdigest() == p["file_sha256"], mid
        assert p["path"] == "config.json" and "/" in p["repository"]
        assert p["file"] == p["repository"].replace("/", "--") + "_config.json", mid
        assert p["record"] in ("imported", "hand-written")
        if p.get("quant_file"):
            assert hashlib.sha256((CONFIG_DIR / p["quant_file"]).read_bytes()).hexdigest() == p["quant_file_sha256"], mid


def test_quantisation_kept_outside_config_json_is_read_from_hf_quant_config(models):
    m = models["nemotron-3-super-120b-a12b-fp8"]
    assert m["weight_dtype"] == "fp8" and "hf_quant_config.json" in m["weight_dtype_locator"]
    assert "latent" in m["moe"]["expert_ffn_size"]["note"]  # moe_latent_size: no ledger count, the size label is stored
    assert m["params_total"]["as_published"] == "120B-A12B"


def test_book_locked_configs_carry_their_revision(models):
    """Configs whose bytes equal an entry of the book's sources.lock.json keep that entry's revision."""
    locked = {"qwen3-8b": "f7c4eadfbbf5", "qwen3-32b": "97e295b63283", "qwen3-30b-a3b": "2850ddb3bf7a",
              "qwen3-235b-a22b": "0ecd5d6fe6f2", "kimi-k3": "9710e121a58d", "qwen3.5-397b-a17b": "3ae7fa89c2f7"}
    for mid, prefix in locked.items():
        p = models[mid]["config_provenance"]
        assert p["file_sha256"].startswith(prefix) and len(p["revision"]) == 40, mid


def test_imported_facts_cite_the_repositorys_config(models, sources):
    for mid, m in models.items():
        p = m.get("config_provenance") or {}
        if p.get("record") != "imported":
            continue
        src = sources[m["layers"]["source"]]
        assert src["kind"] == "model-config"
        assert src["url"] == f"https://huggingface.co/{p['repository']}/blob/{p.get('revision', 'main')}/config.json", mid
        assert p["file_sha256"] in src["note"], mid


def test_importing_each_manifest_entry_reproduces_the_stored_record(models, manifest):
    imported = {i for i, m in models.items() if (m.get("config_provenance") or {}).get("record") == "imported"}
    assert {e["id"] for e in manifest} == imported
    assert len(imported) >= 32
    for e in manifest:
        rec, _ = from_manifest_entry(e)
        stored = json.loads(json.dumps(models[e["id"]]))  # the loader's dicts, without YAML identity
        assert rec == stored, e["id"]


def _shape(groups):
    return sorted(((g["count"], tuple((s["dim"], s.get("window"), s.get("ratio", 1)) for s in g.get("streams") or []),
                    g.get("state_elements", 0)) for g in groups), key=repr)


def _values(rec: dict, prefix: str = "") -> dict:
    out = {}
    for k, val in rec.items():
        if isinstance(val, dict) and "value" in val:
            out[prefix + k] = val["value"]
        elif isinstance(val, dict) and k in ("moe", "mla"):
            out.update(_values(val, f"{k}."))
    return out


def test_hand_written_records_agree_with_their_config(models):
    """The strongest check of the importer: the 14 hand-written records with a kept config give the same
    layer groups, counts and shapes (facts the hand-written record does not carry are not compared)."""
    checked = 0
    for mid, m in models.items():
        p = m.get("config_provenance") or {}
        if p.get("record") != "hand-written":
            continue
        got = record_from_config(json.loads((CONFIG_DIR / p["file"]).read_bytes()))
        assert _shape(got["layer_groups"]) == _shape(m["layer_groups"]), mid
        assert got["attention"] == m["attention"] and got["kind"] == m["kind"] and got["weight_dtype"] == m["weight_dtype"], mid
        mine, theirs = _values(got), _values(m)
        for k, val in theirs.items():
            if k in mine and k not in ("params_total", "params_active"):
                assert mine[k] == val, (mid, k)
        checked += 1
    assert checked == 14


@pytest.mark.parametrize("tp", [None, 8])
def test_kv_cache_runs_on_every_model(models, lookup, tp):
    for mid, m in models.items():
        if not m.get("layer_groups"):
            continue
        body = {"model": mid, "tokens": [1, 8192, 131072]}
        if tp:
            body["tp"] = tp
        o = run("kv-cache", body, lookup)[2].outputs
        assert o["bytes_per_request"][1] > 0, mid


def test_kv_cache_of_an_imported_hybrid_from_first_principles(lookup, models):
    m = models["qwen3.5-35b-a3b"]
    c = json.loads((CONFIG_DIR / m["config_provenance"]["file"]).read_bytes())["text_config"]
    o = run("kv-cache", {"model": "qwen3.5-35b-a3b", "tokens": 8192, "kv_format": "bf16", "state_format": "fp32"}, lookup)[2].outputs
    full = c["layer_types"].count("full_attention")
    lin = c["layer_types"].count("linear_attention")
    kv = full * 2 * c["num_key_value_heads"] * c["head_dim"] * 2 * 8192
    state = lin * c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"] * 4
    assert o["bytes_per_request"] == kv + state


def test_computed_parameter_counts_match_the_weight_memory_calculator(models, lookup):
    for mid in ("deepseek-r1", "kimi-k2-instruct", "mixtral-8x7b", "minimax-m2.5"):
        m = models[mid]
        assert m["params_total"]["note"].startswith("computed from config, not published")
        o = run("weight-memory", {"model": mid}, lookup)[2].outputs
        assert o["params_total"] == m["params_total"]["value"], mid
        assert o["params_active"] == m["params_active"]["value"], mid
    assert 670e9 < models["deepseek-r1"]["params_total"]["value"] < 672e9  # the report's 671B
    assert 46e9 < models["mixtral-8x7b"]["params_total"]["value"] < 47e9  # Mistral's 46.7B


def test_cli_prints_a_record_and_requires_provenance(capsys):
    f = CONFIG_DIR / "Qwen--Qwen3-0.6B_config.json"
    assert main([str(f), "--id", "x-0.6b", "--name", "X", "--repository", "Qwen/Qwen3-0.6B", "--sha256",
                 "--source", "qwen3-0.6b-config", "--family", "qwen"]) == 0
    rec = yaml.safe_load(capsys.readouterr().out)[0]
    assert rec["id"] == "x-0.6b" and rec["config_provenance"]["file_sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert rec["layers"] == {"value": 28, "source": "qwen3-0.6b-config", "locator": "num_hidden_layers"}
    with pytest.raises(ValueError):
        build_record(json.loads(f.read_bytes()), id="x", name="X", repository="Qwen/Qwen3-0.6B", source="s",
                     family="qwen", organisation="Alibaba Qwen")


def test_importer_refuses_what_hf_config_refuses():
    c = json.loads((CONFIG_DIR / "refused" / "MiniMaxAI--MiniMax-M3_config.json").read_bytes())
    with pytest.raises(CalcInputError) as e:
        build_record(c, id="minimax-m3", name="MiniMax-M3", repository="MiniMaxAI/MiniMax-M3", source="s", family="minimax",
                     organisation="MiniMax", sha256="0" * 64)
    assert e.value.loc == ("minimax-m3.config.sparse_attention_config",)
