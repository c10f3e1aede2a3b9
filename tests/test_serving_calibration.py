"""Calibration of serving-estimate (knowledge/serving_calibration.py, issue #25 item 5): the fit is the median over
sources of each source's median log ratio, in a group with at least MIN_POINTS points; leaving each source out never lets a point's own
source into the factor it is estimated with (perturbing one source's measurements moves none of its own
estimates); the calculator applies a factor only with calibration 'auto', scales every step time by it, leaves the
floor alone and says what the factor rests on. Synthetic rows, and one serving-estimate deployment: cheap."""
from __future__ import annotations

import copy
import math

import pytest

from calculators.families.serving._benchmark_points import CALIBRATION, calibration_key
from calculators.framework import runner
from knowledge import serving_calibration as SC


def row(ident, source, hardware="mi300x", framework="vllm", tpot=(0.010, 0.030), tok=(300.0, 100.0),
        basis="bound", load="concurrency"):
    """A compared validation row: (predicted, measured) TPOT and tokens/s per device."""
    pred = {"tpot_s": tpot[0], "ttft_s": 0.1, "output_tokens_per_s_per_device": tok[0]}
    meas = {"tpot_s": tpot[1], "ttft_s": 0.2, "output_tokens_per_s_per_device": tok[1]}
    return {"id": ident, "source": source, "hardware": hardware, "framework": framework, "compared": True,
            "basis": basis, "load": load, "predicted": pred, "measured": meas}


def test_a_factor_is_the_median_over_sources_of_each_sources_median_ratio():
    rows = [row("a", "s1", tpot=(0.01, 0.02), tok=(200, 100)),
            row("b", "s2", tpot=(0.01, 0.04), tok=(400, 100)), row("c", "s2", tpot=(0.01, 0.04), tok=(400, 100)),
            row("e", "s2", tpot=(0.01, 0.04), tok=(400, 100)),
            row("f", "s3", tpot=(0.01, 0.03), tok=(300, 100)), row("d", "s4", hardware="l4")]
    f = SC.fit(rows)
    k = f[calibration_key("mi300x", "vllm", "bound")]
    # the points' median would be s2's 4.0 (three of five points); the sources vote 2, 4 and 3
    assert k["factor"] == pytest.approx(3.0) and k["points"] == 5 and k["sources"] == ["s1", "s2", "s3"]
    assert f[calibration_key("mi300x", "*", "bound")]["factor"] == pytest.approx(3.0)
    assert not any(key.startswith("l4/") for key in f), "one point is no group"
    # TPOT and tokens/s each ask for log k; a point asks for their mean
    assert SC.residual(row("e", "s", tpot=(0.01, 0.02), tok=(800, 100))) == pytest.approx(math.log(4.0))


def test_leaving_a_source_out_never_uses_its_own_measurements():
    rows = [row("a1", "A", tpot=(0.01, 0.02)), row("a2", "A", tpot=(0.01, 0.025)),
            row("b1", "B", tpot=(0.01, 0.04), tok=(400, 100)), row("b2", "B", tpot=(0.01, 0.05), tok=(500, 100)),
            row("c1", "C", tpot=(0.01, 0.03))]
    before = SC.leave_one_source_out(rows)
    moved = copy.deepcopy(rows)
    for r in moved:
        if r["source"] == "A":           # A's measurements ten times slower
            r["measured"]["tpot_s"] *= 10
            r["measured"]["output_tokens_per_s_per_device"] /= 10
    after = SC.leave_one_source_out(moved)
    for ident in ("a1", "a2"):
        assert after[ident]["predicted"] == before[ident]["predicted"]
        assert after[ident]["factor"] == before[ident]["factor"] is not None
        assert "A" not in after[ident]["fitted_on"]["sources"]
    assert after["b1"]["factor"] != before["b1"]["factor"], "B's fold does include A"
    # B's points are estimated with the factor of A and C only: the median of A's and C's own medians
    a = sorted(SC.residual(r) for r in rows if r["source"] == "A")
    c = [SC.residual(r) for r in rows if r["source"] == "C"]
    assert before["b1"]["factor"] == pytest.approx(math.exp(((a[0] + a[1]) / 2 + c[0]) / 2))
    assert before["b1"]["predicted"]["tpot_s"] == pytest.approx(0.01 * before["b1"]["factor"])


def test_a_factor_fitted_on_one_source_alone_is_not_kept():
    rows = [row("a1", "A", tpot=(0.01, 0.02)), row("a2", "A", tpot=(0.01, 0.02)), row("a3", "A", tpot=(0.01, 0.02))]
    assert SC.fit(rows) == {}
    assert SC.fit(rows + [row("b1", "B", tpot=(0.01, 0.02))])[calibration_key("mi300x", "vllm", "bound")]["points"] == 4


def test_hardware_that_only_its_own_source_measured_gets_no_factor_and_says_so():
    rows = [row("a1", "A", hardware="mi325x"), row("a2", "A", hardware="mi325x"), row("b1", "B"), row("b2", "B")]
    loso = SC.leave_one_source_out(rows)
    assert loso["a1"]["factor"] is None and loso["a1"]["predicted"] == rows[0]["predicted"]
    assert "mi325x" in loso["a1"]["note"] and "no source but A" in loso["a1"]["note"]
    assert loso["b1"]["factor"] is None, "mi300x is measured by B alone"
    # measured-kernel estimates get factors fitted, not applied
    meas = [row("m1", "A", basis="measured (x)"), row("m2", "B", basis="measured (x)"),
            row("m3", "C", basis="measured (x)")]
    assert SC.leave_one_source_out(meas)["m1"]["factor"] is None
    assert SC.leave_one_source_out(meas, bases=("bound", "measured"))["m1"]["factor"] == pytest.approx(3.0)


