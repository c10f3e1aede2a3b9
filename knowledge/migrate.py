"""Plain-SQL migrations: `knowledge/migrations/NNNN_name.sql` (package data, so an installed wheel has them), each
applied once, in one transaction.

Applied versions are recorded in `schema_migrations`; running the migrations again on a migrated
store applies nothing.
"""
from __future__ import annotations

from pathlib import Path

import duckdb

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def migration_files(directory: Path = MIGRATIONS_DIR) -> list[Path]:
    return sorted(p for p in directory.glob("[0-9][0-9][0-9][0-9]_*.sql"))


def applied(con: duckdb.DuckDBPyConnection) -> set[str]:
    con.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version VARCHAR PRIMARY KEY, "
                "applied_at TIMESTAMP DEFAULT current_timestamp)")
    return {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}


def upgrade(con: duckdb.DuckDBPyConnection, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply every migration not yet applied; returns the versions applied now."""
    done = applied(con)
    now = []
    for path in migration_files(directory):
        version = path.stem
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            for statement in duckdb.extract_statements(path.read_text(encoding="utf-8")):
                con.execute(statement)
            con.execute("INSERT INTO schema_migrations (version) VALUES (?)", [version])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        now.append(version)
    return now
