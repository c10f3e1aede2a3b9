"""The rules of worked examples (issue 15), each on tiny synthetic records, and the number parser.

R1 every printed number of a bound example is read by a check or excused in `unchecked`;
R2 checks pass, are at least as precise as the text and at most 5 % wide (unless `coarse`), scale > 0;
R3 no echo checks (nor a value equal to a request input unless marked `echo` or `equals_input`, issue 26:
tests/test_derivation_scan.py); R4 an unbound example says why.
"""
from __future__ import annotations

import pytest

from knowledge.derivations import audit, main, parse_numbers


def values(text):
    return [n.value for n in parse_numbers(text)]


@pytest.mark.parametrize("text, want", [
    ("144 KiB", [144]),
    ("50,331,648", [50331648]),
    ("1,207,959,552 bytes = 1.125 GiB", [1207959552, 1.125]),
    ("20.5, 40.5 s", [20.5, 40.5]),
    ("−3.5%", [-3.5]),
    ("-2 s", [-2]),
    ("20-40 ms", [20, 40]),
    ("H100 80 GB", [80]),
    ("FP8 weights", []),
    ("Qwen3-8B at 16 GB", [16]),
    ("Llama-3.1-70B", []),
    ("DeepSeek-V3 671B", [671]),
    ("~401 mm^2", [401]),
    ("4.02e+22 FLOPs", [4.02e22]),
    ("~5.033e7 pairs", [5.033e7]),
    ("4096 (8x512)", [4096, 8, 512]),
    ("capacity x3.33", [3.33]),
    ("Mixtral 8x7B is 2x faster", [2]),
    ("[640,384,512,512] ms", [640, 384, 512, 512]),
    ("约 2.11 ms", [2.11]),
    ("14 秒", [14]),
    ("no (labels only)", []),
    (12.5, [12.5]),
    (3, [3]),
    ("7/3", [7 / 3]),
    ("-1/7", [-1 / 7]),
    ("p > 15/19", [15 / 19]),
    ("yes (128/8)", [16]),
    ("96 / 0 MiB", [96, 0]),
    ("1,536 / 4,608", [1536, 4608]),
    ("16 GB/s", [16]),
    ("capacity x3.33, traffic /1.98", [3.33, 1.98]),
])
def test_parse_numbers(text, want):
    assert values(text) == pytest.approx(want)


@pytest.mark.parametrize("text, decimals", [("1.125 GiB", 3), ("144 KiB", 0), ("1,714.21875 MiB", 5),
                                            ("2.50 s", 2), ("4.02e+22", -20), ("6.04e8", -6)])
def test_parse_numbers_decimal_places(text, decimals):
    assert parse_numbers(text)[0].decimals == decimals


def test_a_fraction_is_one_exact_number():
    (n,) = parse_numbers("341/256")
    assert n.fraction and n.value == 341 / 256 and n.decimals == 9
    assert not parse_numbers("1.332")[0].fraction


def bound(printed, checks, expected=None, request=None, **extra):
    return {"id": "case-one/example", "case": "case-one", "name": "example", "family": "kv_sizing", "title": "t",
            "printed": printed, "calculator": "kv-cache", "request": request or {"model": "tiny-1b", "tokens": 8},
            "expected": expected or {"bytes_per_token": 147456}, "checks": checks, **extra}


def rules(d):
    return [r for r, _ in audit(d).violations]


GOOD = bound({"kv": "144 KiB"}, [{"path": "bytes_per_token", "printed": 144, "scale": 1024, "decimals": 1}])


def test_a_conforming_example_has_no_violation_and_counts_its_number():
    a = audit(GOOD)
    assert a.violations == []
    assert (a.printed_numbers, a.checked_numbers) == (1, 1)


# ---------------------------------------------------------------------------- R1

def test_r1_a_printed_number_no_check_reads():
    d = bound({"kv": "144 KiB", "total": "1.125 GiB"}, GOOD["checks"])
    assert rules(d) == ["R1"] and "total" in audit(d).violations[0][1]
    assert (audit(d).printed_numbers, audit(d).checked_numbers) == (2, 1)


def test_r1_each_number_of_a_text_needs_its_check():
    d = bound({"kv": "147,456 B = 144 KiB"}, GOOD["checks"])
    assert rules(d) == ["R1"] and "147,456" in audit(d).violations[0][1]


