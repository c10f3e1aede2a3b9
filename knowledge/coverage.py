"""How much of the book's arithmetic is stored, bound to a calculator, and reproduced."""
from __future__ import annotations

from collections import defaultdict


def coverage(cases: list[dict], derivations: list[dict], reproduced: dict[str, bool] | None = None) -> dict:
    """Per case: stored, bound (and reproduced when `reproduced` maps derivation id -> ok)."""
    by_case: dict[str, list[dict]] = defaultdict(list)
    for d in derivations:
        by_case[d["case"]].append(d)
    per_case = []
    fam_bound: dict[str, int] = defaultdict(int)
    fam_all: dict[str, int] = defaultdict(int)
    for d in derivations:
        fam_all[d.get("family", "?")] += 1
        if d.get("calculator"):
            fam_bound[d.get("family", "?")] += 1
    for c in cases:
        ds = by_case.get(c["slug"], [])
        bound = [d for d in ds if d.get("calculator")]
        row = {"slug": c["slug"], "title_zh": c["title_zh"], "stored": len(ds), "bound": len(bound),
               "families_unbound": sorted({d.get("family", "?") for d in ds if not d.get("calculator")})}
        if reproduced is not None:
            row["reproduced"] = sum(1 for d in bound if reproduced.get(d["id"]))
        per_case.append(row)
    total = len(derivations)
    bound_total = sum(1 for d in derivations if d.get("calculator"))
    out = {
        "cases": len(cases), "derivations": total, "bound": bound_total,
        "bound_fraction": (bound_total / total) if total else 0.0,
        "calculators_used": sorted({d["calculator"] for d in derivations if d.get("calculator")}),
        "per_case": per_case,
        "families_without_calculator": sorted(f for f in fam_all if fam_bound.get(f, 0) == 0),
        "families": {f: {"stored": fam_all[f], "bound": fam_bound.get(f, 0)} for f in sorted(fam_all)},
    }
    if reproduced is not None:
        out["reproduced"] = sum(1 for d in derivations if d.get("calculator") and reproduced.get(d["id"]))
    return out
