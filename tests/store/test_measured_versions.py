"""Each measured table names two versions: the wheel directory's (`version` = `directory_version`, repeated by its
collection_meta.yaml) and the one its rows were collected with (`collected_with`, from the rows' `version` column);
answers cite the collected one. Offline against the committed copies; against the wheel itself with
CASEBOOK_MEASUREMENT_WHEEL."""
from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import duckdb
import pytest
import yaml

from knowledge import measurements as M
from knowledge.loader import catalog_lookup, default_catalog

WHEEL_ENV = "CASEBOOK_MEASUREMENT_WHEEL"


def _rows_by_version(path: Path, where: str = "true") -> list[dict]:
    con = duckdb.connect()
    try:
        got = con.execute(f"SELECT CAST(version AS VARCHAR), count(*) FROM read_parquet(?) WHERE {where} "
                          "GROUP BY 1 ORDER BY 2 DESC, 1", [str(path)]).fetchall()
    finally:
        con.close()
    return [{"version": v, "rows": n} for v, n in got]


def test_every_file_names_its_directory_and_collected_version():
    files = M.load_manifest()["files"]
    for f in files:
        assert f["directory_version"] == f["version"] == Path(f["path"]).parts[3], f["path"]
        assert f["collection_meta"]["runtime_version"] == f["directory_version"], f["path"]
        rows = _rows_by_version(M.MEASURED_DIR / f["path"]) if "version" in f["columns"] else []
        assert f["collected_with_rows"] == rows, f["path"]
        assert sum(r["rows"] for r in rows) in (0, f["rows"])
        assert f["collected_with"] == M.collected_label(rows, f["version"])
    by = {f["path"]: f for f in files}
    # the two the fact check found: rows that name another version than their directory
    assert by["l40s/comm/vllm/0.22.0/custom_allreduce_perf.parquet"]["collected_with"] == "0.14.0"
    moe = by["b200_sxm/moe/vllm/0.24.0/moe_perf.parquet"]
    assert [r["version"] for r in moe["collected_with_rows"]] == ["0.24.0", "0.1.dev19262+gb6bbf29dd.d20260727"]
    assert moe["collected_with"].startswith("0.24.0 (+ ") and "0.1.dev19262" in moe["collected_with"]
    assert sum(f["collected_with"] != f["version"] for f in files) >= 2


def test_the_label_names_every_version_most_rows_first():
    assert M.collected_label([], "1.0") == "1.0"
    assert M.collected_label([{"version": "0.14.0", "rows": 9}], "0.22.0") == "0.14.0"
    assert M.collected_label([{"version": "a", "rows": 9}, {"version": "b", "rows": 2}], "a") == "a (+ 2 rows: b)"


def test_lookups_and_answers_cite_the_collected_version():
    lookup = catalog_lookup(default_catalog())
    t = lookup("measurement", "l40s/custom_allreduce")
    assert (t["version"], t["collected_with"]) == ("0.22.0", "0.14.0")
    from calculators.perf.measured_tables import collected, directory_note

    assert collected(t) == "0.14.0" and directory_note(t) == ", wheel directory 0.22.0"
    plain = lookup("measurement", "h100_sxm/gemm")
    assert collected(plain) == plain["version"] and directory_note(plain) == ""
    index = {(i["system"], i["framework"], i["table"]): i for i in lookup("measurement", "index")}
    assert index[("l40s", "vllm", "custom_allreduce")]["collected_with"] == "0.14.0"


def test_a_b200_estimate_names_the_moe_table_as_collected(client):
    body = client.post("/api/v1/calculators/roofline", json={
        "model": "qwen3-30b-a3b", "hardware": "b200-sxm", "phase": "decode", "batch": 8, "context_tokens": 2048,
        "estimate": "both"}).json()
    step = next(s for s in body["steps"] if s["label"] == "measured kernels")
    moe = next(p for p in step["substituted"].split("; ") if p.startswith("moe: "))
    assert moe.startswith("moe: vllm 0.24.0 (+ ") and "rows: 0.1.dev19262+gb6bbf29dd.d20260727)" in moe, moe


def test_the_l40s_system_names_its_all_reduce_table_as_collected():
    from calculators.perf.measured_tables import Rates, load_system

    system = load_system(catalog_lookup(default_catalog()), "l40s", Rates({"BF16": 1e15}, 1e12))
    assert system.provenance["custom_allreduce_perf"] == "vllm 0.14.0"
    assert system.provenance["gemm_perf"] == "vllm 0.24.0"


def test_the_versions_are_read_from_the_wheel():
    wheel = os.environ.get(WHEEL_ENV)
    if not wheel:
        pytest.fail(f"{WHEEL_ENV} is not set: this test reads the version column of every table in the wheel "
                    "(.ci/run downloads aiconfigurator-core 0.12.0 and sets it).")
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for f in M.load_manifest()["files"]:
            meta = yaml.load(zf.read(f["collection_meta"]["path_in_wheel"]), Loader=yaml.BaseLoader)
            assert meta["runtime"]["version"] == f["collection_meta"]["runtime_version"], f["path"]
            if "version" not in f["columns"]:
                continue
            src = Path(tmp) / "t.parquet"
            src.write_bytes(zf.read(f["path_in_wheel"]))
            # the rows kept here (the whole file, or its subset's condition) name the versions the manifest says
            assert _rows_by_version(src, f.get("rows_where") or "true") == f["collected_with_rows"], f["path"]
            if f["path"] == "b200_sxm/moe/vllm/0.24.0/moe_perf.parquet":
                whole = {r["version"]: r["rows"] for r in _rows_by_version(src)}
                assert whole == {"0.24.0": 66831, "0.1.dev19262+gb6bbf29dd.d20260727": 972}