def test_r1_unchecked_excuses_an_entry():
    d = bound({"kv": "144 KiB", "note": "measured 150 KiB"}, GOOD["checks"], unchecked={"note": "a measurement"})
    a = audit(d)
    assert a.violations == [] and (a.printed_numbers, a.checked_numbers, a.excused_numbers) == (2, 1, 1)


def test_r1_unchecked_must_name_a_printed_entry_with_a_reason():
    assert rules(bound({"kv": "144 KiB"}, GOOD["checks"], unchecked={"nope": "x"})) == ["R1"]
    assert rules(bound({"kv": "144 KiB", "n": "2"}, GOOD["checks"], unchecked={"n": " "})) == ["R1"]


def test_r1_an_entry_without_numbers_is_checked_or_excused():
    assert rules(bound({"kv": "144 KiB", "fits": "yes"}, GOOD["checks"])) == ["R1"]
    assert rules(bound({"kv": "144 KiB", "fits": "yes"}, GOOD["checks"], unchecked={"fits": "a label"})) == []


def test_r1_a_check_whose_number_is_printed_nowhere():
    d = bound({"kv": "144 KiB"}, [{"path": "bytes_per_token", "printed": 147456, "decimals": 0}])
    assert "R1" in rules(d) and "appears in no printed entry" in " ".join(m for _, m in audit(d).violations)


def test_r1_an_ambiguous_number_needs_printed_key():
    printed = {"a": "144 KiB", "b": "144 KiB per token"}
    chk = {"path": "bytes_per_token", "printed": 144, "scale": 1024, "decimals": 1}
    assert "several printed entries" in " ".join(m for _, m in audit(bound(printed, [chk])).violations)
    d = bound(printed, [chk, {**chk, "printed_key": "a"}, {**chk, "printed_key": "b"}])
    assert rules(d) == ["R1"]  # only the ambiguous first check is left
    assert rules(bound(printed, [{**chk, "printed_key": "a"}, {**chk, "printed_key": "b"}])) == []


def test_r1_printed_key_must_exist_and_hold_the_number():
    chk = {"path": "bytes_per_token", "printed": 144, "scale": 1024, "decimals": 1}
    assert "R1" in rules(bound({"kv": "144 KiB"}, [{**chk, "printed_key": "nope"}]))
    assert "R1" in rules(bound({"kv": "144 KiB", "x": "145 KiB"}, [GOOD["checks"][0], {**chk, "printed_key": "x"}]))


def test_r1_a_failing_check_does_not_count_as_checked():
    d = bound({"kv": "145 KiB"}, [{"path": "bytes_per_token", "printed": 145, "scale": 1024, "decimals": 1}])
    a = audit(d)
    assert rules(d) == ["R2"] and a.checked_numbers == 0


# ---------------------------------------------------------------------------- R2

def test_r2_decimals_below_the_printed_places():
    d = bound({"kv": "1.125 GiB"}, [{"path": "b", "printed": 1.125, "scale": 2 ** 30, "decimals": 2}],
              expected={"b": 1207959552})
    assert rules(d) == ["R2"] and "decimal places" in audit(d).violations[0][1]
    d["checks"][0]["decimals"] = 3
    assert rules(d) == []


def test_r2_tolerance_wider_than_five_percent():
    d = bound({"kv": "8 MiB"}, [{"path": "b", "printed": 8, "scale": 2 ** 20, "decimals": 0}],
              expected={"b": 8 * 2 ** 20})
    assert rules(d) == ["R2"] and audit(d).checked_numbers == 0
    d["checks"][0]["decimals"] = 2
    assert rules(d) == [] and audit(d).checked_numbers == 1
    d["checks"][0]["decimals"] = 0
    d["checks"][0]["coarse"] = "the book rounds to whole MiB"
    assert rules(d) == []


def test_r2_rel_wider_than_five_percent():
    d = bound({"x": "≈2"}, [{"path": "b", "printed": 2, "rel": 0.08}], expected={"b": 2.1})
    assert rules(d) == ["R2"]
    d["checks"][0]["coarse"] = "the book says about 2"
    assert rules(d) == []
    d = bound({"x": "≈2"}, [{"path": "b", "printed": 2, "rel": 0.05}], expected={"b": 2.09})
    assert rules(d) == []


