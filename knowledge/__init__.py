"""The sourced knowledge store: data files, validation, the DuckDB build and read-only queries."""
