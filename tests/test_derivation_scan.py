"""The scan of issue 26: a check counts only when it compares a computed output with a number the book prints.

- a numeric check whose value equals one of its request's inputs (numerically, in the request's SI units, which
  `expected` shares; a derived check also when all its operands reduce to inputs) is refused unless the check says
  `echo: <reason>` (not counted, listed apart) or `equals_input: <why the calculator computes it all the same>`;
- every counted check names the printed entry it reads (`printed_key`, its locator in the record of what the case
  prints), that entry holds the number, and the record does not call the entry implied or not printed;
- the four defective checks the independent fact check found are refused when their old form is put back.
"""
from __future__ import annotations

import copy

import pytest

from knowledge.coverage import coverage
from knowledge.derivations import (COUNTED_KINDS, COUNTING_RULE, _printed_value, _same, audit, check_kind, evaluate,
                                   input_echo, parse_numbers)
from knowledge.loader import default_catalog

ALL = default_catalog().records.get("derivation", [])
BY_ID = {d["id"]: d for d in ALL}
BOUND = [d for d in ALL if d.get("calculator")]


def bound(printed, checks, expected, request, **extra):
    return {"id": "case-one/example", "case": "case-one", "name": "example", "family": "other", "title": "t",
            "printed": printed, "calculator": "capacity", "request": request, "expected": expected, "checks": checks,
            **extra}


def rules(d):
    return [r for r, _ in audit(d).violations]


# ---------------------------------------------------------------------------- the rule on small records

REQ = {"resources": [{"name": "a", "units": 4, "capacity": 0.2}], "rate": 5000}


def test_an_output_equal_to_an_input_elsewhere_is_refused_unless_marked():
    chk = {"path": "b_time", "printed": 200, "scale": 0.001, "decimals": 0, "printed_key": "b"}
    d = bound({"b": "200 ms"}, [chk], {"b_time": 0.2}, REQ)
    assert rules(d) == ["R3"] and "resources.0.capacity" in audit(d).violations[0][1]
    assert audit(d).checked_numbers == 0
    echo = bound({"b": "200 ms"}, [{**chk, "echo": "B is the given time passed back"}], {"b_time": 0.2}, REQ)
    a = audit(echo)
    assert a.violations == [] and a.checked_numbers == 0 and a.not_counted_by["echo"] == 1
    assert a.not_counted == [{"entry": "b", "text": "200 ms", "number": "200", "kind": "echo",
                              "reason": "B is the given time passed back"}]
    same = bound({"b": "200 ms"}, [{**chk, "equals_input": "the bottleneck of two stages"}], {"b_time": 0.2}, REQ)
    assert rules(same) == [] and audit(same).checked_numbers == 1


def test_a_computed_value_needs_no_mark_and_a_needless_mark_is_refused():
    chk = {"path": "total", "printed": 0.8, "decimals": 2, "printed_key": "t"}
    assert rules(bound({"t": "0.8"}, [chk], {"total": 0.8}, REQ)) == []
    assert rules(bound({"t": "0.8"}, [{**chk, "equals_input": "x"}], {"total": 0.8}, REQ)) == ["R3"]
    both = {**chk, "path": "x", "echo": "a", "equals_input": "b"}
    assert "R3" in rules(bound({"t": "0.8"}, [{**both, "printed": 0.2}], {"x": 0.2}, REQ))


def test_a_derived_check_whose_operands_reduce_to_inputs_is_an_echo():
    # the old 15.768 T tokens: (break_even_uses / payback_s) is uses_per_s passed back, times two constants
    chk = {"product_of": [{"ratio_of": ["n", "t"]}, 100, 31536000], "printed": 15.768, "scale": 1e12, "decimals": 3,
           "printed_key": "v"}
    d = bound({"v": "15.768 trillion"}, [chk], {"n": 4e13, "t": 8e9}, REQ)
    assert input_echo(d, chk) == ["rate"]
    assert rules(d) == ["R3"] and "formed from request inputs only" in audit(d).violations[0][1]
    # a ratio of outputs that is no input is the calculator's own
    d = bound({"v": "15.768 trillion"}, [chk], {"n": 4e13, "t": 8e9 / 1.1}, REQ)
    assert input_echo(d, chk) == []


def test_givens_and_echoes_are_matched_but_not_counted_and_coverage_says_the_rule():
    given = {"given": "rate", "printed": 5000, "decimals": 0, "printed_key": "r"}
    out = {"path": "total", "printed": 0.8, "decimals": 2, "printed_key": "t"}
    echo = {"path": "b_time", "printed": 200, "scale": 0.001, "decimals": 0, "printed_key": "b", "echo": "given B"}
    d = bound({"r": "5,000/s", "t": "0.8", "b": "200 ms"}, [given, out, echo], {"total": 0.8, "b_time": 0.2}, REQ)
    d["case"] = "case-one"
    cov = coverage([{"slug": "case-one", "title_zh": "一"}], [d])
    assert (cov["printed_numbers"], cov["checked_numbers"]) == (3, 1)
    assert cov["checked_by"] == {"output": 1, "derived": 0}
    assert cov["not_counted_by"] == {"given": 1, "echo": 1, "unchecked": 0}
    assert {(n["id"], n["kind"]) for n in cov["not_counted"]} == {("case-one/example", "given"),
                                                                  ("case-one/example", "echo")}
    assert cov["counting_rule"] == COUNTING_RULE and "computed" in COUNTING_RULE and cov["checked_examples"] == 1