def test_r2_a_printed_zero_needs_coarse_unless_exact():
    d = bound({"x": "0 (hidden)"}, [{"path": "b", "printed": 0, "decimals": 0}], expected={"b": 0.3})
    assert rules(d) == ["R2"]
    d["checks"][0]["coarse"] = "fully hidden: the book rounds to 0"
    assert rules(d) == []
    assert rules(bound({"x": "0 (hidden)"}, [{"path": "b", "printed": 0, "decimals": 0}], expected={"b": 0})) == []


def test_r2_negative_scale_is_refused():
    d = bound({"x": "0.3333"}, [{"path": "b", "printed": 0.3333, "scale": -1, "decimals": 4}],
              expected={"b": -1 / 3})
    assert "R2" in rules(d) and "positive" in " ".join(m for _, m in audit(d).violations)


def test_r2_a_check_that_does_not_pass():
    d = bound({"kv": "150 KiB"}, [{"path": "bytes_per_token", "printed": 150, "scale": 1024, "decimals": 1}])
    assert rules(d) == ["R2"]


def test_r2_a_check_path_without_expected_value():
    assert rules(bound({"kv": "144 KiB"}, [{"path": "nope", "printed": 144, "scale": 1024, "decimals": 1}])) == ["R2"]


# ---------------------------------------------------------------------------- R3

def test_r3_an_echo_check():
    d = bound({"t": "8 tokens", "kv": "144 KiB"},
              [GOOD["checks"][0], {"path": "tokens", "printed": 8, "decimals": 2}],
              expected={"bytes_per_token": 147456, "tokens": 8})
    assert rules(d) == ["R3"] and audit(d).checked_numbers == 1


def test_r3_an_echo_at_the_same_nesting_or_an_input_value_elsewhere():
    request = {"model": "tiny-1b", "what_if": [{"tokens": 8}]}
    chk = {"path": "what_if.0.tokens", "printed": 8, "decimals": 2}
    assert rules(bound({"t": "8"}, [chk], expected={"what_if.0.tokens": 8}, request=request)) == ["R3"]
    # another path with an input's value: an echo too unless the record says why it is computed (issue 26)
    chk = {"path": "plans.0.tokens", "printed": 8, "decimals": 2}
    assert rules(bound({"t": "8"}, [chk], expected={"plans.0.tokens": 8}, request=request)) == ["R3"]
    d = bound({"t": "8"}, [{**chk, "equals_input": "the planner picks 8 of its candidates"}],
              expected={"plans.0.tokens": 8}, request=request)
    assert rules(d) == [] and audit(d).checked_numbers == 1


def test_r3_a_different_value_is_no_echo():
    d = bound({"t": "16"}, [{"path": "tokens", "printed": 16, "decimals": 2}], expected={"tokens": 16})
    assert rules(d) == []


# ---------------------------------------------------------------------------- R4

def unbound(**extra):
    return {"id": "case-one/u", "case": "case-one", "name": "u", "family": "other", "title": "t",
            "printed": {"x": "42 ms"}, **extra}


def test_r4_an_unbound_example_says_why():
    assert rules(unbound()) == ["R4"]
    assert rules(unbound(unbound_reason=" ")) == ["R4"]
    a = audit(unbound(unbound_reason="a quoted measurement"))
    assert a.violations == [] and (a.printed_numbers, a.checked_numbers) == (1, 0)


def test_r4_a_bound_example_has_no_unbound_reason():
    assert rules({**GOOD, "unbound_reason": "stale"}) == ["R4"]


def test_r4_the_record_refuses_an_unbound_derivation_without_reason(monkeypatch):
    from pydantic import ValidationError

    from knowledge.records import book

    base = {"id": "case-one/u", "case": "case-one", "name": "u", "family": "other", "title": "t"}
    monkeypatch.setattr(book, "REQUIRE_UNBOUND_REASON", True)
    with pytest.raises(ValidationError, match="unbound_reason|says why"):
        book.Derivation.model_validate(base)
    book.Derivation.model_validate({**base, "unbound_reason": "no calculator models a queue of humans"})
    monkeypatch.setattr(book, "REQUIRE_UNBOUND_REASON", False)
    book.Derivation.model_validate(base)


