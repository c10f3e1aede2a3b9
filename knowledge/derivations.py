"""Recompute the stored worked examples through their calculators and compare.

Two checks per bound derivation: `expected` against the calculator's outputs (relative 1e-9),
and the book's `printed` numbers (in `checks`) against `expected` at the book's rounding.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from calculators.framework import runner
from calculators.framework import Lookup

REL_TOL = 1e-9


def _is_sequence(node: Any) -> bool:
    """A list, tuple or NumPy array (anything indexable by position that is not a mapping or text)."""
    return not isinstance(node, (dict, str, bytes)) and hasattr(node, "__getitem__") and hasattr(node, "__len__")


def resolve_path(outputs: Any, path: str) -> Any:
    """Follow a dotted path ("candidates.1.cost_per_success") through dicts and lists (or NumPy arrays); a NumPy
    value found is returned as the plain Python value (float, int, bool, list)."""
    node = outputs
    for part in path.split("."):
        if isinstance(node, dict):
            if part not in node:
                raise KeyError(path)
            node = node[part]
        elif _is_sequence(node):
            node = node[int(part)]
        else:
            raise KeyError(path)
    return plain(node)


def plain(value: Any) -> Any:
    """A NumPy scalar or array as the plain Python value (float, int, bool, list); anything else unchanged."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def close(expected: Any, got: Any, rel: float = REL_TOL) -> bool:
    """Does an output equal the pinned value (numbers within `rel`; bools, text and None exactly)?"""
    got = plain(got)
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
    """Every check of a derivation evaluated against `expected` (and the request, for givens): does the
    quantity it reads print as the book prints it (a number at the book's rounding, a verdict, a label)?"""
    out = []
    for chk in derivation.get("checks") or []:
        ev = evaluate(derivation, chk)
        label = chk.get("path") or _source_label(chk)
        if ev.error:
            out.append(Check(label, None, _shown(chk), False, ev.error))
            continue
        out.append(Check(label, ev.value, _shown(chk), _passes(chk, ev.value)))
    return out


# ---------------------------------------------------------------------------- kinds of check
#
# output   {path, printed, scale, decimals|rel}: an output the calculator returns (pinned in `expected`)
# derived  {ratio_of|difference_of|sum_of|product_of: [operand, ...], printed, ...}: a quantity formed from the
#          calculator's own outputs (paths in `expected`), optionally with a stated request field
#          ("request:<path>"); at least one operand is an output that is not a request field passed through
# given    {given: <request path>, printed, ...}: the book's given, matched against the request value (a typo in
#          either fails); counted apart from the output checks
# verdict  {path | at_most: [a, b] | at_least: [a, b] | whole: a, verdict: true|false, printed_key}: a boolean
#          output, or a comparison of outputs; the printed text says the same yes/no
# label    {path | min_of | max_of, label, printed_key}: a text output (or the name of the smallest / largest of
#          several outputs) equal to `label`, which the printed text shows (or `shown_as`, the book's words for it)

DERIVED_OPS = ("ratio_of", "difference_of", "sum_of", "product_of")
CHOICE_OPS = ("min_of", "max_of")
#: verdicts formed from outputs: a <= b, a >= b, a is a whole number (128 experts over 8 ranks: 16 each, yes)
TEST_OPS = ("at_most", "at_least", "whole")
REQUEST_PREFIX = "request:"
#: the relative tolerance of a printed fraction (7/3 is exact: its check must be too)
FRACTION_REL = 1e-9


def check_kind(chk: dict) -> str:
    """output, derived, given, verdict or label (see the table above)."""
    if chk.get("given") is not None:
        return "given"
    if chk.get("verdict") is not None:
        return "verdict"
    if chk.get("label") is not None:
        return "label"
    if any(chk.get(op) is not None for op in DERIVED_OPS):
        return "derived"
    return "output"


def _source_label(chk: dict) -> str:
    for op in (*DERIVED_OPS, *CHOICE_OPS, *TEST_OPS):
        if chk.get(op) is not None:
            return f"{op} {chk[op]}"
    if chk.get("given") is not None:
        return f"given {chk['given']}"
    return str(chk.get("path"))


