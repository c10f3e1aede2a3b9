"""`casebook import-models --wheel`: every Hugging Face config the aiconfigurator-core wheel bundles is in the store
(its kept bytes equal the wheel's) or listed in model-configs/skipped.yaml with the reason the reader gives today;
every imported model has a layout; Llama-3.3-70B and Llama-2-70B are store models with the published shapes; the
benchmark points of those models and of MI325X / MI355X name the store's ids. The wheel tests need the wheel
(CASEBOOK_MEASUREMENT_WHEEL, as the measured tables' tests)."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest
import yaml

from calculators.domain import layout_of, record_from_config
from calculators.framework import CalcInputError
from knowledge.model_import import (
    CONFIG_DIR, QUANT_SUFFIX, SKIPPED, WHEEL_CONFIGS, build_record, import_wheel, model_id_of, repository_of, size_label,
)

WHEEL_ENV = "CASEBOOK_MEASUREMENT_WHEEL"
WHEEL_SHA256 = "aadc4aad0a00bf8a61c477c62bef43de479849c3aa0b1c3078068e08309eccc4"


@pytest.fixture(scope="module")
def wheel() -> Path:
    path = os.environ.get(WHEEL_ENV)
    if not path:
        pytest.fail(f"{WHEEL_ENV} is not set: these tests compare the imported model configs with the wheel they came "
                    f"from. Run `pip download aiconfigurator-core==0.12.0 --no-deps -d DIR` and set {WHEEL_ENV}=DIR/<the .whl>.")
    assert Path(path).is_file(), f"{WHEEL_ENV}={path} is not a file"
    return Path(path)


@pytest.fixture(scope="module")
def bundled(wheel) -> dict[str, bytes]:
    """file name -> bytes of every config (and hf_quant_config) the wheel bundles."""
    with zipfile.ZipFile(wheel) as z:
        return {n[len(WHEEL_CONFIGS):]: z.read(n) for n in z.namelist()
                if n.startswith(WHEEL_CONFIGS) and n.endswith(".json")}


@pytest.fixture(scope="module")
def models(catalog) -> dict[str, dict]:
    return catalog.by_id("model")


@pytest.fixture(scope="module")
def skipped() -> list[dict]:
    return yaml.safe_load(SKIPPED.read_text(encoding="utf-8"))


def _from_wheel(m: dict) -> bool:
    return ((m.get("config_provenance") or {}).get("via") or "").startswith("aiconfigurator-core 0.12.0 wheel")


def test_the_wheel_is_the_one_cited(wheel, skipped):
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == WHEEL_SHA256
    assert WHEEL_SHA256 in SKIPPED.read_text(encoding="utf-8")


def test_every_bundled_config_is_in_the_store_or_skipped_with_a_reason(bundled, models, skipped):
    configs = sorted(f for f in bundled if not f.endswith(QUANT_SUFFIX))
    assert len(configs) >= 80
    by_file = {(m.get("config_provenance") or {}).get("file"): mid for mid, m in models.items()}
    by_repo = {(m.get("config_provenance") or {}).get("repository") for m in models.values()}
    left_out = {s["file"]: s for s in skipped}
    for f in configs:
        in_store = f in by_file or repository_of(f) in by_repo
        assert in_store != (f in left_out), f"{f}: {'both imported and skipped' if in_store else 'neither imported nor skipped'}"
    for s in skipped:
        assert s["reason"] and s["repository"] == repository_of(s["file"])
        assert hashlib.sha256(bundled[s["file"]]).hexdigest() == s["sha256"], s["file"]


def test_the_kept_configs_are_the_wheels_bytes(bundled, models):
    """Every store model whose config came from the wheel keeps exactly the wheel's bytes (and its quant file's)."""
    checked = 0
    for mid, m in models.items():
        if not _from_wheel(m):
            continue
        p = m["config_provenance"]
        raw = bundled[p["file"]]
        assert hashlib.sha256(raw).hexdigest() == p["file_sha256"] == hashlib.sha256((CONFIG_DIR / p["file"]).read_bytes()).hexdigest(), mid
        if p.get("quant_file"):
            assert hashlib.sha256(bundled[p["quant_file"]]).hexdigest() == p["quant_file_sha256"], mid
        checked += 1
    assert checked >= 75


def test_the_skipped_configs_are_still_refused_by_the_reader(bundled, skipped):
    """skipped.yaml is not stale: each config it lists is refused today, at the field it names."""
    for s in skipped:
        cfg = json.loads(bundled[s["file"]])
        quant_name = s["file"][: -len("_config.json")] + QUANT_SUFFIX
        quant = (quant_name, json.loads(bundled[quant_name]), "0" * 64) if quant_name in bundled else None
        with pytest.raises((CalcInputError, ValueError)) as e:
            build_record(cfg, id="x", name="x", repository=s["repository"], source="s", family="f", organisation="o",
                         sha256="0" * 64, quant=quant)
        if isinstance(e.value, CalcInputError):
            assert e.value.loc[0].endswith(s["field"]), s["file"]


def test_every_imported_model_has_a_layout(models, skipped):
    refused = {s["repository"] for s in skipped}
    for mid, m in models.items():
        if not _from_wheel(m):
            continue
        assert m["config_provenance"]["repository"] not in refused, mid
        lay = layout_of(m)
        assert lay.mixer_layers >= 1 and lay.ffn_layers >= 1, mid


def test_the_import_is_complete_and_repeatable(wheel, tmp_path):
    """A dry run over the committed store imports nothing; into an empty directory it makes again the manifest
    entries the command wrote (same ids, names, sources, size labels, licence and wheel hash) and writes nothing."""
    report = import_wheel(wheel)
    assert report["imported"] == [] and report["license"] == "Apache-2.0"
    assert [s["file"] for s in report["skipped"]] == [s["file"] for s in yaml.safe_load(SKIPPED.read_text(encoding="utf-8"))]
    written = [e for e in yaml.safe_load((CONFIG_DIR / "manifest.yaml").read_text(encoding="utf-8"))
               if WHEEL_SHA256 in (e.get("source_note") or "")]
    assert len(written) >= 31
    fresh = {e["file"]: e for e in import_wheel(wheel, config_dir=tmp_path, models_path=tmp_path / "none.yaml")["imported"]}
    for e in written:
        assert fresh[e["file"]] == e, e["id"]
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_ids_families_and_size_labels_from_the_repository_name():
    assert repository_of("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4_config.json") == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"
    assert model_id_of("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4") == "nemotron-3-nano-30b-a3b-nvfp4"
    assert size_label("Qwen/Qwen3-235B-A22B-FP8", "moe") == {"total": 235e9, "active": 22e9, "as_published": "235B-A22B"}
    assert size_label("nvidia/Llama-3.1-70B-Instruct-FP8", "dense") == {"total": 70e9, "as_published": "70B"}
    assert size_label("meta-llama/Llama-4-Scout-17B-16E-Instruct", "moe") is None  # 17B is the active count


def test_modelopt_quantisation_in_config_json_is_read():
    cfg = json.loads((CONFIG_DIR / "nvidia--GLM-5.1-NVFP4_config.json").read_bytes())
    assert record_from_config(cfg)["weight_dtype"] == "nvfp4"
    cfg["quantization_config"]["quant_algo"] = "MIXED_PRECISION"
    with pytest.raises(CalcInputError) as e:
        record_from_config(cfg)
    assert e.value.loc == ("model_config.quantization_config.quant_algo",)


@pytest.mark.parametrize("mid, repo, context, vocab, dtype", [
    ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct", 131072, 128256, "bf16"),
    ("llama-2-70b", "meta-llama/Llama-2-70b-hf", 4096, 32000, "fp16"),
])
def test_the_two_llama_70b_models(models, mid, repo, context, vocab, dtype):
    m = models[mid]
    shape = {k: m[k]["value"] for k in ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size", "vocab_size",
                                        "context_length")}
    assert shape == {"layers": 80, "hidden_size": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "ffn_size": 28672,
                     "vocab_size": vocab, "context_length": context}
    assert m["weight_dtype"] == dtype and m["config_provenance"]["repository"] == repo
    raw = (CONFIG_DIR / m["config_provenance"]["file"]).read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()  # the git blob the via names
    assert blob in m["config_provenance"]["via"], mid
    cfg = json.loads(raw)
    assert (cfg["num_hidden_layers"], cfg["vocab_size"], cfg["max_position_embeddings"]) == (80, vocab, context)


def test_benchmark_points_name_the_store_ids(catalog):
    models, hardware = catalog.by_id("model"), catalog.by_id("hardware")
    points = catalog.records["benchmark"]
    want_model = {"meta-llama/Llama-2-70b-chat-hf": "llama-2-70b", "nvidia/Llama-3.3-70B-Instruct-FP8": "llama-3.3-70b",
                  "nvidia/Llama-3.3-70B-Instruct-FP4": "llama-3.3-70b"}
    seen = 0
    for p in points:
        if p["model_hf"] in want_model:
            assert p["model"] == want_model[p["model_hf"]], p["id"]
            seen += 1
        if "MI355X" in p["hardware_name"] or "MI325X" in p["hardware_name"]:
            assert p["hardware"] == ("mi355x" if "MI355X" in p["hardware_name"] else "mi325x"), p["id"]
            seen += 1
        assert p["model"] is None or p["model"] in models, p["id"]
        assert p["hardware"] is None or p["hardware"] in hardware, p["id"]
        if p["hardware"] is None:
            assert "GB200" in p["hardware_name"], p["id"]  # the only device the store has no per-GPU record of
    assert seen >= 45


def test_the_cli_dry_run_lists_what_it_would_skip(wheel, skipped, capsys):
    from api.cli import main

    assert main(["import-models", "--wheel", str(wheel), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"0 imported, {len(skipped)} skipped" in out and "licence Apache-2.0" in out
    assert all(s["repository"] in out for s in skipped)
    assert "nothing written" in out
