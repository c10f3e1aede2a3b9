"""Ranked full-text search over cases, facts, derivations and glossary, English and Chinese.

A small BM25 index held in memory (the corpus is a few hundred documents). Latin text is split
into lowercase words; Chinese text into overlapping character bigrams (plus single characters for
one-character queries), so `推测解码` matches `推测解码的执行成本` without a segmenter.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

WORD = re.compile(r"[a-z0-9][a-z0-9.+-]*[a-z0-9+]|[a-z0-9]")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
STOP = {"the", "a", "an", "of", "and", "or", "to", "in", "on", "for", "is", "by", "with", "at", "as", "from", "it"}


def tokens(text: str) -> list[str]:
    text = (text or "").lower()
    out = [w for w in WORD.findall(text) if w not in STOP]
    # words joined by hyphens also count as their parts ("kv-cache" -> kv, cache)
    for w in list(out):
        if "-" in w:
            out.extend(p for p in w.split("-") if p and p not in STOP)
    for run in CJK.findall(text):
        if len(run) == 1:
            out.append(run)
        out.extend(run[i:i + 2] for i in range(len(run) - 1))
    return out


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


class SearchIndex:
    K1, B = 1.2, 0.75

    def __init__(self, docs: list[Doc]):
        self.docs = docs
        self.tf: list[Counter] = []
        self.len: list[int] = []
        self.df: Counter = Counter()
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(docs):
            # the title counts three times: a match there matters more than one in a long summary
            toks = tokens(d.title) * 3 + tokens(d.text)
            tf = Counter(toks)
            self.tf.append(tf)
            self.len.append(len(toks))
            for t in tf:
                self.df[t] += 1
                self.postings[t].append(i)
        self.avg = (sum(self.len) / len(self.len)) if self.len else 1.0

    def search(self, query: str, kinds: set[str] | None = None, limit: int = 20, offset: int = 0) -> tuple[list[tuple[Doc, float]], int]:
        q = list(dict.fromkeys(tokens(query)))
        if not q:
            return [], 0
        n = len(self.docs)
        scores: dict[int, float] = defaultdict(float)
        matched: dict[int, int] = defaultdict(int)
        for t in q:
            post = self.postings.get(t)
            if not post:
                continue
            idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
            for i in post:
                f = self.tf[i][t]
                scores[i] += idf * f * (self.K1 + 1) / (f + self.K1 * (1 - self.B + self.B * self.len[i] / self.avg))
                matched[i] += 1
        ranked = []
        for i, s in scores.items():
            d = self.docs[i]
            if kinds and d.kind not in kinds:
                continue
            coverage = matched[i] / len(q)   # documents matching every query term rank first
            ranked.append((d, s * d.boost * (0.5 + coverage)))
        ranked.sort(key=lambda x: (-x[1], x[0].kind, x[0].id))
        return ranked[offset:offset + limit], len(ranked)


def build_index(store) -> SearchIndex:
    """Documents for every case, fact record, derivation, glossary entry and claim in the store."""
    docs: list[Doc] = []
    for c in store.all("case"):
        docs.append(Doc("case", c["slug"], f"{c['title_zh']} — {c['title_en']}", f"/cases/{c['slug']}",
                        f"/api/v1/cases/{c['slug']}",
                        " ".join([c.get("summary", ""), c.get("section", ""), c.get("section_en", ""), c["slug"].replace("-", " "),
                                  " ".join(c.get("tags") or [])]), c.get("summary", "")[:240], 1.5))
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
                        " ".join([d.get("formula", ""), d["name"].replace("_", " "), d.get("family", ""), d.get("note", "") or ""]),
                        d.get("formula", "")[:240], 0.7))
    for g in store.all("glossary"):
        docs.append(Doc("glossary", g["id"], g.get("term", g["id"]), f"/glossary#{g['id']}", f"/api/v1/glossary/{g['id']}",
                        " ".join(str(g.get(k, "")) for k in ("term_zh", "definition", "kind", "aliases")),
                        (g.get("definition") or "")[:240], 1.2))
    for c in store.all("claim"):
        docs.append(Doc("claim", c["id"], c.get("claim_en", c["id"]), f"/claims#{c['id']}", f"/api/v1/claims/{c['id']}",
                        " ".join(str(c.get(k, "")) for k in ("claim_zh", "verdict", "topic", "explanation")),
                        c.get("verdict", "")))
    return SearchIndex(docs)