def _shown(chk: dict) -> Any:
    for k in ("verdict", "label"):
        if chk.get(k) is not None:
            return chk[k]
    return chk.get("printed")


@dataclass
class Evaluated:
    """The quantity a check compares with the book (a number, a bool or a label), or why it has none."""

    kind: str
    value: Any = None
    error: str = ""
    operands_from_outputs: int = 0  # derived: operands that are outputs, not request fields passed through


def _operand(derivation: dict, operand: Any) -> tuple[float, bool]:
    """An operand's value and whether a calculator output is in it: an output path of `expected` (an echoed request
    field does not count as an output), `request:<path>` (a stated request field), a plain number (a stated
    constant: the baseline k = 1, a unit) or a nested `{op: [operands]}`."""
    expected = derivation.get("expected") or {}
    if isinstance(operand, dict):
        if len(operand) != 1 or next(iter(operand)) not in DERIVED_OPS:
            raise KeyError(f"a nested operand is one of {', '.join(DERIVED_OPS)}: {operand!r}")
        op, operands = next(iter(operand.items()))
        return _combine(derivation, op, operands)
    if isinstance(operand, (int, float)) and not isinstance(operand, bool):
        return float(operand), False
    if isinstance(operand, str) and operand.startswith(REQUEST_PREFIX):
        value = plain(resolve_path(derivation.get("request") or {}, operand[len(REQUEST_PREFIX):]))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KeyError(f"operand {operand!r} is not a number ({value!r})")
        return float(value), False
    if not isinstance(operand, str) or operand not in expected:
        raise KeyError(f"operand {operand!r} is not an output path in `expected` (or request:<path>)")
    value = plain(expected[operand])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KeyError(f"operand {operand!r} is not a number ({value!r})")
    return float(value), not _echo(derivation, operand, value)


def _combine(derivation: dict, op: str, operands: Any) -> tuple[float, bool]:
    """Apply one derived operation to its operands: the value and whether any operand is a calculator output."""
    if not isinstance(operands, list) or len(operands) < 2:
        raise ValueError(f"{op} takes a list of at least two operands")
    if op in ("ratio_of", "difference_of") and len(operands) != 2:
        raise ValueError(f"{op} takes exactly two operands")
    vals = [_operand(derivation, o) for o in operands]
    nums = [v for v, _ in vals]
    from_outputs = any(is_out for _, is_out in vals)
    if op == "ratio_of":
        if nums[1] == 0:
            raise ValueError("ratio_of divides by zero")
        return nums[0] / nums[1], from_outputs
    if op == "difference_of":
        return nums[0] - nums[1], from_outputs
    if op == "sum_of":
        return math.fsum(nums), from_outputs
    return math.prod(nums), from_outputs


