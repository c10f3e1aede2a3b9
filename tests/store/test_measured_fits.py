"""The α–β fits of the measured all-reduces stored at build time (`measured_fit`): they are what
`calculators.domain.link_fit.fit_all_reduce` gives on the same rows, one per GPU count of every measured
system's nccl and custom_allreduce table, each naming the measured file and sha256 it came from."""
from __future__ import annotations

import numpy as np
import pytest

from calculators.domain.link_fit import fit_all_reduce
from knowledge import measurements as M
from knowledge.build import measured_fit_rows
from knowledge.store import Store
from knowledge.measurements import FIT_METHOD, FITTED_TABLES

NUMBERS = ("start_up_s", "algorithm_bytes_per_s", "alpha_s", "link_bytes_per_s", "rms_relative_residual",
           "max_relative_residual", "message_bytes_min", "message_bytes_max")


@pytest.fixture(scope="module")
def store(built_db):
    s = Store(built_db)
    yield s
    s.close()


def fitted_files() -> list[dict]:
    return [f for f in M.load_manifest()["files"] if f["table"] in FITTED_TABLES]


def all_reduce_gpu_counts(columns: dict, backend: str | None) -> set[int]:
    """The GPU counts (≥ 2) at which the table has 16-bit all-reduce rows of the fitted backend."""
    keep = np.asarray(columns["op_name"]).astype(str) == "all_reduce"
    dtype_col = M.MESSAGE_DTYPE["nccl"] if "nccl_dtype" in columns else M.MESSAGE_DTYPE["custom_allreduce"]
    keep &= np.isin(np.asarray(columns[dtype_col]).astype(str), ["half", "bfloat16", "float16"])
    if backend and "backend" in columns:
        keep &= np.asarray(columns["backend"]).astype(str) == backend
    return {int(p) for p in np.asarray(columns["num_gpus"])[keep] if p >= 2}


@pytest.mark.parametrize("f", fitted_files(), ids=lambda f: f"{f['system']}/{f['table']}")
def test_stored_fits_equal_fit_all_reduce_on_the_same_rows(store, f):
    """Recomputed from the committed Parquet file (not from the store), the fits match to the last bit."""
    columns = M.read_parquet_columns(M.MEASURED_DIR / f["path"])
    backend = FITTED_TABLES[f["table"]] if "backend" in columns else None
    expected = fit_all_reduce(columns, {"file": f["path"]}, backend=backend)
    stored = store.fits_of(f["system"], f["table"])
    assert [s["gpus"] for s in stored] == [e.gpus for e in expected]
    for s, e in zip(stored, expected, strict=True):
        for name in NUMBERS:
            assert s[name] == pytest.approx(getattr(e, name), rel=1e-12, abs=0), (f["path"], e.gpus, name)
        assert s["points"] == e.points
        assert (s["op_name"], s["dtype"], s["backend"]) == ("all_reduce", e.source["dtype"], backend)


@pytest.mark.parametrize("f", fitted_files(), ids=lambda f: f"{f['system']}/{f['table']}")
def test_every_gpu_count_of_every_table_has_a_fit_naming_its_file(store, f):
    columns = store.lookup("measurement", f"{f['system']}/{f['table']}")["columns"]
    counts = all_reduce_gpu_counts(columns, FITTED_TABLES[f["table"]])
    stored = store.fits_of(f["system"], f["table"])
    assert counts and {s["gpus"] for s in stored} == counts
    for s in stored:
        assert (s["file"], s["sha256"]) == (f["path"], f["sha256"])
        assert s["method"] == FIT_METHOD
        p = s["gpus"]
        assert s["alpha_s"] == pytest.approx(s["start_up_s"] / (2 * (p - 1)), rel=1e-12)
        assert s["link_bytes_per_s"] == pytest.approx(s["algorithm_bytes_per_s"] * 2 * (p - 1) / p, rel=1e-12)
        assert 0 <= s["rms_relative_residual"] <= s["max_relative_residual"]
        assert s["start_up_s"] >= 0 and s["algorithm_bytes_per_s"] > 0 and s["points"] >= 3


def test_every_measured_system_has_fits_of_both_tables(store):
    page = store.measured_fits(limit=1000)
    assert page.total == len(page.items) == sum(len(store.fits_of(f["system"], f["table"])) for f in fitted_files())
    assert {(i["system"], i["table"]) for i in page.items} == {(s, t) for s in M.SYSTEMS for t in FITTED_TABLES}


def test_store_filters_fits_case_insensitively_and_pages(store):
    only = store.measured_fits("H100_SXM", "NCCL", 8)
    assert only.total == 1 and only.items[0]["system"] == "h100_sxm" and only.items[0]["gpus"] == 8
    first, second = store.measured_fits(limit=2), store.measured_fits(limit=2, offset=2)
    assert first.total == second.total and first.items[-1] != second.items[0]
    assert store.measured_fits("no_such_system").total == 0


def test_fit_rows_need_the_table_and_skip_the_others():
    """The builder's fitting is a function of the files and a reader: tables without all-reduce are skipped."""
    files = [f for f in M.load_manifest()["files"] if f["system"] == "l40s"]
    read = lambda f: M.read_parquet_columns(M.MEASURED_DIR / f["path"])
    rows = measured_fit_rows(files, read)
    assert {r["table_name"] for r in rows} == set(FITTED_TABLES)
    assert all(r["system"] == "l40s" and r["method"] == FIT_METHOD for r in rows)
