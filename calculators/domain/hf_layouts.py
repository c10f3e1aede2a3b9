"""The attention and FFN layouts of the model families a Hugging Face config can describe: GQA/MHA/MQA with sliding
and chunked windows and per-layer patterns, Gated DeltaNet and KDA hybrids, MLA (with a DSA indexer),
DeepSeek-V4's compressed histories, Nemotron-H's hybrid pattern, and the MoE block.
"""
from __future__ import annotations


from calculators.domain.hf_reader import NEMOTRON_CHARS, _collapse, _group, _is_int, _layer_types, _Reader, _stream

def _heads_dims(r: _Reader, rec: dict, heads: int) -> tuple[int, int]:
    """kv_heads and head_dim facts of a softmax-attention layer."""
    if r.has("num_key_value_heads"):
        kv = r.int("num_key_value_heads")
        rec["kv_heads"] = r.fact(kv, "num_key_value_heads")
    else:
        kv = heads
        rec["kv_heads"] = r.fact(kv, "num_attention_heads", note="no num_key_value_heads key: multi-head attention, kv_heads = heads")
    hk = r.first("head_dim", "attention_head_dim")
    if hk:
        hd = r.int(hk)
        rec["head_dim"] = r.fact(hd, hk)
    else:
        d = r.int("hidden_size")
        if d % heads:
            raise r.err("head_dim", f"absent, and hidden_size {d} is not a multiple of num_attention_heads {heads}")
        hd = d // heads
        rec["head_dim"] = r.fact(hd, "hidden_size", "num_attention_heads",
                                 note=f"derived: {d} / {heads} = {hd}; the config has no head_dim key")
        rec["head_dim"]["locator"] = f"{r.key('hidden_size')} / {r.key('num_attention_heads')}"
    if kv > heads or heads % kv:
        raise r.err("num_key_value_heads", f"{kv} KV heads do not divide {heads} query heads")
    return kv, hd


def _kind(kv: int, heads: int) -> str:
    return "mha" if kv == heads else "mqa" if kv == 1 else "gqa"


def _window_of(r: _Reader, types: list[str]) -> int | None:
    """The sliding window, required when any layer slides."""
    return r.int("sliding_window") if "sliding_attention" in types else None