def evaluate(derivation: dict, chk: dict) -> Evaluated:
    """The quantity a check reads: an output, a quantity derived from outputs, a request given, a verdict
    or a label; `error` says why there is none (a missing path, a non-number, a division by zero)."""
    kind = check_kind(chk)
    expected = derivation.get("expected") or {}
    try:
        if kind == "given":
            value = plain(resolve_path(derivation.get("request") or {}, str(chk["given"])))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return Evaluated(kind, error=f"request field {chk['given']} is not a number ({value!r})")
            return Evaluated(kind, float(value))
        if kind == "derived":
            ops = [op for op in DERIVED_OPS if chk.get(op) is not None]
            if len(ops) != 1:
                return Evaluated(kind, error=f"one of {', '.join(DERIVED_OPS)} per check, not {ops}")
            value, from_outputs = _combine(derivation, ops[0], chk[ops[0]])
            return Evaluated(kind, value, operands_from_outputs=int(from_outputs))
        if kind == "verdict" and any(chk.get(op) is not None for op in TEST_OPS):
            op = next(op for op in TEST_OPS if chk.get(op) is not None)
            if op == "whole":
                v, is_out = _operand(derivation, chk[op])
                value, outs = abs(v - round(v)) <= 1e-9 * max(1.0, abs(v)), is_out
            else:
                if not isinstance(chk[op], list) or len(chk[op]) != 2:
                    return Evaluated(kind, error=f"{op} compares exactly two operands")
                (a, a_out), (b, b_out) = (_operand(derivation, o) for o in chk[op])
                value, outs = (a <= b if op == "at_most" else a >= b), a_out or b_out
            if not outs:
                return Evaluated(kind, error=f"{op} tests no calculator output (only request fields or constants)")
            return Evaluated(kind, bool(value), operands_from_outputs=1)
        if kind == "label" and any(chk.get(op) is not None for op in CHOICE_OPS):
            op = next(op for op in CHOICE_OPS if chk.get(op) is not None)
            options = chk[op]
            if not isinstance(options, dict) or len(options) < 2:
                return Evaluated(kind, error=f"{op} maps at least two labels to output paths")
            vals = {lab: _operand(derivation, path) for lab, path in options.items()}
            if not any(is_out for _, is_out in vals.values()):
                return Evaluated(kind, error=f"{op} compares no calculator output")
            pick = (min if op == "min_of" else max)(vals, key=lambda lab: vals[lab][0])
            ties = [lab for lab in vals if vals[lab][0] == vals[pick][0]]
            if len(ties) > 1:
                return Evaluated(kind, error=f"{op}: {', '.join(map(str, ties))} tie")
            return Evaluated(kind, pick, operands_from_outputs=1)
        path = chk.get("path")
        try:
            value = plain(expected[path] if path in expected else resolve_path(expected, str(path)))
        except (KeyError, IndexError, ValueError):
            return Evaluated(kind, error="path has no expected value")
        if kind == "verdict" and not isinstance(value, bool):
            return Evaluated(kind, error=f"a verdict reads a true/false output, not {value!r}")
        if kind == "label" and not isinstance(value, str):
            return Evaluated(kind, error=f"a label reads a text output, not {value!r}")
        if kind in ("output", "derived") and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return Evaluated(kind, error=f"expected {value!r} is not a number")
        return Evaluated(kind, value)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        return Evaluated(kind, error=str(e.args[0]) if e.args else type(e).__name__)


def _printed_value(chk: dict) -> float:
    """A numeric check's `printed`: a number, or a fraction as text ("7/3", "-1/7") read as its value."""
    p = chk.get("printed")
    if isinstance(p, bool) or p is None:
        raise ValueError("printed is not a number")
    if isinstance(p, (int, float)):
        return float(p)
    ns = parse_numbers(str(p))
    if len(ns) != 1:
        raise ValueError(f"printed {p!r} is not one number")
    return ns[0].value


def _passes(chk: dict, value: Any) -> bool:
    """Does the evaluated quantity print as the check says the book prints it?"""
    kind = check_kind(chk)
    if kind == "verdict":
        return isinstance(value, bool) and value == bool(chk["verdict"])
    if kind == "label":
        return isinstance(value, str) and _norm(value) == _norm(str(chk["label"]))
    try:
        pval = _printed_value(chk)
        scale = float(chk.get("scale", 1) or 1)
    except (TypeError, ValueError):
        return False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or scale <= 0:
        return False
    return printed_matches(float(value), pval, scale, chk.get("decimals"), chk.get("rel"),
                           float(chk.get("offset", 0.0) or 0.0))


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


# ---------------------------------------------------------------------------- verdict words

_NO_WORDS = re.compile(r"^\s*(?:no|not|false)\b|\b(?:infeasible|cannot|can't|does not|doesn't|do not|fails?|"
                       r"insufficient|overflows?|exceeds?|not feasible|won't)\b|不可行|不能|否|不够", re.I)
_YES_WORDS = re.compile(r"^\s*(?:yes|true)\b|\b(?:holds?|fits?|feasible|pass(?:es)?|divisible|enough|ok)\b|"
                        r"可行|能|是|够", re.I)


def parse_verdict(text: Any) -> bool | None:
    """The yes/no a printed text states: "yes (128/8)" true, "no (256 > 240)" and "two A's infeasible" false,
    "holds the backlog" true; None when it states neither (or both at the start)."""
    if isinstance(text, bool):
        return text
    if not isinstance(text, str):
        return None
    s = text.strip()
    if re.match(r"(?i)^(yes|true)\b", s):
        return True
    if re.match(r"(?i)^(no|not|false)\b", s):
        return False
    if _NO_WORDS.search(s):
        return False
    if _YES_WORDS.search(s):
        return True
    return None


