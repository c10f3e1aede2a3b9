"""How a model named in a request becomes a store id: exactly, else case-insensitively, else by its Hugging Face
repository or name (with or without the owner, `-Instruct`, `-chat`, `-hf` or a leading `Meta-`).

`resolve_model(lookup, name, loc)` is the one place: calculators call it through `model_record`, and the
API route of a model calls `resolve_model_id`. An exact id costs one lookup; only a miss builds the index
of names (from `lookup("ids", "model")` and the records). A name that reads as several models is a 422 listing
them; a name that reads as none is the usual unknown-id 422 (with the closest ids).
"""
from __future__ import annotations

import re

from calculators.framework import CalcInputError, Lookup, UnknownId, ids_of

#: suffixes a Hugging Face repository name adds to the architecture's name (tried one after the other)
SUFFIXES = ("-instruct", "-chat", "-hf")
#: `Meta-Llama-3.1-8B` (the old repository name) is `Llama-3.1-8B`
PREFIXES = ("meta-",)


class AmbiguousModelId(CalcInputError):
    """A name that matches several store models equally well (`candidates`, sorted)."""

    def __init__(self, loc, ident: str, candidates: list[str]):
        self.ident = ident
        self.candidates = sorted(candidates)
        super().__init__(loc, f"model {ident!r} is ambiguous: it reads as {', '.join(self.candidates)}; give one of these ids")


def _norm(s: str) -> str:
    return re.sub(r"\s+", "-", s.strip().lower())


def _variants(key: str) -> list[str]:
    """`key` without the suffixes and prefixes a repository name adds, one step at a time (most specific first)."""
    out, todo = [], [key]
    while todo:
        k = todo.pop(0)
        if k in out:
            continue
        out.append(k)
        todo += [k[: -len(s)] for s in SUFFIXES if k.endswith(s) and len(k) > len(s)]
        todo += [k[len(p):] for p in PREFIXES if k.startswith(p) and len(k) > len(p)]
    return out


def _names(rec: dict) -> list[str]:
    """The names a record answers to: id, name, the repository (owner/name) and its name alone."""
    names = [rec.get("id") or "", rec.get("name") or ""]
    repo = (rec.get("config_provenance") or {}).get("repository")
    if repo:
        names += [repo, repo.split("/", 1)[-1]]
    return [_norm(n) for n in names if n]


def _index(lookup: Lookup) -> dict[str, dict[str, set[str]]]:
    """Tables normalised name -> the ids answering to it: `id` (ids), `exact` (ids, names, repositories and
    repository names) and `loose` (those names with a suffix or prefix dropped)."""
    ids: dict[str, set[str]] = {}
    exact: dict[str, set[str]] = {}
    loose: dict[str, set[str]] = {}
    for mid in ids_of(lookup, "model"):
        try:
            rec = lookup("model", mid)
        except KeyError:
            continue
        ids.setdefault(_norm(mid), set()).add(mid)
        for n in _names(rec):
            exact.setdefault(n, set()).add(mid)
            for v in _variants(n)[1:]:
                loose.setdefault(v, set()).add(mid)
    return {"id": ids, "exact": exact, "loose": loose}


def resolve_model_id(lookup: Lookup, ident: str, loc="model") -> tuple[str, str | None]:
    """(store id, how it was read) for a model name; `how` is None when `ident` is the id itself.

    Tiers, the first that matches decides: the id case-insensitively; a record's id, name, repository or
    repository name case-insensitively; the same after dropping the owner (`meta-llama/`); the name with a
    suffix or prefix dropped (`-Instruct`, `-chat`, `-hf`, `Meta-`, most specific first); the records' names
    with one dropped. Several ids at the deciding tier are AmbiguousModelId; no tier matching is UnknownId."""
    try:
        lookup("model", ident)
        return ident, None
    except KeyError:
        pass
    if not isinstance(ident, str) or not ident.strip():
        raise UnknownId(loc, "model", ident)
    idx = _index(lookup)
    key = _norm(ident)
    tail = key.split("/", 1)[1] if "/" in key else None
    variants = _variants(tail or key)[1:]
    tiers = (("id", [key]), ("exact", [key]), ("exact", [tail] if tail else []), ("exact", variants),
             ("loose", [k for k in (key, tail, *variants) if k]))
    for table, keys in tiers:
        found: set[str] = set()
        for k in keys:
            found = idx[table].get(k, set())
            if found:
                break  # the most specific spelling that matches decides
        if len(found) == 1:
            mid = next(iter(found))
            return mid, f"model {ident!r} read as {mid}"
        if found:
            raise AmbiguousModelId(loc, ident, list(found))
    raise UnknownId(loc, "model", ident)


def resolve_model(lookup: Lookup, ident: str, loc="model") -> tuple[dict, str | None]:
    """(store record, assumption line or None) for the model a request names (see `resolve_model_id`)."""
    mid, how = resolve_model_id(lookup, ident, loc)
    try:
        return lookup("model", mid), how
    except KeyError:
        raise UnknownId(loc, "model", ident) from None
