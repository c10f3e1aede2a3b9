"""The catalogue against the calculators (issue #26 item 6): every stored model in every calculator that takes a
`model`, and every hardware record with a kind the site's list can filter by.

Models: for each calculator whose request has a `model` field, a minimal valid request (the calculator's own
example, with the model swapped) runs through the in-process runner for every model id in the store. Each run
either answers, or refuses with a 4xx CalcInputError on a request field whose message names the model and says why
(an architecture the calculator does not model, a figure the record lacks). A refusal because the model does not fit
the example's parallelism (`tp`/`pp`) is retried on a larger one before it counts. Anything else fails: another
exception, a 5xx, a refusal on no field or that does not say which model. The costly calculators (COSTLY: the
planner runs the step model for every candidate) take one model per architecture family (the record's kind and
attention layout) instead of all of them; the rest take every model. `python tests/calculators/test_catalogue_coverage.py`
prints the matrix and the CPU time each calculator took.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from pydantic import ValidationError

from calculators.domain import HARDWARE_KINDS, hardware_kind
from calculators.framework import CalcInputError
from calculators.framework.lookup import ids_of
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import compute

#: calculators whose examples need other inputs once a model gives the shapes: fields dropped (the model supplies
#: them, or they conflict with it) and fields added (the hardware the model runs on)
ADJUST: dict[str, tuple[frozenset[str], dict[str, Any]]] = {
    "serving-cost": (frozenset({"params", "weight_bytes_per_param", "kv_bytes_per_token", "memory_per_device_bytes",
                                "memory_bandwidth_bytes_per_s"}), {"hardware": "h100-sxm"}),
    "speculative-decoding": (frozenset({"target_step_s"}), {"hardware": "h100-sxm"}),
    "tp-overhead": (frozenset({"hidden_size", "layers"}), {"hardware": "h100-sxm"}),
    # the planner's example searches three devices, several TP degrees and batches, both modes: one of each here
    "deployment-plan": (frozenset(), {"hardware": ["h100-sxm"], "tp": [8], "batch": [16], "mode": "aggregated"}),
}
#: calculators that cost tens of milliseconds per model (the planner searches deployments with the step model):
#: they take one model per architecture family, the others every model
COSTLY = frozenset({"deployment-plan"})
#: larger parallelism tried, in turn, when a model does not fit the example's (a refusal on `tp` or `pp`)
LARGER = ({"tp": 8}, {"tp": 8, "pp": 4})
#: at least this many models are stored (issue #26: 84 and growing)
MIN_MODELS = 84


def model_calculators() -> list[str]:
    return [name for name, calc in REGISTRY.items() if "model" in calc.request_model.model_fields]


def base_request(name: str) -> dict[str, Any]:
    """The calculator's own example that names a model (else its main example), adjusted by ADJUST."""
    calc = REGISTRY[name]
    example = next((e for e in (calc.example, *calc.extra_examples) if "model" in e), calc.example)
    drop, add = ADJUST.get(name, (frozenset(), {}))
    return {k: v for k, v in example.items() if k not in drop} | add


def family(rec: dict) -> tuple[str, str]:
    """A model's architecture family: dense or MoE, and its attention layout (gqa, mla, hybrid-swa, ...)."""
    return str(rec.get("kind")), str(rec.get("attention"))


def sample(lookup, models: list[str]) -> list[str]:
    """One model per architecture family (the first id of each, in id order)."""
    firsts: dict[tuple[str, str], str] = {}
    for m in models:
        firsts.setdefault(family(lookup("model", m)), m)
    return sorted(firsts.values())


def outcome(name: str, body: dict, model: str, lookup) -> tuple[str, str]:
    """('ok', how) or ('refused', 'field: message'); raises on anything that is neither."""
    request = body | {"model": model}
    fields = REGISTRY[name].request_model.model_fields
    for bigger in ({}, *(b for b in LARGER if set(b) <= set(fields))):
        try:
            compute(name, request | bigger, lookup)
            return "ok", ("" if not bigger else "with " + ", ".join(f"{k}={v}" for k, v in bigger.items()))
        except CalcInputError as exc:
            refusal = exc
            if not (exc.loc and exc.loc[0] in ("tp", "pp")):
                break
    loc = refusal.loc[0] if refusal.loc else None
    assert 400 <= refusal.status < 500, f"{name} / {model}: status {refusal.status}: {refusal.message}"
    assert loc in fields, f"{name} / {model}: refusal on {refusal.loc!r}, not a request field: {refusal.message}"
    assert model in refusal.message, (f"{name} / {model}: the refusal on {loc} does not say which model it is about "
                                      f"(and so why): {refusal.message!r}")
    assert len(refusal.message.split()) >= 5, f"{name} / {model}: a refusal without a reason: {refusal.message!r}"
    return "refused", f"{loc}: {refusal.message}"


