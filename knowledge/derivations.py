"""Recompute the stored worked examples through their calculators and compare.

Two checks per bound derivation: `expected` against the calculator's outputs (relative 1e-9),
and the book's `printed` numbers (in `checks`) against `expected` at the book's rounding.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from calculators import runner
from calculators.core import Lookup

REL_TOL = 1e-9


def resolve_path(outputs: Any, path: str) -> Any:
    """Follow a dotted path ("candidates.1.cost_per_success") through dicts and lists."""
    node = outputs
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                raise KeyError(path)
            node = node[part]
        else:
            raise KeyError(path)
    return node


def close(expected: Any, got: Any, rel: float = REL_TOL) -> bool:
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(close(e, g, rel) for e, g in zip(expected, got))
    if isinstance(expected, (bool, str)) or expected is None:
        return expected == got
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return False
    return math.isclose(float(expected), float(got), rel_tol=rel, abs_tol=1e-12)


@dataclass
class Check:
    path: str
    expected: Any
    got: Any
    ok: bool
    message: str = ""


def recompute(derivation: dict, lookup: Lookup) -> list[Check]:
    """Run a bound derivation's request and compare every `expected` path."""
    _, _, result = runner.compute(derivation["calculator"], derivation["request"], lookup)
    checks = []
    for path, want in (derivation.get("expected") or {}).items():
        try:
            got = resolve_path(result.outputs, path)
        except (KeyError, IndexError, ValueError):
            checks.append(Check(path, want, None, False, "path not in outputs"))
            continue
        checks.append(Check(path, want, got, close(want, got)))
    return checks


def printed_matches(expected: float, printed: float, scale: float = 1.0, decimals: int | None = None,
                    rel: float | None = None, offset: float = 0.0) -> bool:
    """Does `(expected − offset) / scale` print as `printed` at the stated rounding?

    `decimals`: the book shows that many decimal places (half a unit in the last place allowed);
    `rel`: a relative tolerance instead, for values printed with "≈" or significant figures;
    `offset`: subtracted first, so a ratio 1.2222 checks a printed "+22 %" (offset 1, scale 0.01).
    """
    value = (expected - offset) / scale
    if rel is not None:
        return math.isclose(value, printed, rel_tol=rel)
    if decimals is None:
        decimals = 0
    return abs(value - printed) <= 0.5 * 10 ** (-decimals) + 1e-9 * max(1.0, abs(printed))


def printed_checks(derivation: dict) -> list[Check]:
    out = []
    expected = derivation.get("expected") or {}
    for chk in derivation.get("checks") or []:
        path = chk["path"]
        if path not in expected:
            out.append(Check(path, None, chk.get("printed"), False, "check path has no expected value"))
            continue
        want = expected[path]
        ok = printed_matches(float(want), float(chk["printed"]), float(chk.get("scale", 1.0)),
                             chk.get("decimals"), chk.get("rel"), float(chk.get("offset", 0.0)))
        out.append(Check(path, want, chk["printed"], ok))
    return out


# ---------------------------------------------------------------------------- the rules (issue 15)
#
# R1  every number of `printed` of a bound example is read by a check, or its entry is in `unchecked`
# R2  a check passes at the book's rounding, is at least as precise as the printed text, and its tolerance
#     is at most 5 % of the printed value (unless `coarse` says why); `scale` is positive
# R3  no echo checks: an output that is a request field passed through proves nothing
# R4  every unbound example says why (`unbound_reason`); a bound one has none

MAX_REL = 0.05

_NUM = re.compile(r"(?P<sign>[-−+])?(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?"
                  r"(?P<exp>[eE][-−+]?\d+(?![\w.]))?")
_MOE_NAME = re.compile(r"(?<![\w.])\d+x\d+(?:\.\d+)?[BMT]\b")
_ASCII_LETTER = re.compile(r"[A-Za-z_]")
_WORD_BEFORE = re.compile(r"[\w.\-]*$", re.ASCII)


@dataclass(frozen=True)
class Number:
    """A number as printed in a text: its value and how many decimal places the text shows."""

    value: float
    decimals: int
    text: str


