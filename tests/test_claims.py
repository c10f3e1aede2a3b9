"""Audited claims of the compendium page and the glossary of methods it names.

Every claim with a calculator is recomputed (its stored `expected` outputs, relative 1e-9, and the
same for each of its `alternatives`); every claim states the page's numbers parsed (`page_numbers`),
and the verdict follows from ours (recomputed now) / the page's: holds within tolerance, holds-if within
tolerance under a stated condition, off outside it with off_by the computed factor. Glossary entries cite papers that exist in the source files.
"""
from __future__ import annotations

import math
import re

import pytest

from calculators.framework import registry
from calculators.framework import runner
from knowledge.derivations import recompute, resolve_path
from knowledge.records.book import Claim, compare_page_number, factor
from knowledge.loader import default_catalog

CAT = default_catalog()
CLAIMS = [c for c in CAT.records.get("claim", []) if isinstance(c, dict)]
GLOSSARY = [g for g in CAT.records.get("glossary", []) if isinstance(g, dict)]
SOURCES = CAT.by_id("source")
PAGE = "compendium-scaling-deployment"
VERDICTS = {"holds", "holds-if", "off"}
GLOSSARY_KINDS = {"kv-eviction", "speculative-decoding", "caching", "batching", "parallelism"}
SLUG = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
BOUND = [c for c in CLAIMS if c.get("calculator")]
ALTERNATIVES = [(c["id"], i, a) for c in CLAIMS for i, a in enumerate(c.get("alternatives") or [])]


def _by_id(ident: str) -> dict:
    found = [c for c in CLAIMS if c["id"] == ident]
    assert found, f"claim {ident} is missing"
    return found[0]


def _failures(checks) -> str:
    return "; ".join(f"{c.path}: expected {c.expected!r}, got {c.got!r} {c.message}" for c in checks if not c.ok)


# --------------------------------------------------------------------------- recomputation

@pytest.mark.parametrize("claim", BOUND, ids=[c["id"] for c in BOUND])
def test_claim_recomputes(claim, lookup):
    assert claim["calculator"] in registry.REGISTRY, f"unknown calculator {claim['calculator']}"
    assert isinstance(claim.get("request"), dict), "a bound claim needs a request body"
    assert claim.get("expected"), "a bound claim needs expected outputs"
    checks = recompute(claim, lookup)
    assert all(c.ok for c in checks), _failures(checks)


@pytest.mark.parametrize("cid,index,alt", ALTERNATIVES, ids=[f"{c}/{i}" for c, i, _ in ALTERNATIVES])
def test_alternative_recomputes(cid, index, alt, lookup):
    assert alt.get("label"), "an alternative needs a label"
    assert alt["calculator"] in registry.REGISTRY
    assert alt.get("expected")
    checks = recompute(alt, lookup)
    assert all(c.ok for c in checks), _failures(checks)


# --------------------------------------------------------------------------- record shape

def test_enough_claims_with_verdicts():
    assert len(CLAIMS) >= 14
    assert sum(1 for c in CLAIMS if c.get("verdict")) >= 12
    assert len(BOUND) >= 12


def test_claim_ids_unique_slugs():
    ids = [c.get("id") for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert all(isinstance(i, str) and SLUG.match(i) for i in ids), ids


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.get("id", "?") for c in CLAIMS])
def test_claim_fields(claim):
    for field in ("topic", "claim_en", "page_value", "source", "locator", "recomputed", "verdict", "explanation"):
        assert claim.get(field) not in (None, "", []), f"{field} is missing"
    assert claim["source"] == PAGE and claim["source"] in SOURCES
    assert claim["verdict"] in VERDICTS, claim["verdict"]
    assert isinstance(claim.get("assumptions"), list) and claim["assumptions"], "assumptions must be a non-empty list"
    if claim["verdict"] == "off":
        off_by = claim.get("off_by")
        assert isinstance(off_by, (int, float)) and not isinstance(off_by, bool) and math.isfinite(off_by), \
            "an 'off' verdict needs a numeric off_by"
        assert off_by > 1, "off_by is a factor > 1 (the larger over the smaller value)"
    else:
        assert "off_by" not in claim, "only an 'off' verdict carries off_by"


