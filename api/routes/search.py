"""Ranked search across cases, calculators, facts, derivations, glossary and claims (English and Chinese)."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from api import schemas as S
from api.deps import get_index
from api.queries import SearchQuery

router = APIRouter(tags=["search"])


@router.get("/search", response_model=S.SearchResults, summary="Search cases and facts",
            description="BM25-ranked search over cases, calculators, models, hardware, links, frameworks, worked "
                        "examples, glossary and claims. Chinese is matched by character bigrams against the Chinese "
                        "titles and summaries of cases, the Chinese glossary terms and the Chinese topic words of "
                        "calculators, so `q=推测解码` finds the speculative-decoding case and calculator; a Chinese "
                        "query gets Chinese snippets where there are some. `kind` may be repeated to restrict the "
                        "result kinds.")
def search(query: Annotated[SearchQuery, Query()], index: Any = Depends(get_index)) -> dict[str, Any]:
    hits, total = query.run_search(index)
    return {"query": query.q, "total": total, "limit": query.limit, "offset": query.offset,
            "items": [{"kind": d.kind, "id": d.id, "title": d.title, "url": d.url, "api_url": d.api_url,
                       "snippet": d.snippet, "score": round(score, 4)} for d, score in hits]}
