"""How facts reach a calculator: `lookup(kind, id)` returns a store record as a dict (or a typed record); helpers
to fetch, read sourced values and memoise what is derived from a record."""
from __future__ import annotations

from typing import Any, Callable


from calculators.framework.errors import CalcInputError, UnknownId

Lookup = Callable[[str, str], dict]

IDS = "ids"


def no_lookup(kind: str, ident: str) -> dict:
    """A lookup that knows no ids (for pure-number requests and tests)."""
    raise KeyError(ident)


def ids_of(lookup: Lookup, kind: str) -> list[str]:
    """The ids of `kind` the lookup knows ([] when it cannot list them)."""
    try:
        ids = lookup(IDS, kind)
    except (KeyError, TypeError, ValueError):
        return []
    return [str(i) for i in ids] if isinstance(ids, (list, tuple, set, frozenset, dict)) else []


def fetch(lookup: Lookup, kind: str, ident: str, loc: str) -> dict:
    """Resolve an id through `lookup`, turning a miss into a 422 that names the field."""
    try:
        return lookup(kind, ident)
    except KeyError:
        raise UnknownId(loc, kind, ident) from None


def fact_value(record: dict, *path: str, required: bool = True, loc: str = "") -> float | None:
    """The `value` of a sourced fact inside a store record (None when absent and optional)."""
    node: Any = record
    for key in path:
        if not isinstance(node, dict) or key not in node or node[key] is None:
            if required:
                raise CalcInputError(loc or path[0], f"{record.get('id', '?')} has no sourced {'.'.join(path)}")
            return None
        node = node[key]
    return node["value"] if isinstance(node, dict) else node


def fact_source(record: dict, *path: str) -> dict | None:
    """Provenance of a fact: {field, value, source, locator} or None."""
    node: Any = record
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if not isinstance(node, dict) or "source" not in node:
        return None
    return {"record": record.get("id"), "field": ".".join(path), "value": node.get("value"),
            "source": node.get("source"), "locator": node.get("locator"),
            "source_url": node.get("source_url")}


class TransientRecord(dict):
    """A record built for one request (from a `model_config`): nothing derived from it is memoised, since no later
    request will hold the same record."""

    __slots__ = ()


class RecordMemo:
    """Values derived from store records, computed once per record rather than once per request.

    Keyed by the record's identity and the arguments that shape the value: a store's records are built once and
    never change, and the memo holds each record it keys on, so an id cannot be reused while its entry lives. A
    record built per request (from a `model_config`) misses and is computed as before. Values handed out are
    shared between requests: callers treat them as read-only. Bounded: cleared when `maxsize` entries are held."""

    def __init__(self, maxsize: int = 512):
        self.maxsize = maxsize
        self._entries: dict[tuple, tuple[dict, Any]] = {}

    def get(self, rec: dict, key: tuple, make: Callable[[], Any]) -> Any:
        """The value for (`rec`, `key`), made by `make()` on the first request for it (every time for a
        TransientRecord)."""
        if isinstance(rec, TransientRecord):
            return make()
        k = (id(rec), *key)
        hit = self._entries.get(k)
        if hit is not None and hit[0] is rec:
            return hit[1]
        value = make()
        if len(self._entries) >= self.maxsize:
            self._entries.clear()
        self._entries[k] = (rec, value)
        return value

