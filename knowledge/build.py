"""Build the DuckDB store from the data files: validate, migrate, load, then swap in atomically.

Besides the records and the measured tables it derives one set of facts: the α–β fit of every measured
all-reduce (`measured_fit`, one row per system, table and GPU count, via `calculators.domain.link_fit`), each
row naming the measured file and sha256 it was fitted to.

`python -m knowledge.build [--db PATH] [--check]` is the same as `casebook build`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from knowledge import measurements as M
from knowledge.column_cache import prune_column_cache
from knowledge.loader import DATA_DIR, Catalog, DuplicateKeys, load_catalog
from knowledge.migrate import MIGRATIONS_DIR, upgrade
from knowledge.store import KEY
from knowledge.store import SCHEMA_META_KEY as STORE_SCHEMA_KEY
from knowledge.validate import Problem, Validated, validate_catalog

if TYPE_CHECKING:
    from sqlmodel import SQLModel


def default_db() -> Path:
    """Where the store goes when neither `--db` nor CASEBOOK_DB says: `var/casebook.duckdb` of the checkout
    (editable install, the folder holding `knowledge/` has the pyproject.toml), else, for an installed wheel,
    the per-user cache `$XDG_CACHE_HOME/casebook/casebook.duckdb` (default `~/.cache`), never site-packages."""
    env = os.environ.get("CASEBOOK_DB")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / "var" / "casebook.duckdb"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "casebook" / "casebook.duckdb"


DEFAULT_DB = default_db()
#: part of the content hash: a store written by a builder with another layout is stale (2: meta `store_schema`)
SCHEMA_VERSION = "2"
#: the benchmark points' store order: grouped by model and hardware, then the configuration and the load
BENCHMARK_ORDER = ("model_hf", "hardware_name", "framework", "devices", "input_tokens", "output_tokens", "concurrency",
                   "requests_per_s_offered", "id")
#: file suffixes that make up the store's content (besides NOTICE files)
HASHED = {".yaml", ".yml", ".sql", ".parquet"}


class BuildError(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the data files:\n" + "\n".join(f"  {p}" for p in problems))


def content_hash(data_dir: Path = DATA_DIR, migrations_dir: Path = MIGRATIONS_DIR) -> str:
    """SHA-256 over the data files (YAML, the measured Parquet tables and their NOTICE) and the
    migrations (names and bytes): the store's identity."""
    h = hashlib.sha256(SCHEMA_VERSION.encode())
    for base in (data_dir, migrations_dir):
        for path in sorted(p for p in base.rglob("*") if p.is_file() and (p.suffix in HASHED or p.name == "NOTICE")):
            h.update(str(path.relative_to(base)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def stored_hash(db: Path) -> str | None:
    """The content hash recorded in a built store, or None when missing or unreadable."""
    if not db.exists():
        return None
    try:
        con = duckdb.connect(str(db), read_only=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'content_hash'").fetchone()
        finally:
            con.close()
        return row[0] if row else None
    except duckdb.Error:
        return None


def is_stale(db: Path, data_dir: Path = DATA_DIR) -> bool:
    return stored_hash(db) != content_hash(data_dir)


def _calculator_names() -> set[str]:
    from calculators.framework.registry import REGISTRY
    return set(REGISTRY)


def check(data_dir: Path = DATA_DIR) -> tuple[Catalog, list[Problem]]:
    """Load and validate the data files: the catalog and every problem (empty when it builds)."""
    cat, validated = _validated(data_dir)
    return cat, validated.problems


def _validated(data_dir: Path) -> tuple[Catalog, Validated]:
    try:
        cat = load_catalog(data_dir)
    except DuplicateKeys as exc:
        return Catalog(), Validated(problems=[Problem(exc.filename, rec, key, f"duplicate key in a mapping (line {line}): "
                                                      "YAML would keep only the last value")
                                              for rec, key, line in exc.found])
    except (ValueError, OSError) as exc:  # YAML syntax or top-level shape
        return Catalog(), Validated(problems=[Problem(str(getattr(exc, "filename", "") or "data"), "-", "-", str(exc))])
    except Exception as exc:  # yaml.YAMLError carries the file position in its message
        return Catalog(), Validated(problems=[Problem("data", "-", "-", f"cannot parse: {exc}")])
    validated = validate_catalog(cat, _calculator_names())
    validated.problems.extend(Problem("measured/manifest.yaml", "-", "sha256", msg)
                              for msg in M.check_files(data_dir / "measured"))
    return cat, validated


# ---------------------------------------------------------------------------- enrichment

def _enrich_facts(node, sources: dict[str, dict]):
    """Add `source_url` and `source_title` beside every fact's source id (denormalised for readers)."""
    if isinstance(node, dict):
        if "value" in node and "source" in node and isinstance(node["source"], str):
            src = sources.get(node["source"], {})
            node.setdefault("source_url", src.get("url"))
            node.setdefault("source_title", src.get("title"))
        for v in node.values():
            _enrich_facts(v, sources)
    elif isinstance(node, list):
        for v in node:
            _enrich_facts(v, sources)
    return node


def _insert(con: duckdb.DuckDBPyConnection, table: type[SQLModel], rows: list[dict]) -> None:
    """Insert rows (dicts keyed by column) into the table of a SQLModel class, by column name."""
    if not rows:
        return
    cols = list(table.model_fields)
    con.executemany(f"INSERT INTO {table.__tablename__} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [tuple(r[c] for c in cols) for r in rows])


def _write_measurements(con: duckdb.DuckDBPyConnection, measured: Path) -> list[str]:
    """Load the measured Parquet tables (`measured/manifest.yaml`) into `measured_<table>` tables,
    each row with its `system` and `file` (manifest path), files in manifest order, rows in file order.
    Returns the table names created."""
    from knowledge import tables as T  # SQLModel: only when writing a store

    manifest = M.load_manifest(measured)
    files = manifest.get("files", [])
    _insert(con, T.MeasurementFile, [T.MeasurementFile.row(f) for f in files])
    header = {k: v for k, v in manifest.items() if k != "files"}
    _insert(con, T.Meta, [{"key": "measurement_manifest", "value": json.dumps(header, ensure_ascii=False)},
                          {"key": "measurement_systems", "value": json.dumps(M.load_systems(measured), ensure_ascii=False)}])
    created = []
    for table in M.TABLES:
        group = [f for f in files if f["table"] == table]
        if not group:
            continue
        name = f"measured_{table}"
        paths = [str(measured / f["path"]) for f in group]
        con.execute(f"CREATE TABLE {name} AS SELECT ''::VARCHAR AS system, ''::VARCHAR AS file, * "
                    "FROM read_parquet(?, union_by_name = true) LIMIT 0", [paths])
        for f, path in zip(group, paths):
            con.execute(f"INSERT INTO {name} BY NAME SELECT ?::VARCHAR AS system, ?::VARCHAR AS file, * "
                        "FROM read_parquet(?)", [f["system"], f["path"], path])
        created.append(name)
    return created


def measured_fit_rows(files: list[dict], read: Callable[[dict], dict[str, np.ndarray]]) -> list[dict]:
    """The `measured_fit` rows: `fit_all_reduce` over the all-reduce rows of every fitted table
    (`M.FITTED_TABLES`) of every measured file, `read(f)` giving that file's columns."""
    from knowledge import tables as T  # SQLModel: only when writing a store

    from calculators.domain.link_fit import fit_all_reduce

    rows = []
    for f in files:
        if f["table"] not in M.FITTED_TABLES:
            continue
        columns = read(f)
        backend = M.FITTED_TABLES[f["table"]] if "backend" in columns else None
        source = {k: f.get(k) for k in ("system", "table", "framework", "version", "gpu", "sha256")} | {"file": f["path"]}
        rows += [T.MeasuredFit.row(fit.as_dict(), f) for fit in fit_all_reduce(columns, source, backend=backend)]
    return rows


def _write_fits(con: duckdb.DuckDBPyConnection, measured: Path) -> int:
    """Fit the measured all-reduces as loaded into `measured_<table>` and write `measured_fit`; returns the rows."""
    from knowledge import tables as T  # SQLModel: only when writing a store

    def read(f: dict) -> dict[str, np.ndarray]:
        cols = ", ".join(f'"{c}"' for c in f["columns"])
        return dict(con.execute(f"SELECT {cols} FROM measured_{f['table']} WHERE file = ? ORDER BY rowid",
                                [f["path"]]).fetchnumpy())

    rows = measured_fit_rows(M.load_manifest(measured).get("files", []), read)
    _insert(con, T.MeasuredFit, rows)
    return len(rows)


def write(validated: Validated, db: Path, digest: str, data_dir: Path = DATA_DIR) -> dict[str, int]:
    """Write validated records (and the measured tables under `data_dir/measured`) to a temporary file in
    `db`'s directory, then rename it over `db` (os.replace): a reader sees the whole old file or the
    whole new one, never a half-written store. Its SHA-256 is recorded beside it (`<db>.sha256`)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    tmp = db.with_name(db.name + f".tmp{os.getpid()}")
    _remove(tmp, Path(str(tmp) + ".wal"))
    try:
        counts = _write_file(validated, tmp, digest, data_dir)
        with open(tmp, "rb+") as f:  # on disk before the rename makes it visible
            os.fsync(f.fileno())
        _swap_in(tmp, db)
    finally:
        _remove(tmp, Path(str(tmp) + ".wal"))
    return counts


def _remove(*paths: Path) -> None:
    """Delete files that may not exist."""
    for p in paths:
        p.unlink(missing_ok=True)


def _write_checksums(db: Path, digests: list[str]) -> None:
    """Replace the checksum record beside `db` (one `<sha256>  <file name>` line per digest) atomically."""
    from knowledge.store import checksum_path

    target = checksum_path(db)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    tmp.write_text("".join(f"{d}  {db.name}\n" for d in digests), encoding="ascii")
    os.replace(tmp, target)


def _swap_in(tmp: Path, db: Path) -> None:
    """Rename a finished store over `db` and record its SHA-256. The record holds the old and the new digest
    while the file is swapped, so a reader that verifies either file at any moment finds its digest."""
    from knowledge.store import file_sha256, recorded_checksums

    new = file_sha256(tmp)
    old = recorded_checksums(db) - {new}
    _write_checksums(db, [new, *sorted(old)])
    os.replace(tmp, db)
    _write_checksums(db, [new])


def store_schema() -> dict:
    """How the store describes its own tables (meta `store_schema`), so readers need no ORM: each record kind's
    table, key, filter columns (declaration order, `doc` excluded) and default order, and every table name."""
    from knowledge import tables as T

    kinds = {}
    for kind, table in T.TABLES.items():
        key = KEY.get(kind, "id")
        order = {"case": ["section_order", "slug"], "derivation": ["case_slug", "id"],
                 "benchmark": list(BENCHMARK_ORDER)}.get(kind, [key])
        kinds[kind] = {"table": table.__tablename__, "key": key, "order": order,
                       "columns": [c for c in table.model_fields if c != "doc"]}
    return {"kinds": kinds, "tables": [t.__tablename__ for t in T.ALL_TABLES]}


def _write_file(validated: Validated, tmp: Path, digest: str, data_dir: Path) -> dict[str, int]:
    """Write the store's tables into the new file `tmp`; returns the row count of every table."""
    from knowledge import tables as T  # SQLModel: only when writing a store

    recs = validated.records
    sources = {raw["id"]: raw for raw, _ in recs.get("source", [])}
    for kind in ("hardware", "link", "model", "price"):
        for raw, _ in recs.get(kind, []):
            _enrich_facts(raw, sources)
    for raw, _ in recs.get("framework", []):
        for feat in raw.get("features") or []:
            feat.setdefault("source_url", sources.get(feat.get("source"), {}).get("url"))
    counts: dict[str, int] = {}
    con = duckdb.connect(str(tmp))
    try:
        upgrade(con)
        con.execute("BEGIN TRANSACTION")
        for kind, table in T.TABLES.items():
            _insert(con, table, [table.row(raw, rec) for raw, rec in recs.get(kind, [])])
        _insert(con, T.HardwarePeak, [r for _, hw in recs.get("hardware", []) for r in T.HardwarePeak.rows(hw)])
        _insert(con, T.FrameworkFeature, [r for _, fw in recs.get("framework", []) for r in T.FrameworkFeature.rows(fw)])
        _insert(con, T.Fact, [r for kind in ("hardware", "link", "model", "price")
                              for raw, rec in recs.get(kind, []) for r in T.Fact.rows(kind, rec.id, raw)])
        _insert(con, T.Meta, [{"key": k, "value": v} for k, v in (
            ("content_hash", digest), ("built_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ("schema_version", SCHEMA_VERSION), (STORE_SCHEMA_KEY, json.dumps(store_schema())))])
        measured = _write_measurements(con, data_dir / "measured")
        _write_fits(con, data_dir / "measured")
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
        for kind, table in (*T.TABLES.items(), ("hardware_peak", T.HardwarePeak),
                            ("framework_feature", T.FrameworkFeature), ("fact", T.Fact),
                            ("measured_fit", T.MeasuredFit)):
            counts[kind] = con.execute(f"SELECT count(*) FROM {table.__tablename__}").fetchone()[0]
        for name in measured:
            counts[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
    finally:
        con.close()
    return counts


def build(db: Path = DEFAULT_DB, data_dir: Path = DATA_DIR) -> dict[str, int]:
    """Validate and write the store; raises BuildError naming every problem."""
    _, validated = _validated(data_dir)
    if validated.problems:
        raise BuildError(validated.problems)
    counts = write(validated, db, content_hash(data_dir), data_dir)
    # the measured columns cached beside the store for files it no longer holds (knowledge.column_cache)
    prune_column_cache(db, {f["sha256"] for f in M.load_manifest(data_dir / "measured").get("files", [])})
    return counts


def store_problem(db: Path, data_dir: Path = DATA_DIR) -> str | None:
    """Why the store at `db` must be (re)built: missing, stale, or failing verification
    (`knowledge.store.verify_store`); None when it can be served as it is."""
    from knowledge.store import StoreInvalid, recorded_checksums, verify_store

    if not db.exists():
        return "the store file does not exist"
    try:
        check = verify_store(db, accepted=recorded_checksums(db))
    except StoreInvalid as exc:
        return exc.reason
    if check.content_hash != content_hash(data_dir):
        return "stale: built from other data files than those in " + str(data_dir)
    return None


def ensure_built(db: Path = DEFAULT_DB, data_dir: Path = DATA_DIR) -> bool:
    """Build the store when missing, stale, truncated or corrupted; returns True when it built."""
    reason = store_problem(db, data_dir)
    if reason is None:
        return False
    if db.exists():
        print(f"rebuilding {db}: {reason}", file=sys.stderr)
    build(db, data_dir)
    return True


#: how `casebook serve` tells its workers why it serves an older store than the data files (see ensure_servable)
STALE_REASON_ENV = "CASEBOOK_STORE_STALE_REASON"


def stale_reason(exc: BuildError | OSError) -> str:
    """Why an older store is served, in one line: the build's first problems (and how many more) or the error."""
    if isinstance(exc, BuildError):
        shown = "; ".join(" ".join(str(p).split()) for p in exc.problems[:3])   # a YAML error spans lines
        more = f" (and {len(exc.problems) - 3} more)" if len(exc.problems) > 3 else ""
        return f"the data files do not build ({len(exc.problems)} problem(s): {shown}{more}): serving the store " \
               "built from earlier data files"
    error = " ".join(str(exc).split())
    return f"the store could not be rebuilt ({error}): serving the one built from earlier data files"


def ensure_servable(db: Path = DEFAULT_DB, data_dir: Path = DATA_DIR) -> str | None:
    """Build the store when missing, stale, truncated or corrupted, like `ensure_built`; but when the data files do
    not build (or the new store cannot be written) and the store there is sound, only built from older data files,
    keep it: returns why it is served stale (None when it is current). Raises BuildError (or OSError) when there is
    no sound store to fall back on."""
    reason = store_problem(db, data_dir)
    if reason is None:
        return None
    if db.exists():
        print(f"rebuilding {db}: {reason}", file=sys.stderr)
    try:
        build(db, data_dir)
    except (BuildError, OSError) as exc:
        if not reason.startswith("stale:"):
            raise                       # missing or damaged: nothing sound to serve instead
        return stale_reason(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="casebook build", description="Validate the data files and write the store.")
    ap.add_argument("--db", type=Path, default=DEFAULT_DB, help="store file to write (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="validate only; write nothing")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.check:
        _, problems = check()
        for p in problems:
            print(p, file=sys.stderr)
        print(f"{len(problems)} problem(s)", file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    try:
        counts = build(args.db)
    except BuildError as exc:
        print(f"casebook build: refused.\n{exc}", file=sys.stderr)
        return 1
    print(f"built {args.db} in {time.perf_counter() - t0:.2f} s: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