def test_required_claims_present():
    ids = {c["id"] for c in CLAIMS}
    for ident in ("weights-70b-fp16-140gb", "prefix-cache-system-prompt-200mb", "tp-nvlink-overhead-per-layer",
                  "tp-pcie-overhead-per-layer", "h100-100-concurrent-users-70b", "int4-vs-fp16-cost-2-4x",
                  "utilisation-30-vs-90-3x-cost", "speculative-rule-of-thumb", "fleet-10m-users-100k-gpus",
                  "serving-cost-example-70b-fp16-h100", "serving-cost-example-70b-int8-h100",
                  "serving-cost-example-70b-int4-a100", "serving-cost-example-8b-int4-a10g"):
        assert ident in ids, ident


def test_serving_examples_compare_page_with_bandwidth_method():
    examples = [c for c in CLAIMS if c["id"].startswith("serving-cost-example-")]
    assert len(examples) == 4
    for c in examples:
        assert c["request"].get("method") == "page"
        assert "cost_per_mtok_usd" in c["expected"] and "methods.bandwidth.cost_per_mtok_usd" in c["expected"]


# --------------------------------------------------------------------------- verdicts tied to numbers

def _fresh_output(claim: dict, path: str, lookup) -> float:
    """Our number for a page-number path, from the calculator's outputs recomputed now (not the stored expected)."""
    request, calculator = claim["request"], claim["calculator"]
    if path.startswith("alternatives."):
        _, index, path = path.split(".", 2)
        alt = claim["alternatives"][int(index)]
        request, calculator = alt["request"], alt["calculator"]
        stored = alt["expected"]
    else:
        stored = claim["expected"]
    head = path if path in stored else path.rpartition(".")[0]
    assert head in stored, f"{path}: a page number compares with a stored expected output"
    _, _, result = runner.compute(calculator, request, lookup)
    value = resolve_path(result.outputs, path)
    assert isinstance(value, (int, float)) and not isinstance(value, bool), (path, value)
    return float(value)


def _fresh_numbers(claim: dict, lookup) -> list[dict]:
    out = []
    for n in claim["page_numbers"]:
        ours = _fresh_output(claim, n["path"], lookup)
        if n.get("per"):
            ours /= _fresh_output(claim, n["per"], lookup)
        ratio, within = compare_page_number(n["value"], ours, n.get("relation", "="), n.get("tolerance", 0.05))
        out.append({**n, "ours": ours, "ratio": ratio, "within": within})
    return out


@pytest.mark.parametrize("claim", CLAIMS, ids=[c["id"] for c in CLAIMS])
def test_page_numbers_are_parsed_and_tied_to_an_output(claim):
    numbers = claim.get("page_numbers")
    assert isinstance(numbers, list) and numbers, "every claim states the page's numbers (page_numbers)"
    for n in numbers:
        assert n.get("text") and n.get("unit") and n.get("path"), n
        value = n["value"]
        if isinstance(value, list):
            assert len(value) == 2 and 0 < value[0] < value[1], value
        else:
            assert isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0, value
        assert 0 < n.get("tolerance", 0.05) < 1
        assert n.get("relation", "=") in ("=", ">=", "<=")


@pytest.mark.parametrize("claim", CLAIMS, ids=[c["id"] for c in CLAIMS])
def test_verdict_follows_from_the_page_numbers(claim, lookup):
    """ours (recomputed now) / the page's number decides the verdict: holds and holds-if need every ratio within
    its tolerance (holds-if: under its stated condition); off needs one outside, off_by = its factor (5 %)."""
    numbers = _fresh_numbers(claim, lookup)
    assert Claim.verdict_problems(claim["verdict"], claim.get("off_by"), numbers) == []
    if claim["verdict"] == "off":
        worst = max(factor(n["ratio"]) for n in numbers if not n["within"])
        assert claim["off_by"] == pytest.approx(worst, rel=0.05)
    else:
        assert all(n["within"] for n in numbers)
    if claim["verdict"] == "holds-if":
        assert all(len(n.get("condition", "").strip()) > 10 for n in numbers)


@pytest.mark.parametrize("claim", CLAIMS, ids=[c["id"] for c in CLAIMS])
def test_stored_comparison_matches_the_recomputed_one(claim, lookup):
    """The comparison the API and the page show (from stored outputs) equals the one recomputed now."""
    shown = Claim.compared(claim)
    fresh = _fresh_numbers(claim, lookup)
    for s, f in zip(shown, fresh, strict=True):
        assert s["ours"] == pytest.approx(f["ours"], rel=1e-9)
        assert s["ratio"] == pytest.approx(f["ratio"], rel=1e-9)
        assert s["within"] == f["within"]


