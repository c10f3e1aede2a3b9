"""Read the YAML data files into plain dicts, without validation or the database.

The builder validates what this returns and writes it to DuckDB; tests and the calculators'
`lookup` can use it directly so that they do not need a built store.
"""
from __future__ import annotations

import functools
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent / "data"

try:  # the C loader is several times faster; fall back to pure Python where libyaml is absent
    _Base = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Base = yaml.SafeLoader


class DuplicateKeys(ValueError):
    """A data file repeats a key inside one mapping (YAML would silently keep the last value)."""

    def __init__(self, filename: str, found: list[tuple[str, str, int]]):
        self.filename = filename
        self.found = found  # (record id or "-", key, 1-based line)
        super().__init__("; ".join(f"{filename}: {rec}: {key}: duplicate key (line {line})" for rec, key, line in found))


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader that reads YAML 1.2 floats such as `80.0e9` (PyYAML wants `80.0e+9`) and
    notes every key repeated within one mapping instead of letting the last one win silently."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[int, str]] = []  # (0-based line, key)
        self.spans: list[tuple[int, int, str]] = []  # (first line, last line, id) of mappings with an id

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    self.duplicates.append((key_node.start_mark.line, str(key)))
                seen.add(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                pass
            if key in ("id", "slug") and isinstance(key_node, yaml.ScalarNode):
                ident = next((v.value for k, v in node.value if k is key_node), None)
                if isinstance(ident, str):
                    self.spans.append((node.start_mark.line, node.end_mark.line, ident))
        return super().construct_mapping(node, deep=deep)

    def record_at(self, line: int) -> str:
        """The id of the widest mapping with an id around `line` (the record), or "-"."""
        around = [s for s in self.spans if s[0] <= line <= s[1]]
        return max(around, key=lambda s: s[1] - s[0])[2] if around else "-"


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$|^[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)

#: kind -> data file name (or glob) under DATA_DIR
FILES = {
    "source": "sources*.yaml",
    "hardware": "hardware.yaml",
    "link": "links.yaml",
    "model": "models.yaml",
    "framework": "frameworks.yaml",
    "price": "prices*.yaml",
    "case": "cases.yaml",
    "glossary": "glossary.yaml",
    "claim": "claims.yaml",
    "derivation": "derivations/*.yaml",
    "benchmark": "benchmarks/*.yaml",
}

#: other data files the build reads (the measured tables' manifest and system map): not records, but the
#: build refuses a repeated key in them just the same (NVIDIA's verbatim collection_meta.yaml copies are
#: checked by their sha256 instead)
CHECKED_FILES = ("measured/manifest.yaml", "measured/systems.yaml", "launch-args.yaml")


@dataclass
class Catalog:
    """Every record of every data file, with the file each came from."""

    records: dict[str, list[dict]] = field(default_factory=dict)
    origin: dict[int, str] = field(default_factory=dict)  # id(record) -> relative file name
    data_dir: Path | None = None  # where the files were read (the measured tables live under it)

    def by_id(self, kind: str) -> dict[str, dict]:
        key = "slug" if kind == "case" else "id"
        return {r.get(key): r for r in self.records.get(kind, []) if isinstance(r, dict)}

    def file_of(self, record: dict) -> str:
        return self.origin.get(id(record), "?")


def load_yaml(path: Path, name: str | None = None) -> list:
    """One data file's content; raises DuplicateKeys (named `name`, default the file name) when a
    mapping repeats a key."""
    with path.open(encoding="utf-8") as fh:
        loader = _Loader(fh)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    if loader.duplicates:
        raise DuplicateKeys(name or path.name, [(loader.record_at(line), key, line + 1)
                                                for line, key in sorted(loader.duplicates)])
    return data or []


def load_catalog(data_dir: Path = DATA_DIR) -> Catalog:
    cat = Catalog(data_dir=Path(data_dir))
    for kind, pattern in FILES.items():
        rows: list[dict] = []
        for path in sorted(data_dir.glob(pattern)):
            content = load_yaml(path, str(path.relative_to(data_dir)))
            if not isinstance(content, list):
                raise ValueError(f"{path.relative_to(data_dir)}: top level must be a list of records")
            for rec in content:
                if isinstance(rec, dict):
                    cat.origin[id(rec)] = str(path.relative_to(data_dir))
                rows.append(rec)
        cat.records[kind] = rows
    for name in CHECKED_FILES:   # raises DuplicateKeys naming file, key and line
        if (data_dir / name).exists():
            load_yaml(data_dir / name, name)
    for rec in cat.records.get("derivation", []):
        if isinstance(rec, dict) and "case" in rec and "name" in rec:
            rec.setdefault("id", f"{rec['case']}/{rec['name']}")
    return cat


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return load_catalog()


@functools.lru_cache(maxsize=4)
def _measurements(directory: Path):
    """The measured tables under `directory`, read from Parquet on first use (once per directory)."""
    from knowledge.measurements import from_directory

    return from_directory(directory)


def gpu_prices(prices, hardware_id: str) -> list[dict]:
    """The GPU-hour price records of one hardware id (records with `hardware` and `device_usd_per_hour`)."""
    return [p for p in prices if isinstance(p, dict) and p.get("hardware") == hardware_id
            and isinstance(p.get("device_usd_per_hour"), dict)]


def class_errors(ident: str, rows: list[dict], within: float = 0.25) -> dict:
    """Kind "validation_class" from validation rows (`knowledge.validation.Row.as_dict`): serving-estimate's errors on
    the compared published runs of one "<hardware id>/<framework>". Per figure: the points with an error, the median,
    90th-percentile (nearest rank) and largest |predicted / measured − 1|, and the share within `within`."""
    hardware, _, framework = ident.partition("/")
    rows = [r for r in rows if r.get("compared") and r.get("hardware") == hardware and r.get("framework") == framework]
    out = {"id": ident, "hardware": hardware, "framework": framework, "points": len(rows),
           "point_ids": [r["id"] for r in rows]}
    for metric in ("tpot_s", "output_tokens_per_s_per_device", "ttft_s"):
        errs = sorted(abs(r["errors"][metric]) for r in rows if (r.get("errors") or {}).get(metric) is not None)
        n = len(errs)
        out[metric] = {"n": n, "median_abs_error": statistics.median(errs) if n else None,
                       "p90_abs_error": errs[math.ceil(0.9 * n) - 1] if n else None,
                       "max_abs_error": errs[-1] if n else None,
                       "within_25_percent": sum(e <= within for e in errs) / n if n else None}
    return out


def validation_class(lookup, ident: str, cache: dict) -> dict:
    """Kind "validation_class" without a store: the class's points recomputed as `knowledge.validation.validate_point`
    does (computed on first use and kept in `cache`; a store answers it from its persisted validation report)."""
    if ident not in cache:
        from knowledge import validation as V

        hardware, _, framework = ident.partition("/")
        rows = [V.validate_point(p, lookup).as_dict() for p in V.points(lookup)
                if p.get("hardware") == hardware and p.get("framework") == framework]
        cache[ident] = class_errors(ident, rows, V.WITHIN)
    return cache[ident]


def catalog_lookup(cat: Catalog):
    """A calculators `Lookup` over a catalog: (kind, id) -> record, KeyError when unknown.

    Kind "measurement" reads the measured Parquet tables beside the data files directly (no store):
    "index", "systems" or "<system>/<table>" (see `knowledge.measurements.Measurements`)."""
    index = {kind: cat.by_id(kind) for kind in cat.records}
    classes: dict = {}

    def lookup(kind: str, ident: str):
        if kind == "measurement":
            return _measurements(Path(cat.data_dir or DATA_DIR) / "measured").lookup(ident)
        if kind == "gpu_prices":
            return gpu_prices(cat.records.get("price", []), ident)
        if kind == "validation_class":
            return validation_class(lookup, ident, classes)
        if kind == "ids":
            return list(index.get(ident, {}))
        return index[kind][ident]

    return lookup
