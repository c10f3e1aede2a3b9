"""Ranked search across cases, facts, derivations, glossary and claims (English and Chinese)."""
from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Query

from api import schemas as S
from api.deps import get_index
from api.routes.common import Limit, Offset

router = APIRouter(tags=["search"])


class Kind(str, Enum):
    case = "case"
    model = "model"
    hardware = "hardware"
    link = "link"
    framework = "framework"
    derivation = "derivation"
    glossary = "glossary"
    claim = "claim"


@router.get("/search", response_model=S.SearchResults, summary="Search cases and facts",
            description="BM25-ranked search; Chinese is matched by character bigrams, so `q=推测解码` finds the "
                        "speculative-decoding case. `kind` may be repeated to restrict the result kinds.")
def search(q: Annotated[str, Query(min_length=1, max_length=500, description="Words or Chinese text.")],
           kind: Annotated[Optional[list[Kind]], Query(description="Restrict to these kinds.")] = None,
           limit: Limit = 20, offset: Offset = 0, index=Depends(get_index)):
    hits, total = index.search(q, {k.value for k in kind} if kind else None, limit, offset)
    return {"query": q, "total": total, "limit": limit, "offset": offset,
            "items": [{"kind": d.kind, "id": d.id, "title": d.title, "url": d.url, "api_url": d.api_url,
                       "snippet": d.snippet, "score": round(score, 4)} for d, score in hits]}