# ---------------------------------------------------------------------------- the rules (issue 15)
#
# R1  every number of `printed` of a bound example is read by a check, or its entry is in `unchecked`;
#     an entry in `not_quantities` (a text that is genuinely no quantity, e.g. an index formula) holds no number
# R2  a check passes at the book's rounding, is at least as precise as the printed text, and its tolerance
#     is at most 5 % of the printed value (unless `coarse` says why); `scale` is positive; a printed fraction
#     is exact (decimals >= 9 or rel <= 1e-9)
# R3  no echo checks: an output that is a request field passed through proves nothing (a derived check needs
#     at least one operand that is a real output)
# R4  every unbound example says why (`unbound_reason`); a bound one has none

MAX_REL = 0.05

_NUM = re.compile(r"(?P<sign>[-−+])?(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?"
                  r"(?P<exp>[eE][-−+]?\d+(?![\w.]))?")
# a fraction a/b written without spaces ("7/3", "-1/7", "p > 15/19"); "96 / 0 MiB" (spaced) is two numbers
_FRACTION = re.compile(r"(?<![\w/])(?<!\d[.,])(?P<sign>[-−])?(?P<a>\d+)/(?P<b>\d+)(?![\w/])(?![.,]\d)")
_MOE_NAME = re.compile(r"(?<![\w.])\d+x\d+(?:\.\d+)?[BMT]\b")
_ASCII_LETTER = re.compile(r"[A-Za-z_]")
_WORD_BEFORE = re.compile(r"[\w.\-]*$", re.ASCII)
#: decimal places a printed fraction stands for (it is exact; a check must match it to 1e-9)
FRACTION_DECIMALS = 9


