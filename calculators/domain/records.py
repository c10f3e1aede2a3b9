"""Store records as calculators read them: typed views with their sourced facts.

A lookup hands records over in the store's shape (every number a fact `{value, source, locator}`). Calculators
never read that shape by string keys: `record(lookup, kind, id, loc)` and `model_record` (in `architecture`) give a
`Record` (a `ModelRecord` for models) whose attributes name what is in it (`rec.id`, `rec.label`, `rec.attention`,
`rec.moe` …) and whose `value(...)`, `source(...)` and `cited(res, ...)` read a sourced fact with its provenance.
A view is made once per store record (records never change) and is still readable as the mapping it was built from,
which is what the domain's own ledgers and readers walk.
"""
from __future__ import annotations

from typing import Any

from calculators.framework import Lookup, RecordMemo, Result, TransientRecord, fact_source, fact_value, fetch

__all__ = ["ModelRecord", "Record", "as_model", "as_record", "record"]


class Record(dict):
    """One store record (hardware, link, price, model …) with typed access to its facts."""

    __slots__ = ()

    @property
    def id(self) -> str:
        return str(dict.get(self, "id") or "")

    @property
    def name(self) -> str | None:
        v = dict.get(self, "name")
        return None if v is None else str(v)

    @property
    def label(self) -> str:
        """The name people know it by (its name, else its id)."""
        return self.name or self.id

    def value(self, *path: str, required: bool = True, loc: str = "") -> float | None:
        """The value of the sourced fact at `path` (a 422 naming `loc` when it is missing and required)."""
        return fact_value(self, *path, required=required, loc=loc)

    def source(self, *path: str) -> dict | None:
        """The provenance of the fact at `path` ({record, field, value, source, locator}) or None."""
        return fact_source(self, *path)

    def cited(self, res: Result, *path: str, required: bool = True, loc: str = "") -> float | None:
        """`value(...)`, with the fact cited in the answer's sources."""
        v = self.value(*path, required=required, loc=loc)
        if v is not None:
            res.cite(self.source(*path))
        return v


class TransientView(Record, TransientRecord):
    """A view of a record built for one request (from a `model_config`): nothing derived from it is memoised."""

    __slots__ = ()


class ModelRecord(Record):
    """A model: its shapes and counts as sourced facts, its attention kind, MoE block, KV layer groups and the
    format its weights ship in."""

    __slots__ = ()

    @property
    def kind(self) -> str | None:
        v = dict.get(self, "kind")
        return None if v is None else str(v)

    @property
    def attention(self) -> str | None:
        v = dict.get(self, "attention")
        return None if v is None else str(v)

    @property
    def weight_dtype(self) -> Any:
        """The published weight format(s), as the record states them (a name, or per component)."""
        return dict.get(self, "weight_dtype")

    @property
    def layer_groups(self) -> list:
        return list(dict.get(self, "layer_groups") or [])

    @property
    def moe(self) -> dict | None:
        v = dict.get(self, "moe")
        return v if isinstance(v, dict) else None

    @property
    def is_moe(self) -> bool:
        return self.kind == "moe" or self.moe is not None


class TransientModel(ModelRecord, TransientRecord):
    __slots__ = ()


_VIEWS = RecordMemo(maxsize=4096)


def _view(rec: dict, cls: type[Record], transient: type[Record]) -> Record:
    if isinstance(rec, cls):
        return rec
    if isinstance(rec, TransientRecord):
        return transient(rec)
    return _VIEWS.get(rec, (cls.__name__,), lambda: cls(rec))


def as_record(rec: dict) -> Record:
    """A store record as a typed view (the same view for the same record)."""
    return _view(rec, Record, TransientView)


def as_model(rec: dict) -> ModelRecord:
    """A model record as a `ModelRecord` (the same view for the same store record)."""
    return _view(rec, ModelRecord, TransientModel)


def record(lookup: Lookup, kind: str, ident: str, loc: str) -> Record:
    """The record `ident` of `kind` as a typed view (a miss is a 422 naming `loc`); a model is a `ModelRecord`."""
    rec = fetch(lookup, kind, ident, loc)
    return as_model(rec) if kind == "model" else as_record(rec)