def _attention(r: _Reader, L: int, rec: dict, note: list[str]) -> list[dict]:
    """Softmax attention (dense GQA/MHA/MQA, windows, chunks, Gemma 4 globals, MiMo hybrids) and Qwen3-Next linear layers."""
    heads = rec["heads"]["value"]
    kv, hd = _heads_dims(r, rec, heads)
    base = _kind(kv, heads)
    dim = 2 * kv * hd
    kv_note = f"dim = 2 x kv_heads x head_dim = 2 x {kv} x {hd} = {dim}"
    types = _layer_types(r, L)
    how = "every layer full attention"
    if types is None and r.has("hybrid_layer_pattern"):  # MiMo-V2: 1 = sliding window, 0 = full attention
        pat = r.int_list("hybrid_layer_pattern", L)
        if set(pat) - {0, 1}:
            raise r.err("hybrid_layer_pattern", "entries must be 0 (full) or 1 (sliding window)")
        types = ["sliding_attention" if p else "full_attention" for p in pat]
        how = "hybrid_layer_pattern (1 = sliding window, 0 = full attention)"
    elif types is None and r.has("sliding_window_pattern"):  # Gemma 3: every p-th layer global
        p = r.int("sliding_window_pattern")
        types = ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(L)]
        how = f"sliding_window_pattern {p}: layer i is global when (i + 1) % {p} == 0, else local"
    elif types is None and r.has("attention_chunk_size"):  # Llama 4: RoPE layers chunked, NoPE layers global
        chunk = r.int("attention_chunk_size")
        if r.has("no_rope_layers"):
            nr = r.int_list("no_rope_layers", L)
            how = "no_rope_layers (1 = RoPE layer, chunked; 0 = NoPE layer, full attention)"
        else:
            step = r.int("no_rope_layer_interval") if r.has("no_rope_layer_interval") else 4
            nr = [int((i + 1) % step != 0) for i in range(L)]
            how = (f"no_rope_layers absent: the Llama4TextConfig default (no_rope_layer_interval {step}) makes every "
                   f"{step}th layer a NoPE full-attention layer and the others chunked")
        types = ["chunked_attention" if x else "full_attention" for x in nr]
        note.append(f"Chunked attention (attention_chunk_size {chunk}) is counted as a window of {chunk} entries: a chunk "
                    f"holds between 1 and {chunk} tokens, so this is the upper bound.")
    elif types is None and r.get("use_sliding_window") is True:  # Qwen2 style: layers >= max_window_layers windowed
        mwl = r.int("max_window_layers", 0)
        types = ["sliding_attention" if i >= mwl else "full_attention" for i in range(L)]
        how = f"use_sliding_window true: layers >= max_window_layers ({mwl}) use the window"
    elif types is None and r.has("sliding_window") and r.get("use_sliding_window") is not False:
        types = ["sliding_attention"] * L
        how = "sliding_window on every layer (no per-layer pattern in the config)"
    elif types is None and r.has("full_attention_interval") and r.has("linear_num_value_heads"):
        p = r.int("full_attention_interval")
        types = ["full_attention" if (i + 1) % p == 0 else "linear_attention" for i in range(L)]
        how = f"full_attention_interval {p}: layer i is full attention when (i + 1) % {p} == 0"
    elif types is None:
        types = ["full_attention"] * L
        if r.get("use_sliding_window") is False and r.has("sliding_window"):
            how += f" (use_sliding_window false, so sliding_window {r.get('sliding_window')} is not applied)"
    else:
        how = "layer_types"

    window = _window_of(r, types)
    if window is not None:
        rec["sliding_window"] = r.fact(window, "sliding_window")
    chunk = r.int("attention_chunk_size") if "chunked_attention" in types else None

    # full-attention layers with their own shapes (Gemma 4 globals; MiMo-V2 swa_* shapes for window layers)
    full_kv, full_hd, full_name, full_dim = kv, hd, "kv", dim
    if r.has("global_head_dim") or r.has("num_global_key_value_heads"):
        full_hd = r.int("global_head_dim") if r.has("global_head_dim") else hd
        full_kv = r.int("num_global_key_value_heads") if r.has("num_global_key_value_heads") else kv
        full_dim = 2 * full_kv * full_hd
        if r.get("attention_k_eq_v") is True:
            full_dim, full_name = full_kv * full_hd, "k=v"
            note.append(f"Full-attention layers use num_global_key_value_heads {full_kv} x global_head_dim {full_hd} with "
                        f"attention_k_eq_v (values reuse the keys): one tensor, dim = {full_kv} x {full_hd} = {full_dim} "
                        "(an engine that stores K and V separately holds twice this).")
        else:
            note.append(f"Full-attention layers: dim = 2 x {full_kv} x {full_hd} = {full_dim}.")
    swa_kv, swa_hd, swa_dim = kv, hd, dim
    v_hd = r.int("v_head_dim") if r.has("v_head_dim") else None
    if v_hd is not None and v_hd != hd:
        full_dim = kv * (hd + v_hd)
        kv_note = f"K and V differ in width: dim = kv_heads x (head_dim + v_head_dim) = {kv} x ({hd} + {v_hd}) = {full_dim}"
        swa_dim = full_dim
    if r.has("swa_num_key_value_heads"):
        swa_kv = r.int("swa_num_key_value_heads")
        swa_hd = r.int("swa_head_dim") if r.has("swa_head_dim") else hd
        swa_v = r.int("swa_v_head_dim") if r.has("swa_v_head_dim") else swa_hd
        swa_dim = swa_kv * (swa_hd + swa_v)
        note.append(f"Sliding-window layers use their own shapes: swa_num_key_value_heads {swa_kv} x (swa_head_dim {swa_hd} "
                    f"+ swa_v_head_dim {swa_v}) = {swa_dim}.")

    lin = None
    if "linear_attention" in types:
        lin = _gated_deltanet(r, rec, note)
    specs = []
    for t in types:
        if t == "full_attention":
            specs.append(_group("full attention", [_stream(full_name, full_dim)], kv_heads=full_kv))
        elif t == "sliding_attention":
            specs.append(_group(f"sliding window ({window})", [_stream("kv", swa_dim, window)], kv_heads=swa_kv))
        elif t == "chunked_attention":
            specs.append(_group(f"chunked attention ({chunk})", [_stream("kv", dim, chunk)], kv_heads=kv))
        else:
            specs.append(lin)
    groups = _collapse(specs)
    kinds = set(types)
    if "linear_attention" in kinds:
        rec["attention"] = "hybrid-linear"
        rec["linear_attention_layers"] = r.fact(types.count("linear_attention"), "layer_types" if r.has("layer_types") else
                                                "full_attention_interval", note="layers of type linear_attention")
        rec["full_attention_layers"] = r.fact(types.count("full_attention"), "layer_types" if r.has("layer_types") else
                                              "full_attention_interval", note="layers of type full_attention")
    elif kinds == {"sliding_attention"}:
        rec["attention"] = f"{base}-swa"
    elif "chunked_attention" in kinds:
        rec["attention"] = "hybrid-chunked"
    elif "sliding_attention" in kinds:
        rec["attention"] = "hybrid-swa"
    else:
        rec["attention"] = base
    note.insert(0, f"{how}: " + ", ".join(f"{g['count']} x {g['name']}" for g in groups) + f". {kv_note}.")
    return groups