def test_verdict_rules_reject_inconsistent_verdicts():
    inside = [{"text": "140 GB", "path": "x", "ratio": 1.02, "within": True, "tolerance": 0.05}]
    outside = [{"text": "200 MB", "path": "x", "ratio": 3.28, "within": False, "tolerance": 0.05}]
    assert Claim.verdict_problems("holds", None, inside) == []
    assert Claim.verdict_problems("holds", None, outside)
    assert Claim.verdict_problems("holds-if", None, inside)            # no condition stated
    assert Claim.verdict_problems("holds-if", None, [{**inside[0], "condition": "INT4 weights, 1K contexts"}]) == []
    assert Claim.verdict_problems("off", 3.3, outside) == []
    assert Claim.verdict_problems("off", 5.0, outside)                 # off_by not the computed factor
    assert Claim.verdict_problems("off", 3.3, inside)                  # nothing is off
    assert compare_page_number([2, 3], 2.8) == (1.0, True)
    assert compare_page_number([2, 3], 1.5)[0] == pytest.approx(0.75)
    assert compare_page_number(100, 125, ">=") == (1.25, True)
    assert compare_page_number(100, 125, "<=") == (1.25, False)


def test_no_claim_calls_a_gqa_model_mha():
    """Llama 2 70B and Llama 3.1 70B have 8 KV heads (GQA); no claim may call a 70B Llama 'without GQA'."""
    for c in CLAIMS:
        texts = [c.get("claim_en", ""), c.get("recomputed", ""), c.get("explanation", ""), *c.get("assumptions", []),
                 *(a.get("label", "") for a in c.get("alternatives") or [])]
        for t in texts:
            assert not re.search(r"70B[^.;]*without GQA|without GQA[^.;]*70B", t), (c["id"], t)


def test_prefix_cache_page_figure_matches_neither_gqa_nor_mha():
    c = _by_id("prefix-cache-system-prompt-200mb")
    gqa = c["expected"]["prefix_kv_bytes"]
    mha = c["alternatives"][0]["expected"]["prefix_kv_bytes"]
    assert gqa == 2000 * 80 * 2 * 8 * 128 * 2 and mha == 2000 * 80 * 2 * 64 * 128 * 2
    assert gqa / 200e6 > 3 and mha / 200e6 > 25


def test_speculative_rule_close_for_short_drafts_only():
    e = _by_id("speculative-rule-of-thumb")["expected"]
    k = _by_id("speculative-rule-of-thumb")["request"]["draft_tokens"]
    for kk, rule, exact in zip(k, e["page_rule_speedup"], e["speedup"]):
        if kk <= 4:
            assert abs(rule / exact - 1) < 0.15
        else:
            assert rule / exact > 1.4


def test_int4_saves_two_to_four_times():
    c = _by_id("int4-vs-fp16-cost-2-4x")
    int4 = c["expected"]["cost_per_mtok_usd"]
    fp16 = c["alternatives"][0]["expected"]["cost_per_mtok_usd"]
    ratios = [a / b for a, b in zip(fp16, int4)]
    assert all(2 <= r <= 4 for r in ratios), ratios
    assert ratios == sorted(ratios, reverse=True), "the gain shrinks as the batch (KV traffic) grows"


def test_one_h100_holds_about_100_users_only_with_int4_and_short_context():
    c = _by_id("h100-100-concurrent-users-70b")
    assert c["expected"]["max_requests"][0] >= 100 > c["expected"]["max_requests"][1]
    assert c["alternatives"][0]["expected"]["fits"] == [False]


# --------------------------------------------------------------------------- glossary

