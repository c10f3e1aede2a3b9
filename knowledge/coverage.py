"""How much of the book's arithmetic is stored, bound to a calculator, and reproduced.

Per case and in total: worked examples stored and bound, the numbers the bound examples print and how many of
them a passing, rule-conforming check reads (`knowledge.derivations.audit`), split by the kind of check (an output,
or a quantity derived from outputs: only those count, `COUNTING_RULE`), the numbers matched but not counted (a printed
given matched against the request, an echo check, an `unchecked` entry) each with its reason, the printed verdicts and
labels checked, the texts that are no quantity (each with its reason), and why each unbound example is unbound.
"""
from __future__ import annotations

from collections import defaultdict

from knowledge.derivations import COUNTED_KINDS, COUNTING_RULE, audit

NOT_COUNTED_KINDS = ("given", "echo", "unchecked")


def _share(part: int, whole: int) -> float:
    return (part / whole) if whole else 0.0


def _kinds(audits: list) -> dict[str, int]:
    """Checked numbers by the kind of check that reads them (output, derived)."""
    return {k: sum(a.checked_by.get(k, 0) for a in audits) for k in COUNTED_KINDS}


def _not_counted_kinds(audits: list) -> dict[str, int]:
    """Printed numbers matched or excused but not counted: givens, echo checks, `unchecked` entries."""
    return {k: sum(a.not_counted_by.get(k, 0) for a in audits) for k in NOT_COUNTED_KINDS}


def _not_counted(ds: list[dict], audits: dict) -> list[dict]:
    return [{"id": d.get("id") or f"{d['case']}/{d.get('name')}", **nc} for d in ds for nc in audits[id(d)].not_counted]


def coverage(cases: list[dict], derivations: list[dict], reproduced: dict[str, bool] | None = None) -> dict:
    """Per case: stored, bound, printed and checked numbers, unbound examples with their reasons
    (and reproduced when `reproduced` maps derivation id -> ok)."""
    by_case: dict[str, list[dict]] = defaultdict(list)
    for d in derivations:
        by_case[d["case"]].append(d)
    audits = {id(d): audit(d) for d in derivations}
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
        printed = sum(audits[id(d)].printed_numbers for d in bound)
        checked = sum(audits[id(d)].checked_numbers for d in bound)
        row = {"slug": c["slug"], "title_zh": c["title_zh"], "stored": len(ds), "bound": len(bound),
               "families_unbound": sorted({d.get("family", "?") for d in ds if not d.get("calculator")}),
               "printed_numbers": printed, "checked_numbers": checked,
               "excused_numbers": sum(audits[id(d)].excused_numbers for d in bound),
               "checked_fraction": _share(checked, printed),
               "checked_by": _kinds([audits[id(d)] for d in bound]),
               "not_counted_by": _not_counted_kinds([audits[id(d)] for d in bound]),
               "not_counted": _not_counted(bound, audits),
               "checked_examples": sum(1 for d in bound if audits[id(d)].checked_numbers or audits[id(d)].checked_words),
               "printed_words": sum(audits[id(d)].printed_words for d in bound),
               "checked_words": sum(audits[id(d)].checked_words for d in bound),
               "not_quantities": [{"id": d.get("id") or f"{d['case']}/{d.get('name')}", "entry": k, "text": str(d["printed"][k]),
                                   "reason": why} for d in bound for k, why in audits[id(d)].not_quantities.items()],
               "printed_numbers_unbound": sum(audits[id(d)].printed_numbers for d in ds if not d.get("calculator")),
               "violations": sum(len(audits[id(d)].violations) for d in ds),
               "unbound": [{"id": d.get("id") or f"{d['case']}/{d.get('name')}", "name": d.get("name"),
                            "title": d.get("title"), "family": d.get("family", "?"),
                            "reason": d.get("unbound_reason")} for d in ds if not d.get("calculator")]}
        if reproduced is not None:
            row["reproduced"] = sum(1 for d in bound if reproduced.get(d["id"]))
        per_case.append(row)
    total = len(derivations)
    bound_all = [d for d in derivations if d.get("calculator")]
    printed_total = sum(audits[id(d)].printed_numbers for d in bound_all)
    checked_total = sum(audits[id(d)].checked_numbers for d in bound_all)
    out = {
        "cases": len(cases), "derivations": total, "bound": len(bound_all),
        "bound_fraction": _share(len(bound_all), total),
        "printed_numbers": printed_total, "checked_numbers": checked_total,
        "excused_numbers": sum(audits[id(d)].excused_numbers for d in bound_all),
        "checked_fraction": _share(checked_total, printed_total),
        "checked_by": _kinds([audits[id(d)] for d in bound_all]),
        "not_counted_by": _not_counted_kinds([audits[id(d)] for d in bound_all]),
        "not_counted": _not_counted(bound_all, audits),
        "checked_examples": sum(1 for d in bound_all if audits[id(d)].checked_numbers or audits[id(d)].checked_words),
        "counting_rule": COUNTING_RULE,
        "printed_words": sum(audits[id(d)].printed_words for d in bound_all),
        "checked_words": sum(audits[id(d)].checked_words for d in bound_all),
        "not_quantities": [nq for row in per_case for nq in row["not_quantities"]],
        "unbound_without_reason": sum(1 for d in derivations
                                      if not d.get("calculator") and not (d.get("unbound_reason") or "").strip()),
        "violations": sum(len(a.violations) for a in audits.values()),
        "derivations_with_violations": sum(1 for a in audits.values() if a.violations),
        "calculators_used": sorted({d["calculator"] for d in derivations if d.get("calculator")}),
        "per_case": per_case,
        "families_without_calculator": sorted(f for f in fam_all if fam_bound.get(f, 0) == 0),
        "families": {f: {"stored": fam_all[f], "bound": fam_bound.get(f, 0)} for f in sorted(fam_all)},
    }
    if reproduced is not None:
        out["reproduced"] = sum(1 for d in derivations if d.get("calculator") and reproduced.get(d["id"]))
    return out