def _gated_deltanet(r: _Reader, rec: dict, note: list[str]) -> dict:
    """Qwen3-Next / Qwen3.5 Gated DeltaNet layer: a dk x dv state per value head."""
    hv = r.int("linear_num_value_heads")
    dk = r.int("linear_key_head_dim")
    dv = r.int("linear_value_head_dim")
    hk = r.int("linear_num_key_heads")
    state = hv * dk * dv
    rec["linear_attention_heads"] = r.fact(hv, "linear_num_value_heads", note=f"value heads; {hk} key heads (linear_num_key_heads)")
    rec["linear_attention_head_dim"] = r.fact(dv, "linear_value_head_dim", note=f"key head dim {dk} (linear_key_head_dim)")
    conv = (r.int("linear_conv_kernel_dim") - 1) * (2 * hk * dk + hv * dv) if r.has("linear_conv_kernel_dim") else None
    note.append(f"Gated DeltaNet layers keep a recurrent state of linear_num_value_heads x linear_key_head_dim x "
                f"linear_value_head_dim = {hv} x {dk} x {dv} = {state} values per layer, independent of length"
                + (f"; the short-convolution state ((linear_conv_kernel_dim - 1) x (2 x {hk} x {dk} + {hv} x {dv}) = {conv} "
                   "values per layer) is left out." if conv else "."))
    return _group("linear attention (gated deltanet)", [], state, state_heads=hv)


def _mla_block(r: _Reader, rec: dict) -> tuple[int, int]:
    kvr = r.int("kv_lora_rank")
    rope = r.int("qk_rope_head_dim", 0)
    nope = r.int("qk_nope_head_dim")
    mla = {"kv_lora_rank": r.fact(kvr, "kv_lora_rank")}
    if r.has("q_lora_rank"):
        mla["q_lora_rank"] = r.fact(r.int("q_lora_rank"), "q_lora_rank")
    mla["qk_rope_head_dim"] = r.fact(rope, "qk_rope_head_dim")
    mla["qk_nope_head_dim"] = r.fact(nope, "qk_nope_head_dim")
    mla["v_head_dim"] = r.fact(r.int("v_head_dim"), "v_head_dim")
    rec["mla"] = mla
    heads = rec["heads"]["value"]
    kvh = r.int("num_key_value_heads") if r.has("num_key_value_heads") else heads
    rec["kv_heads"] = r.fact(kvh, "num_key_value_heads" if r.has("num_key_value_heads") else "num_attention_heads",
                             note="MLA: keys and values are reconstructed per head from the shared latent")
    if r.has("qk_head_dim") and r.int("qk_head_dim") != nope + rope:
        raise r.err("qk_head_dim", f"{r.get('qk_head_dim')} != qk_nope_head_dim + qk_rope_head_dim = {nope + rope}")
    rec["head_dim"] = r.fact(nope + rope, "qk_nope_head_dim", "qk_rope_head_dim",
                             note=f"derived: query/key head dim {nope} + {rope} = {nope + rope}; values use v_head_dim")
    return kvr, rope


