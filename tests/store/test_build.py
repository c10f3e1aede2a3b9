"""The builder refuses bad data with the file, record and field named; migrations are idempotent."""
from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import duckdb
import pytest

from knowledge.build import BuildError, build, check, content_hash, is_stale, stored_hash
from knowledge.loader import DATA_DIR
from knowledge.migrate import upgrade
from knowledge.tables import ALL_TABLES

SOURCES = """
- id: src-a
  title: A datasheet
  url: https://example.org/a.pdf
  kind: datasheet
"""
HARDWARE = """
- id: gpu-x
  name: GPU X
  vendor: Acme
  scope: device
  memory_bytes: {value: 80.0e9, source: src-a, locator: "Table 1", as_published: "80 GB", basis: decimal,
                 basis_source: src-a, basis_locator: "Table 1, footnote", note: "the datasheet defines GB as 1e9 bytes"}
  memory_bandwidth_bytes_per_s: {value: 3.35e12, source: src-a, locator: "Table 1"}
  peaks:
    - {input_precision: BF16, accumulator: FP32, unit: tensor, sparsity: dense,
       flop_per_s: {value: 989.0e12, source: src-a, locator: "Table 2"}}
"""
MODELS = """
- id: tiny-1b
  name: Tiny-1B
  family: tiny
  kind: dense
  layers: {value: 4, source: src-a, locator: "config.json"}
  layer_groups:
    - {count: 4, streams: [{name: kv, dim: 256, window: null, ratio: 1}], state_elements: 0}
  layer_groups_provenance: {source: src-a, locator: "config.json"}
"""
CASES = """
- slug: case-one
  title_zh: 案例一
  title_en: Case one
  section: "第 2 章 · 模型架构"
  section_order: 2
  cited_chapters: [2]
  summary: A case.
  source_url: https://example.org/case-one.md
  related: []
"""