def run_matrix(lookup) -> tuple[dict[str, dict[str, tuple[str, str]]], dict[str, float]]:
    models = sorted(ids_of(lookup, "model"))
    strata = sample(lookup, models)
    matrix: dict[str, dict[str, tuple[str, str]]] = {}
    seconds: dict[str, float] = {}
    for name in model_calculators():
        body = base_request(name)
        t0 = time.process_time()
        matrix[name] = {m: outcome(name, body, m, lookup) for m in (strata if name in COSTLY else models)}
        seconds[name] = time.process_time() - t0
    return matrix, seconds


@pytest.fixture(scope="module")
def matrix(lookup):
    return run_matrix(lookup)[0]


def test_the_store_has_the_models_the_matrix_is_about(lookup):
    models = ids_of(lookup, "model")
    assert len(models) >= MIN_MODELS
    assert len(sample(lookup, sorted(models))) >= 8, "the stratified sample should span the architecture families"


def test_every_model_taking_calculator_has_a_base_request_that_answers(lookup):
    """The base of each row answers for the model its own example names (so a refusal below is the model's)."""
    names = model_calculators()
    assert len(names) >= 15 and "serving-estimate" in names and "kv-cache" in names
    for name in names:
        body = base_request(name)
        try:
            compute(name, body if "model" in body else body | {"model": "qwen3-8b"}, lookup)
        except (CalcInputError, ValidationError) as exc:
            pytest.fail(f"{name}: its base request does not answer: {exc}")


def test_every_model_answers_or_is_refused_with_a_reason(matrix, lookup):
    """The matrix itself: any exception other than a 4xx with a reason on a named field fails inside `outcome`."""
    models = set(ids_of(lookup, "model"))
    for name, row in matrix.items():
        expected = set(sample(lookup, sorted(models))) if name in COSTLY else models
        assert set(row) == expected, name
    answered = sum(1 for row in matrix.values() for what, _ in row.values() if what == "ok")
    assert answered > 0.6 * sum(len(row) for row in matrix.values())
    # issue #26 item 6: the only refusals left are the MoE calculators refusing dense models
    refused = {(name, m) for name, row in matrix.items() for m, (what, _) in row.items() if what == "refused"}
    assert refused == {(name, m) for name in ("moe", "moe-placement") for m in models
                       if lookup("model", m).get("kind") == "dense"}


def test_a_dense_model_in_a_moe_calculator_is_refused_for_being_dense(matrix, lookup):
    """Spot checks that the matrix reads real answers: MoE calculators refuse dense models and answer MoE ones."""
    for name in ("moe", "moe-placement"):
        row = matrix[name]
        assert row["qwen3-8b"][0] == "refused" and "mixture-of-experts" in row["qwen3-8b"][1]
        assert row["qwen3-235b-a22b"] == ("ok", "")
    assert matrix["kv-cache"]["llama-3.1-8b"][0] == "ok"


# --------------------------------------------------------------------------- hardware kinds

def test_every_hardware_record_has_a_kind(catalog):
    records = catalog.records["hardware"]
    assert len(records) >= 150
    kinds = Counter(hardware_kind(h) for h in records)
    assert set(kinds) <= set(HARDWARE_KINDS)
    assert all(kinds[k] > 0 for k in HARDWARE_KINDS), kinds


@pytest.mark.parametrize("record_id, kind", [
    ("h100-sxm", "data-centre-gpu"), ("mi300x", "data-centre-gpu"), ("l40s", "data-centre-gpu"),
    ("rtx-pro6000-blackwell-server", "data-centre-gpu"),
    ("tpu-v5e", "accelerator"), ("trainium2", "accelerator"), ("gaudi3", "accelerator"), ("ascend-910b", "accelerator"),
    ("m4-max-40gpu-128gb", "laptop-desktop"), ("rtx4090", "laptop-desktop"), ("rtx-pro6000-blackwell-ws", "laptop-desktop"),
    ("gb200-nvl72", "rack-system"), ("atlas-800t-a3-8npu", "rack-system"), ("atlas-900-a3-superpod-384npu-max", "rack-system"),
])
def test_hand_checked_kinds(lookup, record_id, kind):
    assert hardware_kind(lookup("hardware", record_id)) == kind