REQUIRED_TERMS = {
    "h2o": "kv-eviction", "scissorhands": "kv-eviction", "streamingllm": "kv-eviction",
    "medusa": "speculative-decoding", "eagle": "speculative-decoding", "self-speculative-decoding": "speculative-decoding",
    "tree-speculative-decoding": "speculative-decoding", "lookahead-decoding": "speculative-decoding",
    "speculative-decoding": "speculative-decoding", "prefix-caching": "caching", "radix-attention": "caching",
    "paged-attention": "caching", "continuous-batching": "batching", "tensor-parallelism": "parallelism",
    "pipeline-parallelism": "parallelism",
}
#: arXiv ids of the papers that introduced the methods (checked by hand against arXiv)
ARXIV = {
    "h2o": "2306.14048", "scissorhands": "2305.17118", "streamingllm": "2309.17453", "medusa": "2401.10774",
    "eagle": "2401.15077", "eagle-2": "2406.16858", "eagle-3": "2503.01840", "self-speculative-decoding": "2309.08168",
    "tree-speculative-decoding": "2305.09781", "lookahead-decoding": "2402.02057",
    "speculative-decoding": "2211.17192", "paged-attention": "2309.06180", "radix-attention": "2312.07104",
    "tensor-parallelism": "1909.08053", "pipeline-parallelism": "1811.06965", "sequence-parallelism": "2310.01889",
}


def test_glossary_required_terms():
    kinds = {g["id"]: g.get("kind") for g in GLOSSARY}
    for ident, kind in REQUIRED_TERMS.items():
        assert kinds.get(ident) == kind, f"{ident}: expected kind {kind}, got {kinds.get(ident)}"


@pytest.mark.parametrize("entry", GLOSSARY, ids=[g.get("id", "?") for g in GLOSSARY])
def test_glossary_entry(entry):
    assert SLUG.match(entry["id"])
    for field in ("term", "kind", "definition", "paper", "seen_in"):
        assert entry.get(field), f"{field} is missing"
    assert entry["kind"] in GLOSSARY_KINDS
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", entry["definition"].strip()) if s]
    assert 2 <= len(sentences) <= 5, f"definition has {len(sentences)} sentences"
    assert isinstance(entry.get("aliases", []), list)
    for pid in [entry["paper"], *(entry.get("also_papers") or [])]:
        assert pid in SOURCES, f"unknown paper source {pid}"
        assert SOURCES[pid].get("kind") == "paper"
    assert entry["seen_in"] in SOURCES
    for name in entry.get("related_calculators") or []:
        assert name in registry.REGISTRY, f"unknown calculator {name}"


def test_glossary_ids_unique():
    ids = [g["id"] for g in GLOSSARY]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("ident,arxiv_id", sorted(ARXIV.items()))
def test_glossary_paper_arxiv_ids(ident, arxiv_id):
    entry = next(g for g in GLOSSARY if g["id"] == ident)
    assert SOURCES[entry["paper"]]["url"] == f"https://arxiv.org/abs/{arxiv_id}"


def test_compendium_paper_sources_are_well_formed():
    papers = [s for s in CAT.records["source"] if CAT.file_of(s) == "sources-compendium.yaml"]
    assert len(papers) >= 15
    for s in papers:
        assert s["kind"] == "paper" and s.get("publisher") and s.get("date"), s["id"]
        assert re.match(r"^https://(arxiv\.org/abs/\d{4}\.\d{4,5}|www\.usenix\.org/conference/)", s["url"]), s["url"]


# --------------------------------------------------------------------------- served by the API

def test_api_lists_claims_and_glossary(client):
    r = client.get("/api/v1/claims", params={"limit": 100})
    assert r.status_code == 200
    body = r.json()
    assert body["total"] == len(CLAIMS)
    one = client.get("/api/v1/claims/prefix-cache-system-prompt-200mb").json()
    assert one["verdict"] == "off" and one["off_by"] == 3.3
    number = one["page_numbers"][0]
    assert number["text"] == "每次请求节省约200 MB" and number["value"] == 200e6 and number["unit"] == "B"
    assert number["ours"] == 655360000 and number["ratio"] == pytest.approx(3.2768) and number["within"] is False
    off = client.get("/api/v1/claims", params={"verdict": "off"}).json()
    assert off["total"] == sum(1 for c in CLAIMS if c["verdict"] == "off")
    g = client.get("/api/v1/glossary", params={"kind": "kv-eviction"}).json()
    assert {"h2o", "scissorhands", "streamingllm"} <= {e["id"] for e in g["items"]}


def test_search_finds_glossary_and_claims(client):
    hits = client.get("/api/v1/search", params={"q": "attention sinks", "kind": "glossary"}).json()["items"]
    assert hits and hits[0]["id"] == "streamingllm"
    hits = client.get("/api/v1/search", params={"q": "系统提示 200 MB", "kind": "claim"}).json()["items"]
    assert any(h["id"] == "prefix-cache-system-prompt-200mb" for h in hits)