def test_check_record_takes_printed_key_and_coarse():
    from knowledge.records.book import Check

    c = Check.model_validate({"path": "b", "printed": 8, "printed_key": "kv", "coarse": "whole MiB"})
    assert (c.printed_key, c.coarse) == ("kv", "whole MiB")


# ---------------------------------------------------------------------------- the audit command

def test_audit_command_prints_violations_per_derivation(tmp_path, capsys):
    import yaml

    f = tmp_path / "fam.yaml"
    f.write_text(yaml.safe_dump([unbound(), GOOD]), encoding="utf-8")
    assert main(["--audit", str(f)]) == 1
    out = capsys.readouterr().out
    assert "case-one/u" in out and "R4 unbound example has no unbound_reason" in out
    assert "case-one/example" not in out
    assert "2 derivations, 1 with violations" in out
    f.write_text(yaml.safe_dump([GOOD]), encoding="utf-8")
    assert main(["--audit", str(f)]) == 0


def test_r4_the_build_names_the_record_without_reason(monkeypatch):
    from knowledge.loader import Catalog
    from knowledge.records import book
    from knowledge.validate import validate

    monkeypatch.setattr(book, "REQUIRE_UNBOUND_REASON", True)

    rec = {"id": "case-one/u", "case": "case-one", "name": "u", "family": "other", "title": "t"}
    cat = Catalog(records={"case": [{"slug": "case-one"}], "derivation": [rec]})
    problems = [str(p) for p in validate(cat) if "case-one/u" in str(p)]
    assert any("unbound_reason" in p for p in problems), problems
    rec["unbound_reason"] = "a quoted measurement"
    assert not [p for p in validate(cat) if "case-one/u" in str(p)]


def test_an_offset_reads_a_ratio_as_a_printed_percentage_gain():
    from knowledge.derivations import printed_matches

    assert printed_matches(1.2222, 22, scale=0.01, decimals=0, offset=1)
    assert not printed_matches(1.2622, 22, scale=0.01, decimals=0, offset=1)
    assert not printed_matches(1.2222, 22, scale=0.01, decimals=0)      # without the offset it is 122


# ---------------------------------------------------------------------------- fractions, derived, givens, verdicts, labels

from knowledge.derivations import check_kind, evaluate, parse_verdict, printed_checks, resolve_path  # noqa: E402


def test_a_printed_fraction_is_checked_whole_and_exactly():
    d = bound({"p": "p > 15/19"}, [{"path": "x", "printed": "15/19", "decimals": 9}], expected={"x": 15 / 19})
    assert rules(d) == [] and audit(d).checked_numbers == 1
    d["checks"][0]["decimals"] = 4  # 15/19 is exact: four decimals would accept 0.78945
    assert rules(d) == ["R2"] and audit(d).checked_numbers == 0
    d["checks"][0] = {"path": "x", "printed": "15/19", "rel": 1e-4}
    assert rules(d) == ["R2"]
    d = bound({"p": "p > 15/19"}, [{"path": "x", "printed": "15/19", "decimals": 9}], expected={"x": 0.79})
    assert rules(d) == ["R2"]


def test_a_derived_ratio_of_two_outputs():
    exp = {"a": 81920, "b": 24576}
    chk = {"ratio_of": ["a", "b"], "printed": 3.33, "decimals": 2, "printed_key": "r"}
    d = bound({"r": "capacity x3.33"}, [chk], expected=exp)
    assert check_kind(chk) == "derived" and rules(d) == []
    assert audit(d).checked_by == {"output": 0, "derived": 1}
    assert rules(bound({"r": "capacity x3.34"}, [{**chk, "printed": 3.34}], expected=exp)) == ["R2"]


def test_a_derived_check_nests_and_reads_stated_request_fields():
    request = {"model": "tiny-1b", "tokens": 8, "retrieval_s": 0.2}
    chk = {"difference_of": [{"sum_of": ["t", "request:retrieval_s"]}, 0.01], "printed": 310, "scale": 0.001,
           "decimals": 0, "printed_key": "total"}
    d = bound({"total": "310 ms"}, [chk], expected={"t": 0.12}, request=request)
    assert evaluate(d, chk).value == pytest.approx(0.31) and rules(d) == []


