"""The measured tables are shared between workers: a store's measured columns are written once as `.npy` files
beside it and memory-mapped (knowledge.column_cache), text dictionary-encoded, and the kernel indexes built over
the codes are the ones built over the strings. Memory figures are the benchmark's (benchmarks/bench_memory.py)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from calculators.perf import measured_tables as MT
from calculators.perf.measured import (
    ATTN_CATS,
    GEMM_AXES,
    GEMM_CATS,
    GEN_AXES,
    MOE_AXES,
    MOE_CATS,
)
from calculators.perf.measured_layers import _PART, LIN_CATS
from knowledge import column_cache as CC
from knowledge.column_cache import (
    ColumnCache,
    Columns,
    column_cache_dir,
    prune_column_cache,
)
from knowledge.store import Store

IDENT = "h100_sxm/gemm"


@pytest.fixture()
def private_db(built_db, tmp_path) -> Path:
    """A copy of the built store with no column cache yet (as `casebook serve`'s private copy starts)."""
    db = tmp_path / "casebook.duckdb"
    shutil.copyfile(built_db, db)
    return db


def _mapped_file(arr: np.ndarray) -> Path:
    assert isinstance(arr, np.memmap) and arr.mode == "r" and not arr.flags.writeable
    return Path(arr.filename)


def test_store_columns_are_memory_mapped_from_the_cache_beside_the_store(private_db):
    store = Store(private_db)
    try:
        cols = store.lookup("measurement", IDENT)["columns"]
        assert isinstance(cols, Columns) and cols.mapped
        cache = column_cache_dir(private_db)
        for name in ("m", "n", "k", "latency"):
            assert _mapped_file(cols[name]).parent.parent == cache
        codes, vocab = cols.coded("gemm_dtype")
        assert _mapped_file(codes).parent.parent == cache and list(vocab) == sorted(set(vocab))
        # the values are the store's, row for row, text decoded from the codes
        f = store.measurements.files[IDENT]
        rows = store._sql("SELECT gemm_dtype, m, latency FROM measured_gemm WHERE file = ? ORDER BY rowid", [f["path"]])
        assert [r[0] for r in rows] == cols["gemm_dtype"].tolist() == vocab[np.asarray(codes)].tolist()
        assert [r[1] for r in rows] == cols["m"].tolist() and [r[2] for r in rows] == cols["latency"].tolist()
        assert cols["m"].dtype == np.int64 and cols["latency"].dtype == np.float64
    finally:
        store.close()


def test_a_second_store_maps_the_same_files_without_reading_the_rows(private_db, monkeypatch):
    """Like a second worker: it finds the cache, maps the same files (one copy in the page cache) and neither asks
    DuckDB for the rows nor copies them."""
    first = Store(private_db)
    try:
        a = first.lookup("measurement", IDENT)["columns"]
    finally:
        first.close()

    def no_read(*args, **kwargs):
        raise AssertionError("the rows were read again")

    second = Store(private_db)
    try:
        monkeypatch.setattr(second.measurements, "_read", no_read)
        b = second.lookup("measurement", IDENT)["columns"]
        assert b is not a and b.mapped
        for name in ("m", "latency"):
            assert _mapped_file(b[name]) == _mapped_file(a[name])
            assert np.array_equal(a[name], b[name])
        assert _mapped_file(b.coded("kernel_source")[0]) == _mapped_file(a.coded("kernel_source")[0])
        assert second.lookup("measurement", IDENT)["columns"] is b       # loaded once per process
    finally:
        second.close()


def test_columns_stay_in_memory_when_the_cache_cannot_be_written(private_db):
    blocker = private_db.with_name("not-a-directory")
    blocker.write_text("a file where the cache directory would be")
    store = Store(private_db)
    try:
        store.measurements.column_cache = ColumnCache(blocker)
        cols = store.lookup("measurement", IDENT)["columns"]
        assert not cols.mapped and not isinstance(cols["m"], np.memmap)
        assert store.measurements.column_cache.unwritable        # the reason, said once in the log
        assert cols["gemm_dtype"].dtype == object and set(cols["gemm_dtype"]) >= {"bfloat16"}
    finally:
        store.close()


def _as_strings(rec: dict) -> dict:
    """The same table with plain arrays (text as object arrays of str) under another index key."""
    cols = rec["columns"]
    return {**rec, "sha256": "strings-" + rec["sha256"], "columns": {n: np.asarray(cols[n]) for n in cols}}


@pytest.mark.parametrize("ident, cats, axes, derive, defaults", [
    ("h100_sxm/gemm", GEMM_CATS, GEMM_AXES, None, None),
    ("h200_sxm/generation_attention", ATTN_CATS, GEN_AXES,
     {"seq_len": lambda c: np.asarray(c["isl"]) + np.asarray(c["step"])}, {"window_size": 0}),
    ("h200_sxm/sglang/moe", MOE_CATS, MOE_AXES, None, None),
    ("h200_sxm/vllm/gdn", LIN_CATS, ("batch_size",), _PART, None),
])
def test_the_index_over_codes_is_the_index_over_strings(lookup, ident, cats, axes, derive, defaults):
    rec = lookup("measurement", ident)
    assert isinstance(rec["columns"], Columns) and any(rec["columns"].coded(c) for c in rec["columns"])
    coded = MT.index_table(rec, cats, axes, derive, defaults)
    plain = MT.index_table(_as_strings(rec), cats, axes, derive, defaults)
    assert list(coded) == list(plain) and coded
    for key in coded:
        assert all(type(k) is type(p) for k, p in zip(key, next(p for p in plain if p == key)))
        g, h = coded[key], plain[key]
        assert g.names == h.names and all(np.array_equal(a, b) for a, b in zip(g.axes, h.axes))
        assert np.array_equal(g.log_lat, h.log_lat, equal_nan=True)


def test_a_store_whose_path_names_another_file_now_reads_through_its_own_connection(private_db):
    """A store rebuilt (renamed over) under an open Store: the rows come from the file that Store opened."""
    store = Store(private_db)
    try:
        held = private_db.with_name("opened.duckdb")
        os.rename(private_db, held)
        private_db.write_bytes(b"not a store")                 # the path now names another file
        cols = store.lookup("measurement", IDENT)["columns"]
        assert cols.mapped and len(cols["latency"]) == store.measurements.files[IDENT]["rows"]
    finally:
        store.close()


def test_prune_keeps_only_the_files_a_build_holds(private_db):
    store = Store(private_db)
    try:
        store.lookup("measurement", IDENT)
        sha = store.measurements.files[IDENT]["sha256"]
    finally:
        store.close()
    cache = column_cache_dir(private_db)
    stale = cache / f"{'0' * 64}-{CC.FORMAT}"
    old_format = cache / f"{sha}-v0"
    for d in (stale, old_format):
        d.mkdir()
    assert set(prune_column_cache(private_db, {sha})) == {stale, old_format}
    assert [d.name for d in cache.iterdir()] == [f"{sha}-{CC.FORMAT}"]
