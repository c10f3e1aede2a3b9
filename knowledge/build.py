"""Build the DuckDB store from the data files: validate, migrate, load, then swap in atomically.

`python -m knowledge.build [--db PATH] [--check]` is the same as `casebook build`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import duckdb

from knowledge.loader import DATA_DIR, Catalog, load_catalog
from knowledge.migrate import MIGRATIONS_DIR, upgrade
from knowledge.validate import Problem, validate

DEFAULT_DB = Path(os.environ.get("CASEBOOK_DB", Path(__file__).resolve().parent.parent / "var" / "casebook.duckdb"))
SCHEMA_VERSION = "1"


class BuildError(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(f"{len(problems)} problem(s) in the data files:\n" + "\n".join(f"  {p}" for p in problems))


def content_hash(data_dir: Path = DATA_DIR, migrations_dir: Path = MIGRATIONS_DIR) -> str:
    """SHA-256 over the data files and migrations (names and bytes): the store's identity."""
    h = hashlib.sha256(SCHEMA_VERSION.encode())
    for base in (data_dir, migrations_dir):
        for path in sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in {".yaml", ".yml", ".sql"}):
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
    from calculators.registry import REGISTRY
    return set(REGISTRY)


def check(data_dir: Path = DATA_DIR) -> tuple[Catalog, list[Problem]]:
    try:
        cat = load_catalog(data_dir)
    except (ValueError, OSError) as exc:  # YAML syntax or top-level shape
        return Catalog(), [Problem(str(getattr(exc, "filename", "") or "data"), "-", "-", str(exc))]
    except Exception as exc:  # yaml.YAMLError carries the file position in its message
        return Catalog(), [Problem("data", "-", "-", f"cannot parse: {exc}")]
    return cat, validate(cat, _calculator_names())


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


