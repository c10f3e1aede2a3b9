"""Bilingual search: Chinese and English queries on the same topic find the same things; calculators and
glossary entries are in the index; every case has a Chinese summary, stored, served and shown."""
from __future__ import annotations

import re

import pytest

from calculators.framework.registry import REGISTRY
from knowledge.search import FAMILY_TERMS, has_cjk, stem, tokens

#: the same topic asked in Chinese and in English: a reader's wording, not a copy of a title
PAIRS = [
    ("KV 缓存", "KV cache"),
    ("张量并行", "tensor parallelism"),
    ("推测解码", "speculative decoding"),
    ("混合专家", "mixture of experts"),
    ("量化", "quantization"),
    ("检查点", "checkpoint"),
    ("预填充", "prefill"),
    ("模型路由", "model routing"),
    ("边缘 云端", "edge cloud"),
    ("前缀缓存", "prefix caching"),
    ("流水线并行", "pipeline parallelism"),
    ("集合通信", "collective communication"),
    ("排队", "queueing"),
    ("强化学习", "reinforcement learning"),
    ("能耗", "energy"),
    ("权重卸载", "weight offload"),
    ("训练计算量", "training compute"),
    ("多 LoRA 服务", "multi LoRA serving"),
    ("结构化生成", "structured generation"),
    ("连续批处理", "continuous batching"),
    ("KV 缓存驱逐", "KV cache eviction"),
    ("专家并行", "expert parallelism"),
    ("注意力分块", "attention tiles"),
    ("锁页内存", "pinned memory"),
    ("屋顶线", "roofline"),
]
#: measured misses, kept visible rather than dropped: "graph execution" also ranks the speculative-decoding
#: case (its English summary speaks of executed graph rows); only one of the top three is shared
KNOWN_MISSES = [("图执行", "graph execution")]


def top(client, q: str, n: int = 3, **params) -> list[str]:
    body = client.get("/api/v1/search", params={"q": q, "limit": n, **params}).json()
    return [f"{h['kind']}:{h['id']}" for h in body["items"]]


@pytest.mark.parametrize(("zh", "en"), PAIRS, ids=[en for _, en in PAIRS])
def test_chinese_and_english_queries_agree(client, zh, en):
    """"Agree" means the two top-3 lists share at least two of their three documents, or rank the same document
    first. Either says the Chinese reader is sent to the same place as the English one: a single shared hit at
    rank 3 would not count. Every pair here is a natural query in each language, not a title copied across."""
    a, b = top(client, zh), top(client, en)
    assert len(a) == len(b) == 3, (a, b)
    shared = set(a) & set(b)
    assert len(shared) >= 2 or a[0] == b[0], f"{zh!r} -> {a}; {en!r} -> {b}"


@pytest.mark.parametrize(("zh", "en"), KNOWN_MISSES)
def test_known_misses_still_overlap(client, zh, en):
    assert set(top(client, zh)) & set(top(client, en))


def test_most_pairs_agree_even_by_the_strict_rule(client):
    """Stricter: share two of three documents (same top-1 alone does not count), over all pairs and misses."""
    pairs = PAIRS + KNOWN_MISSES
    strict = sum(len(set(top(client, zh)) & set(top(client, en))) >= 2 for zh, en in pairs)
    assert strict >= 0.8 * len(pairs), strict


@pytest.mark.parametrize(("word", "zh"), [("speculative", "推测解码"), ("prefill", "预填充"), ("checkpoint", "检查点"),
                                        ("quanti[sz]", "量化"), ("routing", "路由"), ("lora", "LoRA 服务"),
                                        ("tensor-parallel", "张量并行"), ("pipeline", "流水线")])
def test_chinese_query_reaches_every_case_the_english_word_does(client, word, zh):
    """The issue: `推测解码` found 5 results where `speculative decoding` found 42, because case summaries were
    English only. Now every case whose English summary uses the word is found by the Chinese term."""
    cases = client.get("/api/v1/cases", params={"limit": 100}).json()["items"]
    english = {c["slug"] for c in cases if re.search(word, c["summary"].lower().replace(" ", "-" if "-" in word else " "))}
    hits = client.get("/api/v1/search", params={"q": zh, "kind": "case", "limit": 100}).json()["items"]
    assert english, word
    assert english <= {h["id"] for h in hits}, sorted(english - {h["id"] for h in hits})


# ---------------------------------------------------------------------------- calculators and glossary

@pytest.mark.parametrize("name", ["kv-cache", "lora", "tp-overhead", "edge-transfer", "moe-placement", "roofline"])
def test_calculator_is_found_by_its_name(client, name):
    hits = client.get("/api/v1/search", params={"q": name}).json()["items"]
    first = hits[0]
    assert (first["kind"], first["id"]) == ("calculator", name), hits[:3]
    assert first["url"] == f"/calculators/{name}" and first["api_url"] == f"/api/v1/calculators/{name}"
    assert first["title"] == REGISTRY[name].title


