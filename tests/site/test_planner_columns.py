"""The planner page shows what the search chose beyond TP/PP/EP/batch (issue #28): whether a plan runs DP attention
and how many tokens a sequence gains per decode step (MTP), for the best plan and for every candidate, with the
numbers the JSON answer holds. A column only a search option fills is left out, and the note says so, when every
candidate has its usual value."""
from __future__ import annotations

import re

import pytest

from api.site import planner
from api.urls import urls
from tests.site.test_planner_page import parse, pareto_svg

NAME = "deployment-plan"
#: a MoE model with MTP modules on one device type: DP-attention and plain-TP splits, 1 + accepted drafts per step
R1 = {"model": "deepseek-r1", "hardware": ["h200-sxm"], "tp": [8], "batch": [8, 64], "arrival_rate_per_s": 2,
      "input_tokens": 2000, "output_tokens": 200, "ttft_s": 5, "tpot_s": 0.1, "mtp": True}
DENSE = {"model": "qwen3-8b", "hardware": ["h100-sxm"], "tp": [1, 2], "batch": [8, 32], "arrival_rate_per_s": 2,
         "input_tokens": 1000, "output_tokens": 200, "ttft_s": 1, "tpot_s": 0.02}


@pytest.fixture(scope="module")
def r1(client):
    r = client.post(urls.api_item("calculator", NAME), json=R1)
    assert r.status_code == 200, r.text[:300]
    html = client.get(urls.calculator(NAME, R1))
    assert html.status_code == 200, html.text[:300]
    return r.json()["outputs"], html.text


def test_every_candidate_row_shows_dp_attention_and_tokens_per_step(r1):
    out, html = r1
    cands = out["candidates"]
    assert {c["dp_attention"] for c in cands} == {True, False}          # both kinds of split are on the page
    assert all(c["tokens_per_step"] > 1 for c in cands)
    p = parse(html)
    assert {"dp_attention", "tokens_per_step"} <= set(p.heads)
    assert len(p.rows) == len(cands)
    for row in p.rows:
        i, c = row["index"], cands[row["index"]]
        assert p.values[f"candidates.{i}.dp_attention"] == ("true" if c["dp_attention"] else "false")
        assert float(p.values[f"candidates.{i}.tokens_per_step"]) == c["tokens_per_step"]
    for flag in ("yes", "no"):
        assert re.search(rf'data-path="candidates\.\d+\.dp_attention" data-value="[a-z]+">{flag}</td>', html)
    assert "left out" not in html


def test_the_best_plan_shows_them_and_its_row_is_the_best_one(r1):
    out, html = r1
    best = out["best"]
    assert best is not None
    p = parse(html)
    assert p.values["best.dp_attention"] == ("true" if best["dp_attention"] else "false")
    assert float(p.values["best.tokens_per_step"]) == best["tokens_per_step"]
    # a plain-TP split and a DP-attention split can share hardware, mode, tp, pp, ep and batch: the key tells them apart
    keys = [planner.plan_key(c) for c in out["candidates"]]
    assert len(set(keys)) == len(keys)
    (row,) = [r for r in p.rows if "best" in r["cls"]]
    assert out["candidates"][row["index"]] == best
    label = " ".join(re.findall(r"<tspan[^>]*>([^<]*)</tspan>", pareto_svg(html)))
    assert f"{best['tokens_per_step']:.3g} tok/step" in label
    assert ("DP attention" in label) == best["dp_attention"]


def test_a_sort_by_tokens_per_step_is_offered_and_works(client, r1):
    out, _ = r1
    html = client.get(urls.calculator_view(NAME, R1, sort="tokens_per_step", desc=1)).text
    p = parse(html)
    assert p.sorted_by == ["tokens_per_step"]
    shown = [out["candidates"][r["index"]]["tokens_per_step"] for r in p.rows]
    assert shown == sorted(shown, reverse=True)


def test_a_dense_plan_leaves_the_columns_out_and_says_why(client):
    html = client.get(urls.calculator(NAME, DENSE)).text
    p = parse(html)
    assert p.rows and not {"dp_attention", "tokens_per_step"} & set(p.heads)
    assert "No candidate uses DP attention; every candidate gains 1 token per decode step (no MTP): those columns are " \
           "left out." in html
    assert p.values["best.dp_attention"] == "false" and float(p.values["best.tokens_per_step"]) == 1.0