def test_a_derived_check_needs_a_real_output():
    request = {"model": "tiny-1b", "tokens": 8}
    only_givens = {"product_of": ["request:tokens", 2], "printed": 16, "decimals": 1, "printed_key": "n"}
    assert rules(bound({"n": "16"}, [only_givens], expected={"x": 1.0}, request=request)) == ["R3"]
    echo = {"product_of": ["tokens", 2], "printed": 16, "decimals": 1, "printed_key": "n"}
    assert rules(bound({"n": "16"}, [echo], expected={"tokens": 8}, request=request)) == ["R3"]


def test_a_derived_check_with_a_missing_operand_or_zero_divisor():
    d = bound({"r": "2"}, [{"ratio_of": ["a", "nope"], "printed": 2, "decimals": 1}], expected={"a": 2.0})
    assert rules(d) == ["R2"] and "nope" in audit(d).violations[0][1]
    d = bound({"r": "2"}, [{"ratio_of": ["a", "z"], "printed": 2, "decimals": 1}], expected={"a": 2.0, "z": 0.0})
    assert rules(d) == ["R2"] and "zero" in audit(d).violations[0][1]


def test_a_given_matches_the_request_and_counts_apart():
    request = {"model": "tiny-1b", "tokens": 8, "window_s": 360000}
    chk = {"given": "window_s", "printed": 360000, "decimals": 0, "printed_key": "C"}
    d = bound({"C": "360,000 GPU·s", "kv": "144 KiB"}, [chk, GOOD["checks"][0]], request=request)
    a = audit(d)
    # a given is matched but not counted: it compares an input, not a computed output, with the book
    assert a.violations == [] and a.checked_by == {"output": 1, "derived": 0} and a.checked_numbers == 1
    assert a.not_counted_by["given"] == 1 and [n["kind"] for n in a.not_counted] == ["given"]
    d["request"] = {**request, "window_s": 36000}  # a typo in the request (or in the book's text) fails
    assert rules(d) == ["R2"] and audit(d).not_counted_by["given"] == 0
    assert rules(bound({"C": "1"}, [{"given": "nope", "printed": 1, "decimals": 1}], request=request)) == ["R2"]


@pytest.mark.parametrize("text, says", [("yes", True), ("no", False), ("no (256 > 240)", False), ("yes (128/8)", True),
                                        ("two A's infeasible", False), ("holds the backlog (payload only)", True),
                                        ("no (4 KV heads cannot split over TP=8 without replication)", False),
                                        ("16 workers", None), ("CPU cast", None)])
def test_parse_verdict(text, says):
    assert parse_verdict(text) is says


def test_a_verdict_reads_a_boolean_output_and_the_printed_yes_no():
    chk = {"path": "fits", "verdict": False, "printed_key": "ok"}
    d = bound({"ok": "no (256 > 240)", "kv": "144 KiB"}, [chk, GOOD["checks"][0]],
              expected={"fits": False, "bytes_per_token": 147456})
    # 256 and 240 are numbers of the entry: the verdict alone does not read them
    assert rules(d) == ["R1", "R1"]
    d = bound({"ok": "no", "kv": "144 KiB"}, [chk, GOOD["checks"][0]], expected={"fits": False, "bytes_per_token": 147456})
    a = audit(d)
    assert a.violations == [] and (a.printed_words, a.checked_words) == (1, 1)
    d["expected"]["fits"] = True  # the output says yes, the book no
    assert rules(d) == ["R2"] and audit(d).checked_words == 0
    d["expected"]["fits"] = False
    d["printed"]["ok"] = "yes"  # the check declares no, the text says yes
    assert rules(d) == ["R1"]
    d["printed"]["ok"] = "maybe"
    assert rules(d) == ["R1"]
    d = bound({"ok": "no"}, [{"path": "n", "verdict": False, "printed_key": "ok"}], expected={"n": 3})
    assert rules(d) == ["R2"]  # a number is no verdict


def test_a_verdict_from_a_comparison_of_outputs():
    exp = {"replication_factor": 2.0, "experts_per_rank": 16.0}
    no = {"at_most": ["replication_factor", 1], "verdict": False, "printed_key": "kv"}
    yes = {"whole": "experts_per_rank", "verdict": True, "printed_key": "ex"}
    d = bound({"kv": "no", "ex": "yes"}, [no, yes], expected=exp)
    assert rules(d) == [] and audit(d).checked_words == 2
    d["expected"] = {"replication_factor": 1.0, "experts_per_rank": 16.5}
    assert rules(d) == ["R2", "R2"]
    assert rules(bound({"kv": "no"}, [{"at_most": [3, 1], "verdict": False, "printed_key": "kv"}], expected=exp)) == ["R2"]