def test_an_entry_the_record_calls_implied_is_not_a_check_against_the_book():
    chk = {"path": "total", "printed": 32, "decimals": 1, "printed_key": "s"}
    assert rules(bound({"s": "32"}, [chk], {"total": 32}, REQ)) == []
    d = bound({"s": "32"}, [chk], {"total": 32}, REQ, note="Implied by the remark that four processes ...")
    assert rules(d) == ["R1"] and audit(d).checked_numbers == 0
    assert rules(bound({"s": "32 (implied)"}, [chk], {"total": 32}, REQ)) == ["R1"]


# ---------------------------------------------------------------------------- the four defects, put back

def _with(did, **changes):
    d = copy.deepcopy(BY_ID[did])
    d.update(copy.deepcopy(changes))
    return d


def _old_checks(did, index, old_check):
    d = copy.deepcopy(BY_ID[did])
    d["checks"][index] = old_check
    return d


def test_the_old_unprinted_32_is_refused():
    did = "reward-deadlines-and-feedback/per_process_rate_limit_scope"
    old = _with(did, printed={"service_wide": "32"},
                checks=[{"path": "resources.0.total_capacity", "printed": 32, "scale": 1.0, "decimals": 1,
                         "printed_key": "service_wide"}],
                note="Implied by the note that four processes each allowing eight cannot be read as a service-wide "
                     "limit of eight. Four independent units of eight concurrent requests each.")
    assert rules(old) == ["R1"] and audit(old).checked_numbers == 0
    now = audit(BY_ID[did])
    assert now.violations == [] and now.printed_numbers == 0 and now.checked_words == 1  # the verdict the case prints


def test_the_old_0_4_ms_read_from_another_quantity_is_refused():
    did = "collective-paths-and-diagnosis/collective_arrival_skew"
    cur = BY_ID[did]
    i = next(i for i, c in enumerate(cur["checks"]) if c.get("printed_key") == "last_arrival_sees")
    old = _old_checks(did, i, {"path": "what_if.1.total_s", "printed": 0.4, "scale": 0.001, "decimals": 2,
                               "printed_key": "last_arrival_sees"})
    assert "R3" in rules(old)
    assert cur["checks"][i]["path"] == "stages.3.idle_s" and audit(cur).violations == []


def test_the_old_echoes_are_refused():
    did = "opentallas/specialization_payback"
    cur = BY_ID[did]
    i = next(i for i, c in enumerate(cur["checks"]) if c.get("printed_key") == "one_year_output")
    old = _old_checks(did, i, {k: v for k, v in cur["checks"][i].items() if k != "echo"})
    assert rules(old) == ["R3"]
    a = audit(cur)
    assert a.violations == [] and [n["number"] for n in a.not_counted if n["kind"] == "echo"] == ["15.768"]

    did = "cache-events-and-routing/stale_cache_routing_break_even"
    cur = BY_ID[did]
    i = next(i for i, c in enumerate(cur["checks"]) if c.get("printed_key") == "B_cold")
    old = _old_checks(did, i, {"path": "options.1.expected.0", "printed": 200, "scale": 0.001, "decimals": 0,
                               "printed_key": "B_cold"})
    assert rules(old) == ["R3"]
    assert "B_cold" in {n["entry"] for n in audit(cur).not_counted if n["kind"] == "echo"}


# ---------------------------------------------------------------------------- the book's data

@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_no_check_of_the_book_equals_an_input_unmarked(derivation):
    bad = []
    for i, chk in enumerate(derivation.get("checks") or []):
        if check_kind(chk) not in ("output", "derived") or evaluate(derivation, chk).error:
            continue
        hits = input_echo(derivation, chk)
        marked = [k for k in ("echo", "equals_input") if isinstance(chk.get(k), str) and chk[k].strip()]
        if hits and len(marked) != 1:
            bad.append(f"checks[{i}] equals request input {hits[:3]}: mark it `echo` or `equals_input` with a reason")
        if not hits and "equals_input" in marked:
            bad.append(f"checks[{i}] says equals_input, but equals no input")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("derivation", BOUND, ids=[d["id"] for d in BOUND])
def test_every_counted_check_names_the_printed_entry_that_holds_its_number(derivation):
    bad = []
    printed = derivation.get("printed") or {}
    for i, chk in enumerate(derivation.get("checks") or []):
        if check_kind(chk) not in COUNTED_KINDS or chk.get("echo"):
            continue
        key = chk.get("printed_key")
        if key not in printed:
            bad.append(f"checks[{i}]: printed_key {key!r} names no printed entry")
            continue
        pval = _printed_value(chk)
        if not any(_same(n.value, pval) for n in parse_numbers(printed[key])):
            bad.append(f"checks[{i}]: {pval:g} is not a number of printed[{key!r}] = {printed[key]!r}")
    assert not bad, "\n".join(bad)


def test_the_book_counts_only_computed_checks():
    from knowledge.loader import load_catalog

    cat = load_catalog().records
    cov = coverage(cat["case"], cat["derivation"])
    assert cov["violations"] == 0
    assert sum(cov["checked_by"].values()) == cov["checked_numbers"]
    assert cov["checked_numbers"] + sum(cov["not_counted_by"].values()) == cov["printed_numbers"]
    assert len(cov["not_counted"]) == sum(cov["not_counted_by"].values())
    assert all(n["reason"].strip() for n in cov["not_counted"])
    echoes = {(n["id"], n["entry"]) for n in cov["not_counted"] if n["kind"] == "echo"}
    assert ("opentallas/specialization_payback", "one_year_output") in echoes
    assert ("cache-events-and-routing/stale_cache_routing_break_even", "B_cold") in echoes