def make_data(tmp_path: Path, **overrides: str) -> Path:
    data = tmp_path / "data"
    (data / "derivations").mkdir(parents=True)
    files = {"sources.yaml": SOURCES, "hardware.yaml": HARDWARE, "models.yaml": MODELS, "cases.yaml": CASES}
    files.update({k.replace("_", ".", 1) if not k.endswith(".yaml") else k: v for k, v in overrides.items()})
    for name, text in files.items():
        (data / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return data


def problems_of(data: Path) -> list[str]:
    return [str(p) for p in check(data)[1]]


def test_clean_data_has_no_problems(tmp_path):
    assert problems_of(make_data(tmp_path)) == []


@pytest.mark.parametrize("bad, expected", [
    (HARDWARE.replace(', source: src-a, locator: "Table 1", as_published: "80 GB"', ''),
     "hardware.yaml: gpu-x: memory_bytes: fact has no source"),
    (HARDWARE.replace('{value: 80.0e9, source: src-a, locator: "Table 1", as_published: "80 GB", basis: decimal,\n'
                      '                 basis_source: src-a, basis_locator: "Table 1, footnote", '
                      'note: "the datasheet defines GB as 1e9 bytes"}', '80.0e9'),
     "hardware.yaml: gpu-x: memory_bytes: fact has no source"),
    (HARDWARE.replace("memory_bytes:", "memory:"), "hardware.yaml: gpu-x: memory: unit missing"),
    (HARDWARE.replace("3.35e12", "-1.0"), "hardware.yaml: gpu-x: memory_bandwidth_bytes_per_s: impossible value"),
    (HARDWARE.replace('source: src-a, locator: "Table 2"', 'source: nowhere, locator: "Table 2"'),
     "hardware.yaml: gpu-x: peaks.0.flop_per_s.source: reference to unknown source 'nowhere'"),
    (HARDWARE.replace('source: src-a, locator: "Table 1", as_published', 'source: src-a, as_published'),
     "hardware.yaml: gpu-x: memory_bytes: fact has no locator"),
    (HARDWARE + HARDWARE.replace("- id: gpu-x", "- id: gpu-x", 1), "hardware.yaml: gpu-x: id: duplicate id 'gpu-x'"),
])
def test_bad_hardware_is_refused_with_its_place(tmp_path, bad, expected):
    found = problems_of(make_data(tmp_path, **{"hardware.yaml": bad}))
    assert any(p.startswith(expected) for p in found), found


def test_zero_layers_is_impossible(tmp_path):
    found = problems_of(make_data(tmp_path, **{"models.yaml": MODELS.replace("value: 4,", "value: 0,")}))
    assert any(p.startswith("models.yaml: tiny-1b: layers: impossible value") for p in found), found


def test_dangling_case_reference_is_refused(tmp_path):
    found = problems_of(make_data(tmp_path, **{"cases.yaml": CASES.replace("related: []", "related: [no-such-case]")}))
    assert any(p.startswith("cases.yaml: case-one: related: reference to unknown case 'no-such-case'") for p in found), found


def test_derivation_with_unknown_calculator_is_refused(tmp_path):
    deriv = """
    - case: case-one
      name: example
      family: kv_sizing
      title: An example
      calculator: no-such-calculator
      request: {}
      expected: {x: 1}
    """
    data = make_data(tmp_path)
    (data / "derivations" / "kv_sizing.yaml").write_text(textwrap.dedent(deriv), encoding="utf-8")
    found = problems_of(data)
    assert any("case-one/example: calculator: unknown calculator 'no-such-calculator'" in p for p in found), found


def test_build_refuses_and_writes_nothing(tmp_path):
    data = make_data(tmp_path, **{"models.yaml": MODELS.replace("value: 4,", "value: 0,")})
    db = tmp_path / "x.duckdb"
    with pytest.raises(BuildError) as err:
        build(db, data)
    assert "tiny-1b: layers" in str(err.value)
    assert not db.exists()


def test_build_small_store_and_staleness(tmp_path):
    data = make_data(tmp_path)
    db = tmp_path / "x.duckdb"
    counts = build(db, data)
    assert counts["hardware"] == 1 and counts["hardware_peak"] == 1 and counts["model"] == 1
    assert stored_hash(db) == content_hash(data)
    assert not is_stale(db, data)
    (data / "cases.yaml").write_text(textwrap.dedent(CASES).replace("A case.", "A changed case."), encoding="utf-8")
    assert is_stale(db, data)


def _private_copy(built_db: Path, tmp_path: Path) -> Path:
    """A copy of the built store: the server under test keeps pooled connections to the original,
    and DuckDB refuses a second connection with another configuration in the same process."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(built_db, copy)
    return copy


def test_real_data_builds_with_provenance(built_db, tmp_path):
    con = duckdb.connect(str(_private_copy(built_db, tmp_path)), read_only=True)
    try:
        n_facts, n_unsourced = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE source_id IS NULL OR locator IS NULL) FROM fact").fetchone()
        assert n_facts > 500 and n_unsourced == 0
        assert con.execute("SELECT count(*) FROM case_study").fetchone()[0] == 71
    finally:
        con.close()


def test_migrations_rerun_is_a_no_op(built_db, tmp_path):
    con = duckdb.connect(str(_private_copy(built_db, tmp_path)))
    try:
        before = con.execute("SELECT count(*) FROM fact").fetchone()[0]
        assert upgrade(con) == []
        assert con.execute("SELECT count(*) FROM fact").fetchone()[0] == before
    finally:
        con.close()


#: the DuckDB type of each Python column type of the SQLModel tables
SQL_TYPES = {str: "VARCHAR", float: "DOUBLE", int: "INTEGER", bool: "BOOLEAN"}


def _python_type(annotation) -> type:
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return args[0] if args else annotation


def test_sqlmodel_tables_match_the_migrated_schema(built_db, tmp_path):
    """Same columns with the same types (order is free: rows are inserted by column name, and
    `ALTER TABLE ... ADD COLUMN` appends)."""
    con = duckdb.connect(str(_private_copy(built_db, tmp_path)), read_only=True)
    try:
        for cls in ALL_TABLES:
            table = cls.__tablename__
            stored = dict(con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?",
                [table]).fetchall())
            declared = {name: SQL_TYPES[_python_type(f.annotation)] for name, f in cls.model_fields.items()}
            assert stored == declared, table
    finally:
        con.close()


def test_real_data_has_no_problems():
    assert [str(p) for p in check(DATA_DIR)[1]] == []


def test_the_store_describes_its_tables_as_the_sqlmodel_classes_declare_them(built_db, tmp_path):
    """Readers take each kind's table, key, columns and order from meta `store_schema` (no ORM at serve time):
    it must say what `knowledge.tables` declares, every table it names must exist, and the Store reads it."""
    from knowledge.store import KEY, SCHEMA_META_KEY, Store
    from knowledge.tables import TABLES

    path = _private_copy(built_db, tmp_path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        described = json.loads(con.execute("SELECT value FROM meta WHERE key = ?", [SCHEMA_META_KEY]).fetchone()[0])
        names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        con.close()
    assert described["tables"] == [t.__tablename__ for t in ALL_TABLES]
    assert set(described["tables"]) <= names
    assert list(described["kinds"]) == list(TABLES)
    for kind, cls in TABLES.items():
        d = described["kinds"][kind]
        assert d["table"] == cls.__tablename__
        assert d["key"] == KEY.get(kind, "id")
        assert d["columns"] == [c for c in cls.model_fields if c != "doc"]
        assert set(d["order"]) <= set(d["columns"]) and d["order"]
    store = Store(path)
    try:
        assert store.columns("hardware") == described["kinds"]["hardware"]["columns"]
        with pytest.raises(KeyError):
            store.list("hardware", where={"no_such_column": 1})
    finally:
        store.close()


def test_a_store_without_its_description_is_refused_with_the_reason(built_db, tmp_path):
    """A store written before `store_schema` existed is not served half-understood: verification names why."""
    from knowledge.store import SCHEMA_META_KEY, StoreInvalid, verify_store

    path = tmp_path / "old.duckdb"
    shutil.copyfile(built_db, path)
    con = duckdb.connect(str(path))
    try:
        con.execute("DELETE FROM meta WHERE key = ?", [SCHEMA_META_KEY])
    finally:
        con.close()
    with pytest.raises(StoreInvalid, match="store_schema"):
        verify_store(path)