def test_a_label_reads_a_text_output_or_the_smallest_of_outputs():
    exp = {"cpu": 6.166e-3, "gpu": 6.493e-3, "cheapest": "B16"}
    pick = {"min_of": {"CPU cast": "cpu", "GPU cast": "gpu"}, "label": "CPU cast", "printed_key": "faster"}
    named = {"path": "cheapest", "label": "B16", "shown_as": "sixteen workers", "printed_key": "choice"}
    d = bound({"faster": "CPU cast", "choice": "sixteen workers"}, [pick, named], expected=exp)
    assert rules(d) == [] and audit(d).checked_words == 2
    d["expected"] = {**exp, "cpu": 7e-3, "cheapest": "B4"}
    assert rules(d) == ["R2", "R2"]
    d = bound({"faster": "GPU cast"}, [pick], expected=exp)
    assert rules(d) == ["R1"]  # the book's words do not show the label


def test_verdict_and_label_checks_name_their_entry():
    assert rules(bound({"ok": "yes"}, [{"path": "fits", "verdict": True}], expected={"fits": True})) == ["R1", "R1"]


def test_not_quantities_need_a_reason_and_a_text_that_is_no_number():
    d = bound({"kv": "144 KiB", "r": "floor(r/2)"}, GOOD["checks"],
              not_quantities={"r": "an index formula, not a quantity"})
    a = audit(d)
    assert a.violations == [] and a.printed_numbers == 1 and a.not_quantities == {"r": "an index formula, not a quantity"}
    assert rules(bound({"kv": "144 KiB", "r": "12000"}, GOOD["checks"], not_quantities={"r": "hidden"})) == ["R1", "R1"]
    assert rules(bound({"kv": "144 KiB", "r": "floor(r/2)"}, GOOD["checks"], not_quantities={"r": " "})) == ["R1", "R1"]
    assert rules(bound({"kv": "144 KiB"}, GOOD["checks"], not_quantities={"nope": "x"})) == ["R1"]


def test_printed_checks_evaluate_every_kind():
    request = {"model": "tiny-1b", "tokens": 8}
    d = bound({"kv": "144 KiB", "r": "2", "t": "8", "ok": "yes"},
              [GOOD["checks"][0], {"ratio_of": ["bytes_per_token", "half"], "printed": 2, "decimals": 1},
               {"given": "tokens", "printed": 8, "decimals": 1}, {"path": "fits", "verdict": True, "printed_key": "ok"}],
              expected={"bytes_per_token": 147456, "half": 73728, "fits": True}, request=request)
    assert [c.ok for c in printed_checks(d)] == [True, True, True, True]
    d["expected"]["fits"] = False
    assert [c.ok for c in printed_checks(d)] == [True, True, True, False]


def test_resolve_path_reads_numpy_arrays():
    import numpy as np
    outputs = {"a": np.array([1.0, 2.5]), "b": [{"c": np.float64(3.0)}], "f": np.array([True, False])}
    assert resolve_path(outputs, "a.1") == 2.5 and type(resolve_path(outputs, "b.0.c")) is float
    assert resolve_path(outputs, "f.0") is True and resolve_path(outputs, "a") == [1.0, 2.5]


def test_check_record_takes_the_new_kinds_and_refuses_two_sources():
    from pydantic import ValidationError

    from knowledge.records.book import Check

    assert Check.model_validate({"path": "a", "printed": "7/3"}).printed == "7/3"
    assert Check.model_validate({"ratio_of": ["a", {"sum_of": ["b", 1]}], "printed": 2}).ratio_of[1] == {"sum_of": ["b", 1]}
    assert Check.model_validate({"path": "ok", "verdict": False, "printed_key": "x"}).verdict is False
    with pytest.raises(ValidationError, match="exactly one"):
        Check.model_validate({"path": "a", "given": "b", "printed": 1})
    with pytest.raises(ValidationError, match="printed"):
        Check.model_validate({"path": "a"})
