"""Validation of the data files: every record goes through its model in `knowledge.records`.

Errors name the file, the record (id or slug) and the field, e.g.
`hardware.yaml: h100-sxm: memory_bandwidth_bytes_per_s: impossible value: must be > 0 (got 0)`.
Only what needs the whole catalog lives here (unique ids); references and calculator names are
checked by the models through the validation context.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from knowledge.loader import Catalog
from knowledge.records import KINDS, Record, describe


@dataclass
class Problem:
    """One reason the build refuses: where (file, record, field) and what."""

    file: str
    record: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.record}: {self.field}: {self.message}"


@dataclass
class Validated:
    """The catalog's records that passed, as (raw dict, typed record) pairs per kind, and the problems."""

    records: dict[str, list[tuple[dict, Record]]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _name(rec: Any, key: str) -> str:
    if not isinstance(rec, dict):
        return "?"
    return str(rec.get(key) or rec.get("id") or rec.get("slug") or "?")


def _duplicates(cat: Catalog, kind: str, key: str) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for rec in cat.records.get(kind, []):
        ident = rec.get(key) if isinstance(rec, dict) else None
        if isinstance(ident, str) and ident:
            if ident in seen:
                out.append(Problem(cat.file_of(rec), ident, key, f"duplicate id {ident!r}"))
            seen.add(ident)
    return out


def validate_catalog(cat: Catalog, calculator_names: set[str] | None = None) -> Validated:
    """Validate every record of the catalog through its model; keep the typed records that pass."""
    context = {"ids": {kind: {i for i in cat.by_id(kind) if isinstance(i, str)} for kind in cat.records},
               "calculators": calculator_names}
    out = Validated()
    for kind, model in KINDS.items():
        out.problems += _duplicates(cat, kind, model.key)
        rows = out.records.setdefault(kind, [])
        for rec in cat.records.get(kind, []):
            if not isinstance(rec, dict):
                out.problems.append(Problem("?", "?", "-", f"{kind} entry is not a mapping"))
                continue
            try:
                rows.append((rec, model.model_validate(rec, context=context)))
            except ValidationError as exc:
                file, name = cat.file_of(rec), _name(rec, model.key)
                out.problems += [Problem(file, name, f or "-", m) for f, m in describe(exc.errors())]
    return out


def validate(catalog: Catalog, calculator_names: set[str] | None = None) -> list[Problem]:
    """Every problem of the catalog (empty when it builds)."""
    return validate_catalog(catalog, calculator_names).problems