def _mla(r: _Reader, L: int, rec: dict, note: list[str]) -> list[dict]:
    """DeepSeek V2/V3/R1, Kimi K2, GLM-5: a compact latent per layer (plus a DSA indexer key when configured)."""
    kvr, rope = _mla_block(r, rec)
    streams = [_stream("latent", kvr + rope)]
    rec["attention"] = "mla"
    text = (f"Compact MLA cache on all {L} layers: one latent of kv_lora_rank + qk_rope_head_dim = {kvr} + {rope} = "
            f"{kvr + rope} values per token per layer, shared by all heads.")
    if r.has("index_head_dim"):
        ih = r.int("index_head_dim")
        streams.append(_stream("indexer", ih))
        rec["attention"] = "mla-dsa"
        text += (f" DeepSeek Sparse Attention adds the lightning indexer's key cache: index_head_dim = {ih} values per "
                 f"token per layer (one key shared by the index_n_heads {r.get('index_n_heads')} query heads); attention "
                 f"reads only index_topk {r.get('index_topk')} entries but all are kept.")
    note.append(text)
    return [_group("mla + dsa indexer" if len(streams) > 1 else "mla", streams) | {"count": L}]


def _deepseek_v4(r: _Reader, L: int, rec: dict, note: list[str]) -> list[dict]:
    """DeepSeek V4: a sliding window on every layer plus CSA (ratio 4, with indexer) or HCA compressed history."""
    heads = rec["heads"]["value"]
    kv, hd = _heads_dims(r, rec, heads)
    if kv != 1:
        raise r.err("num_key_value_heads", f"DeepSeek-V4 layout expects one shared KV entry, got {kv}")
    w = r.int("sliding_window")
    rec["sliding_window"] = r.fact(w, "sliding_window")
    mtp = r.int("num_nextn_predict_layers", 0) if r.has("num_nextn_predict_layers") else 0
    ratios = r.int_list("compress_ratios", L + mtp)[:L]
    ih = r.int("index_head_dim")
    specs = []
    for i, c in enumerate(ratios):
        win = _stream("window", hd, w)
        if c == 0:
            specs.append(_group("window only", [win]))
        elif c == 4:
            specs.append(_group("csa (ratio 4) + indexer", [win, _stream("compressed", hd, None, 4), _stream("indexer", ih, None, 4)]))
        elif c > 1:
            specs.append(_group(f"hca (ratio {c})", [win, _stream("compressed", hd, None, c)]))
        else:
            raise r.err("compress_ratios", f"entry {i} is {c}: expected 0 (window only), 4 (CSA) or a larger HCA ratio")
    groups = _collapse(specs)
    rec["attention"] = "csa-hca"
    note.append(f"compress_ratios over the {L} main layers (the last {mtp} entries are the MTP modules): "
                + ", ".join(f"{g['count']} x {g['name']}" for g in groups)
                + f". Every layer keeps a {w}-token window of one shared entry of head_dim {hd} values (K = V, no factor 2); "
                  f"ratio-4 (CSA) layers add one compressed entry per 4 tokens and a lightning-indexer key of index_head_dim "
                  f"{ih} per 4 tokens (the reference code builds the indexer only when compress_ratio == 4); other ratios (HCA) "
                  "add one compressed entry per `ratio` tokens. Compressor state and unfinished blocks are not streams.")
    return groups


def _kimi_linear(r: _Reader, L: int, rec: dict, note: list[str]) -> list[dict]:
    """Kimi Linear / K3: KDA layers (recurrent state) and MLA layers, listed 1-based in linear_attn_config."""
    lac = r.get("linear_attn_config")
    sub = _Reader(lac, r.loc, r.key("linear_attn_config."))
    kda = sub.int_list("kda_layers")
    full = sub.int_list("full_attn_layers")
    if sorted(kda + full) != list(range(1, L + 1)):
        raise sub.err("kda_layers", f"kda_layers and full_attn_layers must partition layers 1..{L}")
    nh, hd = sub.int("num_heads"), sub.int("head_dim")
    state = nh * hd * hd
    kvr, rope = _mla_block(r, rec)
    rec["attention"] = "kda-mla"
    rec["linear_attention_layers"] = sub.fact(len(kda), "kda_layers", note="length of the list")
    rec["full_attention_layers"] = sub.fact(len(full), "full_attn_layers", note="length of the list")
    rec["linear_attention_heads"] = sub.fact(nh, "num_heads")
    rec["linear_attention_head_dim"] = sub.fact(hd, "head_dim")
    specs = [_group("kda (recurrent)", [], state, state_heads=nh) if i in kda else _group("mla", [_stream("latent", kvr + rope)])
             for i in range(1, L + 1)]
    note.append(f"KDA layers (linear_attn_config.kda_layers, 1-based: {len(kda)}) keep a recurrent state of num_heads x "
                f"head_dim x head_dim = {nh} x {hd} x {hd} = {state} values per layer; short-conv state (kernel "
                f"{lac.get('short_conv_kernel_size')}), projections and gates are left out. MLA layers (full_attn_layers: "
                f"{len(full)}) cache kv_lora_rank + qk_rope_head_dim = {kvr} + {rope} = {kvr + rope} values per token.")
    return _collapse(specs)


