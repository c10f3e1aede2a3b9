"""The building blocks of reading a Hugging Face `config.json`: the keys this reader understands, a reader that
turns each value into a fact with the config key it came from as its locator, and the per-layer specs (groups,
streams, layer types) that the layouts in `hf_layouts` assemble.
"""
from __future__ import annotations

from typing import Any

from calculators.framework import CalcInputError


#: layer_types entries this module understands
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
#: hybrid_override_pattern characters of Nemotron-H: Mamba-2, attention, dense MLP, MoE
NEMOTRON_CHARS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
#: configs whose layout this module does not model; refused rather than approximated
UNSUPPORTED_KEYS = {
    "block_configs": "per-layer heterogeneous blocks (Nemotron-NAS / DeciLM) are not modelled",
    "cross_attention_layers": "cross-attention layers (Llama 3.2 Vision style) are not modelled",
    "layers_block_type": "per-layer block types (Jamba / Granite hybrid style) are not modelled",
    "attn_layer_period": "Jamba-style attention period is not modelled",
}
#: keys that shape the layer groups, cited in layer_groups_provenance when present
LAYOUT_KEYS = ("layer_types", "sliding_window_pattern", "hybrid_layer_pattern", "attention_chunk_size", "no_rope_layers",
               "full_attention_interval", "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v", "v_head_dim",
               "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim", "hybrid_override_pattern", "mamba_num_heads",
               "mamba_head_dim", "ssm_state_size", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
               "linear_attn_config", "compress_ratios", "index_head_dim")
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}

# Upper bounds on the counts a config gives, far above any published model (the largest today: 126 layers,
# 384 routed experts, 128 query heads, hidden 18,432, vocabulary 262,144), so that a config cannot make the
# reader or a calculator do work or allocate memory in proportion to an absurd count: a layer count of 1e9 is a
# 422 naming the key and its bound, not a billion-entry layer list. Every count read goes through one of them.
#: (bound, what it bounds) per group of keys
_BOUND_GROUPS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (1_000, "layers", ("num_hidden_layers", "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules",
                       "first_k_dense_replace", "max_window_layers")),
    (4_096, "experts", ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", "n_shared_experts",
                        "num_shared_experts", "num_experts_per_tok", "num_experts_per_token", "top_k_experts",
                        "moe_topk", "experts_per_token", "n_groups")),
    (4_096, "heads", ("num_attention_heads", "num_key_value_heads", "num_global_key_value_heads",
                      "swa_num_key_value_heads", "mamba_num_heads", "linear_num_value_heads", "linear_num_key_heads",
                      "num_heads", "index_n_heads")),
    (262_144, "the hidden size", ("hidden_size",)),
    (10**7, "the vocabulary", ("vocab_size",)),
    (2**20, "a width", ("intermediate_size", "moe_intermediate_size", "shared_intermediate_size",
                        "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size", "share_expert_dim",
                        "dense_intermediate_size", "intermediate_size_mlp", "moe_latent_size",
                        "routed_expert_hidden_size", "kv_lora_rank", "q_lora_rank", "head_dim", "attention_head_dim",
                        "global_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "qk_head_dim", "v_head_dim",
                        "swa_head_dim", "swa_v_head_dim", "index_head_dim", "mamba_head_dim", "ssm_state_size",
                        "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "conv_kernel")),
)
#: the bound of every other count (context lengths, windows, layer intervals): 1e9
DEFAULT_BOUND = (10**9, "a count")
#: key -> (its upper bound, what it bounds)
BOUNDS: dict[str, tuple[int, str]] = {k: (bound, what) for bound, what, keys in _BOUND_GROUPS for k in keys}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class _Reader:
    """Typed access to one (possibly nested) config dict; errors name `<loc>.<prefix><key>`."""

    def __init__(self, cfg: dict, loc: str, prefix: str):
        self.cfg, self.loc, self.prefix = cfg, loc, prefix

    def key(self, k: str) -> str:
        return f"{self.prefix}{k}"

    def err(self, k: str, message: str) -> CalcInputError:
        return CalcInputError(f"{self.loc}.{self.key(k)}", message)

    def has(self, k: str) -> bool:
        return self.cfg.get(k) is not None

    def get(self, k: str, default: Any = None) -> Any:
        v = self.cfg.get(k)
        return default if v is None else v

    def int(self, k: str, minimum: int = 1) -> int:
        v = self.cfg.get(k)
        if v is None:
            raise self.err(k, "required by this layout but missing")
        if not _is_int(v):
            raise self.err(k, f"a count is needed, got {v!r}")
        if v < minimum:
            raise self.err(k, f"must be >= {minimum}, got {v}")
        bound, what = BOUNDS.get(k, DEFAULT_BOUND)
        if v > bound:
            raise self.err(k, f"must be ≤ {bound:,} (the bound on {what}, far above any published model), got {v:,}")
        return v

    def opt_int(self, k: str, minimum: int = 0) -> int | None:
        return None if self.cfg.get(k) is None else self.int(k, minimum)

    def first(self, *keys: str) -> str | None:
        """The first of `keys` present (not null)."""
        return next((k for k in keys if self.has(k)), None)

    def int_list(self, k: str, length: int | None = None) -> list[int]:
        v = self.cfg.get(k)
        if not isinstance(v, list) or not all(_is_int(x) for x in v):
            raise self.err(k, f"a list of integers is needed, got {type(v).__name__}")
        if length is not None and len(v) != length:
            raise self.err(k, f"has {len(v)} entries, expected {length}")
        return v

    def fact(self, value: int | float, *keys: str, note: str | None = None) -> dict:
        f: dict = {"value": value, "locator": " + ".join(self.key(k) for k in keys) if keys else self.prefix.rstrip(".")}
        if note:
            f["note"] = note
        return f




# --------------------------------------------------------------------------- per-layer specs

def _group(name: str, streams: list[dict], state: int = 0, kv_heads: int | None = None,
           state_heads: int | None = None) -> dict:
    g: dict = {"name": name, "count": 1, "streams": streams, "state_elements": state}
    if kv_heads:
        g["kv_heads"] = kv_heads
    if state_heads:
        g["state_heads"] = state_heads
    return g


def _stream(name: str, dim: int, window: int | None = None, ratio: int = 1) -> dict:
    return {"name": name, "dim": dim, "window": window, "ratio": ratio}


def _collapse(layers: list[dict]) -> list[dict]:
    """Identical per-layer specs -> groups with counts, in order of first appearance."""
    out: list[dict] = []
    for spec in layers:
        for g in out:
            if {k: v for k, v in g.items() if k != "count"} == {k: v for k, v in spec.items() if k != "count"}:
                g["count"] += 1
                break
        else:
            out.append(dict(spec))
    return out


def _layer_types(r: _Reader, n: int) -> list[str] | None:
    """Per-layer attention type from `layer_types` (validated), or None when absent."""
    if not r.has("layer_types"):
        return None
    lt = r.get("layer_types")
    if not isinstance(lt, list) or len(lt) != n:
        raise r.err("layer_types", f"needs {n} entries (num_hidden_layers), got {len(lt) if isinstance(lt, list) else lt!r}")
    for i, t in enumerate(lt):
        if t not in LAYER_TYPES:
            raise r.err("layer_types", f"entry {i} {t!r} is not one of {', '.join(LAYER_TYPES)}")
    return lt
