"""The architecture engine: one place that turns a model into KV/state bytes, parameters and FLOPs.

A model comes from the store (`model`: an id), from a Hugging Face `config.json` (`model_config`,
read by `calculators.domain.hf_config` into the same record shape), or from explicit layer groups. Every
calculator asks this module, so kv-cache, roofline, parallel-split, prefix-cache and serving-cost
size the same model's KV cache to the same byte:
- layer groups → retained entries per stream (`entries_at`) → bytes per request (`kv_sizes`), with
  blocks of a format counted per entry, window and ratio honoured together, TP splits by KV heads;
- shapes → a parameter ledger per component (`ledger`), the basis of weight bytes and of the
  forward FLOPs per token (2 × the matrices each token multiplies);
- the record's `weight_dtype` → the published weight formats (`calculators.domain.formats`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from calculators.domain.records import ModelRecord, as_model
from calculators.domain.model_ids import resolve_model
from calculators.framework import (
    CalcInputError,
    Lookup,
    RecordMemo,
    Result,
    TransientRecord,
    fact_source,
    fact_value,
    num,
    out,
)
from calculators.domain.formats import Fmt, format_bytes, format_label, resolve_format, shipped_weight_formats

#: attention kinds whose cached K/V split across tensor-parallel ranks by KV head
SPLIT_ATTENTION = ("mha", "gqa", "mqa", "gqa-swa", "hybrid-swa", "swa")
#: shapes every projection ledger needs
SHAPE_FIELDS = ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "vocab_size")

#: the request field that carries a Hugging Face config.json (the Python attribute is `hf_config`, because
#: pydantic reserves `model_config`)
MODEL_CONFIG_FIELD = Field(None, alias="model_config", description=(
    "A Hugging Face config.json object as published (instead of `model`): dense GQA/MHA/MQA, MLA, sliding-window "
    "and per-layer patterns, hybrid linear attention and the common MoE layouts are read; a key that cannot be "
    "interpreted is a 422 naming it."), examples=[None], json_schema_extra={"type": "object"})


# --------------------------------------------------------------------------- models

def _given(req, name: str) -> bool:
    attr = "hf_config" if name == "model_config" else name
    return getattr(req, attr, None) is not None


def model_record(req, lookup: Lookup, res: Result | None = None, required: bool = True) -> ModelRecord | None:
    """The model a request names, typed: the store record for `model`, or one built from `model_config`.

    Both come in the store's record shape (facts as {value, source/locator}) behind a `ModelRecord`, so everything
    downstream reads them the same way. None when neither is given and `required` is false."""
    model_id = getattr(req, "model", None)
    config = getattr(req, "hf_config", None)
    if model_id is not None and config is not None:
        raise CalcInputError("model_config", "give `model` (an id) or `model_config`, not both")
    if model_id is not None:
        rec, how = resolve_model(lookup, model_id, "model")
        if how and res is not None:
            # a name read as a store id (case, Hugging Face repository, -Instruct ...): said once, and the request
            # carries the id from here on, so everything keyed by it (benchmarks, labels, nested requests) agrees
            res.assume(how)
            req.model = rec["id"]
        return as_model(rec)
    if config is not None:
        return as_model(record_from_hf_config(config, res))
    if required:
        raise CalcInputError("model", "give `model` (an id) or `model_config` (a config.json object)")
    return None


def record_from_hf_config(config: dict, res: Result | None = None) -> dict:
    """A model record from a config.json: the shapes as read, plus parameter counts from the ledger."""
    from calculators.domain.hf_config import record_from_config

    if not isinstance(config, dict):
        raise CalcInputError("model_config", "must be a JSON object (a config.json)")
    rec = TransientRecord(record_from_config(config, "model_config"))
    rec.setdefault("id", "model_config")
    rec.setdefault("name", str(config.get("_name_or_path") or config.get("model_type") or "model_config"))
    arch = arch_from_record(rec, None, "model_config")
    if arch is not None:
        led = ledger(arch)
        for key, value in (("params_total", led["total"]), ("params_active", led["active_total"])):
            if key not in rec:
                rec[key] = {"value": float(value), "locator": "computed from the config's shapes (parameter ledger)"}
    if res is not None:
        res.assume("Model from `model_config`: shapes read from the given config.json"
                   + ("; parameter counts computed from those shapes, not published figures." if arch is not None else "."))
    return rec


def exact(x):
    """Python ints as JSON integers while float64 holds them exactly, floats beyond (JSON integers stop at 64 bits,
    and a parameter count past 2^53 is far outside any model); recurses into dicts and lists."""
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x if abs(x) < 2**53 else float(x)
    if isinstance(x, dict):
        return {k: exact(v) for k, v in x.items()}
    if isinstance(x, list):
        return [exact(v) for v in x]
    return x


@dataclass
class Arch:
    """Shapes as plain ints (from a request or a store record)."""

    layers: int
    d: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    qk_norm: bool
    ffn_matrices: int
    attention: str
    experts: int = 0
    top_k: int = 0
    shared: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0
    kv_lora: int = 0
    q_lora: int = 0
    rope_dim: int = 0
    nope_dim: int = 0
    v_dim: int = 0
    name: str = "architecture"

    @property
    def moe_layers(self) -> int:
        return max(self.layers - self.dense_layers, 0) if self.experts else 0

    @property
    def dense_ffn_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def qk_dim(self) -> int:
        return self.nope_dim + self.rope_dim if self.attention == "mla" else self.head_dim

    @property
    def vo_dim(self) -> int:
        return self.v_dim if self.attention == "mla" else self.head_dim

    def kv_values_per_token(self) -> int:
        """Cached values per token per layer (K and V, or the MLA latent + rope key)."""
        if self.attention == "mla":
            return self.kv_lora + self.rope_dim
        return 2 * self.kv_heads * self.head_dim


#: what a model record yields (its Arch, layer groups, ledger), computed once per record
_DERIVED = RecordMemo()


def arch_from_record(rec: dict, res: Result | None, loc: str = "model", qk_norm: bool | None = None) -> Arch | None:
    """Shapes of a store model record, or None when its attention family has no projection ledger here.

    The Arch is shared by every request for the record (read it, don't change it); the facts it was read from
    are cited into `res` each time."""
    arch, cited = _DERIVED.get(rec, ("arch", loc, qk_norm), lambda: _arch_from_record(rec, loc, qk_norm))
    if res is not None:
        for prov in cited:
            res.cite(prov)
    return arch


def _arch_from_record(rec: dict, loc: str, qk_norm: bool | None) -> tuple[Arch | None, list[dict]]:
    """(the Arch, the provenance of the facts read) of a model record."""
    kind = str(rec.get("attention", "")).lower()
    if kind not in ("mha", "gqa", "mla"):
        return None, []
    v = {f: fact_value(rec, f, loc=loc) for f in SHAPE_FIELDS}
    ffn = fact_value(rec, "ffn_size", required=False) or 0
    arch = Arch(layers=int(v["layers"]), d=int(v["hidden_size"]), heads=int(v["heads"]), kv_heads=int(v["kv_heads"]),
                head_dim=int(v["head_dim"]), ffn=int(ffn), vocab=int(v["vocab_size"]),
                tied=bool(rec.get("tie_word_embeddings", False)),
                qk_norm=bool(rec.get("qk_norm", False)) if qk_norm is None else qk_norm,
                ffn_matrices=3, attention=kind, name=rec.get("id", "model"))
    cited = list(SHAPE_FIELDS) + (["ffn_size"] if ffn else [])
    if rec.get("moe"):
        arch.experts = int(fact_value(rec, "moe", "experts", loc=loc))
        arch.top_k = int(fact_value(rec, "moe", "experts_per_token", loc=loc))
        arch.shared = int(fact_value(rec, "moe", "shared_experts", required=False) or 0)
        arch.expert_ffn = int(fact_value(rec, "moe", "expert_ffn_size", loc=loc))
        arch.dense_layers = int(fact_value(rec, "moe", "dense_layers", required=False) or 0)
        cited += ["moe.experts", "moe.experts_per_token", "moe.shared_experts", "moe.expert_ffn_size", "moe.dense_layers"]
        if arch.dense_layers and not arch.ffn:
            raise CalcInputError(loc, f"{arch.name} has dense layers but no sourced ffn_size")
    if kind == "mla":
        if not rec.get("mla"):
            raise CalcInputError(loc, f"{arch.name} is MLA but has no sourced mla shapes")
        arch.kv_lora = int(fact_value(rec, "mla", "kv_lora_rank", loc=loc))
        arch.q_lora = int(fact_value(rec, "mla", "q_lora_rank", required=False) or 0)
        arch.rope_dim = int(fact_value(rec, "mla", "qk_rope_head_dim", required=False) or 0)
        arch.nope_dim = int(fact_value(rec, "mla", "qk_nope_head_dim", required=False) or (arch.head_dim - arch.rope_dim))
        arch.v_dim = int(fact_value(rec, "mla", "v_head_dim", required=False) or arch.head_dim)
        cited += ["mla.kv_lora_rank", "mla.q_lora_rank", "mla.qk_rope_head_dim", "mla.qk_nope_head_dim", "mla.v_head_dim"]
    provenance = [p for f in cited if (p := fact_source(rec, *f.split("."))) is not None]
    return arch, provenance


COMPONENTS = ("attention", "dense_ffn", "routed_experts", "shared_experts", "router", "norms", "embeddings", "lm_head")


def ledger(a: Arch) -> dict:
    """Parameter counts per component (whole model), per layer, and per token (active).

    Kept on the Arch instance (a store record's Arch is shared, so its ledger is counted once; an Arch built for one
    request takes its ledger with it): read it, don't change it."""
    led = a.__dict__.get("_ledger")
    if led is None:
        led = a.__dict__["_ledger"] = _ledger(a)
    return led


def _ledger(a: Arch) -> dict:
    d, L = a.d, a.layers
    if a.attention == "mla":
        q = (d * a.q_lora + a.q_lora + a.q_lora * a.heads * a.qk_dim) if a.q_lora else d * a.heads * a.qk_dim
        attn_layer = q + d * (a.kv_lora + a.rope_dim) + a.kv_lora + a.kv_lora * a.heads * (a.nope_dim + a.v_dim) \
            + a.heads * a.v_dim * d
        attn_matrix_layer = attn_layer - a.kv_lora - a.q_lora  # norm vectors inside MLA
    else:
        attn_layer = d * a.heads * a.head_dim + 2 * d * a.kv_heads * a.head_dim + a.heads * a.head_dim * d
        attn_matrix_layer = attn_layer
    expert = a.ffn_matrices * d * a.expert_ffn
    dense_ffn_layer = a.ffn_matrices * d * a.ffn
    norms_layer = 2 * d + (2 * a.qk_dim if a.qk_norm and a.heads else 0)
    comp = {
        "attention": attn_layer * L,
        "dense_ffn": dense_ffn_layer * a.dense_ffn_layers,
        "routed_experts": expert * a.experts * a.moe_layers,
        "shared_experts": expert * a.shared * a.moe_layers,
        "router": d * a.experts * a.moe_layers,
        "norms": norms_layer * L + d,
        "embeddings": a.vocab * d,
        "lm_head": 0 if a.tied else a.vocab * d,
    }
    # matrices that multiply every token (forward FLOPs = 2 x these per token)
    active_matrix = {
        "attention": attn_matrix_layer * L,
        "dense_ffn": comp["dense_ffn"],
        "routed_experts": expert * a.top_k * a.moe_layers,
        "shared_experts": comp["shared_experts"],
        "router": comp["router"],
    }
    head_matrix = a.vocab * d  # the output projection multiplies every token that needs logits (tied or not)
    return exact({
        "components": comp,
        "total": sum(comp.values()),
        "core_matrix": active_matrix["attention"] + comp["dense_ffn"] + comp["routed_experts"] + comp["shared_experts"]
        + comp["router"],
        "active_matrix": active_matrix,
        "active_matrix_total": sum(active_matrix.values()),
        "head_matrix": head_matrix,
        "active_total": sum(active_matrix.values()) + comp["norms"] + comp["embeddings"] + comp["lm_head"]
        + (comp["attention"] - active_matrix["attention"]),
        "per_layer": {"attention": attn_layer, "dense_ffn": dense_ffn_layer if a.ffn else 0,
                      "expert": expert, "norms": norms_layer},
    })


# --------------------------------------------------------------------------- KV and state

@dataclass(frozen=True)
class StreamSpec:
    name: str
    dim: int
    window: int | None
    ratio: int
    heads: int | None           # heads the stream splits into under TP (None = replicated)

    @property
    def full(self) -> bool:
        return self.window is None and self.ratio == 1


@dataclass(frozen=True)
class GroupSpec:
    name: str
    count: int
    streams: tuple[StreamSpec, ...]
    state_elements: int
    state_heads: int | None
    state_fmt: Fmt | None


def _int(v) -> int:
    return int(v["value"] if isinstance(v, dict) else v)


def groups_from_model(rec: dict, res: Result | None, loc: str = "model") -> list[GroupSpec]:
    """A store model record's layer groups as specs (KV heads and state heads inferred from the record).

    Read once per record; each call gets its own list of the (immutable) specs and cites the facts into `res`."""
    groups, cited = _DERIVED.get(rec, ("groups", loc), lambda: _groups_from_model(rec, loc))
    if res is not None:
        for prov in cited:
            res.cite(prov)
    return list(groups)


def _groups_from_model(rec: dict, loc: str) -> tuple[tuple[GroupSpec, ...], list[dict]]:
    """(the layer group specs, the provenance of the facts read) of a model record."""
    raw = rec.get("layer_groups")
    if not raw:
        raise CalcInputError(loc, f"{rec.get('id', '?')} has no layer_groups; give `architecture` instead")
    attention = str(rec.get("attention", "")).lower()
    kv_heads = fact_value(rec, "kv_heads", required=False) if attention in SPLIT_ATTENTION else None
    state_heads = fact_value(rec, "linear_attention_heads", required=False)
    groups = []
    for g in raw:
        gh = g.get("kv_heads", kv_heads)
        sh = g.get("state_heads", state_heads)
        streams = tuple(StreamSpec(s.get("name") or "kv", _int(s["dim"]), None if s.get("window") is None else _int(s["window"]),
                                   _int(s.get("ratio") or 1), int(gh) if gh else None) for s in g.get("streams") or [])
        state = _int(g.get("state_elements") or 0)
        groups.append(GroupSpec(g.get("name") or "layers", _int(g["count"]), streams, state,
                                int(sh) if (sh and state) else None, None))
    cited = []
    prov = rec.get("layer_groups_provenance")
    if isinstance(prov, dict):
        cited.append({"record": rec.get("id"), "field": "layer_groups", "value": None, "source": prov.get("source"),
                      "locator": prov.get("locator"), "source_url": prov.get("source_url")})
    if kv_heads:
        cited.append(fact_source(rec, "kv_heads"))
    if state_heads and any(g.state_elements for g in groups):
        cited.append(fact_source(rec, "linear_attention_heads"))
    return tuple(groups), [c for c in cited if c is not None]


def groups_from_architecture(arch, loc: str = "architecture") -> list[GroupSpec]:
    groups = []
    for i, g in enumerate(arch.layer_groups):
        for j, s in enumerate(g.streams):
            if g.kv_heads and s.dim % g.kv_heads:
                raise CalcInputError(f"{loc}.layer_groups.{i}.kv_heads",
                                     f"stream dim {s.dim} is not a multiple of kv_heads {g.kv_heads}")
        if g.state_heads and g.state_elements % g.state_heads:
            raise CalcInputError(f"{loc}.layer_groups.{i}.state_heads",
                                 f"state_elements {g.state_elements} is not a multiple of state_heads {g.state_heads}")
        sf = resolve_format(g.state_format, f"{loc}.layer_groups.{i}.state_format") if g.state_format is not None else None
        streams = tuple(StreamSpec(s.name or ("kv" if g.kv_heads else f"stream {j}"), s.dim, s.window, s.ratio, g.kv_heads)
                        for j, s in enumerate(g.streams))
        groups.append(GroupSpec(g.name or f"group {i}", g.count, streams, g.state_elements, g.state_heads, sf))
    return groups


def resolve_groups(req, lookup: Lookup, res: Result) -> tuple[list[GroupSpec], dict | None]:
    """Layer groups from `model` or `architecture` (exactly one)."""
    given = [k for k in ("model", "model_config", "architecture") if _given(req, k)]
    if len(given) != 1:
        raise CalcInputError(given[1] if given else "model",
                             "give exactly one of `model` (an id), `model_config` (a config.json) or `architecture`")
    if given[0] != "architecture":
        rec = model_record(req, lookup, res)
        return groups_from_model(rec, res, given[0]), rec
    return groups_from_architecture(req.architecture), None


def kv_source(req, lookup: Lookup, res: Result, required: bool = True) -> tuple[list[GroupSpec] | None, Fmt | None, dict | None]:
    """KV description of the prefix-cache / kv-eviction requests: `model`, `architecture` or `kv_bytes_per_token`."""
    given = [k for k in ("model", "model_config", "architecture", "kv_bytes_per_token") if _given(req, k)]
    if len(given) > 1:
        raise CalcInputError(given[1], "give only one of `model`, `model_config`, `architecture` or `kv_bytes_per_token`")
    if not given:
        if required:
            raise CalcInputError("model", "give `model` (an id), `model_config`, `architecture` or `kv_bytes_per_token`")
        return None, None, None
    if given[0] == "kv_bytes_per_token":
        groups = [GroupSpec("given bytes per token", 1, (StreamSpec("kv", 1, None, 1, None),), 0, None, None)]
        return groups, Fmt("given", 8.0 * req.kv_bytes_per_token, layout="bytes per token given directly"), None
    if given[0] in ("model", "model_config"):
        rec = model_record(req, lookup, res)
        return groups_from_model(rec, res, given[0]), resolve_format(req.kv_format, "kv_format"), rec
    return groups_from_architecture(req.architecture), resolve_format(req.kv_format, "kv_format"), None


def entries_at(tokens: np.ndarray, s: StreamSpec) -> np.ndarray:
    """Retained entries of a stream at `tokens` tokens (int64 arrays)."""
    e = tokens // s.ratio
    if s.window is not None:
        e = np.minimum(e, s.window)
    return e


def _rank_fraction(heads: int | None, tp: int) -> float:
    """Share of a head-split tensor on one rank: ceil(h / tp) / h (one whole head when h < tp)."""
    if not heads or tp <= 1:
        return 1.0
    return math.ceil(heads / tp) / heads


@dataclass
class Sizes:
    values_per_token: float
    bytes_per_token: float
    device_bytes_per_token: float
    values_per_request: np.ndarray
    bytes_per_request: np.ndarray
    device_bytes_per_request: np.ndarray
    state_elements: float
    state_bytes: float
    device_state_bytes: float
    pages_per_request: np.ndarray | None
    groups: list[dict]


def kv_sizes(groups: list[GroupSpec], fmt: Fmt, state_fmt: Fmt, tokens: np.ndarray, tp: int = 1,
             page: int | None = None) -> Sizes:
    """Per-request KV bytes of every group and stream at `tokens` (an int64 array)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    zero = np.zeros(tokens.shape, dtype=float)
    vpt = bpt = dbpt = 0.0
    values = zero.copy()
    total = zero.copy()
    device = zero.copy()
    st_el = st_b = st_db = 0.0
    pages = np.zeros(tokens.shape, dtype=np.int64) if page else None
    out_groups = []
    for g in groups:
        g_total = zero.copy()
        g_dev = zero.copy()
        streams_out = []
        for s in g.streams:
            e = entries_at(tokens, s)
            if page:
                npages = -(-e // page)
                pages = np.maximum(pages, npages)
                e_kept = npages * page
            else:
                e_kept = e
            eb = fmt.entry_bytes(s.dim)
            frac = _rank_fraction(s.heads, tp)
            deb = fmt.entry_bytes(s.dim * frac)
            b = g.count * eb * e_kept.astype(float)
            db = g.count * deb * e_kept.astype(float)
            values = values + g.count * s.dim * e.astype(float)
            g_total = g_total + b
            g_dev = g_dev + db
            if s.full:
                vpt += g.count * s.dim
                bpt += g.count * eb
                dbpt += g.count * deb
            streams_out.append({"name": s.name, "dim": s.dim, "window": s.window, "ratio": s.ratio,
                                "split_heads": s.heads, "entries": e_kept, "bytes": b})
        sf = g.state_fmt or state_fmt
        sb = g.count * sf.entry_bytes(g.state_elements)
        sdb = g.count * sf.entry_bytes(g.state_elements * _rank_fraction(g.state_heads, tp))
        st_el += g.count * g.state_elements
        st_b += sb
        st_db += sdb
        values = values + g.count * g.state_elements
        g_total = g_total + sb
        g_dev = g_dev + sdb
        total = total + g_total
        device = device + g_dev
        out_groups.append({"name": g.name, "count": g.count, "streams": streams_out, "state_elements": g.state_elements,
                           "state_bytes": sb, "bytes_per_request": g_total, "per_device_bytes_per_request": g_dev})
    return Sizes(vpt, bpt, dbpt, values, total, device, st_el, st_b, st_db, pages, out_groups)


def intify(a):
    """Integral numbers (arrays or scalars) print as integers."""
    arr_ = np.asarray(a, dtype=float)
    # the range check is false for NaN (max and min propagate it) and ±inf, so it stands for finiteness too
    if arr_.size and -2**53 < arr_.min() and arr_.max() < 2**53 and (arr_ == np.trunc(arr_)).all():
        return out(arr_.astype(np.int64))
    return out(arr_)


def group_lines(groups: list[GroupSpec], fmt: Fmt, n0: int) -> list[str]:
    """Human formula pieces for the first point: count × dim × entries × bytes/value per stream."""
    parts = []
    for g in groups:
        for s in g.streams:
            e = int(entries_at(np.asarray(n0, dtype=np.int64), s))
            parts.append(f"{g.count}×{num(fmt.entry_bytes(s.dim))} B×{num(e)}")
    return parts


def _per_token_and_state(groups: list[GroupSpec], fmt: Fmt, state_fmt: Fmt) -> tuple[Any, float]:
    """(bytes per token of every stream that keeps one entry per token, with no window; the fixed state bytes):
    the part of a cache that is linear in tokens, summed once instead of per stream and point. `fmt` may be a
    sweep of formats whose `entry_bytes` gives an array: the per-token bytes are then an array too."""
    per_token = sum(g.count * fmt.entry_bytes(st.dim) for g in groups for st in g.streams if st.full)
    state = sum(g.count * (g.state_fmt or state_fmt).entry_bytes(g.state_elements) for g in groups if g.state_elements)
    return per_token, float(state)


def _partial_streams(groups: list[GroupSpec]) -> list[tuple[GroupSpec, StreamSpec]]:
    """The streams whose entries are not one per token (a window or a ratio): counted point by point."""
    return [(g, st) for g in groups for st in g.streams if not st.full]


def cache_bytes(groups: list[GroupSpec], fmt: Fmt, state_fmt: Fmt, tokens) -> np.ndarray:
    """Per-request cache bytes at `tokens` tokens (whole tokens, any numeric array): what `kv_sizes(...)
    .bytes_per_request` gives with no paging on one device, for callers that need only that total. The full
    streams are one multiply; only windowed or compressed streams count their entries one by one."""
    per_token, state = _per_token_and_state(groups, fmt, state_fmt)
    total = per_token * np.asarray(tokens, dtype=float) + state
    partial = _partial_streams(groups)
    if partial:
        t = np.asarray(np.rint(tokens), dtype=np.int64)
        for g, st in partial:
            total = total + g.count * fmt.entry_bytes(st.dim) * entries_at(t, st).astype(float)
    return total


def written_bytes(groups: list[GroupSpec], fmt: Fmt, state_fmt: Fmt, s, p) -> np.ndarray:
    """Cache bytes written per request when p tokens follow s: new entries of each stream (a window stream keeps
    writing into its ring buffer; a compressed stream writes one entry per `ratio` tokens), plus the state."""
    per_token, state = _per_token_and_state(groups, fmt, state_fmt)
    p_float = np.asarray(p, dtype=float)
    total = per_token * p_float + state + 0.0 * np.asarray(s, dtype=float)
    partial = _partial_streams(groups)
    if partial:
        s_int, p_int = np.asarray(np.rint(s), dtype=np.int64), np.asarray(np.rint(p), dtype=np.int64)
        for g, st in partial:
            if st.window is not None and st.ratio == 1:
                new = p_float
            else:
                new = ((s_int + p_int) // st.ratio - s_int // st.ratio)
                if st.window is not None:
                    new = np.minimum(new, st.window)
            total = total + g.count * fmt.entry_bytes(st.dim) * np.asarray(new, dtype=float)
    return total