def _nemotron_h(r: _Reader, L: int, rec: dict, note: list[str]) -> list[dict]:
    """Nemotron-H: hybrid_override_pattern of Mamba-2 (M), attention (*), MLP (-) and MoE (E) layers."""
    pat = r.get("hybrid_override_pattern")
    if not isinstance(pat, str) or len(pat) != L:
        raise r.err("hybrid_override_pattern", f"needs a string of {L} characters (num_hidden_layers)")
    bad = sorted(set(pat) - set(NEMOTRON_CHARS))
    if bad:
        raise r.err("hybrid_override_pattern", f"unknown layer code(s) {bad}; known: M (Mamba-2), * (attention), - (MLP), E (MoE)")
    heads = rec["heads"]["value"]
    kv, hd = _heads_dims(r, rec, heads)
    nh, mhd, ds = r.int("mamba_num_heads"), r.int("mamba_head_dim"), r.int("ssm_state_size")
    state = nh * mhd * ds
    dim = 2 * kv * hd
    specs = []
    for c in pat:
        if c == "M":
            specs.append(_group("mamba2 (recurrent)", [], state, state_heads=nh))
        elif c == "*":
            specs.append(_group("full attention", [_stream("kv", dim)], kv_heads=kv))
    groups = _collapse(specs)
    rec["attention"] = "hybrid-mamba"
    rec["linear_attention_layers"] = r.fact(pat.count("M"), "hybrid_override_pattern", note="count of M (Mamba-2) layers")
    rec["full_attention_layers"] = r.fact(pat.count("*"), "hybrid_override_pattern", note="count of * (attention) layers")
    rec["linear_attention_heads"] = r.fact(nh, "mamba_num_heads")
    rec["linear_attention_head_dim"] = r.fact(mhd, "mamba_head_dim")
    ng = r.get("n_groups")
    conv = (r.int("conv_kernel") - 1) * (nh * mhd + 2 * r.int("n_groups") * ds) if r.has("conv_kernel") and ng else None
    note.append(f"hybrid_override_pattern ({L} layers): {pat.count('M')} Mamba-2, {pat.count('*')} attention, "
                f"{pat.count('-')} MLP-only and {pat.count('E')} MoE-only layers; MLP/MoE layers keep no cache. Attention "
                f"layers: dim = 2 x {kv} x {hd} = {dim}. Mamba-2 layers keep an SSM state of mamba_num_heads x mamba_head_dim x "
                f"ssm_state_size = {nh} x {mhd} x {ds} = {state} values per layer"
                + (f"; the convolution state ((conv_kernel - 1) x (heads x head_dim + 2 x n_groups x state) = {conv} values) "
                   "is left out." if conv else "."))
    return groups


# --------------------------------------------------------------------------- MoE