@dataclass(frozen=True)
class Number:
    """A number as printed in a text: its value and how many decimal places the text shows (a fraction such as
    7/3 is one number, its value a/b, exact)."""

    value: float
    decimals: int
    text: str
    fraction: bool = False


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
    (`4.02e+22`), fractions (`7/3` is one number, 2.333…); digits of identifiers (H100, FP8, Qwen3-8B) and
    units are not numbers."""
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
    found: list[tuple[int, Number]] = []

    def fraction(m: re.Match) -> str:
        if int(m.group("b")) == 0:
            return m.group(0)
        v = int(m.group("a")) / int(m.group("b"))
        if m.group("sign"):
            v = -v
        found.append((m.start(), Number(v, FRACTION_DECIMALS, m.group(0), fraction=True)))
        return "#" * len(m.group(0))

    text = _FRACTION.sub(fraction, text)
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
        found.append((m.start(), Number(v, decimals, m.group(0) if sign else m.group(0)[m.start("int") - m.start():])))
    return [n for _, n in sorted(found, key=lambda t: t[0])]


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


#: how a printed number is read when several checks read it (the strongest wins): the first two are counted as
#: checked (a computed output against the book's number); a given (the request value the book prints) and an echo (a
#: check excused with `echo: <reason>`: its value is an input passed through) are matched but not counted
NUMBER_KINDS = ("output", "derived", "given", "echo")
COUNTED_KINDS = ("output", "derived")
#: the rule coverage states with its counts
COUNTING_RULE = ("A printed number counts as checked only when a passing check compares a computed calculator output "
                 "(or a quantity derived from outputs) with it, the check names the printed entry it reads "
                 "(printed_key), and its value is not one of the request's inputs (an echo); givens matched against the "
                 "request, echo checks and excused entries are listed apart, each with its reason.")
#: a record's own words that a value is not printed by the book (the old per_process_rate_limit_scope note said
#: "Implied by ..."): a check reading such an entry is not a check against the book
_NOT_PRINTED = re.compile(r"(?i)\bimplied\b|\bnot printed\b|\bunprinted\b|\bnever prints?\b")


@dataclass
class Audit:
    """The rules applied to one derivation."""

    id: str
    bound: bool
    printed_numbers: int
    checked_numbers: int  # read by a passing, conforming check of an output or a quantity derived from outputs
    excused_numbers: int  # numbers of entries listed in `unchecked`
    violations: list[tuple[str, str]]
    checked_by: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED_KINDS, 0))
    #: printed numbers matched but not counted: by a given, by an echo check, or excused in `unchecked`
    not_counted_by: dict[str, int] = field(default_factory=lambda: {"given": 0, "echo": 0, "unchecked": 0})
    #: each of those with its reason: {entry, text, kind, reason}
    not_counted: list[dict] = field(default_factory=list)
    printed_words: int = 0  # printed verdicts and labels: entries a verdict/label check reads or without a number
    checked_words: int = 0  # of those, read by a passing verdict or label check
    not_quantities: dict[str, str] = field(default_factory=dict)  # entries that are no quantity, with the reason


def _check_label(i: int, chk: dict) -> str:
    return f"checks[{i}] {chk.get('path') or _source_label(chk)} printed {_shown(chk)}"


def _echo(derivation: dict, path: str, want: Any) -> bool:
    """R3: is the output at `path` the request field at the same place, passed through?"""
    request = derivation.get("request")
    if not isinstance(request, (dict, list)):
        return False
    try:
        given = plain(resolve_path(request, path))
    except (KeyError, IndexError, ValueError, TypeError):
        return False
    want = plain(want)
    if isinstance(given, bool) or isinstance(want, bool):
        return given == want
    if isinstance(given, (int, float)) and isinstance(want, (int, float)):
        return _same(float(given), float(want))
    return given == want


def request_inputs_flat(request: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every number of a request body with its dotted path (booleans are no numbers)."""
    out: list[tuple[str, float]] = []
    if isinstance(request, dict):
        for k, v in request.items():
            out += request_inputs_flat(v, f"{prefix}{k}.")
    elif isinstance(request, (list, tuple)):
        for i, v in enumerate(request):
            out += request_inputs_flat(v, f"{prefix}{i}.")
    elif isinstance(request, (int, float)) and not isinstance(request, bool):
        out.append((prefix[:-1], float(request)))
    return out


def _equal_inputs(value: float, inputs: list[tuple[str, float]]) -> list[str]:
    return [p for p, v in inputs if _same(v, value)]


def _informative(derivation: dict, operand: Any, inputs: list[tuple[str, float]]) -> tuple[bool, list[str]]:
    """Does an operand carry something the calculator computed? An output path whose value is one of the request's
    inputs does not, nor a request field or a constant, nor an operation of such operands (or whose value is an
    input). Returns (informative, the request paths it reduces to)."""
    if isinstance(operand, dict) and len(operand) == 1 and next(iter(operand)) in DERIVED_OPS:
        op, operands = next(iter(operand.items()))
        value, _ = _combine(derivation, op, operands)
        hits = _equal_inputs(value, inputs)
        if hits:
            return False, hits
        parts = [_informative(derivation, o, inputs) for o in operands]
        return any(i for i, _ in parts), [p for _, ps in parts for p in ps]
    if isinstance(operand, str) and operand.startswith(REQUEST_PREFIX):
        return False, [operand[len(REQUEST_PREFIX):]]
    if isinstance(operand, str):
        value, is_out = _operand(derivation, operand)
        hits = _equal_inputs(value, inputs)
        return (is_out and not hits), hits
    return False, []  # a stated constant


def input_echo(derivation: dict, chk: dict, value: Any = None) -> list[str]:
    """The scan of issue 26: the request inputs a numeric check's quantity equals (numerically, in the request's own
    SI units, which `expected` shares), or, for a derived check, the inputs it is formed from when none of its
    operands carries a computed value (a ratio of two outputs that equals an input is that input). Empty when the
    quantity is the calculator's own."""
    kind = check_kind(chk)
    if kind not in ("output", "derived"):
        return []
    inputs = request_inputs_flat(derivation.get("request") or {})
    if value is None:
        ev = evaluate(derivation, chk)
        if ev.error:
            return []
        value = ev.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    hits = _equal_inputs(float(value), inputs)
    if hits or kind == "output":
        return hits
    op = next(op for op in DERIVED_OPS if chk.get(op) is not None)
    try:
        informative, paths = _informative(derivation, {op: chk[op]}, inputs)
    except (KeyError, IndexError, ValueError, TypeError):
        return []
    return [] if informative else (paths or ["(constants only)"])


