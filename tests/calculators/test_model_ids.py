"""Model ids resolve case-insensitively and by Hugging Face repository or name (with or without the owner,
-Instruct, -chat, -hf, Meta-), in one place (calculators.domain.model_ids) used by every calculator through
`model_record`; the answer says how the name was read; a name that reads as several models is a 422 listing them."""
from __future__ import annotations

import pytest

from calculators.domain import AmbiguousModelId, resolve_model_id
from calculators.framework import UnknownId
from calculators.framework.runner import RunError, solve

READS = [
    ("llama-3.1-8b", "llama-3.1-8b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("Llama-3.1-8B", "llama-3.1-8b"),
    ("LLAMA-3.1-8B", "llama-3.1-8b"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("Llama 3.1 70B", "llama-3.1-70b"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
    ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
    ("Qwen/Qwen3-8B", "qwen3-8b"),
    ("Qwen3-VL-32B", "qwen3-vl-32b-instruct"),          # the record's name without its -Instruct
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "llama-3.1-70b-instruct-fp8"),  # a quantised checkpoint is its own record
]


@pytest.mark.parametrize("name, mid", READS)
def test_names_resolve_to_the_store_id(lookup, name, mid):
    got, how = resolve_model_id(lookup, name)
    assert got == mid
    assert how == (None if name == mid else f"model {name!r} read as {mid}")


@pytest.mark.parametrize("name", ["nvidia/Llama-3.3-70B-Instruct-FP8", "llama-3.1-9b", "qwen3-8b\u202e", "-instruct"])
def test_names_of_no_store_model_are_unknown(lookup, name):
    with pytest.raises(UnknownId):
        resolve_model_id(lookup, name)


def _with_twins(lookup):
    """The store plus a second record citing the same repository as llama-3.1-8b."""
    twin = {**lookup("model", "llama-3.1-8b"), "id": "llama-3.1-8b-twin", "name": "Llama 3.1 8B twin"}

    def look(kind, ident):
        if kind == "ids" and ident == "model":
            return [*lookup("ids", "model"), twin["id"]]
        if kind == "model" and ident == twin["id"]:
            return twin
        return lookup(kind, ident)
    return look


def test_a_name_of_two_models_is_ambiguous(lookup):
    with pytest.raises(AmbiguousModelId) as e:
        resolve_model_id(_with_twins(lookup), "meta-llama/Meta-Llama-3.1-8B")
    assert e.value.candidates == ["llama-3.1-8b", "llama-3.1-8b-twin"]
    assert resolve_model_id(_with_twins(lookup), "LLAMA-3.1-8B")[0] == "llama-3.1-8b"  # an id's spelling wins


@pytest.mark.parametrize("calc, body", [
    ("kv-cache", {"tokens": 8192}),
    ("weight-memory", {}),
    ("deployment-plan", {"arrival_rate_per_s": 1, "input_tokens": 1000, "output_tokens": 200, "ttft_s": 10, "tpot_s": 0.2,
                         "hardware": ["h100-sxm"], "tp": [1], "batch": [1], "estimate": "bound", "mode": "aggregated"}),
])
def test_a_calculator_reads_a_hugging_face_name_and_says_so(lookup, calc, body):
    by_id = solve(calc, {"model": "llama-3.1-8b", **body}, lookup)[2]
    _, req, res = solve(calc, {"model": "meta-llama/Llama-3.1-8B-Instruct", **body}, lookup)
    assert res.outputs == by_id.outputs
    assert req.model == "llama-3.1-8b"
    said = [a for a in res.assumptions if "read as" in a]
    assert said == ["model 'meta-llama/Llama-3.1-8B-Instruct' read as llama-3.1-8b"]
    assert not [a for a in by_id.assumptions if "read as" in a]


def test_an_ambiguous_name_is_a_422_listing_the_candidates(lookup):
    with pytest.raises(RunError) as e:
        solve("kv-cache", {"model": "meta-llama/Meta-Llama-3.1-8B", "tokens": 8}, _with_twins(lookup))
    assert e.value.status == 422
    assert e.value.errors[0].field == "model"
    assert "llama-3.1-8b, llama-3.1-8b-twin" in e.value.errors[0].message


def test_an_unknown_name_is_still_a_422_with_suggestions(lookup):
    with pytest.raises(RunError) as e:
        solve("kv-cache", {"model": "llama-3.1-9b", "tokens": 8}, lookup)
    assert e.value.status == 422 and e.value.errors[0].field == "model"
    assert "llama-3.1-8b" in (e.value.errors[0].suggestions or [])
