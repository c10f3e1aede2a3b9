"""The calibration report: enough configurations over systems and model kinds, positive measured estimates, a
recomputation that gives the same numbers, leave-one-out errors within bounds, the page and its JSON twin agreeing,
and the CLI printing the median and 90th percentile."""
from __future__ import annotations

import copy
import dataclasses
import re

import pytest

from api.cli import main as cli_main
from api.site.calibration import scatter
from api.urls import urls
from knowledge import calibration
from knowledge.calibration import GRID, CalibrationGrid, calibration_report, clear_cache


@pytest.fixture(scope="module")
def report(lookup):
    clear_cache()
    return calibration_report(lookup)


def test_grid_spans_systems_kinds_batches_contexts_and_tp(report):
    rows = report["configurations"]
    assert len(rows) >= 60 and report["counts"]["evaluated"] == len(rows)
    assert len({r["system"] for r in rows}) >= 3
    assert {r["kind"] for r in rows} == {"dense", "moe"}
    decode = [r for r in rows if r["phase"] == "decode"]
    assert {r["batch"] for r in decode} == {1, 8, 64, 256}
    assert {r["context_tokens"] for r in decode} == {1024, 8192, 32768}
    assert {r["tp"] for r in decode} == {1, 2, 4, 8}
    assert any(r["phase"] == "prefill" for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)


def test_every_estimate_is_positive_and_above_its_bound(report):
    for r in report["configurations"]:
        assert r["measured_s"] > 0 and r["bound_s"] > 0, r["id"]
        assert r["total_s"] == pytest.approx(r["measured_s"] + r["allreduce_s"])
        assert r["ratio"] == pytest.approx(r["measured_s"] / r["bound_s"])
        assert (r["allreduce_s"] > 0) == (r["tp"] > 1), r["id"]
        assert 0.0 <= r["extrapolated_fraction"] <= 1.0
        assert r["framework"] == "vllm" and r["version"]
    # measured kernels never beat the sum of their peak-rate bounds on this grid
    assert report["summary"]["ratio"]["overall"]["min"] > 1.0


def test_skipped_configurations_do_not_fit_and_evaluated_ones_do(report):
    assert report["skipped"], "the grid holds configurations that exceed memory (235B at TP 1)"
    for r in report["skipped"]:
        assert r["need_bytes"] > r["usable_bytes"] and "GiB" in r["reason"], r
    for r in report["configurations"]:
        assert r["need_bytes"] <= r["usable_bytes"]
    big = [r for r in report["skipped"] if r["model"] == "qwen3-235b-a22b" and r["tp"] == 1]
    per_system = len(GRID.batches) * len(GRID.contexts) + len(GRID.prefill_tokens)
    assert len(big) == len(report["counts"]["systems"]) * per_system


def test_summary_groups_match_the_rows(report):
    s = report["summary"]["ratio"]
    rows = report["configurations"]
    assert s["overall"]["n"] == len(rows)
    assert sum(st["n"] for st in s["by_system"].values()) == len(rows)
    assert set(s["by_kind"]) == {"dense", "moe"}
    for st in [s["overall"], *s["by_system"].values(), *s["by_kind"].values()]:
        assert st["min"] <= st["median"] <= st["p90"] <= st["max"]
    check = report["summary"]["roofline_cross_check"]
    assert check["compared"] > 0
    # the roofline overlaps the whole step: never above the per-op sum of bounds (small float slack)
    assert check["bound_over_roofline"]["min"] >= 0.999


def test_report_is_recomputed_not_stored(lookup, report, monkeypatch):
    calls = []
    real = calibration._compute
    monkeypatch.setattr(calibration, "_compute", lambda *a: calls.append(1) or real(*a))
    clear_cache()
    again = calibration_report(lookup)
    assert calls == [1] and again == report
    calibration_report(lookup)
    assert calls == [1], "the second call is served from the cache"


