"""The layer layout of any model: what each group of layers mixes tokens with, and what its FFN is.

`Arch` (in `architecture`) covers models whose every layer has the same attention. A `Layout` covers every
model in the store and every Hugging Face config the reader accepts, by reading the record's KV layer groups
(one per attention kind, with windows, compression ratios and recurrent state) beside its shapes:

- a *mixer group* per layer group: full, sliding-window or chunked attention (GQA/MHA/MQA, K = V allowed), MLA
  (with a DeepSeek sparse-attention indexer when the record has one), compressed attention (DeepSeek V4's
  CSA/HCA: a window plus entries kept every `ratio` tokens), or linear/recurrent attention (Gated DeltaNet,
  KDA, Mamba-2: a fixed state per layer);
- the FFN layers: dense ones (`ffn`), MoE ones (E routed experts of width f, top-k, shared experts), and
  layers that are FFN-only (Nemotron-H's pattern puts mixers and FFNs on separate layers);
- the projection parameters of each, itemised from the shapes where they are known, and for the pieces a record
  does not itemise (linear-attention gates, V4's grouped output projection) estimated and stated.

`layout_of(rec)` is memoised per store record; `layout_ledger(layout)` gives the parameter count per component
(the basis of weight bytes in each component's format).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from typing import Any

from calculators.domain.architecture import Arch, arch_from_record, ledger
from calculators.domain.formats import format_bytes, format_label, resolve_format, shipped_weight_formats
from calculators.framework import CalcInputError, RecordMemo, Result, fact_source, fact_value, num

#: mixer kinds
ATTENTION, MLA, COMPRESSED, LINEAR = "attention", "mla", "compressed", "linear"
#: the attention labels of model records this module reads, and the linear-attention kind each implies
LINEAR_KINDS = {"hybrid-linear": "gated-deltanet", "hybrid-mamba": "mamba2", "kda-mla": "kda"}
KNOWN_ATTENTION = ("mha", "gqa", "mqa", "gqa-swa", "swa", "hybrid-swa", "hybrid-chunked", "mla", "mla-dsa", "csa-hca",
                   "hybrid-linear", "hybrid-mamba", "kda-mla")


@dataclass(frozen=True)
class Mixer:
    """One group of layers with the same token mixer (all sizes per layer, whole model, before any split)."""

    name: str
    count: int
    kind: str                       # attention | mla | compressed | linear
    heads: int = 0                  # query heads (linear: value heads)
    kv_heads: int = 0               # cached K/V heads (MLA: 1 latent; linear: state heads)
    head_dim: int = 0               # Q/K width per head (MLA: nope + rope)
    v_dim: int = 0                  # V width per head
    window: int | None = None       # keys a query sees at most (sliding window or chunk)
    key_ratio: int = 1              # compressed: one key per `key_ratio` tokens beyond the window
    params: float = 0.0             # projection parameters per layer (matrices)
    kv_values: int = 0              # cached values per token per layer (all streams, before windows)
    kv_lora: int = 0                # MLA latent rank
    rope_dim: int = 0
    index_heads: int = 0            # DSA / CSA indexer
    index_dim: int = 0
    index_topk: int = 0             # keys the main attention reads per query with an indexer
    state_elements: int = 0         # linear: recurrent state values per layer
    linear_kind: str = ""
    estimated: bool = False         # params estimated, not itemised from published shapes


@dataclass(frozen=True)
class Layout:
    """Every layer of a model as mixer groups and FFN counts (whole model, before any split)."""

    name: str
    layers: int
    d: int
    vocab: int
    tied: bool
    mixers: tuple[Mixer, ...]
    ffn_layers: int                 # layers with an FFN (dense or MoE)
    dense_layers: int
    ffn: int                        # dense FFN width
    moe_layers: int = 0
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0             # total width of the shared experts (0: none)
    expert_params: float = 0.0      # parameters of one routed expert in one layer
    ffn_matrices: int = 3
    qk_norm: bool = False
    mtp_layers: int = 0             # multi-token-prediction modules beside the main layers (num_nextn_predict_layers)
    published_total: float | None = None
    published_active: float | None = None
    notes: tuple[str, ...] = field(default=())
    arch: Arch | None = None        # the uniform projection Arch, where the record has one

    @property
    def mixer_layers(self) -> int:
        return sum(m.count for m in self.mixers)

    def kinds(self) -> list[str]:
        return sorted({m.kind for m in self.mixers})


_MEMO = RecordMemo()


def layout_of(rec: dict, loc: str = "model") -> Layout:
    """The layout of a model record (store or `model_config`); a 422 naming `loc` when it cannot be read."""
    return _MEMO.get(rec, ("layout", loc), lambda: _layout(rec, loc))


def _v(rec: dict, *path: str, loc: str, required: bool = True):
    return fact_value(rec, *path, loc=loc, required=required)


def _attention_params(d: int, heads: int, kv_heads: int, hd: int, v_dim: int, k_eq_v: bool) -> float:
    return float(d * heads * hd + d * kv_heads * hd + (0 if k_eq_v else d * kv_heads * v_dim) + heads * v_dim * d)


def _mla_params(rec: dict, d: int, heads: int, loc: str) -> tuple[float, int, int, int, int]:
    kvr = int(_v(rec, "mla", "kv_lora_rank", loc=loc))
    qr = int(_v(rec, "mla", "q_lora_rank", loc=loc, required=False) or 0)
    rope = int(_v(rec, "mla", "qk_rope_head_dim", loc=loc, required=False) or 0)
    hd = int(_v(rec, "head_dim", loc=loc))
    nope = int(_v(rec, "mla", "qk_nope_head_dim", loc=loc, required=False) or (hd - rope))
    vd = int(_v(rec, "mla", "v_head_dim", loc=loc, required=False) or hd)
    q = (d * qr + qr * heads * (nope + rope)) if qr else d * heads * (nope + rope)
    p = q + d * (kvr + rope) + kvr * heads * (nope + vd) + heads * vd * d
    return float(p), kvr, rope, nope + rope, vd


def _layout(rec: dict, loc: str) -> Layout:
    kind = str(rec.get("attention", "")).lower()
    name = rec.get("id", "model")
    if kind not in KNOWN_ATTENTION:
        raise CalcInputError(f"{loc}.attention", f"{name}: attention layout {kind or '(none)'!r} is not understood; known: "
                             + ", ".join(KNOWN_ATTENTION))
    L = int(_v(rec, "layers", loc=loc))
    d = int(_v(rec, "hidden_size", loc=loc))
    heads = int(_v(rec, "heads", loc=loc))
    kvh = int(_v(rec, "kv_heads", loc=loc, required=False) or heads)
    hd = int(_v(rec, "head_dim", loc=loc, required=False) or d // heads)
    vocab = int(_v(rec, "vocab_size", loc=loc))
    notes: list[str] = []
    groups = rec.get("layer_groups") or [{"name": "layers", "count": L, "streams": [{"dim": 2 * kvh * hd}]}]
    mla_shape = _mla_params(rec, d, heads, loc) if rec.get("mla") else None
    ih = int(_v(rec, "index_n_heads", loc=loc, required=False) or 0)
    idim = int(_v(rec, "index_head_dim", loc=loc, required=False) or 0)
    itopk = int(_v(rec, "index_topk", loc=loc, required=False) or 0)
    lin_heads = int(_v(rec, "linear_attention_heads", loc=loc, required=False) or 0)
    lin_hd = int(_v(rec, "linear_attention_head_dim", loc=loc, required=False) or 0)
    mixers: list[Mixer] = []
    for g in groups:
        count = int(g["count"]["value"] if isinstance(g["count"], dict) else g["count"])
        streams = g.get("streams") or []
        gname = g.get("name") or "layers"
        dims = [int(s["dim"]["value"] if isinstance(s["dim"], dict) else s["dim"]) for s in streams]
        state = int(g.get("state_elements") or 0)
        if not streams:
            if not state:
                raise CalcInputError(f"{loc}.layer_groups", f"{name}: group {gname!r} keeps neither a cache nor a state")
            lk = LINEAR_KINDS.get(kind, "linear")
            sh = int(g.get("state_heads") or lin_heads or 1)
            width = (lin_heads or sh) * (lin_hd or max(int(round((state / max(sh, 1)) ** 0.5)), 1))
            # q, k, v and output projections of width heads × head_dim (Mamba-2: in_proj of x and z, out_proj); the
            # gates, the short convolution and the low-rank pieces are within a few per cent of these and left out
            params = float((4 if lk != "mamba2" else 3) * d * width)
            mixers.append(Mixer(gname, count, LINEAR, heads=lin_heads or sh, kv_heads=sh, head_dim=lin_hd, v_dim=lin_hd,
                                params=params, state_elements=state, linear_kind=lk, estimated=True))
            continue
        windows = [None if s.get("window") is None else int(s["window"]) for s in streams]
        ratios = [int(s.get("ratio") or 1) for s in streams]
        if kind == "csa-hca":
            # one shared K = V entry of head_dim per kept token: a window of every token, plus one per `ratio`
            ratio = max(ratios)
            win = next((w for w, r in zip(windows, ratios) if w is not None and r == 1), None)
            has_idx = any(s.get("name") == "indexer" for s in streams)
            mixers.append(Mixer(gname, count, COMPRESSED, heads=heads, kv_heads=1, head_dim=hd, v_dim=hd, window=win,
                                key_ratio=ratio, params=0.0, kv_values=sum(dims),
                                index_heads=ih if has_idx else 0, index_dim=idim if has_idx else 0,
                                index_topk=itopk if has_idx else 0, estimated=True))
            continue
        if mla_shape is not None and dims and dims[0] == mla_shape[1] + mla_shape[2]:
            p, kvr, rope, qk, vd = mla_shape
            has_idx = len(dims) > 1 and ih and idim
            if has_idx:
                qr = int(_v(rec, "mla", "q_lora_rank", loc=loc, required=False) or d)
                p += qr * ih * idim + d * idim + d * ih
            mixers.append(Mixer(gname, count, MLA, heads=heads, kv_heads=1, head_dim=qk, v_dim=vd, params=p,
                                kv_values=sum(dims), kv_lora=kvr, rope_dim=rope, index_heads=ih if has_idx else 0,
                                index_dim=idim if has_idx else 0, index_topk=itopk if has_idx else 0))
            continue
        gkv = int(g.get("kv_heads") or kvh)
        k_eq_v = str(streams[0].get("name", "")).lower() in ("k=v", "k = v")
        per_head = dims[0] // gkv if gkv else 2 * hd
        ghd = per_head if k_eq_v else per_head // 2
        if ghd <= 0:
            raise CalcInputError(f"{loc}.layer_groups", f"{name}: group {gname!r} has a stream narrower than its KV heads")
        params = _attention_params(d, heads, gkv, ghd, ghd, k_eq_v)
        mixers.append(Mixer(gname, count, ATTENTION, heads=heads, kv_heads=gkv, head_dim=ghd, v_dim=ghd, window=windows[0],
                            params=params, kv_values=sum(dims)))
    n_mix = sum(m.count for m in mixers)
    if n_mix > L:
        raise CalcInputError(f"{loc}.layer_groups", f"{name}: layer groups count {n_mix} layers, more than its {L}")
    # Nemotron-H style patterns put FFNs on layers of their own; everywhere else every layer has one
    ffn_layers = L - n_mix if n_mix < L else L
    ffn = int(_v(rec, "ffn_size", loc=loc, required=False) or 0)
    moe = rec.get("moe")
    lay = dict(name=name, layers=L, d=d, vocab=vocab, tied=bool(rec.get("tie_word_embeddings", False)),
               qk_norm=bool(rec.get("qk_norm", False)), ffn_layers=ffn_layers, ffn=ffn,
               mtp_layers=int(_v(rec, "num_nextn_predict_layers", loc=loc, required=False) or 0),
               published_total=_v(rec, "params_total", loc=loc, required=False),
               published_active=_v(rec, "params_active", loc=loc, required=False))
    if moe:
        E = int(_v(rec, "moe", "experts", loc=loc))
        k = int(_v(rec, "moe", "experts_per_token", loc=loc))
        f = int(_v(rec, "moe", "expert_ffn_size", loc=loc))
        shared = int(_v(rec, "moe", "shared_experts", loc=loc, required=False) or 0)
        dense = int(_v(rec, "moe", "dense_layers", loc=loc, required=False) or 0)
        if dense and not ffn:
            ffn = f * max(k, 1)
            notes.append(f"{name}: its {dense} dense layers have no published width; taken as top-k × expert width = {ffn}.")
        moe_layers = max(ffn_layers - dense, 0)
        lay.update(ffn=ffn, dense_layers=ffn_layers - moe_layers, moe_layers=moe_layers, experts=E, top_k=k, expert_ffn=f,
                   shared_ffn=shared * f, expert_params=float(3 * d * f))
    else:
        lay.update(dense_layers=ffn_layers)
        if not ffn:
            raise CalcInputError(f"{loc}.ffn_size", f"{name}: no FFN width (ffn_size) and no MoE block")
    out = Layout(mixers=tuple(mixers), notes=tuple(notes), arch=arch_from_record(rec, None, loc), **lay)
    return _reconciled(out)


def _reconciled(lay: Layout) -> Layout:
    """Fill what the shapes leave open from the published parameter counts, and say so: the attention of a
    compressed (DeepSeek V4) layer, and the size of one expert where the expert shapes overshoot the total."""
    notes = list(lay.notes)
    led = layout_ledger(lay)
    total = lay.published_total
    if lay.experts and total and led["components"]["routed_experts"] >= total:
        active = lay.published_active or 0.0
        if lay.experts > lay.top_k and total > active > 0:
            per = (total - active) / (lay.experts - lay.top_k) / max(lay.moe_layers, 1)
            notes.append(f"{lay.name}: its expert shapes (3·d·f each) exceed the published total {num(total)}; one expert's "
                         f"size is taken from the published counts, (total − active)/(E − k) per MoE layer = {num(per)}.")
            lay = replace(lay, expert_params=per, notes=tuple(notes))
            led = layout_ledger(lay)
    open_mixers = [m for m in lay.mixers if m.kind == COMPRESSED and not m.params]
    if open_mixers:
        rest = (total or 0.0) - led["total"]
        n = sum(m.count for m in open_mixers)
        fallback = 2.0 * lay.d * lay.mixers[0].heads * lay.mixers[0].head_dim
        per = rest / n if total and rest > 0 else fallback
        how = (f"the published total {num(total)} less every itemised part, over its {n} compressed-attention layers"
               if total and rest > 0 else "2 × d × heads × head_dim (no published total to take it from)")
        notes.append(f"{lay.name}: compressed-attention projections (low-rank query, grouped output) are not itemised by "
                     f"its config; {num(per)} parameters per layer are taken as {how}.")
        lay = replace(lay, mixers=tuple(replace(m, params=per) if m in open_mixers else m for m in lay.mixers),
                      notes=tuple(notes))
    if any(m.kind == LINEAR for m in lay.mixers):
        kinds = sorted({m.linear_kind for m in lay.mixers if m.kind == LINEAR})
        notes.append(f"{lay.name}: linear-attention ({', '.join(kinds)}) projections estimated from their widths "
                     "(4·d·heads·head_dim; Mamba-2 3·d·d_inner); gates and short convolutions are left out.")
        lay = replace(lay, notes=tuple(notes))
    return lay


def layout_ledger(lay: Layout) -> dict:
    """Parameters per component (whole model) and the matrices each token multiplies (active)."""
    cached = lay.__dict__.get("_ledger")
    if cached is not None:
        return cached
    d = lay.d
    attn = sum(m.params * m.count for m in lay.mixers)
    dense = float(lay.ffn_matrices * d * lay.ffn * lay.dense_layers)
    routed = lay.expert_params * lay.experts * lay.moe_layers
    shared = float(lay.ffn_matrices * d * lay.shared_ffn * lay.moe_layers)
    router = float(d * lay.experts * lay.moe_layers)
    norms = float(2 * d * lay.layers + d)
    emb = float(lay.vocab * d)
    head = 0.0 if lay.tied else emb
    comp = {"attention": attn, "dense_ffn": dense, "routed_experts": routed, "shared_experts": shared, "router": router,
            "norms": norms, "embeddings": emb, "lm_head": head}
    active_matrix = {"attention": attn, "dense_ffn": dense, "routed_experts": lay.expert_params * lay.top_k * lay.moe_layers,
                     "shared_experts": shared, "router": router}
    led = {"components": comp, "total": sum(comp.values()), "active_matrix": active_matrix,
           "active_matrix_total": sum(active_matrix.values()), "head_matrix": emb,
           "active_total": sum(active_matrix.values()) + norms + emb + head}
    lay.__dict__["_ledger"] = led       # frozen: kept beside the fields, computed once per layout
    return led


def layout_from_arch(arch: Arch) -> Layout:
    """The layout of a uniform `Arch` (explicit shapes, or a store record with one attention kind)."""
    per = ledger(arch)["per_layer"]
    if arch.attention == "mla":
        mixer = Mixer("mla", arch.layers, MLA, heads=arch.heads, kv_heads=1, head_dim=arch.qk_dim, v_dim=arch.vo_dim,
                      params=float(per["attention"]), kv_values=arch.kv_values_per_token(), kv_lora=arch.kv_lora,
                      rope_dim=arch.rope_dim)
    else:
        mixer = Mixer("layers", arch.layers, ATTENTION, heads=arch.heads, kv_heads=arch.kv_heads or arch.heads,
                      head_dim=arch.head_dim, v_dim=arch.head_dim, params=float(per["attention"]),
                      kv_values=arch.kv_values_per_token())
    return Layout(name=arch.name, layers=arch.layers, d=arch.d, vocab=arch.vocab, tied=arch.tied, mixers=(mixer,),
                  ffn_layers=arch.layers, dense_layers=arch.dense_ffn_layers, ffn=arch.ffn, moe_layers=arch.moe_layers,
                  experts=arch.experts, top_k=arch.top_k, expert_ffn=arch.expert_ffn,
                  shared_ffn=arch.shared * arch.expert_ffn, expert_params=float(arch.ffn_matrices * arch.d * arch.expert_ffn),
                  ffn_matrices=arch.ffn_matrices, qk_norm=arch.qk_norm, arch=arch)


def model_weight_bytes(rec: dict, weight_format: Any, res: Result, loc: str = "weight_format") -> float:
    """Bytes of a model's weights: in `weight_format` when given, else in its published formats (per component when
    the record's shapes allow a ledger, e.g. MXFP4 experts beside BF16 attention), stated in the assumptions."""
    shipped = shipped_weight_formats(rec.get("weight_dtype")) if weight_format is None else None
    if weight_format is None and shipped is None:
        weight_format = "bf16"
        res.assume(f"Weight format: {rec.get('id')} states no published format; bf16 assumed (pass `{loc}`).")
    arch = arch_from_record(rec, None, "model") if rec.get("layer_groups") is not None or rec.get("attention") else None
    comp = ledger(arch)["components"] if arch is not None else _layout_components(rec)
    if comp is not None:
        fmt_of = (lambda c: weight_format) if weight_format is not None else shipped.for_component
        parts = {c: float(format_bytes(v, fmt_of(c))) for c, v in comp.items()}
        weights = sum(parts.values())
        used = sorted({format_label(fmt_of(c)) for c, v in comp.items() if v})
        res.step("weights", "Σ component params × bits/8", " + ".join(f"{c} {num(v)} B" for c, v in parts.items() if v), weights, "B")
    else:
        params = float(fact_value(rec, "params_total", loc="model"))
        res.cite(fact_source(rec, "params_total"))
        fmt = resolve_format(weight_format if weight_format is not None else shipped.main, loc)
        if shipped is not None and shipped.components:
            res.assume(f"{rec.get('id')}'s shapes are not itemised here, so all {num(params)} parameters are counted in "
                       f"its main format {fmt.name} although {shipped.note}.")
        weights = params * fmt.effective_bits / 8
        used = [fmt.name]
        res.step("weights", "params_total × bytes/param", f"{num(params)} × {num(fmt.effective_bits / 8)} B ({fmt.name})", weights, "B")
    if weight_format is None:
        res.assume(f"Weight format: as published, {shipped.label} ({shipped.note}); pass `{loc}` to change it.")
    else:
        res.assume(f"Weight format: {', '.join(used)} (given).")
    return weights


def _layout_components(rec: dict) -> dict | None:
    """Parameters per component from the record's layer layout (hybrid, windowed, DSA, linear), or None."""
    if not rec.get("layer_groups"):
        return None
    try:
        return layout_ledger(layout_of(rec))["components"]
    except CalcInputError:
        return None
