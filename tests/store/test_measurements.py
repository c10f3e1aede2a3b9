"""The measured tables: committed copies match the manifest (offline), re-importing the wheel gives the
same bytes and every file's hash matches its original in the wheel (needs the wheel: CASEBOOK_MEASUREMENT_WHEEL),
the store holds every row, lookups give arrays, per framework."""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import duckdb
import numpy as np
import pytest

from knowledge import measurements as M
from knowledge.build import content_hash
from knowledge.loader import catalog_lookup, default_catalog
from knowledge.store import Store

WHEEL_ENV = "CASEBOOK_MEASUREMENT_WHEEL"


def _committed() -> list[Path]:
    return sorted(p for p in M.MEASURED_DIR.rglob("*") if p.is_file())


def test_manifest_lists_every_committed_copy_with_its_sha256():
    manifest = M.load_manifest()
    assert manifest["package"] == "aiconfigurator-core" and manifest["package_version"] == "0.12.0"
    assert manifest["license"] == "Apache-2.0"
    assert M.check_files() == []
    listed = {f["path"] for f in manifest["files"]} | {f["collection_meta"]["path"] for f in manifest["files"]}
    on_disk = {str(p.relative_to(M.MEASURED_DIR)) for p in _committed()}
    assert on_disk - listed == {"manifest.yaml", "NOTICE", "systems.yaml"}
    assert listed <= on_disk
    for f in manifest["files"]:
        assert f["license"] == "Apache-2.0" and f["package_version"] == "0.12.0"
        assert f["path_in_wheel"].startswith("aiconfigurator_core/systems/data/" + f["system"] + "/")
        assert f["path_in_wheel"].endswith(Path(f["path"]).name) and f["gpu"].startswith("NVIDIA")
    keys = [(f["system"], f["framework"], f["table"]) for f in manifest["files"]]
    assert len(keys) == len(set(keys))                       # one version per system, framework and table
    assert {(s, t) for s, _, t in keys} >= {(s, t) for s in M.SYSTEMS for t in M.REQUIRED}
    assert {t for _, _, t in keys} == set(M.TABLES)
    for f in manifest["files"]:
        assert f["framework"] in M.TABLES[f["table"]][2], f["path"]
        if f["framework"] in M.FRAMEWORKS and f["table"] in M.CORE_TABLES:
            assert f["version"] == manifest["framework_versions"][f["system"]][f["framework"]], f["path"]
    assert set(manifest["framework_versions"]) == set(M.SYSTEMS)
    assert all(set(v) == set(M.FRAMEWORKS) for v in manifest["framework_versions"].values())
    assert sum(p.stat().st_size for p in _committed()) <= M.MAX_BYTES


def test_row_subsets_keep_only_their_rows_and_name_the_original():
    """A table of ROW_FILTERS holds only rows satisfying its condition, fewer than the original, which it names."""
    subsets = [f for f in M.load_manifest()["files"] if "rows_where" in f]
    assert {f["table"] for f in subsets} == set(M.ROW_FILTERS)        # (a file the condition keeps whole is a copy)
    con = duckdb.connect()
    for f in subsets:
        assert f["rows_where"] in M.ROW_FILTERS[f["table"]]
        assert len(f["source_sha256"]) == 64 and f["source_sha256"] != f["sha256"]
        assert 0 < f["rows"] < f["source_rows"], f["path"]
        outside = con.execute(f"SELECT count(*) FROM read_parquet(?) WHERE NOT ({f['rows_where']})",
                              [str(M.MEASURED_DIR / f["path"])]).fetchone()[0]
        assert outside == 0, f["path"]
    verbatim = [f for f in M.load_manifest()["files"] if "rows_where" not in f]
    assert verbatim and not any("source_sha256" in f for f in verbatim)


def test_notice_names_the_package_the_license_and_every_file():
    notice = (M.MEASURED_DIR / "NOTICE").read_text(encoding="utf-8")
    assert "NVIDIA CORPORATION" in notice and M.LICENSE_URL in notice and "unmodified" in notice
    for f in M.load_manifest()["files"]:
        assert f["path_in_wheel"] in notice


def test_a_changed_byte_is_caught(tmp_path):
    shutil.copytree(M.MEASURED_DIR, tmp_path / "measured")
    f = M.load_manifest()["files"][0]
    target = tmp_path / "measured" / f["path"]
    target.write_bytes(target.read_bytes()[:-1] + b"\0")
    assert [p for p in M.check_files(tmp_path / "measured") if f["path"] in p]


def test_content_hash_covers_the_parquet_files(tmp_path):
    data = tmp_path / "data"
    (data / "measured").mkdir(parents=True)
    table = data / "measured" / "t.parquet"
    table.write_bytes(b"one")
    before = content_hash(data)
    table.write_bytes(b"two")
    assert content_hash(data) != before


def test_message_size_counts_elements_not_bytes():
    """Each NCCL sweep covers the same byte range in both dtypes: int8 (1 B) sizes run to twice the half (2 B) ones."""
    for f in M.load_manifest()["files"]:
        if f["table"] != "nccl":
            continue
        con = duckdb.connect()
        top = dict(con.execute("SELECT nccl_dtype, max(message_size) FROM read_parquet(?) GROUP BY 1",
                               [str(M.MEASURED_DIR / f["path"])]).fetchall())
        assert top["int8"] == 2 * top["half"], f["path"]


