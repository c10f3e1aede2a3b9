"""Hugging Face `config.json` -> the store's typed model architecture (a models.yaml-shaped record).

`record_from_config(config)` reads a config exactly as published and returns the architecture part of a
model record: every number is a fact `{value, locator[, note]}` whose locator is the config key(s) it came
from (the importer adds `source`), plus `attention`, `kind`, `weight_dtype`, the `moe` / `mla` blocks and
the KV `layer_groups` in the kv-cache engine's streams form:

- GQA / MHA / MQA layers keep one stream of `2 x kv_heads x head_dim` values per token (K and V of different
  widths: `kv_heads x (head_dim + v_head_dim)`; keys reused as values: `kv_heads x head_dim`);
- MLA layers keep one latent of `kv_lora_rank + qk_rope_head_dim` values (a DSA indexer adds `index_head_dim`);
- sliding-window layers get `window`; Llama 4 chunked layers get `window = attention_chunk_size` (an upper
  bound: a chunk holds at most that many entries);
- linear-attention / SSM layers (Gated DeltaNet, KDA, Mamba-2) keep a fixed recurrent state of
  `state_elements` values per layer (short-convolution state is left out, as in the hand-written records).

A key that changes the architecture and cannot be interpreted raises `CalcInputError("<loc>.<key>", ...)`:
the function never guesses a layout. The reader is in `hf_reader`, the layouts of each family in `hf_layouts`.
"""
from __future__ import annotations


from calculators.framework import CalcInputError
from calculators.domain.hf_reader import DTYPES, LAYOUT_KEYS, UNSUPPORTED_KEYS, _Reader
from calculators.domain.hf_layouts import _attention, _deepseek_v4, _kimi_linear, _mla, _moe, _nemotron_h

def _text_part(config: dict, loc: str) -> tuple[_Reader, list[str]]:
    """The language model's config: `text_config` of a multimodal wrapper, else the config itself."""
    if not isinstance(config, dict):
        raise CalcInputError(loc, "a config.json object is needed")
    notes: list[str] = []
    tc = config.get("text_config")
    if isinstance(tc, dict) and tc.get("num_hidden_layers") is not None:
        notes.append(f"Multimodal config ({config.get('model_type')}); the architecture is the language model in text_config "
                     f"({tc.get('model_type')}); the vision/audio towers are not described.")
        return _Reader(tc, loc, "text_config."), notes
    if tc is not None:
        raise CalcInputError(f"{loc}.text_config", "text_config has no num_hidden_layers: cannot read the language model")
    return _Reader(config, loc, ""), notes


#: ModelOpt `quant_algo` -> models.yaml weight_dtype (MIXED_PRECISION, per-layer formats, is not interpreted)
MODELOPT_ALGO = {"FP8": "fp8", "NVFP4": "nvfp4"}


def _weight_dtype(r: _Reader, top: dict) -> dict:
    """Shipped weight format from quantization_config, else torch_dtype / dtype (models.yaml vocabulary)."""
    q = r.cfg.get("quantization_config") or top.get("quantization_config")
    qloc = r.key("quantization_config") if r.cfg.get("quantization_config") else "quantization_config"
    if q:
        method = str(q.get("quant_method", "")).lower()
        if method == "fp8":
            if r.cfg.get("expert_dtype") == "fp4" or top.get("expert_dtype") == "fp4":
                return {"value": "mixed-fp8-fp4", "locator": f"{qloc}.quant_method fp8 + expert_dtype fp4"}
            block = q.get("weight_block_size")
            return {"value": "fp8", "locator": f"{qloc}.quant_method" + (f" (fp8, {block} blocks)" if block else " (fp8)")}
        if method == "mxfp4":
            return {"value": "mixed-mxfp4-bf16", "locator": f"{qloc}.quant_method mxfp4; modules_to_not_convert stay BF16"}
        if method == "compressed-tensors":
            groups = q.get("config_groups") or {}
            w = [g.get("weights") or {} for g in groups.values() if isinstance(g, dict)]
            if len(w) == 1 and w[0].get("num_bits") == 4:
                kind = "mxfp4" if w[0].get("type") == "float" and w[0].get("group_size") == 32 else \
                    "int4" if w[0].get("type") == "int" else None
                if kind:
                    rest = "-bf16" if q.get("ignore") else ""
                    return {"value": f"mixed-{kind}{rest}" if rest else kind,
                            "locator": f"{qloc}.config_groups weights num_bits 4, type {w[0].get('type')}, group_size "
                                       f"{w[0].get('group_size')}; ignore list stays BF16"}
        producer = str((q.get("producer") or {}).get("name", "")).lower() if isinstance(q.get("producer"), dict) else ""
        if method == "modelopt" or (not method and producer == "modelopt"):
            # NVIDIA ModelOpt checkpoints: one algorithm for the quantised linears; `ignore` names the modules kept
            # at the compute dtype (attention, gates, LM head, ...), which the single weight format does not model
            algo = str(q.get("quant_algo", ""))
            if algo in MODELOPT_ALGO:
                kept = len(q.get("ignore") or [])
                return {"value": MODELOPT_ALGO[algo],
                        "locator": f"{qloc}.quant_algo {algo} (ModelOpt)" + (f"; {kept} module pattern(s) in `ignore` stay "
                                                                             "at the compute dtype, not modelled" if kept else "")}
            raise CalcInputError(f"{r.loc}.{qloc}.quant_algo", f"ModelOpt quant_algo {algo or '?'!r} is not interpreted "
                                 f"(only {', '.join(MODELOPT_ALGO)})")
        raise CalcInputError(f"{r.loc}.{qloc}.quant_method", f"quantisation {method or '?'!r} is not interpreted")
    for k in ("torch_dtype", "dtype"):
        for src, where in ((r.cfg, r.key(k)), (top, k)):
            v = src.get(k)
            if v is not None:
                if v not in DTYPES:
                    raise CalcInputError(f"{r.loc}.{where}", f"dtype {v!r} is not interpreted")
                return {"value": DTYPES[v], "locator": where}
    raise CalcInputError(f"{r.loc}.torch_dtype", "no quantization_config, torch_dtype or dtype: the weight format is unknown")