def test_changing_a_fact_changes_the_bound(lookup):
    """A small grid on H100 with its memory bandwidth doubled: a new cache key and smaller bounds."""
    small = dataclasses.replace(GRID, models=(("qwen3-8b", "dense"),), systems=(("h100-sxm", "h100_sxm"),),
                                batches=(8,), contexts=(8192,), tps=(1,), prefill_tokens=(), loo_sample=20)

    def faster(kind: str, ident: str):
        rec = lookup(kind, ident)
        if (kind, ident) == ("hardware", "h100-sxm"):
            rec = copy.deepcopy(rec)
            rec["memory_bandwidth_bytes_per_s"]["value"] *= 2
        return rec

    base, fast = calibration_report(lookup, small), calibration_report(faster, small)
    assert isinstance(small, CalibrationGrid) and base["cache_key"] != fast["cache_key"]
    assert fast["configurations"][0]["bound_s"] < 0.75 * base["configurations"][0]["bound_s"]


def test_leave_one_out_errors(report):
    loo = report["leave_one_out"]
    assert loo["per_system"] and loo["sample"] == GRID.loo_sample and loo["seed"] == GRID.loo_seed
    for system, tables in loo["per_system"].items():
        assert set(tables) == set(GRID.loo_tables), system
        for table, st in tables.items():
            assert st["points"] > 0 and st["errors"] > 0, (system, table)
            assert 0 <= st["median"] <= st["p90"] < 0.35, (system, table, st)
    assert loo["overall"]["points"] > 0 and loo["overall"]["p90"] < 0.35


def _data_values(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-path="([^"]+)" data-value="([^"]*)"', html))


def _at(doc, path: str):
    """The value at a dotted path whose keys may themselves contain dots (llama-3.1-70b): longest key first."""
    node = doc
    rest = path.split(".")
    while rest:
        for n in range(len(rest), 0, -1):
            key = ".".join(rest[:n])
            if isinstance(node, dict) and key in node:
                node, rest = node[key], rest[n:]
                break
        else:
            raise KeyError(path)
    return node


def test_page_and_json_twin_agree(client):
    page = client.get(urls.calibration())
    assert page.status_code == 200
    twin = re.search(r'class="twin-link">([^<]+)<', page.text).group(1)
    assert twin == "/api/v1/calibration"
    answer = client.get(twin)
    assert answer.status_code == 200
    data = answer.json()
    values = _data_values(page.text)
    assert "summary.ratio.overall.median" in values and "leave_one_out.overall.p90" in values
    assert any(k.startswith("summary.ratio.by_kind.") for k in values)
    for path, shown in values.items():
        want = _at(data, path)
        assert (shown == "" and want is None) or float(shown) == pytest.approx(want, rel=1e-12), path
    assert page.text.count('<circle class="dot') == data["counts"]["evaluated"]
    assert page.text.count('<tr data-id="') == data["counts"]["evaluated"]
    assert "AIConfigurator" in page.text and "leave-one-out" in page.text.lower()


def test_scatter_lines_span_the_square():
    rows = [{"id": "a", "system": "x", "bound_s": 1e-4, "measured_s": 2e-4, "ratio": 2.0},
            {"id": "b", "system": "y", "bound_s": 1e-2, "measured_s": 3e-2, "ratio": 3.0}]
    g = scatter(rows, 2.0)
    ref, med = g["lines"]
    assert (ref["x1"], ref["y1"]) == (g["left"], g["bottom"]) and (ref["x2"], ref["y2"]) == (g["right"], g["top"])
    assert med["x1"] == g["left"] and med["y2"] == g["top"] and med["x2"] < g["right"]
    assert [t["label"] for t in g["ticks"]][:2] == ["100 µs", "1 ms"] and len(g["dots"]) == 2
    assert scatter([], 1.0) is None


def test_cli_prints_median_and_p90(capsys):
    assert cli_main(["calibration"]) == 0
    text = capsys.readouterr().out
    assert "median" in text and "p90" in text and "Leave-one-out" in text
    assert re.search(r"^all tables\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+", text, re.MULTILINE)
