"""Import a Hugging Face config.json as a full models.yaml record (architecture via calculators.domain.hf_config).

    python -m knowledge.model_import CONFIG.json --id qwen3-0.6b --name Qwen3-0.6B --repository Qwen/Qwen3-0.6B \
        --sha256 <hex> --source qwen3-0.6b-config [--family qwen --organisation "Alibaba Qwen"] [--write]
    python -m knowledge.model_import --manifest knowledge/data/model-configs/manifest.yaml --write

Every fact gets `source` (a source whose url is the repository's config.json) and the config-key locator;
the record carries `config_provenance` {repository, revision or file_sha256, path, via, file}. Parameter counts
are a published figure when one is given (e.g. the size label in the repository name), else computed with the
weight-memory ledger and marked "computed from config, not published", else left out.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

import yaml

from calculators.domain.hf_config import record_from_config
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
        pub = params.get("as_published")
        rec["params_total"] = _fact(int(params["total"]), source, label, pub, "size label in the repository name, not an exact count")
        active = params.get("active") or (params["total"] if rec["kind"] == "dense" else None)
        if active:
            rec["params_active"] = _fact(int(active), source, label, pub, "dense: active equals total" if rec["kind"] == "dense"
                                         else "activated per token, size label in the repository name")
    computed = ledger_params(rec)
    if computed and "params_total" not in rec:
        total, active, remark = computed
        rec["params_total"] = _fact(total, source, "computed from config (weight-memory ledger)",
                                    note=f"computed from config, not published: {remark}")
        rec["params_active"] = _fact(active, source, "computed from config (weight-memory ledger)",
                                     note="computed from config, not published: routed experts_per_token + shared + dense parts")
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
    p.add_argument("--write", action="store_true", help="upsert into models.yaml / sources-models.yaml (imported records only)")
    a = p.parse_args(argv)
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
    imported = lambda block: "record: imported" in block  # never rewrite a hand-written record
    changed = upsert(MODELS, [r for r, _ in pairs], imported)
    upsert(SOURCES, [s for _, s in pairs], lambda block: "knowledge/data/model-configs/" in block, flow=False)
    print(f"models.yaml: {len(changed)} record(s) written: {', '.join(changed)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