def test_reimport_from_the_wheel_gives_the_committed_bytes(tmp_path):
    wheel = os.environ.get(WHEEL_ENV)
    if not wheel:
        pytest.fail(f"{WHEEL_ENV} is not set: this test re-imports the measured tables from the wheel they came from. "
                    f"Run `pip download aiconfigurator-core==0.12.0 --no-deps -d DIR` and set {WHEEL_ENV}=DIR/<the .whl> "
                    "(.ci/run does both).")
    assert Path(wheel).is_file(), f"{WHEEL_ENV}={wheel} is not a file"
    out = tmp_path / "measured"
    out.mkdir()
    manifest = M.import_wheel(Path(wheel), out)
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    M.import_wheel(Path(wheel), out)  # twice: the same bytes, nothing added
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == first
    committed = M.load_manifest()
    assert manifest == committed
    with zipfile.ZipFile(wheel) as zf:
        for f in committed["files"]:
            # every imported file: the original in the wheel is the one the manifest names (verbatim copies: the
            # same bytes; row subsets: the original's sha256), and the copy here has the manifest's sha256
            original = M.sha256(zf.read(f["path_in_wheel"]))
            assert original == f.get("source_sha256", f["sha256"]), f["path"]
            assert M.sha256(zf.read(f["collection_meta"]["path_in_wheel"])) == f["collection_meta"]["sha256"]
            for entry in (f, f["collection_meta"]):
                assert M.sha256((out / entry["path"]).read_bytes()) == entry["sha256"], entry["path"]
                assert M.sha256((M.MEASURED_DIR / entry["path"]).read_bytes()) == entry["sha256"], entry["path"]
    for name in ("manifest.yaml", "NOTICE"):
        assert (out / name).read_bytes() == (M.MEASURED_DIR / name).read_bytes(), name


@pytest.fixture(scope="module")
def store(built_db):
    s = Store(built_db)
    yield s
    s.close()


def test_store_tables_hold_every_row_of_the_manifest(store):
    manifest = M.load_manifest()
    assert len(store.measurement_files) == len(manifest["files"])
    for f in manifest["files"]:
        n = store._sql(f"SELECT count(*) FROM measured_{f['table']} WHERE file = ? AND system = ?", [f["path"], f["system"]])
        assert n[0][0] == f["rows"], f["path"]
    for table in M.TABLES:
        total = store._sql(f"SELECT count(*) FROM measured_{table}")[0][0]
        assert total == sum(f["rows"] for f in manifest["files"] if f["table"] == table)


def test_lookup_returns_arrays_the_same_from_store_and_files(store):
    from_files = catalog_lookup(default_catalog())
    for ident in ("h100_sxm/nccl", "l40s/custom_allreduce", "gb200/gemm", "a100_sxm/context_attention",
                  "h200_sxm/sglang/moe", "h200_sxm/trtllm/generation_mla", "b200_sxm/vllm/moe_a2a"):
        a, b = store.lookup("measurement", ident), from_files("measurement", ident)
        assert {k: v for k, v in a.items() if k != "columns"} == {k: v for k, v in b.items() if k != "columns"}
        assert list(a["columns"]) == list(b["columns"])
        for col in a["columns"]:
            assert isinstance(a["columns"][col], np.ndarray)
            assert np.array_equal(a["columns"][col], b["columns"][col]), (ident, col)
        assert a["file"].startswith(ident.split("/")[0] + "/") and len(a["sha256"]) == 64
        assert store.lookup("measurement", ident) is a  # loaded once
    # the two-part key is vLLM's table; another framework's needs its name
    assert store.lookup("measurement", "h200_sxm/moe") is store.lookup("measurement", "h200_sxm/vllm/moe")
    assert store.lookup("measurement", "h200_sxm/sglang/moe")["framework"] == "sglang"
    with pytest.raises(KeyError):
        store.lookup("measurement", "h200_sxm/generation_mla")      # SGLang's and TensorRT-LLM's only
    assert store.lookup("measurement", "b200_sxm/vllm/moe_a2a")["latency_s_per_unit"] == 1e-6
    nccl = store.lookup("measurement", "h100_sxm/nccl")["columns"]
    assert nccl["latency"].dtype == np.float64 and nccl["message_size"].dtype == np.int64
    with pytest.raises(KeyError):
        store.lookup("measurement", "h100_sxm/nope")
    with pytest.raises(KeyError):
        from_files("measurement", "nope/nccl")


def test_lookup_index_and_systems(store, catalog):
    index = store.lookup("measurement", "index")
    assert len(index) == len(M.load_manifest()["files"])
    assert set(index[0]) == {"system", "table", "framework", "version", "collected_with", "gpu", "rows"}
    assert index == catalog_lookup(catalog)("measurement", "index")
    systems = store.lookup("measurement", "systems")
    hardware, links = catalog.by_id("hardware"), catalog.by_id("link")
    assert systems["hardware"]["h100-sxm"] == "h100_sxm" and systems["links"]["pcie4-x16"] == ["l40s"]
    assert set(systems["hardware"]) <= set(hardware)
    assert set(systems["links"]) <= set(links)
    measured = set(M.SYSTEMS)
    assert set(systems["hardware"].values()) <= measured
    assert {s for v in systems["links"].values() for s in v} == measured


def test_cli_refuses_a_missing_wheel(tmp_path, capsys):
    from api.cli import main

    assert main(["import-measurements", "--wheel", str(tmp_path / "none.whl"), "--out", str(tmp_path)]) == 2
    assert "no wheel" in capsys.readouterr().err