def test_a_device_only_its_own_source_measured_takes_its_architectures_factor_from_the_other_sources():
    fam = "arch:CDNA 3"
    rows = [row("a1", "A", hardware="mi325x", basis="proxy (x)", tpot=(0.01, 0.025)),
            row("a2", "A", hardware="mi325x", basis="proxy (x)", tpot=(0.01, 0.025)),
            row("b1", "B", basis="proxy (x)", tpot=(0.01, 0.02), tok=(200, 100)),
            row("b2", "B", basis="proxy (x)", tpot=(0.01, 0.02), tok=(200, 100)),
            row("c1", "C", basis="proxy (x)", tpot=(0.01, 0.02), tok=(200, 100))]
    for r in rows:
        r["hardware_family"] = fam
    f = SC.fit(rows)
    assert f[calibration_key(fam, "vllm", "proxy")]["points"] == 5
    # MI325X is measured by A alone: no factor of its own, its architecture's instead
    assert calibration_key("mi325x", "vllm", "proxy") not in f
    assert SC.choose(f, "mi325x", "vllm", "proxy", fam) is f[calibration_key(fam, "vllm", "proxy")]
    loso = SC.leave_one_source_out(rows)
    # A's MI325X points: no MI325X factor without A, so the CDNA 3 factor of B's and C's MI300X points (× 2)
    assert loso["a1"]["factor"] == pytest.approx(2.0) and loso["a1"]["group"] == "CDNA 3 devices × framework"
    assert loso["a1"]["fitted_on"]["sources"] == ["B", "C"]
    # B's fold has MI300X points of C alone and MI325X points of A: one source per device, but two for CDNA 3
    assert loso["b1"]["group"] == "CDNA 3 devices × framework"
    # without an architecture there is no such fallback
    bare = [{k: v for k, v in r.items() if k != "hardware_family"} for r in rows]
    assert SC.leave_one_source_out(bare)["a1"]["factor"] is None


def test_proxy_step_times_are_a_basis_of_their_own_and_are_applied():
    assert SC.basis_kind("proxy (sglang 0.5 kernels measured on h200_sxm, × 0.9)") == "proxy"
    assert SC.basis_kind("bound") == "bound" and SC.basis_kind("measured (x)") == "measured"
    assert "proxy" in SC.APPLIED and "measured" not in SC.APPLIED


def test_targets_say_whether_each_is_met():
    stat = lambda med, within: {"n": 10, "median_abs_error": med, "within_25_percent": within}  # noqa: E731
    good = {"tpot_s": stat(0.1, 0.8), "output_tokens_per_s_per_device": stat(0.15, 0.7),
            "bound_below_measured": {"n": 10, "holds": 10}}
    bad = {"tpot_s": stat(0.2, 0.5), "output_tokens_per_s_per_device": stat(0.3, 0.4),
           "bound_below_measured": {"n": 10, "holds": 9}}
    t = {x["id"]: x for x in SC.targets(bad, good)}
    assert [t[i]["met_uncalibrated"] for i in ("tpot_median", "tpot_within", "tokens_median", "bound")] == [False] * 4
    assert all(t[i]["met_leave_one_source_out"] for i in ("tpot_median", "tpot_within", "tokens_median"))


BODY = {"model": "llama-3.1-70b", "hardware": "mi300x", "tp": 8, "input_tokens": 1024, "output_tokens": 256,
        "concurrency": 16, "framework": "vllm"}


def test_the_estimate_applies_a_factor_only_with_auto_and_says_what_it_rests_on(lookup):
    factor = {"id": calibration_key("mi300x", "*", "proxy"), "factor": 2.5, "points": 7, "sources": ["s1", "s2"],
              "leave_one_source_out": {"tpot_s": {"n": 7, "median_abs_error": 0.12}}}

    def with_factor(kind, ident):
        if kind == CALIBRATION:
            if ident == factor["id"]:
                return factor
            raise KeyError(ident)
        return lookup(kind, ident)

    plain = runner.compute("serving-estimate", BODY, lookup)[2].outputs          # the catalog holds no factors
    assert plain["calibration"]["applied"] is False and plain["calibration"]["factor"] is None
    cal = runner.compute("serving-estimate", BODY, with_factor)[2]
    o = cal.outputs
    assert o["calibration"] == {"requested": "auto", "applied": True, "factor": 2.5, "group": "this hardware, any framework",
                                "points": 7, "sources": ["s1", "s2"],
                                "leave_one_source_out": factor["leave_one_source_out"]}
    for m in ("tpot_s", "ttft_s", "e2e_s"):      # a closed loop: every time × k, throughput ÷ k, the floor unmoved
        assert o[m]["mean"] == pytest.approx(2.5 * plain[m]["mean"], rel=1e-9), m
    assert o["output_tokens_per_s_per_device"] == pytest.approx(plain["output_tokens_per_s_per_device"] / 2.5, rel=1e-9)
    assert o["bound_tpot_s"] == pytest.approx(plain["bound_tpot_s"], rel=1e-9)
    assert any("× 2.5" in a and "s1, s2" in a and "12 %" in a for a in cal.assumptions)
    off = runner.compute("serving-estimate", {**BODY, "calibration": "none"}, with_factor)[2].outputs
    assert off["calibration"]["applied"] is False and off["tpot_s"] == plain["tpot_s"]


def test_an_unknown_calibration_option_is_a_422_naming_the_field(client):
    r = client.post("/api/v1/calculators/serving-estimate", json={**BODY, "calibration": "always"})
    assert r.status_code == 422 and [e["field"] for e in r.json()["errors"]] == ["calibration"]