def _fact_rows(kind: str, rec_id: str, node, path: str = ""):
    if isinstance(node, dict):
        if "value" in node and "source" in node:
            v = node["value"]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                yield (kind, rec_id, path, float(v), node["source"], node.get("locator"),
                       node.get("as_published"), node.get("note"))
            return
        for k, v in node.items():
            yield from _fact_rows(kind, rec_id, v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _fact_rows(kind, rec_id, v, f"{path}.{i}")


def _v(rec: dict, *path: str):
    node = rec
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node.get("value") if isinstance(node, dict) else node


def _dump(rec: dict) -> str:
    return json.dumps(rec, ensure_ascii=False, default=str)


def write(cat: Catalog, db: Path, digest: str) -> dict[str, int]:
    """Write a validated catalog to a new file at `db` (replacing it atomically)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    tmp = db.with_name(db.name + f".tmp{os.getpid()}")
    for p in (tmp, Path(str(tmp) + ".wal")):
        if p.exists():
            p.unlink()
    sources = cat.by_id("source")
    counts: dict[str, int] = {}
    con = duckdb.connect(str(tmp))
    try:
        upgrade(con)
        con.execute("BEGIN TRANSACTION")
        R = cat.records
        rows = [(s["id"], s["title"], s["url"], s.get("kind"), s.get("publisher"), _str(s.get("date")),
                 _str(s.get("accessed")), _dump(s)) for s in R.get("source", [])]
        if rows:
            con.executemany("INSERT INTO source VALUES (?,?,?,?,?,?,?,?)", rows)
        hw_rows, peak_rows, facts = [], [], []
        for h in R.get("hardware", []):
            _enrich_facts(h, sources)
            hw_rows.append((h["id"], h["name"], h.get("vendor"), h.get("architecture"), h.get("form_factor"),
                            h.get("scope"), _v(h, "memory_bytes"), _v(h, "memory_bandwidth_bytes_per_s"),
                            _v(h, "power_w"), _dump(h)))
            for p in h.get("peaks") or []:
                f = p.get("flop_per_s") or {}
                peak_rows.append((h["id"], p.get("input_precision"), p.get("accumulator"), p.get("unit"),
                                  p.get("sparsity"), f.get("value"), f.get("source"), f.get("locator")))
        if hw_rows:
            con.executemany("INSERT INTO hardware VALUES (?,?,?,?,?,?,?,?,?,?)", hw_rows)
        if peak_rows:
            con.executemany("INSERT INTO hardware_peak VALUES (?,?,?,?,?,?,?,?)", peak_rows)
        rows = []
        for l in R.get("link", []):
            _enrich_facts(l, sources)
            rows.append((l["id"], l["name"], l.get("kind"), _str(l.get("generation")), _v(l, "one_way_bytes_per_s"),
                         _v(l, "latency_s"), l.get("direction_convention"), _dump(l)))
        if rows:
            con.executemany("INSERT INTO link VALUES (?,?,?,?,?,?,?,?)", rows)
        rows = []
        for m in R.get("model", []):
            _enrich_facts(m, sources)
            layers, hidden = _v(m, "layers"), _v(m, "hidden_size")
            rows.append((m["id"], m["name"], m.get("family"), m.get("organisation"), m.get("kind"), m.get("attention"),
                         int(layers) if layers is not None else None, int(hidden) if hidden is not None else None,
                         _v(m, "params_total"), _v(m, "params_active"), _dump(m)))
        if rows:
            con.executemany("INSERT INTO model VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        rows, feat_rows = [], []
        for fw in R.get("framework", []):
            for feat in fw.get("features") or []:
                src = sources.get(feat.get("source"), {})
                feat.setdefault("source_url", src.get("url"))
                feat_rows.append((fw["id"], feat.get("feature"), feat.get("name"), _str(feat.get("since")),
                                  _str(feat.get("date")), feat.get("source"), feat.get("locator")))
            rows.append((fw["id"], fw["name"], fw.get("kind"), fw.get("url"), fw.get("license"), _dump(fw)))
        if rows:
            con.executemany("INSERT INTO framework VALUES (?,?,?,?,?,?)", rows)
        if feat_rows:
            con.executemany("INSERT INTO framework_feature VALUES (?,?,?,?,?,?,?)", feat_rows)
        rows = []
        for p in R.get("price", []):
            _enrich_facts(p, sources)
            rows.append((p["id"], p.get("provider"), p.get("model"), _str(p.get("date")), _v(p, "input_usd_per_mtok"),
                         _v(p, "cache_read_usd_per_mtok"), _v(p, "cache_write_usd_per_mtok"),
                         _v(p, "output_usd_per_mtok"), _dump(p)))
        if rows:
            con.executemany("INSERT INTO price VALUES (?,?,?,?,?,?,?,?,?)", rows)
        rows = []
        for c in R.get("case", []):
            chapters = "," + ",".join(str(x) for x in c.get("cited_chapters") or []) + ","
            rows.append((c["slug"], c["title_zh"], c["title_en"], c.get("section"), c.get("section_en"),
                         c.get("section_order"), chapters, c.get("summary"), c.get("source_url"),
                         c.get("source_commit"), _dump(c)))
        if rows:
            con.executemany("INSERT INTO case_study VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        rows = [(d["id"], d["case"], d["name"], d.get("family"), d.get("title"), d.get("calculator"),
                 bool(d.get("calculator")), _dump(d)) for d in R.get("derivation", [])]
        if rows:
            con.executemany("INSERT INTO derivation VALUES (?,?,?,?,?,?,?,?)", rows)
        rows = [(g["id"], g.get("term") or g.get("name") or g["id"], g.get("kind"), _dump(g)) for g in R.get("glossary", [])]
        if rows:
            con.executemany("INSERT INTO glossary VALUES (?,?,?,?)", rows)
        rows = [(c["id"], c.get("verdict"), c.get("calculator"), _dump(c)) for c in R.get("claim", [])]
        if rows:
            con.executemany("INSERT INTO claim VALUES (?,?,?,?)", rows)
        for kind in ("hardware", "link", "model", "price"):
            for rec in R.get(kind, []):
                facts.extend(_fact_rows(kind, rec["id"], rec))
        if facts:
            con.executemany("INSERT INTO fact VALUES (?,?,?,?,?,?,?,?)", facts)
        con.executemany("INSERT INTO meta VALUES (?,?)", [
            ("content_hash", digest), ("built_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ("schema_version", SCHEMA_VERSION)])
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
        for kind, table in (("source", "source"), ("hardware", "hardware"), ("hardware_peak", "hardware_peak"),
                            ("link", "link"), ("model", "model"), ("framework", "framework"),
                            ("framework_feature", "framework_feature"), ("price", "price"), ("case", "case_study"),
                            ("derivation", "derivation"), ("fact", "fact"), ("glossary", "glossary"), ("claim", "claim")):
            counts[kind] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()
    os.replace(tmp, db)
    return counts


def _str(v) -> str | None:
    return None if v is None else str(v)


def build(db: Path = DEFAULT_DB, data_dir: Path = DATA_DIR) -> dict[str, int]:
    """Validate and write the store; raises BuildError naming every problem."""
    cat, problems = check(data_dir)
    if problems:
        raise BuildError(problems)
    return write(cat, db, content_hash(data_dir))


def ensure_built(db: Path = DEFAULT_DB) -> bool:
    """Build the store when missing or stale; returns True when it built."""
    if not is_stale(db):
        return False
    build(db)
    return True


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
