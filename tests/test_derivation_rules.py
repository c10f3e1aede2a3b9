"""The rules of worked examples (issue 15), each on tiny synthetic records, and the number parser.

R1 every printed number of a bound example is read by a check or excused in `unchecked`;
R2 checks pass, are at least as precise as the text and at most 5 % wide (unless `coarse`), scale > 0;
R3 no echo checks; R4 an unbound example says why.
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
])
def test_parse_numbers(text, want):
    assert values(text) == pytest.approx(want)


@pytest.mark.parametrize("text, decimals", [("1.125 GiB", 3), ("144 KiB", 0), ("1,714.21875 MiB", 5),
                                            ("2.50 s", 2), ("4.02e+22", -20), ("6.04e8", -6)])
def test_parse_numbers_decimal_places(text, decimals):
    assert parse_numbers(text)[0].decimals == decimals


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


def test_r3_an_echo_at_the_same_nesting_only():
    request = {"model": "tiny-1b", "what_if": [{"tokens": 8}]}
    chk = {"path": "what_if.0.tokens", "printed": 8, "decimals": 2}
    assert rules(bound({"t": "8"}, [chk], expected={"what_if.0.tokens": 8}, request=request)) == ["R3"]
    chk = {"path": "plans.0.tokens", "printed": 8, "decimals": 2}
    assert rules(bound({"t": "8"}, [chk], expected={"plans.0.tokens": 8}, request=request)) == []


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