def test_a_name_shared_by_two_kinds_finds_both(client):
    """`speculative-decoding` names a calculator and a glossary entry: both lead the hits."""
    assert set(top(client, "speculative-decoding", 2)) == {"calculator:speculative-decoding",
                                                           "glossary:speculative-decoding"}


@pytest.mark.parametrize(("q", "name"), [("KV 缓存 容量", "kv-cache"), ("推测解码 接受率", "speculative-decoding"),
                                         ("端云 传输", "edge-transfer"), ("模型路由 成本", "routing-cost"),
                                         ("检查点 保存", "checkpoint"), ("能耗", "energy"), ("多 LoRA 适配器", "lora")])
def test_calculator_is_found_in_chinese(client, q, name):
    hits = top(client, q)
    assert f"calculator:{name}" in hits, hits


def test_every_calculator_has_chinese_words_and_both_links_resolve(client, app):
    index = app.state.search_index
    calcs = {d.id: d for d in index.docs if d.kind == "calculator"}
    assert set(calcs) == set(REGISTRY)
    for name, doc in calcs.items():
        assert has_cjk(doc.text), f"{name}: no Chinese words to match"
        assert has_cjk(doc.snippet_zh)
    assert set(FAMILY_TERMS) >= {c.family for c in REGISTRY.values()}, "a calculator family has no topic words"
    assert client.get("/api/v1/calculators/kv-cache").status_code == 200
    assert 'href="/calculators/kv-cache"' in client.get("/calculators").text   # the site links the same page


def test_glossary_terms_are_found_and_rank(client):
    assert top(client, "连续批处理", 1) == ["glossary:continuous-batching"]
    assert top(client, "continuous batching", 1) == ["glossary:continuous-batching"]
    assert "glossary:tensor-parallelism" in top(client, "张量并行")
    hit = client.get("/api/v1/search", params={"q": "前缀缓存", "kind": "glossary"}).json()["items"][0]
    assert hit["id"] == "prefix-caching" and "前缀缓存" in hit["title"] and hit["url"] == "/glossary#prefix-caching"


def test_chinese_query_gets_chinese_snippets(client):
    zh = client.get("/api/v1/search", params={"q": "多 LoRA 服务", "kind": "case"}).json()["items"][0]
    en = client.get("/api/v1/search", params={"q": "multi lora serving", "kind": "case"}).json()["items"][0]
    assert zh["id"] == en["id"] == "multi-lora-serving"
    assert has_cjk(zh["snippet"]) and not has_cjk(en["snippet"])
    page = client.get("/search", params={"q": "多 LoRA 服务"}).text
    assert re.search(r'<p class="snippet" lang="zh">[^<]*LoRA', page)
    assert 'href="/calculators/lora"' in page


def test_search_page_lists_calculators(client):
    page = client.get("/search", params={"q": "speculative decoding"}).text
    assert 'data-id="calculator:speculative-decoding"' in page and 'href="/api/v1/calculators/speculative-decoding"' in page


# ---------------------------------------------------------------------------- Chinese summaries of the cases

def test_every_case_has_a_chinese_summary(client):
    body = client.get("/api/v1/cases", params={"limit": 100}).json()
    assert body["total"] == 71 == len(body["items"])
    for c in body["items"]:
        zh = c.get("summary_zh") or ""
        assert len(re.findall(r"[\u4e00-\u9fff]", zh)) >= 40, c["slug"]
        assert zh != c["summary"]
    assert "summary_zh" in client.get("/openapi.json").json()["components"]["schemas"]["Case"]["properties"]


def test_chinese_summary_is_a_store_column(app):
    """The column is filled for every case (the cases list filters on it in SQL)."""
    store = app.state.store
    assert "summary_zh" in store.columns("case")
    page = store.list("case", contains={"summary_zh": "推测解码"}, limit=100)
    assert "speculative-execution" in {c["slug"] for c in page.items}


def test_case_api_and_page_show_the_chinese_summary(client):
    case = client.get("/api/v1/cases/speculative-execution").json()
    assert "推测解码" in case["summary_zh"]
    html = client.get("/cases/speculative-execution").text
    assert '<p class="summary summary-zh" lang="zh">' + case["summary_zh"].replace("'", "&#39;") in html


# ---------------------------------------------------------------------------- tokens

def test_tokens_split_chinese_into_bigrams_and_stem_english():
    assert tokens("推测解码") == ["推测", "测解", "解码"]
    assert tokens("量") == ["量"]
    assert tokens("KV 缓存") == ["kv", "缓存"] and tokens("KV缓存") == ["kv", "缓存"]
    assert stem("parallelism") == stem("parallel") == "parallel"
    assert stem("quantisation") == stem("quantization") == stem("quantized")
    assert stem("experts") == "expert" and stem("class") == "class" and stem("policies") == "policy"
    assert "qwen3-8b" in tokens("Qwen3-8B") and "v0.6.0" in tokens("vLLM v0.6.0")