# --------------------------------------------------------------------------- families

def record_from_config(config: dict, loc: str = "model_config") -> dict:
    """A models.yaml-shaped architecture record (facts carry `value` and `locator`) from a HF config.json dict."""
    r, notes = _text_part(config, loc)
    for k, why in UNSUPPORTED_KEYS.items():
        if r.has(k) or config.get(k) is not None:
            raise r.err(k, why)
    sac = r.get("sparse_attention_config")
    if isinstance(sac, dict) and sac.get("use_sparse_attention"):
        raise r.err("sparse_attention_config", "block-sparse attention with an index cache (MiniMax-M3 style) is not modelled")
    if r.get("num_kv_shared_layers", 0):
        raise r.err("num_kv_shared_layers", "cross-layer KV sharing is not modelled")
    if not (r.has("num_hidden_layers") and (r.has("num_attention_heads") or r.has("hybrid_override_pattern"))):
        mt = r.get("model_type") or config.get("model_type")
        raise r.err("model_type", f"model type {mt!r} has no recognisable attention keys (num_hidden_layers, num_attention_heads)")

    rec: dict = {}
    L = r.int("num_hidden_layers")
    rec["layers"] = r.fact(L, "num_hidden_layers")
    rec["hidden_size"] = r.fact(r.int("hidden_size"), "hidden_size")
    heads = r.int("num_attention_heads")
    rec["heads"] = r.fact(heads, "num_attention_heads")
    moe = _moe(r, L, rec)
    prov_note: list[str] = []
    if r.has("linear_attn_config"):
        groups = _kimi_linear(r, L, rec, prov_note)
    elif r.has("hybrid_override_pattern"):
        groups = _nemotron_h(r, L, rec, prov_note)
    elif r.has("compress_ratios"):
        groups = _deepseek_v4(r, L, rec, prov_note)
    elif r.has("kv_lora_rank"):
        groups = _mla(r, L, rec, prov_note)
    else:
        groups = _attention(r, L, rec, prov_note)
    if moe:
        rec["moe"] = moe
    rec["kind"] = "moe" if moe else "dense"
    rec["vocab_size"] = r.fact(r.int("vocab_size"), "vocab_size")
    tie = r.cfg.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    if isinstance(tie, bool):
        rec["tie_word_embeddings"] = tie
    if r.has("max_position_embeddings"):
        rec["context_length"] = r.fact(r.int("max_position_embeddings"), "max_position_embeddings")
    for k in ("index_n_heads", "index_head_dim", "index_topk"):
        if r.has(k):
            rec[k] = r.fact(r.int(k), k)
    mtp = r.first("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
    if mtp is not None:
        rec["num_nextn_predict_layers"] = r.fact(r.int(mtp, 0), mtp, note="multi-token-prediction modules, outside num_hidden_layers")
    wd = _weight_dtype(r, config)
    rec["weight_dtype"], rec["weight_dtype_locator"] = wd["value"], wd["locator"]
    rec["layer_groups"] = groups
    rec["layer_groups_provenance"] = {"locator": _locators(rec, r), "note": " ".join(prov_note)}
    if notes:
        rec["notes"] = " ".join(notes)
    return _ordered(rec)


ORDER = ("kind", "attention", "weight_dtype", "weight_dtype_locator", "layers", "hidden_size", "heads", "kv_heads",
         "head_dim", "ffn_size", "vocab_size", "tie_word_embeddings", "moe", "mla", "context_length", "sliding_window",
         "linear_attention_layers", "full_attention_layers", "linear_attention_heads", "linear_attention_head_dim",
         "index_n_heads", "index_head_dim", "index_topk", "num_nextn_predict_layers", "layer_groups",
         "layer_groups_provenance", "notes")


def _ordered(rec: dict) -> dict:
    return {k: rec[k] for k in ORDER if k in rec} | {k: v for k, v in rec.items() if k not in ORDER}


def _locators(rec: dict, r: _Reader) -> str:
    keys = ["num_hidden_layers"]
    for f in ("kv_heads", "head_dim", "sliding_window", "linear_attention_heads"):
        if f in rec:
            keys.append(rec[f]["locator"])
    if "mla" in rec:
        keys += [rec["mla"]["kv_lora_rank"]["locator"], rec["mla"]["qk_rope_head_dim"]["locator"]]
    keys += [k for k in LAYOUT_KEYS if r.has(k)]
    return ", ".join(dict.fromkeys(k if k.startswith(r.prefix) else r.key(k) for k in keys))