def _reason(chk: dict, key: str) -> str | None:
    why = chk.get(key)
    return why.strip() if isinstance(why, str) and why.strip() else None


def _not_quantities(derivation: dict, printed: dict, violations: list[tuple[str, str]]) -> dict[str, str]:
    """The record's `not_quantities` (entries whose text is no quantity), each checked: a printed entry, a reason,
    and a text that is more than a bare number."""
    out: dict[str, str] = {}
    for k, why in (derivation.get("not_quantities") or {}).items():
        if k not in printed:
            violations.append(("R1", f"not_quantities names {k!r}, which is not a printed entry"))
        elif not (isinstance(why, str) and why.strip()):
            violations.append(("R1", f"not_quantities {k!r} has no reason"))
        elif not isinstance(printed[k], str) or not re.search(r"[^\W\d_]", _NUM.sub("", str(printed[k]))):
            violations.append(("R1", f"not_quantities {k!r}: {printed[k]!r} is a number; check it"))
        else:
            out[k] = why
    return out


def audit(derivation: dict) -> Audit:
    """Apply R1–R4 to a derivation (a record as loaded: a dict)."""
    did = derivation.get("id") or f"{derivation.get('case')}/{derivation.get('name')}"
    printed = derivation.get("printed") or {}
    bound = bool(derivation.get("calculator"))
    violations: list[tuple[str, str]] = []
    not_q = _not_quantities(derivation, printed, violations)
    numbers = {k: ([] if k in not_q else parse_numbers(v)) for k, v in printed.items()}
    total = sum(len(ns) for ns in numbers.values())

    # R4
    reason = derivation.get("unbound_reason")
    if not bound:
        if not (isinstance(reason, str) and reason.strip()):
            violations.append(("R4", "unbound example has no unbound_reason"))
        return Audit(did, False, total, 0, 0, violations, not_quantities=not_q)
    if reason:
        violations.append(("R4", "a bound example has an unbound_reason"))

    unchecked = derivation.get("unchecked") or {}
    for k, why in unchecked.items():
        if k not in printed:
            violations.append(("R1", f"unchecked names {k!r}, which is not a printed entry"))
        elif not (isinstance(why, str) and why.strip()):
            violations.append(("R1", f"unchecked {k!r} has no reason"))

    read: dict[tuple[str, int], set[str]] = {}  # (entry, index) -> kinds of passing, conforming checks reading it
    echo_reasons: dict[tuple[str, int], str] = {}
    read_entries: set[str] = set()
    words: dict[str, bool] = {}  # entry read by a verdict/label check -> passes
    for i, chk in enumerate(derivation.get("checks") or []):
        label = _check_label(i, chk)
        kind = check_kind(chk)
        ev = evaluate(derivation, chk)
        key = chk.get("printed_key")
        if key is not None and key not in printed:
            violations.append(("R1", f"{label}: printed_key {key!r} is not a printed entry"))
            continue
        if key is not None and key in not_q:
            violations.append(("R1", f"{label}: printed[{key!r}] is listed in not_quantities, yet a check reads it"))
            continue

        if kind in ("verdict", "label"):  # a yes/no or a label: the printed text must say it, the output must be it
            if key is None:
                violations.append(("R1", f"{label}: a {kind} check names its printed entry (printed_key)"))
                continue
            read_entries.add(key)
            ok = not ev.error
            if ev.error:
                violations.append(("R2", f"{label}: {ev.error}"))
            elif kind == "verdict":
                says = parse_verdict(printed[key])
                if says is None:
                    violations.append(("R1", f"{label}: printed[{key!r}] = {printed[key]!r} states no yes/no"))
                    ok = False
                elif says != bool(chk["verdict"]):
                    violations.append(("R1", f"{label}: printed[{key!r}] = {printed[key]!r} says "
                                             f"{'yes' if says else 'no'}, the check declares {chk['verdict']}"))
                    ok = False
            elif _norm(str(chk.get("shown_as") or chk["label"])) not in _norm(str(printed[key])):
                violations.append(("R1", f"{label}: the label {chk.get('shown_as') or chk['label']!r} is not in "
                                         f"printed[{key!r}] = {printed[key]!r}"))
                ok = False
            if not ev.error and not _passes(chk, ev.value):
                violations.append(("R2", f"{label}: the output is {ev.value!r}, the book says {_shown(chk)!r}"))
                ok = False
            words[key] = words.get(key, False) or ok
            continue

        try:
            pval = _printed_value(chk)
        except ValueError as e:
            violations.append(("R2", f"{label}: {e}"))
            continue
        # which printed entry and number this check reads (R1)
        hits: list[tuple[str, int]] = []
        if key is not None:
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
            read.setdefault(h, set())

        # R2: evaluates, passes, precise enough, not too wide, positive scale
        conforms = True
        scale = chk.get("scale", 1)
        try:
            scale = float(1 if scale is None else scale)
        except (TypeError, ValueError):
            violations.append(("R2", f"{label}: scale {scale!r} is not a number"))
            continue
        if scale <= 0:
            violations.append(("R2", f"{label}: scale {scale:g} must be positive (no sign flips)"))
            conforms = False
        if ev.error:
            violations.append(("R2", f"{label}: {ev.error}"))
            continue
        want = ev.value
        passes = _passes(chk, want)
        if not passes:
            violations.append(("R2", f"{label}: ({kind} {want!r} − offset) / scale {scale:g} does not print as {pval:g}"
                                     f" at decimals={chk.get('decimals')} rel={chk.get('rel')}"))
        coarse = chk.get("coarse")
        coarse = coarse if isinstance(coarse, str) and coarse.strip() else None
        rel = chk.get("rel")
        if rel is not None:
            if rel < 0 or (rel > MAX_REL and not coarse):
                violations.append(("R2", f"{label}: rel {rel:g} is wider than {MAX_REL:g} (say why in `coarse`)"))
                conforms = False
            if number is not None and number.fraction and rel > FRACTION_REL:
                violations.append(("R2", f"{label}: the book prints the exact fraction {number.text!r}; rel {rel:g} "
                                         f"is wider than {FRACTION_REL:g}"))
                conforms = False
        else:
            decimals = chk.get("decimals") or 0
            if number is not None and decimals < number.decimals:
                what = "an exact fraction: decimals" if number.fraction else "decimal places"
                violations.append(("R2", f"{label}: decimals {decimals} < the {number.decimals} {what} "
                                         f"the book prints ({number.text!r})"))
                conforms = False
            tol = 0.5 * 10 ** (-decimals)
            if pval == 0:
                if not (float(want) == 0) and not coarse:
                    violations.append(("R2", f"{label}: a printed 0 with {kind} {want!r} needs `coarse`"))
                    conforms = False
            elif tol / abs(pval) > MAX_REL and not coarse:
                violations.append(("R2", f"{label}: tolerance ±{tol:g} is {tol / abs(pval):.0%} of {pval:g}, "
                                         f"wider than {MAX_REL:.0%} (more decimals, or say why in `coarse`)"))
                conforms = False
        # R3: echo (an output check), or a derived check with no real output among its operands; and the scan of
        # issue 26: a quantity equal to one of the request's inputs is an echo (`echo: <reason>`, not counted) or
        # computed although it equals an input (`equals_input: <why>`, counted)
        echo_why, same_why = _reason(chk, "echo"), _reason(chk, "equals_input")
        counted_as = kind
        if echo_why and same_why:
            violations.append(("R3", f"{label}: a check is either an echo or computed (`echo` or `equals_input`), not both"))
            conforms = False
        if kind == "given" and (echo_why or same_why):
            violations.append(("R3", f"{label}: a given is an input by definition; `echo`/`equals_input` is for outputs"))
            conforms = False
        if kind in ("output", "derived"):
            equal = input_echo(derivation, chk, want)
            if echo_why:
                counted_as = "echo"
            elif kind == "output" and _echo(derivation, chk.get("path"), want):
                violations.append(("R3", f"{label}: output {chk.get('path')} is the request field passed through (an echo)"))
                conforms = False
            elif kind == "derived" and not ev.operands_from_outputs:
                violations.append(("R3", f"{label}: no operand is a calculator output (only request fields or echoes); "
                                         f"a number formed from the givens alone is a `given`, or needs an output"))
                conforms = False
            elif equal and not same_why:
                direct = _equal_inputs(float(want), request_inputs_flat(derivation.get("request") or {}))
                what = (f"the value {want!r} equals the request input" if direct else
                        f"the value {want!r} is formed from request inputs only (operands equal to")
                violations.append(("R3", f"{label}: {what} {', '.join(equal[:3])}{'' if direct else ')'}: mark the check "
                                         f"`echo: <reason>` (not counted) or, when the calculator computes it all the "
                                         f"same, `equals_input: <why>`"))
                conforms = False
            if same_why and not equal:
                violations.append(("R3", f"{label}: `equals_input` on a check whose value equals no request input"))
                conforms = False
            # the locator: a counted check reads a printed entry (printed_key, or the one entry holding its number:
            # R1 above), and the record does not call that entry implied or not printed by the book
            if counted_as != "echo":
                if key is not None and (_NOT_PRINTED.search(str(key)) or _NOT_PRINTED.search(str(printed.get(key)))
                                        or _NOT_PRINTED.match(str(derivation.get("note") or "").strip())):
                    violations.append(("R1", f"{label}: the record says printed[{key!r}] is implied, not printed by "
                                             f"the book: check what the case prints, or excuse the check (`echo`)"))
                    conforms = False
        for h in hits:
            if passes and conforms:
                read[h].add(counted_as)
                if counted_as == "echo":
                    echo_reasons[h] = echo_why

    # R1: every number of every entry not excused is read; entries without numbers are read or excused
    checked_by = dict.fromkeys(COUNTED_KINDS, 0)
    not_counted_by = {"given": 0, "echo": 0, "unchecked": 0}
    not_counted: list[dict] = []
    for (k, j), kinds in sorted(read.items()):
        best = next((kd for kd in NUMBER_KINDS if kd in kinds), None)
        if best in checked_by:
            checked_by[best] += 1
        elif best:
            not_counted_by[best] += 1
            not_counted.append({"entry": k, "text": str(printed[k]), "number": numbers[k][j].text.strip(), "kind": best,
                                "reason": echo_reasons.get((k, j)) if best == "echo" else
                                "a printed given matched against the request: an input, not a computed output"})
    checked = sum(checked_by.values())
    excused = 0
    for k, ns in numbers.items():
        if k in unchecked:
            left = [j for j in range(len(ns)) if not read.get((k, j))]
            excused += len(left)
            not_counted_by["unchecked"] += len(left)
            not_counted += [{"entry": k, "text": str(printed[k]), "number": ns[j].text.strip(), "kind": "unchecked",
                             "reason": unchecked[k]} for j in left]
            continue
        if k in not_q:
            continue
        if not ns:
            if k not in read_entries:
                violations.append(("R1", f"printed[{k!r}] = {printed[k]!r} holds no number and no check reads it: "
                                         f"check the verdict or label it states, or list it in `unchecked` with the reason"))
            continue
        for j, n in enumerate(ns):
            if (k, j) not in read:
                violations.append(("R1", f"printed[{k!r}] = {printed[k]!r}: number {n.text.strip()!r} "
                                         f"(#{j + 1} of {len(ns)}) is read by no check (check it, or list "
                                         f"{k!r} in `unchecked` with the reason)"))
    word_entries = {k for k, ns in numbers.items() if not ns and k not in not_q} | set(words)
    return Audit(did, True, total, checked, excused, violations, checked_by=checked_by,
                 not_counted_by=not_counted_by, not_counted=not_counted,
                 printed_words=len(word_entries), checked_words=sum(1 for k in word_entries if words.get(k)),
                 not_quantities=not_q)


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