def _moe(r: _Reader, L: int, rec: dict) -> dict | None:
    """The `moe` block (experts, top-k, shared, expert width, dense layers) and the dense `ffn_size`, or None."""
    ek = r.first("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
    if r.get("enable_moe_block") is False:
        ek = None
    if ek is None or r.int(ek, 0) <= 1:
        if r.has("intermediate_size"):
            rec["ffn_size"] = r.fact(r.int("intermediate_size"), "intermediate_size")
        return None
    E = r.int(ek)
    tk = r.first("num_experts_per_tok", "num_experts_per_token", "top_k_experts", "moe_topk", "experts_per_token")
    if tk is None:
        raise r.err("num_experts_per_tok", f"{ek} = {E} experts but no experts-per-token key")
    moe: dict = {"experts": r.fact(E, ek), "experts_per_token": r.fact(r.int(tk), tk)}
    wk = "moe_intermediate_size" if r.has("moe_intermediate_size") else "intermediate_size"
    width = r.int(wk)
    # shared experts
    sk = r.first("n_shared_experts", "num_shared_experts")
    if sk:
        moe["shared_experts"] = r.fact(r.int(sk, 0), sk)
    elif r.has("shared_expert_intermediate_size"):
        s = r.int("shared_expert_intermediate_size", 0)
        moe["shared_experts"] = r.fact(int(s > 0), "shared_expert_intermediate_size",
                                       note=f"one shared expert of width {s}" if s else "0: no shared expert")
    elif r.has("shared_intermediate_size"):
        s = r.int("shared_intermediate_size", 0)
        moe["shared_experts"] = r.fact(int(s > 0), "shared_intermediate_size",
                                       note=f"one shared expert of width {s}" if s else "0: no shared expert")
    elif r.has("interleave_moe_layer_step"):  # Llama 4 MoE blocks always carry one shared expert
        moe["shared_experts"] = r.fact(1, "interleave_moe_layer_step",
                                       note="Llama 4 MoE layers have one shared expert of intermediate_size (Llama4TextMoe)")
    else:
        moe["shared_experts"] = r.fact(0, ek, note="derived: the config defines only routed experts")
        moe["shared_experts"]["locator"] = "no shared-expert field in the config"
    moe["expert_ffn_size"] = r.fact(width, wk)
    lk = r.first("moe_latent_size", "routed_expert_hidden_size")
    if lk:  # latent MoE: routed experts read and write a narrower latent, not hidden_size
        moe["expert_ffn_size"]["note"] = f"routed experts work in a {r.int(lk)}-wide latent ({r.key(lk)}), not hidden_size"
    sw = r.first("moe_shared_expert_intermediate_size", "share_expert_dim", "shared_expert_intermediate_size")
    if sw and moe["shared_experts"]["value"] and r.int(sw, 0) != width:
        moe["shared_experts"]["note"] = f"shared expert width {r.get(sw)} ({sw}) differs from the routed experts' {width}"
    # dense (non-MoE) layers
    dense, dloc, dnote = 0, None, None
    if r.has("hybrid_override_pattern"):
        pat = str(r.get("hybrid_override_pattern"))
        dense, dloc = pat.count("-"), "hybrid_override_pattern"
        dnote = f"MLP-only layers ('-'); {pat.count('E')} layers are MoE ('E'); Mamba/attention layers have no FFN"
    elif isinstance(r.get("moe_layer_freq"), list):
        f = r.int_list("moe_layer_freq", L)
        dense, dloc, dnote = f.count(0), "moe_layer_freq", "entries equal to 0 (dense layers)"
    elif r.has("first_k_dense_replace"):
        dense, dloc = r.int("first_k_dense_replace", 0), "first_k_dense_replace"
        step = r.int("moe_layer_freq") if r.has("moe_layer_freq") else 1
        if step > 1:
            dense = L - sum(1 for i in range(L) if i >= dense and i % step == 0)
            dnote = f"derived with moe_layer_freq {step}: MoE when i >= first_k_dense_replace and i % {step} == 0"
    elif r.has("interleave_moe_layer_step"):
        step = r.int("interleave_moe_layer_step")
        dense, dloc = L - L // step, "interleave_moe_layer_step"
        if dense:
            dnote = f"derived: every {step}th layer is MoE, the other {dense} dense (interleaved, not leading)"
    elif r.has("mlp_only_layers") or r.has("decoder_sparse_step"):
        only = set(r.get("mlp_only_layers", []))
        step = r.int("decoder_sparse_step") if r.has("decoder_sparse_step") else 1
        dense = sum(1 for i in range(L) if i in only or (i + 1) % step != 0)
        dloc = "mlp_only_layers, decoder_sparse_step"
        dnote = f"derived: mlp_only_layers {sorted(only)}, decoder_sparse_step {step}"
    if dloc:
        moe["dense_layers"] = r.fact(dense, dloc, note=dnote)
    if _is_int(r.get("moe_layer_freq")):
        moe["moe_layer_freq"] = r.fact(r.get("moe_layer_freq"), "moe_layer_freq")
    if dense:
        fk = r.first("dense_intermediate_size", "intermediate_size_mlp") or ("intermediate_size" if wk != "intermediate_size" else None)
        if fk is None:
            raise r.err("intermediate_size", f"{dense} dense layers but no dense FFN width")
        rec["ffn_size"] = r.fact(r.int(fk), fk, note="FFN width of the dense layers")
    elif r.get("enable_moe_block") is True and r.has("intermediate_size"):  # Gemma 4 26B: dense MLP beside the experts
        rec["ffn_size"] = r.fact(r.int("intermediate_size"), "intermediate_size",
                                 note="every layer also runs a dense MLP of this width beside the experts")
    return moe
