"""Cases of the book, their worked examples (derivations), glossary and audited claims."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from api import schemas as S
from api.deps import get_store
from api.queries import CaseQuery, ClaimQuery, DerivationQuery, GlossaryQuery
from api.responses import FastJSONResponse
from api.routes.common import NotFound, page
from api.service import case_refs
from knowledge.store import Store

router = APIRouter(tags=["cases"])
Slug = Annotated[str, Path(min_length=1, max_length=200, description="Case slug: the book's file name without .md")]


@router.get("/cases", response_model=S.Page[S.Case], summary="List the book's case studies",
            description="The 71 case studies in the order of the book's index. `chapter` keeps the cases cited by "
                        "that chapter; `section` the index group (chapter number of first citation, 99 = further reading).")
def list_cases(request: Request, query: Annotated[CaseQuery, Query()],
               store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/cases/{slug}", response_model=S.CaseDetail, summary="Get one case with its derivations",
            description="A case with our summary, cited chapters, source file, related cases, and every stored worked "
                        "example (`derivations`), each with its calculator request where one recomputes it.")
def get_case(slug: Slug, store: Store = Depends(get_store)):
    case = store.get("case", slug)
    if case is None:
        raise NotFound("case", slug, "/api/v1/cases")
    out = dict(case)
    out["derivations"] = store.derivations_of(slug)
    out["related_cases"] = case_refs(store, case.get("related") or [])
    return out


@router.get("/derivations", response_model=S.Page[S.Derivation], summary="List worked examples",
            description="Worked examples of all cases; filter by case, family, calculator or whether a calculator recomputes them.")
def list_derivations(request: Request, query: Annotated[DerivationQuery, Query()],
                     store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/derivations/{case_slug}/{name}", response_model=S.Derivation, summary="Get one worked example",
            description="One worked example: formula, inputs and the book's printed values, and where bound the calculator, its request and the expected outputs.")
def get_derivation(case_slug: Slug, name: Annotated[str, Path(min_length=1, max_length=200)],
                   store: Store = Depends(get_store)):
    d = store.get("derivation", f"{case_slug}/{name}")
    if d is None:
        raise NotFound("derivation", f"{case_slug}/{name}", "/api/v1/derivations")
    return d


@router.get("/coverage", response_model=S.Coverage, summary="How much of the book's arithmetic is recomputed",
            description="Per case: worked examples stored and bound to a calculator; the numbers the bound ones print "
                        "and how many a passing, rule-conforming check reads; each unbound example with its reason; "
                        "families still without a calculator.")
def get_coverage(store: Store = Depends(get_store)):
    return store.coverage


@router.get("/glossary", response_model=S.Page[S.Glossary], summary="List glossary entries",
            description="Methods and terms (KV eviction methods, speculative decoding variants …) with their papers.")
def list_glossary(request: Request, query: Annotated[GlossaryQuery, Query()],
                  store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/glossary/{entry_id}", response_model=S.Glossary, summary="Get one glossary entry",
            description="One term or method with its definition and the paper or documentation that introduced it.")
def get_glossary(entry_id: Slug, store: Store = Depends(get_store)):
    g = store.get("glossary", entry_id)
    if g is None:
        raise NotFound("glossary", entry_id, "/api/v1/glossary")
    return g


@router.get("/claims", response_model=S.Page[S.Claim], summary="List audited claims of the compendium page",
            description="Numeric claims of the compendium page, recomputed through a calculator, with a verdict.")
def list_claims(request: Request, query: Annotated[ClaimQuery, Query()],
                store: Store = Depends(get_store)) -> FastJSONResponse:
    return page(request, query.run(store))


@router.get("/claims/{claim_id}", response_model=S.Claim, summary="Get one audited claim",
            description="One claim of the compendium page: its number, our recomputation (a stored calculator request), the assumptions that matter and the verdict.")
def get_claim(claim_id: Slug, store: Store = Depends(get_store)):
    c = store.get("claim", claim_id)
    if c is None:
        raise NotFound("claim", claim_id, "/api/v1/claims")
    return c
