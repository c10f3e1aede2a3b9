"""Validation of the data files: every rule that makes `casebook build` refuse, with the place.

Errors name the file, the record (id or slug) and the field, e.g.
`hardware.yaml: h100-sxm: memory_bandwidth_bytes_per_s: must be > 0 (got -1)`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from knowledge.loader import Catalog

SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
#: field-name endings that carry a unit (SI base units, see DATA-FORMAT.md)
UNIT_SUFFIXES = ("_bytes", "_bytes_per_s", "_bits_per_s", "_s", "_w", "_flop_per_s", "_flops",
                 "_usd", "_usd_per_mtok", "_usd_per_hour", "_hz", "_j", "_m")
#: dimensionless counts and ratios that are facts without a unit suffix
COUNT_FIELDS = {"layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size", "vocab_size",
                "experts", "experts_per_token", "shared_experts", "expert_ffn_size", "dense_layers",
                "params_total", "params_active", "context_length", "kv_lora_rank", "q_lora_rank",
                "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window", "devices",
                "lanes", "links", "index_head_dim", "index_n_heads", "index_topk", "compress_ratio",
                "window", "moe_layer_freq", "num_nextn_predict_layers", "routed_scaling_factor",
                "linear_attention_heads", "linear_attention_head_dim", "full_attention_layers",
                "linear_attention_layers", "sm_count", "cores", "gpu_cores", "nics", "ports",
                "efficiency", "ratio", "count", "year", "bits"}
#: fields that must be strictly positive when present (besides any unit-suffixed rate or size)
NON_ZERO = COUNT_FIELDS - {"dense_layers", "shared_experts", "sliding_window", "num_nextn_predict_layers"}
FACT_KINDS = ("hardware", "link", "model", "price")
#: numeric leaves that are structure, not facts (no source needed)
STRUCTURAL = {"devices_in_scope", "section_order", "cited_chapters", "count", "dim", "window", "ratio",
              "state_elements", "kv_heads_per_group", "order"}


@dataclass
class Problem:
    file: str
    record: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.record}: {self.field}: {self.message}"


class Validator:
    def __init__(self, catalog: Catalog, calculator_names: set[str] | None = None):
        self.cat = catalog
        self.calcs = calculator_names
        self.problems: list[Problem] = []
        self.ids = {kind: catalog.by_id(kind) for kind in catalog.records}

    def add(self, rec: dict, field: str, message: str, kind_key: str = "id") -> None:
        name = str(rec.get(kind_key) or rec.get("id") or rec.get("slug") or "?") if isinstance(rec, dict) else "?"
        self.problems.append(Problem(self.cat.file_of(rec) if isinstance(rec, dict) else "?", name, field, message))

    # ------------------------------------------------------------------ generic
    def unique_ids(self, kind: str, key: str = "id") -> None:
        seen: set[str] = set()
        for rec in self.cat.records.get(kind, []):
            if not isinstance(rec, dict):
                self.problems.append(Problem("?", "?", "-", f"{kind} entry is not a mapping"))
                continue
            ident = rec.get(key)
            if not isinstance(ident, str) or not ident:
                self.add(rec, key, "missing id", key)
                continue
            if kind != "derivation" and not SLUG.match(ident):
                self.add(rec, key, f"id {ident!r} is not a lowercase slug", key)
            if ident in seen:
                self.add(rec, key, f"duplicate id {ident!r}", key)
            seen.add(ident)

    def ref(self, rec: dict, field: str, kind: str, ident, key: str = "id") -> None:
        if ident is None:
            return
        if not isinstance(ident, str) or ident not in self.ids.get(kind, {}):
            self.add(rec, field, f"reference to unknown {kind} {ident!r}", key)

    def require(self, rec: dict, fields: tuple[str, ...], key: str = "id") -> None:
        for f in fields:
            if rec.get(f) in (None, "", []):
                self.add(rec, f, "required field is missing", key)

    # ------------------------------------------------------------------ facts
    def fact(self, rec: dict, path: str, name: str, node) -> None:
        if isinstance(node, bool):
            return
        if isinstance(node, (int, float)):
            self.add(rec, path, "fact has no source: write {value, source, locator}")
            return
        if not isinstance(node, dict) or "value" not in node:
            return
        value = node.get("value")
        if not node.get("source"):
            self.add(rec, path, "fact has no source")
        else:
            self.ref(rec, f"{path}.source", "source", node["source"])
        if not node.get("locator"):
            self.add(rec, path, "fact has no locator (table, page, section or config key)")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            self.add(rec, path, f"value must be a finite number (got {value!r})")
            return
        if not (name.endswith(UNIT_SUFFIXES) or name in COUNT_FIELDS):
            self.add(rec, path, "unit missing: the field name must end in a unit (_bytes, _bytes_per_s, _s, _w, "
                                "_flop_per_s, _usd_per_mtok …) or be a known count")
            return
        if value < 0:
            self.add(rec, path, f"impossible value: must be >= 0 (got {value})")
        elif value == 0 and (name in NON_ZERO or name.endswith(("_bytes", "_bytes_per_s", "_bits_per_s", "_flop_per_s", "_w"))):
            self.add(rec, path, "impossible value: must be > 0 (got 0)")
        if name in COUNT_FIELDS - {"efficiency", "ratio", "routed_scaling_factor"} and float(value) != int(value):
            self.add(rec, path, f"a count must be an integer (got {value})")

    def facts_in(self, rec: dict, node, path: str = "") -> None:
        if isinstance(node, dict):
            if "value" in node and ("source" in node or "locator" in node or len(node) <= 2):
                self.fact(rec, path, path.rsplit(".", 1)[-1], node)
                return
            for k, v in node.items():
                if k in ("layer_groups", "layer_groups_provenance", "links", "notes", "features"):
                    continue
                sub = f"{path}.{k}" if path else str(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    if k in STRUCTURAL:
                        continue
                    self.fact(rec, sub, k, v)
                elif isinstance(v, (dict, list)):
                    self.facts_in(rec, v, sub)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self.facts_in(rec, v, f"{path}.{i}")

    # ------------------------------------------------------------------ kinds
    def run(self) -> list[Problem]:
        for kind in ("source", "hardware", "link", "model", "framework", "price", "glossary", "claim"):
            self.unique_ids(kind)
        self.unique_ids("case", "slug")
        self.unique_ids("derivation")
        for s in self.cat.records.get("source", []):
            if isinstance(s, dict):
                self.require(s, ("title", "url", "kind"))
        for kind in FACT_KINDS:
            for rec in self.cat.records.get(kind, []):
                if isinstance(rec, dict):
                    self.require(rec, ("name",))
                    self.facts_in(rec, rec)
        for hw in self.cat.records.get("hardware", []):
            if not isinstance(hw, dict):
                continue
            for link in hw.get("links") or []:
                self.ref(hw, "links", "link", link)
            for i, peak in enumerate(hw.get("peaks") or []):
                for f in ("input_precision", "unit", "sparsity"):
                    if not peak.get(f):
                        self.add(hw, f"peaks.{i}.{f}", "required field is missing")
                if peak.get("sparsity") not in (None, "dense", "structured", "unspecified"):
                    self.add(hw, f"peaks.{i}.sparsity", "must be dense, structured or unspecified (the source does not say)")
        for m in self.cat.records.get("model", []):
            if isinstance(m, dict):
                self.layer_groups(m)
        for fw in self.cat.records.get("framework", []):
            if not isinstance(fw, dict):
                continue
            self.require(fw, ("name", "kind"))
            for i, feat in enumerate(fw.get("features") or []):
                if not feat.get("feature"):
                    self.add(fw, f"features.{i}.feature", "required field is missing")
                if not feat.get("source"):
                    self.add(fw, f"features.{i}.source", "feature row has no source")
                else:
                    self.ref(fw, f"features.{i}.source", "source", feat["source"])
        for c in self.cat.records.get("case", []):
            if not isinstance(c, dict):
                continue
            self.require(c, ("title_zh", "title_en", "section", "summary", "source_url"), "slug")
            for r in c.get("related") or []:
                self.ref(c, "related", "case", r, "slug")
            for kind, ids in (c.get("uses") or {}).items():
                k = {"models": "model", "hardware": "hardware", "links": "link", "frameworks": "framework"}.get(kind)
                if k is None:
                    self.add(c, f"uses.{kind}", "unknown kind of fact", "slug")
                    continue
                for i in ids or []:
                    self.ref(c, f"uses.{kind}", k, i, "slug")
        for d in self.cat.records.get("derivation", []):
            if not isinstance(d, dict):
                continue
            self.require(d, ("case", "name", "family", "title"))
            self.ref(d, "case", "case", d.get("case"))
            if d.get("calculator") is not None:
                if self.calcs is not None and d["calculator"] not in self.calcs:
                    self.add(d, "calculator", f"unknown calculator {d['calculator']!r}")
                if not isinstance(d.get("request"), dict):
                    self.add(d, "request", "a bound derivation needs a request body")
                if not d.get("expected"):
                    self.add(d, "expected", "a bound derivation needs expected outputs")
        for cl in self.cat.records.get("claim", []):
            if isinstance(cl, dict) and cl.get("source"):
                self.ref(cl, "source", "source", cl["source"])
        return self.problems

    def layer_groups(self, m: dict) -> None:
        groups = m.get("layer_groups")
        if groups is None:
            return
        if not isinstance(groups, list) or not groups:
            self.add(m, "layer_groups", "must be a non-empty list")
            return
        for i, g in enumerate(groups):
            if not isinstance(g.get("count"), int) or g["count"] <= 0:
                self.add(m, f"layer_groups.{i}.count", "impossible value: a positive integer is required")
            for j, s in enumerate(g.get("streams") or []):
                if not isinstance(s.get("dim"), int) or s["dim"] <= 0:
                    self.add(m, f"layer_groups.{i}.streams.{j}.dim", "impossible value: a positive integer is required")
                if s.get("window") is not None and (not isinstance(s["window"], int) or s["window"] <= 0):
                    self.add(m, f"layer_groups.{i}.streams.{j}.window", "must be a positive integer or null")
                if s.get("ratio", 1) is not None and (not isinstance(s.get("ratio", 1), int) or s.get("ratio", 1) <= 0):
                    self.add(m, f"layer_groups.{i}.streams.{j}.ratio", "must be a positive integer")
        prov = m.get("layer_groups_provenance") or {}
        if not prov.get("source"):
            self.add(m, "layer_groups_provenance", "layer groups have no source")
        else:
            self.ref(m, "layer_groups_provenance.source", "source", prov["source"])


def validate(catalog: Catalog, calculator_names: set[str] | None = None) -> list[Problem]:
    return Validator(catalog, calculator_names).run()
