"""Ranked full-text search over cases, calculators, facts, derivations, glossary and claims, English and Chinese.

A small BM25 index held in memory (the corpus is under a thousand documents). Latin text is split
into lowercase words, each reduced to a light stem (`parallelism`, `parallel` and `parallels` meet;
words with digits such as `qwen3-8b` stay whole); Chinese text into overlapping character bigrams
(plus the character itself for a one-character run), so `推测解码` matches `推测解码的执行成本`
without a segmenter.

Both languages reach every document kind: a case is indexed with its English and its Chinese
summary; calculators and worked examples, whose texts are English, carry the Chinese terms of
their derivation family (`FAMILY_TERMS`), the Chinese titles of the cases they recompute and the
Chinese names of the glossary entries that point to them.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np

WORD = re.compile(r"[a-z0-9][a-z0-9.+-]*[a-z0-9+]|[a-z0-9]")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
STOP = {"the", "a", "an", "of", "and", "or", "to", "in", "on", "for", "is", "by", "with", "at", "as", "from", "it"}
#: endings a light stemmer replaces, first match wins: (ending, replacement)
SUFFIXES = (("izations", "iz"), ("ization", "iz"), ("ations", ""), ("ation", ""), ("isms", ""), ("ism", ""),
            ("ings", ""), ("ing", ""), ("ers", ""), ("er", ""), ("ies", "y"), ("es", ""), ("ed", ""), ("s", ""),
            ("e", ""))
BRITISH = re.compile(r"is(ation|ations|e|ed|es|ing|er|ers)$")
#: topic words of each derivation family (the `family` of a calculator or a derivation record): the Chinese
#: terms, and the English ones that its texts abbreviate (MoE, RL, TP). Calculators and worked examples are
#: written in English; these let a Chinese query, or a spelled-out English one, reach them.
FAMILY_TERMS: dict[str, tuple[str, str]] = {
    "break_even": ("break-even payback amortisation", "盈亏平衡、回本、一次性开销、摊销"),
    "checkpoint": ("checkpointing", "检查点、保存、恢复、存储带宽"),
    "collective": ("collective communication all-reduce", "集合通信、通信开销、环形、全归约"),
    "edge_transfer": ("edge cloud device upload", "端云、边缘、云端、上传、下载、往返时延"),
    "energy": ("energy power", "能耗、功耗、能量"),
    "kv_sizing": ("KV cache memory", "KV 缓存、显存、容量、注意力状态"),
    "lora": ("low-rank adapters", "LoRA、适配器、低秩、多租户"),
    "moe": ("mixture of experts, expert parallelism", "混合专家、MoE、专家并行、专家放置"),
    "network": ("network transfer bandwidth", "网络、传输、带宽、链路、在途窗口、多路径"),
    "other": ("speed-up efficiency utilisation padding tokens kernel", "加速比、效率、利用率、填充、令牌数、内核、算子"),
    "overlap_timeline": ("overlap pipelining timeline", "重叠、流水线、时间线、串行、双缓冲"),
    "parallel_split": ("tensor parallelism, pipeline parallelism", "张量并行、流水线并行、并行切分"),
    "prefix_cache": ("prefix caching", "前缀缓存、共享前缀、命中率"),
    "quantization": ("quantization low-bit", "量化、位宽、低比特"),
    "queueing": ("queueing waiting", "排队、等待时间、排队论、积压"),
    "rl": ("reinforcement learning", "强化学习、RL、权重同步、轨迹"),
    "roofline": ("roofline arithmetic intensity", "屋顶线、算力、访存、算术强度"),
    "routing_cost": ("model routing cost", "模型路由、任务成本、成功率、单价"),
    "scheduling": ("scheduling throughput", "调度、吞吐、容量上限、剩余时间"),
    "serving_cost": ("serving cost", "推理成本、服务成本、部署"),
    "serving_estimate": ("serving benchmark estimate, TTFT, TPOT, throughput per GPU, concurrency", "推理服务基准、首字延迟、每词延迟、并发、吞吐"),
    "serving_plan": ("deployment planning", "部署规划、部署方案、服务等级"),
    "speculative": ("speculative decoding", "推测解码、草稿、接受率、验证"),
    "training_compute": ("training compute", "训练计算量、GPU 小时、训练天数"),
    "weight_memory": ("weight memory", "权重、显存、参数量、模型大小"),
}


def stem(word: str) -> str:
    """A light English stem: plurals and common endings off, so `parallelism`/`parallel`, `experts`/`expert`,
    `quantisation`/`quantization`/`quantize` meet. Words with digits or dots (ids, versions) stay whole."""
    if len(word) <= 4 or not word.isalpha():
        return word[:-1] if len(word) == 4 and word.isalpha() and word.endswith("e") else word
    word = BRITISH.sub(r"iz\1", word)
    if word.endswith("ss"):   # class, process: not a plural
        return word
    for suf, repl in SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 4:
            word = word[:-len(suf)] + repl
            break
    else:
        if word.endswith("ing") and len(word) >= 6:   # tiling, paging: the verb's stem
            word = word[:-3]
    return word[:-1] if word.endswith("e") and len(word) >= 4 else word   # tile(s) meets tiling, page(s) paging


def tokens(text: str) -> list[str]:
    text = (text or "").lower()
    words = [w for w in WORD.findall(text) if w not in STOP]
    out = [stem(w) for w in words]
    # words joined by hyphens also count as their parts ("kv-cache" -> kv, cache)
    for w in words:
        if "-" in w:
            out.extend(stem(p) for p in w.split("-") if p and p not in STOP)
    for run in CJK.findall(text):
        if len(run) == 1:
            out.append(run)
        out.extend(run[i:i + 2] for i in range(len(run) - 1))
    return out


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text or ""))


@dataclass
class Doc:
    kind: str
    id: str
    title: str
    url: str
    api_url: str
    text: str
    snippet: str
    boost: float = 1.0
    snippet_zh: str = ""   # shown instead of `snippet` when the query is Chinese


class SearchIndex:
    """BM25 over `docs`, held compactly: per term one array of document numbers and one of term counts (no
    per-document counters), scored with NumPy over the matching documents."""

    K1, B = 1.2, 0.75
    EXACT = 3.0   # score factor of a document whose id is the whole query (`kv-cache`, `qwen3-8b`)

    def __init__(self, docs: list[Doc]):
        self.docs = docs
        lengths: list[int] = []
        postings: dict[str, list[int]] = defaultdict(list)
        counts: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(docs):
            # the title counts three times: a match there matters more than one in a long summary
            toks = tokens(d.title) * 3 + tokens(d.text)
            lengths.append(len(toks))
            for t, f in Counter(toks).items():
                postings[t].append(i)
                counts[t].append(f)
        n = len(docs)
        self.len = np.asarray(lengths, dtype=np.float64)
        self.avg = float(sum(lengths) / n) if n else 1.0
        # one flat array of document numbers and one of counts, term after term (CSR): term -> its number,
        # whose postings are doc_ids[start[k]:start[k + 1]]
        self.terms: dict[str, int] = {t: k for k, t in enumerate(postings)}
        sizes = np.asarray([len(v) for v in postings.values()], dtype=np.int64)
        self.start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.doc_ids = np.fromiter((i for v in postings.values() for i in v), dtype=np.int32, count=int(sizes.sum()))
        self.counts = np.fromiter((f for v in counts.values() for f in v), dtype=np.float64, count=int(sizes.sum()))
        self.idf = np.asarray([math.log(1 + (n - int(m) + 0.5) / (int(m) + 0.5)) for m in sizes])
        self.boost = np.asarray([d.boost for d in docs], dtype=np.float64)
        self.kinds = np.asarray([d.kind for d in docs], dtype=object)
        self.by_id: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(docs):
            self.by_id[d.id.lower()].append(i)
        # ties rank by kind, then id: one ordinal per document for that order
        order = sorted(range(n), key=lambda i: (docs[i].kind, docs[i].id))
        self.tie = np.empty(n, dtype=np.int64)
        self.tie[order] = np.arange(n)

    def search(self, query: str, kinds: set[str] | None = None, limit: int = 20, offset: int = 0) -> tuple[list[tuple[Doc, float]], int]:
        q = list(dict.fromkeys(tokens(query)))
        if not q:
            return [], 0
        scores = np.zeros(len(self.docs))
        matched = np.zeros(len(self.docs))
        norm = self.K1 * (1 - self.B + self.B * self.len / self.avg)
        for t in q:
            k = self.terms.get(t)
            if k is None:
                continue
            a, b = self.start[k], self.start[k + 1]
            ids, f, idf = self.doc_ids[a:b], self.counts[a:b], self.idf[k]
            scores[ids] += idf * f * (self.K1 + 1) / (f + norm[ids])
            matched[ids] += 1
        hit = np.flatnonzero(matched)
        if kinds:
            hit = hit[np.isin(self.kinds[hit], list(kinds))]
        named = np.ones(hit.size)
        for i in self.by_id.get(query.strip().lower(), ()):   # the query is this record's id or name
            named[hit == i] = self.EXACT
        # documents matching every query term rank first
        final = scores[hit] * self.boost[hit] * (0.5 + matched[hit] / len(q)) * named
        chosen = np.lexsort((self.tie[hit], -final))[offset:offset + limit]
        page = [(self.docs[i], sc) for i, sc in zip(hit[chosen].tolist(), final[chosen].tolist())]
        if has_cjk(query):   # a Chinese query reads the Chinese snippet where a document has one
            page = [(replace(d, snippet=d.snippet_zh) if d.snippet_zh else d, sc) for d, sc in page]
        return page, int(hit.size)


def family_terms(*families: str | None, lang: int | None = None, sep: str = " ") -> str:
    """The topic words of these families: both languages, or only English (`lang=0`) or Chinese (`lang=1`)."""
    terms = [FAMILY_TERMS.get(f or "", ("", "")) for f in dict.fromkeys(families)]
    return sep.join(t[i] for t in terms for i in ((0, 1) if lang is None else (lang,)) if t[i])


def calculator_docs(calculators, cases: dict[str, dict], glossary: list[dict]) -> list[Doc]:
    """One document per calculator: its English title, summary, name and families, the titles (Chinese and
    English) of the cases it recomputes, and in Chinese the terms of its families and the glossary terms
    pointing to it."""
    terms_zh: dict[str, list[str]] = defaultdict(list)
    for g in glossary:
        for name in g.get("related_calculators") or []:
            terms_zh[name].append(g.get("term_zh") or "")
    docs = []
    for c in calculators:
        fams = (c.family, *c.families)
        # the cases' titles in both languages, so a case topic lifts the calculator for either reader alike
        zh = [family_terms(*fams), *terms_zh.get(c.name, ()),
              *(f'{cases[s]["title_zh"]} {cases[s].get("title_en", "")}' for s in c.cases if s in cases)]
        docs.append(Doc("calculator", c.name, c.title, f"/calculators/{c.name}", f"/api/v1/calculators/{c.name}",
                        " ".join([c.summary, c.name, c.name.replace("-", " "), *(f.replace("_", " ") for f in fams), *zh]),
                        c.summary[:240], 1.1, snippet_zh="主题：" + family_terms(*fams, lang=1, sep="、")))
    return docs


def build_index(store, calculators=None) -> SearchIndex:
    """Documents for every case, calculator (default: the registry), fact record, derivation, glossary entry
    and claim in the store."""
    if calculators is None:
        from calculators.framework.registry import REGISTRY
        calculators = REGISTRY.values()
    docs: list[Doc] = []
    cases = {c["slug"]: c for c in store.all("case")}
    for c in cases.values():
        zh = c.get("summary_zh") or ""
        docs.append(Doc("case", c["slug"], f"{c['title_zh']} — {c['title_en']}", f"/cases/{c['slug']}",
                        f"/api/v1/cases/{c['slug']}",
                        " ".join([c.get("summary", ""), zh, c.get("section", ""), c.get("section_en", ""),
                                  c["slug"].replace("-", " "), " ".join(c.get("tags") or [])]),
                        c.get("summary", "")[:240], 1.5, snippet_zh=zh[:160]))
    glossary = store.all("glossary")
    docs.extend(calculator_docs(calculators, cases, glossary))
    for m in store.all("model"):
        docs.append(Doc("model", m["id"], m["name"], f"/models/{m['id']}", f"/api/v1/models/{m['id']}",
                        " ".join(str(m.get(k, "")) for k in ("family", "organisation", "kind", "attention", "notes", "id")),
                        f"{m.get('kind', '')} · {m.get('attention', '')}"))
    for h in store.all("hardware"):
        docs.append(Doc("hardware", h["id"], h["name"], f"/hardware/{h['id']}", f"/api/v1/hardware/{h['id']}",
                        " ".join(str(h.get(k, "")) for k in ("vendor", "architecture", "form_factor", "notes", "id")),
                        f"{h.get('vendor', '')} {h.get('architecture', '')}", 0.8))
    for l in store.all("link"):
        docs.append(Doc("link", l["id"], l["name"], f"/links#{l['id']}", f"/api/v1/links/{l['id']}",
                        " ".join(str(l.get(k, "")) for k in ("kind", "generation", "direction_convention", "id")),
                        l.get("direction_convention", "")))
    for f in store.all("framework"):
        feats = " ".join(f"{x.get('feature', '')} {x.get('name', '')}" for x in f.get("features") or [])
        docs.append(Doc("framework", f["id"], f["name"], f"/frameworks/{f['id']}", f"/api/v1/frameworks/{f['id']}",
                        " ".join([f.get("summary", ""), f.get("strengths", "") or "", f.get("best_for", "") or "", feats, f.get("kind", "")]),
                        (f.get("summary") or "")[:240]))
    for d in store.all("derivation"):
        docs.append(Doc("derivation", d["id"], d.get("title", d["name"]), f"/cases/{d['case']}#{d['name']}",
                        f"/api/v1/derivations/{d['id']}",
                        " ".join([d.get("formula", ""), d["name"].replace("_", " "), d.get("family", ""), d.get("note", "") or "",
                                  family_terms(d.get("family"))]),
                        d.get("formula", "")[:240], 0.7))
    for g in glossary:
        # the Chinese term is part of the title, as a case's Chinese title is: both languages name the entry
        title = " — ".join(t for t in (g.get("term", g["id"]), g.get("term_zh")) if t)
        docs.append(Doc("glossary", g["id"], title, f"/glossary#{g['id']}", f"/api/v1/glossary/{g['id']}",
                        " ".join([g.get("definition") or "", g.get("kind") or "", " ".join(g.get("aliases") or [])]),
                        (g.get("definition") or "")[:240], 1.2))
    for c in store.all("claim"):
        docs.append(Doc("claim", c["id"], c.get("claim_en", c["id"]), f"/claims#{c['id']}", f"/api/v1/claims/{c['id']}",
                        " ".join(str(c.get(k, "")) for k in ("claim_zh", "verdict", "topic", "explanation")),
                        c.get("verdict", "")))
    return SearchIndex(docs)