def _is_identifier_digit(text: str, start: int) -> bool:
    """Is the number starting at `start` part of a name (H100, FP8, Qwen3-8B, Llama-3.1-70B, mm^2)?"""
    if start == 0:
        return False
    before = text[start - 1]
    if before in "xX" and (start < 2 or not (text[start - 2].isalpha() or text[start - 2] == "_")):
        return False  # 8x512, x3.33: a product or a factor, not a name
    if _ASCII_LETTER.match(before):
        return True
    if before == "^" and start >= 2 and _ASCII_LETTER.match(text[start - 2]):  # a unit's power: mm^2
        return True
    if before in "-." and start >= 2:
        word = _WORD_BEFORE.search(text[:start - 1]).group(0)
        return bool(re.search(r"[A-Za-z]", word))
    return False


def parse_numbers(value: Any) -> list[Number]:
    """The numbers of a printed value, in order: thousands separators (`1,600`), unicode minus, exponents
    (`4.02e+22`); digits of identifiers (H100, FP8, Qwen3-8B) and units are not numbers."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        v = float(value)
        dec = 0 if v.is_integer() else len(repr(v).split(".")[-1].split("e")[0])
        return [Number(v, dec, repr(value))]
    if isinstance(value, dict):
        return [n for v in value.values() for n in parse_numbers(v)]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in parse_numbers(v)]
    # inside [...] a comma separates items: [640,384,512,512] is four numbers, not one
    text = re.sub(r"\[[^\[\]]*\]", lambda b: b.group(0).replace(",", ", "), str(value))
    text = _MOE_NAME.sub(lambda m: "#" * len(m.group(0)), text)  # Mixtral 8x7B is a name
    out = []
    for m in _NUM.finditer(text):
        start = m.start("int")
        if _is_identifier_digit(text, start):
            continue
        sign = m.group("sign") or ""
        if sign and m.start("sign") > 0 and (text[m.start("sign") - 1].isalnum() or text[m.start("sign") - 1] in "._"):
            sign = ""  # 20-40: a range, Qwen3-8B: a name
        digits = m.group("int").replace(",", "")
        frac = m.group("frac") or ""
        exp = m.group("exp") or ""
        literal = digits + frac + exp.replace("−", "-")
        v = float(literal)
        if sign in "-−" and sign:
            v = -v
        decimals = max(len(frac) - 1, 0) - (int(exp[1:].replace("−", "-")) if exp else 0)
        out.append(Number(v, decimals, m.group(0) if sign else m.group(0)[m.start("int") - m.start():]))
    return out


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@dataclass
class Reading:
    """One check of a derivation: the printed entry and number it reads, and whether it conforms."""

    index: int
    path: str
    key: str | None
    number: Number | None
    passes: bool
    conforms: bool


@dataclass
class Audit:
    """The rules applied to one derivation."""

    id: str
    bound: bool
    printed_numbers: int
    checked_numbers: int
    excused_numbers: int  # numbers of entries listed in `unchecked`
    violations: list[tuple[str, str]]


def _check_label(i: int, chk: dict) -> str:
    return f"checks[{i}] {chk.get('path')} printed {chk.get('printed')}"


def _echo(derivation: dict, path: str, want: Any) -> bool:
    """R3: is the output at `path` the request field at the same place, passed through?"""
    request = derivation.get("request")
    if not isinstance(request, (dict, list)):
        return False
    try:
        given = resolve_path(request, path)
    except (KeyError, IndexError, ValueError, TypeError):
        return False
    if isinstance(given, bool) or isinstance(want, bool):
        return given == want
    if isinstance(given, (int, float)) and isinstance(want, (int, float)):
        return _same(float(given), float(want))
    return given == want


def audit(derivation: dict) -> Audit:
    """Apply R1–R4 to a derivation (a record as loaded: a dict)."""
    did = derivation.get("id") or f"{derivation.get('case')}/{derivation.get('name')}"
    printed = derivation.get("printed") or {}
    bound = bool(derivation.get("calculator"))
    violations: list[tuple[str, str]] = []
    numbers = {k: parse_numbers(v) for k, v in printed.items()}
    total = sum(len(ns) for ns in numbers.values())

    # R4
    reason = derivation.get("unbound_reason")
    if not bound:
        if not (isinstance(reason, str) and reason.strip()):
            violations.append(("R4", "unbound example has no unbound_reason"))
        return Audit(did, False, total, 0, 0, violations)
    if reason:
        violations.append(("R4", "a bound example has an unbound_reason"))

    unchecked = derivation.get("unchecked") or {}
    for k, why in unchecked.items():
        if k not in printed:
            violations.append(("R1", f"unchecked names {k!r}, which is not a printed entry"))
        elif not (isinstance(why, str) and why.strip()):
            violations.append(("R1", f"unchecked {k!r} has no reason"))

    expected = derivation.get("expected") or {}
    read: dict[tuple[str, int], bool] = {}  # (entry, index) -> read by a passing, conforming check
    read_entries: set[str] = set()
    for i, chk in enumerate(derivation.get("checks") or []):
        label = _check_label(i, chk)
        path = chk.get("path")
        try:
            pval = float(chk.get("printed"))
        except (TypeError, ValueError):
            violations.append(("R2", f"{label}: printed is not a number"))
            continue
        # which printed entry and number this check reads (R1)
        key = chk.get("printed_key")
        hits: list[tuple[str, int]] = []
        if key is not None:
            if key not in printed:
                violations.append(("R1", f"{label}: printed_key {key!r} is not a printed entry"))
                key = None
            else:
                hits = [(key, j) for j, n in enumerate(numbers[key]) if _same(n.value, pval)]
                if not hits:
                    shown = ", ".join(n.text for n in numbers[key]) or "none"
                    violations.append(("R1", f"{label}: {pval:g} is not a number of printed[{key!r}] "
                                             f"({printed[key]!r}; numbers: {shown})"))
        else:
            keys = [k for k, ns in numbers.items() if any(_same(n.value, pval) for n in ns)]
            if len(keys) == 1:
                key = keys[0]
                hits = [(key, j) for j, n in enumerate(numbers[key]) if _same(n.value, pval)]
            elif not keys:
                violations.append(("R1", f"{label}: {pval:g} appears in no printed entry (give printed_key, or "
                                         f"print the number as the text shows it)"))
            else:
                violations.append(("R1", f"{label}: {pval:g} appears in several printed entries "
                                         f"({', '.join(keys)}): give printed_key"))
        if key is not None:
            read_entries.add(key)
        number = numbers[key][hits[0][1]] if hits else None
        for h in hits:
            read.setdefault(h, False)

        # R2: passes, precise enough, not too wide, positive scale
        conforms = True
        scale = chk.get("scale", 1)
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            violations.append(("R2", f"{label}: scale {scale!r} is not a number"))
            continue
        if scale <= 0:
            violations.append(("R2", f"{label}: scale {scale:g} must be positive (no sign flips)"))
            conforms = False
        if path not in expected:
            violations.append(("R2", f"{label}: path has no expected value"))
            continue
        want = expected[path]
        passes = False
        if isinstance(want, (int, float)) and not isinstance(want, bool) and scale != 0:
            passes = printed_matches(float(want), pval, scale, chk.get("decimals"), chk.get("rel"),
                                     float(chk.get("offset", 0.0)))
        if not passes:
            violations.append(("R2", f"{label}: (expected {want!r} − offset) / scale {scale:g} does not print as {pval:g}"
                                     f" at decimals={chk.get('decimals')} rel={chk.get('rel')}"))
        coarse = chk.get("coarse")
        coarse = coarse if isinstance(coarse, str) and coarse.strip() else None
        rel = chk.get("rel")
        if rel is not None:
            if rel < 0 or (rel > MAX_REL and not coarse):
                violations.append(("R2", f"{label}: rel {rel:g} is wider than {MAX_REL:g} (say why in `coarse`)"))
                conforms = False
        else:
            decimals = chk.get("decimals") or 0
            if number is not None and decimals < number.decimals:
                violations.append(("R2", f"{label}: decimals {decimals} < the {number.decimals} decimal places "
                                         f"the book prints ({number.text!r})"))
                conforms = False
            tol = 0.5 * 10 ** (-decimals)
            if pval == 0:
                if not (isinstance(want, (int, float)) and float(want) == 0) and not coarse:
                    violations.append(("R2", f"{label}: a printed 0 with expected {want!r} needs `coarse`"))
                    conforms = False
            elif tol / abs(pval) > MAX_REL and not coarse:
                violations.append(("R2", f"{label}: tolerance ±{tol:g} is {tol / abs(pval):.0%} of {pval:g}, "
                                         f"wider than {MAX_REL:.0%} (more decimals, or say why in `coarse`)"))
                conforms = False
        # R3: echo
        if _echo(derivation, path, want):
            violations.append(("R3", f"{label}: output {path} is the request field passed through (an echo)"))
            conforms = False
        for h in hits:
            read[h] = read.get(h, False) or (passes and conforms)

    # R1: every number of every entry not excused is read; entries without numbers are read or excused
    checked = sum(1 for ok in read.values() if ok)
    excused = 0
    for k, ns in numbers.items():
        if k in unchecked:
            excused += sum(1 for j in range(len(ns)) if (k, j) not in read)
            continue
        if not ns:
            if k not in read_entries:
                violations.append(("R1", f"printed[{k!r}] = {printed[k]!r} holds no number and no check reads it: "
                                         f"list it in `unchecked` with the reason"))
            continue
        for j, n in enumerate(ns):
            if (k, j) not in read:
                violations.append(("R1", f"printed[{k!r}] = {printed[k]!r}: number {n.text.strip()!r} "
                                         f"(#{j + 1} of {len(ns)}) is read by no check (check it, or list "
                                         f"{k!r} in `unchecked` with the reason)"))
    return Audit(did, True, total, checked, excused, violations)


def violations(derivation: dict) -> list[tuple[str, str]]:
    return audit(derivation).violations


def printed_numbers(derivation: dict) -> int:
    return audit(derivation).printed_numbers


def checked_numbers(derivation: dict) -> int:
    return audit(derivation).checked_numbers


def _load(paths: list[str]) -> list[dict]:
    from pathlib import Path

    from knowledge.loader import DATA_DIR, load_catalog, load_yaml

    if not paths:
        return load_catalog().records.get("derivation", [])
    out = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            path = DATA_DIR / "derivations" / p
        for rec in load_yaml(path) or []:
            if isinstance(rec, dict):
                rec.setdefault("id", f"{rec.get('case')}/{rec.get('name')}")
                out.append(rec)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m knowledge.derivations",
                                 description="Apply the rules R1–R4 of worked examples (see knowledge/DATA-FORMAT.md).")
    ap.add_argument("--audit", action="store_true", help="print every violation per derivation (the default)")
    ap.add_argument("--rule", action="append", help="only these rules (R1, R2, R3, R4); repeatable")
    ap.add_argument("--quiet", "-q", action="store_true", help="only the summary line")
    ap.add_argument("files", nargs="*", help="derivation files (family.yaml or a path); default: all")
    args = ap.parse_args(argv)
    rules = {r.upper() for r in args.rule or []}
    records = _load(args.files)
    n_bad = n_viol = printed = checked = 0
    for d in records:
        a = audit(d)
        vs = [v for v in a.violations if not rules or v[0] in rules]
        if a.bound:
            printed += a.printed_numbers
            checked += a.checked_numbers
        if vs:
            n_bad += 1
            n_viol += len(vs)
            if not args.quiet:
                print(f"{a.id}  ({'bound' if a.bound else 'unbound'}; {a.checked_numbers}/{a.printed_numbers} numbers checked)")
                for rule, msg in vs:
                    print(f"  {rule} {msg}")
    share = f"{checked / printed:.1%}" if printed else "n/a"
    print(f"{len(records)} derivations, {n_bad} with violations ({n_viol} in all); bound examples: "
          f"{checked} of {printed} printed numbers checked ({share})")
    return 1 if n_viol else 0


if __name__ == "__main__":
    raise SystemExit(main())