def test_an_explicit_kind_overrides_the_rule_and_an_unknown_one_is_refused():
    rec = {"id": "x", "name": "NVIDIA H100 SXM", "vendor": "NVIDIA", "scope": "device"}
    assert hardware_kind(rec) == "data-centre-gpu"
    assert hardware_kind(rec | {"kind": "laptop-desktop"}) == "laptop-desktop"
    with pytest.raises(ValueError):
        hardware_kind(rec | {"kind": "gpu"})


def test_hardware_json_filters_by_vendor_and_kind(client):
    everything = client.get("/api/v1/hardware", params={"limit": 1000}).json()["items"]
    assert everything and all(h["kind"] in HARDWARE_KINDS for h in everything)
    want = sorted(h["id"] for h in everything if h.get("vendor") == "AMD" and h["kind"] == "data-centre-gpu")
    r = client.get("/api/v1/hardware", params={"vendor": "AMD", "kind": "data-centre-gpu", "limit": 1000})
    assert r.status_code == 200
    body = r.json()
    assert sorted(h["id"] for h in body["items"]) == want and body["total"] == len(want) and "mi300x" in want
    racks = [h["id"] for h in everything if h["kind"] == "rack-system"]
    page = client.get("/api/v1/hardware", params={"kind": "rack-system", "limit": 2, "offset": 1}).json()
    assert page["total"] == len(racks) and [h["id"] for h in page["items"]] == racks[1:3]
    assert client.get("/api/v1/hardware/tpu-v5e").json()["kind"] == "accelerator"


def test_an_unknown_kind_is_a_422_naming_kind(client):
    r = client.get("/api/v1/hardware", params={"kind": "quantum"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in r.json()["errors"]] == ["kind"]
    assert client.get("/hardware", params={"kind": "quantum"}).status_code == 422


def test_hardware_page_filters_and_shows_filter_links_with_counts(client):
    import re

    everything = client.get("/api/v1/hardware", params={"limit": 1000}).json()["items"]
    html = client.get("/hardware", params={"vendor": "NVIDIA", "kind": "laptop-desktop", "limit": 1000}).text
    rows = re.findall(r'<tr data-id="([^"]+)"', html)
    assert sorted(rows) == sorted(h["id"] for h in everything
                                  if h.get("vendor") == "NVIDIA" and h["kind"] == "laptop-desktop")
    def links(facet: str) -> dict[str, tuple[str, int]]:
        """value -> (href, count) of one facet's filter links."""
        block = re.search(rf'<p class="facets" data-facet="{facet}">(.*?)</p>', html, re.S).group(1)
        return {v: (href, int(n)) for href, v, n in
                re.findall(r'<a href="([^"]*)" data-value="([^"]+)"[^>]*>(?:<strong>)?[^<]+(?:</strong>)? \((\d+)\)</a>', block)}

    nvidia = Counter(h["kind"] for h in everything if h.get("vendor") == "NVIDIA")
    assert {k: n for k, (_, n) in links("kind").items()} == dict(nvidia)
    assert links("kind")["laptop-desktop"][0] == "/hardware?vendor=NVIDIA&amp;limit=1000"   # the current one: drop it
    laptops = Counter(h.get("vendor") for h in everything if h["kind"] == "laptop-desktop")
    vendors = links("vendor")
    assert {v: n for v, (_, n) in vendors.items()} == dict(laptops)
    assert vendors["Apple"][0] == "/hardware?vendor=Apple&amp;kind=laptop-desktop&amp;limit=1000"


if __name__ == "__main__":   # the matrix and its cost, for the issue and for tuning COSTLY
    from knowledge.loader import catalog_lookup, default_catalog

    t0 = time.process_time()
    lk = catalog_lookup(default_catalog())
    print(f"catalogue loaded in {time.process_time() - t0:.2f} s of CPU")
    table, secs = run_matrix(lk)
    for name, row in table.items():
        refused: dict[str, list[str]] = defaultdict(list)
        for m, (what, why) in row.items():
            if what == "refused":
                refused[why.split(":")[0] + ": " + " ".join(family(lk("model", m)))].append(m)
        retried = sum(1 for what, how in row.values() if what == "ok" and how)
        print(f"{name:22s} {secs[name]:6.2f} s  {len(row)} models: {sum(w == 'ok' for w, _ in row.values())} answer"
              f"{f' ({retried} on larger tp/pp)' if retried else ''}, {sum(w == 'refused' for w, _ in row.values())} refused")
        for why, ms in sorted(refused.items()):
            print(f"    refused on {why}: {len(ms)} ({', '.join(ms[:4])}{', ...' if len(ms) > 4 else ''})")
    print(f"total {sum(secs.values()):.2f} s of CPU")
