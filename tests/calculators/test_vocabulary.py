"""One vocabulary: every request field of every calculator is spelt the one way `calculators.framework.vocabulary`
names it; an old spelling is still read (same answer, and the answer says what the field is now) but is no field,
so the OpenAPI document does not offer it."""
from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from calculators.framework.registry import REGISTRY
from calculators.framework import CalcRequest
from calculators.framework.runner import RunError, solve
from calculators.framework.vocabulary import KEPT, SYNONYMS, VOCABULARY
from tests.calculators.plain import compute as run


def _models_in(tp) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in typing.get_args(tp) or () for m in _models_in(a)]


def _fields(model: type[BaseModel], prefix: str = "", seen: frozenset = frozenset()):
    """(path, public name, the model holding it) of every field of a request model and of the models inside it."""
    for name, info in model.model_fields.items():
        public = info.alias or name
        yield prefix + public, public, model
        for sub in _models_in(info.annotation):
            if sub not in seen:
                yield from _fields(sub, f"{prefix}{public}.", seen | {model})


def _old_names(model: type[BaseModel]) -> dict[str, str]:
    """old name -> field for the renames a request model reads: the global synonyms whose field it has, and its own."""
    names = {info.alias or n for n, info in model.model_fields.items()} | set(model.model_fields)
    table = {old: new for old, new in SYNONYMS.items() if new in names and old not in names}
    table.update({old: new for old, new in getattr(model, "renamed_fields", {}).items() if new in names})
    return table


def test_the_tables_are_consistent():
    assert not set(SYNONYMS) & set(VOCABULARY), "a canonical name is listed as a synonym"
    assert set(SYNONYMS.values()) <= set(VOCABULARY), set(SYNONYMS.values()) - set(VOCABULARY)
    assert all((calc in REGISTRY) for calc, _ in KEPT)
    for calc in REGISTRY.values():
        for _, _, model in _fields(calc.request_model):
            for old, new in getattr(model, "renamed_fields", {}).items():
                assert new in model.model_fields and old not in model.model_fields, (model.__name__, old)


def _synonym_fields(name: str, model: type[BaseModel]) -> list[str]:
    """The fields of a request model (nested ones too) spelt like a synonym that KEPT does not explain."""
    return [f"{path} (write `{SYNONYMS[public]}`)" for path, public, _ in _fields(model)
            if public in SYNONYMS and (name, path) not in KEPT]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_no_request_field_is_a_synonym(name):
    """One concept, one name: a field spelt like a synonym is a second name for a canonical concept (unless KEPT
    says why it means something else there)."""
    bad = _synonym_fields(name, REGISTRY[name].request_model)
    assert not bad, f"{name}: " + "; ".join(bad)


def test_the_synonym_check_catches_the_old_planner_and_split_names():
    """Reintroducing `interconnect` (now `link`) or `requests_per_s` (now `arrival_rate_per_s`) as a field, at the top
    or inside a nested request, fails the check above."""
    class Variant(CalcRequest):
        interconnect: str | None = None

    class Old(CalcRequest):
        requests_per_s: float = 1.0
        what_if: list[Variant] = []

    assert SYNONYMS["interconnect"] == "link" and SYNONYMS["requests_per_s"] == "arrival_rate_per_s"
    assert _synonym_fields("parallel-split", Old) == ["requests_per_s (write `arrival_rate_per_s`)",
                                                      "what_if.interconnect (write `link`)"]
    for name in ("parallel-split", "deployment-plan"):
        fields = {path for path, _, _ in _fields(REGISTRY[name].request_model)}
        assert "link" in fields and "interconnect" not in fields and "what_if.interconnect" not in fields
    assert "arrival_rate_per_s" in REGISTRY["deployment-plan"].request_model.model_fields


def test_the_contributing_table_is_the_vocabulary():
    """calculators/CONTRIBUTING.md shows VOCABULARY and SYNONYMS as a table: row for row, the same."""
    text = (Path(__file__).parents[2] / "calculators" / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = text.split("| field | means | old or other spellings (still read, with a note) |\n|---|---|---|\n", 1)[1]
    rows = table.split("\n\n", 1)[0].splitlines()
    want = [f"| `{k}` | {v} | {', '.join(f'`{o}`' for o, n in SYNONYMS.items() if n == k)} |" for k, v in VOCABULARY.items()]
    assert rows == want


PLAN = {"model": "qwen3-8b", "hardware": ["h100-sxm"], "tp": [1, 2], "batch": [8], "mode": "aggregated",
        "estimate": "bound", "input_tokens": 1000, "output_tokens": 100, "ttft_s": 2, "tpot_s": 0.05}


def test_the_planner_reads_requests_per_s_and_interconnect_as_its_old_names(lookup):
    _, _, now = run("deployment-plan", {**PLAN, "arrival_rate_per_s": 3, "link": {"h100-sxm": "nvlink4"}}, lookup)
    _, _, then = run("deployment-plan", {**PLAN, "requests_per_s": 3, "interconnect": {"h100-sxm": "nvlink4"}}, lookup)
    assert then.outputs == now.outputs and then.headline == now.headline
    notes = {a.split(":")[0] for a in then.assumptions}
    assert {"`requests_per_s` is now `arrival_rate_per_s`", "`interconnect` is now `link`"} <= notes
    assert not any("is now" in a for a in now.assumptions)
    for old, new, v in (("requests_per_s", "arrival_rate_per_s", 3), ("interconnect", "link", {"h100-sxm": "nvlink4"})):
        with pytest.raises(RunError) as e:
            solve("deployment-plan", {**PLAN, "arrival_rate_per_s": 3, new: v, old: v}, lookup)
        assert e.value.status == 422 and e.value.errors[0].field == old and f"give only `{new}`" in e.value.errors[0].message


def test_parallel_split_reads_interconnect_in_a_variant_too(lookup):
    body = {"model": "qwen3-8b", "hardware": "h100-sxm", "tp": [1, 2], "context_tokens": 1024, "estimate": "bound"}
    _, _, now = run("parallel-split", {**body, "link": "nvlink4", "what_if": [{"label": "PCIe", "link": "pcie4-x16"}]}, lookup)
    _, _, then = run("parallel-split", {**body, "interconnect": "nvlink4",
                                        "what_if": [{"label": "PCIe", "interconnect": "pcie4-x16"}]}, lookup)
    assert then.outputs == now.outputs and now.outputs["link"] == "nvlink4"
    assert any(a.startswith("`interconnect` is now `link`") for a in then.assumptions)


def _renamed_bodies():
    """(calculator, body with the canonical name, the same body with an old one, old, new): one body per old name (the
    mechanism is one), from the examples of every calculator but the planner (seconds per answer)."""
    out = []
    done = set()
    for name, calc in sorted(REGISTRY.items()):
        if name == "deployment-plan":
            continue
        table = _old_names(calc.request_model)
        for body in (calc.example, *calc.extra_examples):
            for old, new in table.items():
                if new in body and old not in done:
                    done.add(old)
                    renamed = {(old if k == new else k): v for k, v in body.items()}
                    out.append(pytest.param(name, body, renamed, old, new, id=f"{name}:{old}"))
    return out


@pytest.mark.parametrize("name, body, renamed, old, new", _renamed_bodies())
def test_an_old_name_gives_the_same_answer_and_says_so(name, body, renamed, old, new, lookup):
    _, _, now = run(name, body, lookup)
    _, req, then = run(name, renamed, lookup)
    assert then.outputs == now.outputs and then.headline == now.headline
    assert any(a.startswith(f"`{old}` is now `{new}`") for a in then.assumptions)
    assert not any("is now" in a for a in now.assumptions)
    assert new in then.inputs and old not in then.inputs          # the answer echoes the canonical name


def test_the_rename_list_covers_the_issue(lookup):
    """The renames issue #28 names are read, in a nested request too (routing-cost's candidates)."""
    kv = {"model": "qwen3-8b", "tokens": 8192}
    assert run("kv-cache", {**kv, "tensor_parallel": 4}, lookup)[2].outputs == run("kv-cache", {**kv, "tp": 4}, lookup)[2].outputs
    cand = {"name": "A", "pass_rate": 0.9, "usage": {"prefix_tokens": 1000, "new_input_tokens": 100, "output_tokens": 50}}
    old = run("routing-cost", {"tasks": 10, "candidates": [{**cand, "price_per_mtok": {"input": 1, "output": 4},
                                                             "cache_hit_rate": 0.5}]}, lookup)[2]
    new = run("routing-cost", {"tasks": 10, "candidates": [{**cand, "price_per_million_tokens_usd": {"input": 1, "output": 4},
                                                             "prefix_hit_rate": 0.5}]}, lookup)[2]
    assert old.outputs == new.outputs
    assert {"`price_per_mtok` is now `price_per_million_tokens_usd`", "`cache_hit_rate` is now `prefix_hit_rate`"} \
        <= {a.split(":")[0] for a in old.assumptions}
    sc = dict(REGISTRY["serving-cost"].example)
    sc.pop("weight_bytes_per_param", None)
    old_sc = run("serving-cost", {**sc, "bytes_per_param": 1, "tpot_target_s": 0.03}, lookup)[2]
    assert old_sc.outputs == run("serving-cost", {**sc, "weight_bytes_per_param": 1, "tpot_s": 0.03}, lookup)[2].outputs
    assert sum("is now" in a for a in old_sc.assumptions) == 2
    w = run("weight-memory", {"params": 8e9, "format": "fp8"}, lookup)[2]      # weight-memory's own rename
    assert w.outputs == run("weight-memory", {"params": 8e9, "weight_format": "fp8"}, lookup)[2].outputs
    assert any(a.startswith("`format` is now `weight_format`") for a in w.assumptions)
    with pytest.raises(RunError) as e:                                           # ... which holds there only
        solve("kv-cache", {**kv, "format": "fp8"}, lookup)
    assert e.value.errors[0].field == "format"


def test_old_and_new_name_together_is_a_422_naming_the_old_one(lookup):
    with pytest.raises(RunError) as e:
        solve("kv-cache", {"model": "qwen3-8b", "tokens": 1, "tp": 2, "tensor_parallel": 4}, lookup)
    assert e.value.status == 422
    assert e.value.errors[0].field == "tensor_parallel" and "give only `tp`" in e.value.errors[0].message


def test_old_names_are_not_in_the_openapi_document(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    ops = {op["operationId"]: op for path in spec["paths"].values() for op in path.values()}
    checked = 0
    for name, calc in REGISTRY.items():
        body = ops[calc.operation_id]["requestBody"]["content"]["application/json"]["schema"]
        ref = body.get("$ref") or next(s["$ref"] for s in body.get("anyOf", body.get("oneOf", [])) if "$ref" in s)
        props = schemas[ref.rsplit("/", 1)[1]]["properties"]
        old = set(_old_names(calc.request_model))
        assert not old & set(props), (name, old & set(props))
        assert not {p for p in props if p in SYNONYMS and (name, p) not in KEPT}, name
        checked += bool(old)
    assert checked >= 15        # the renamed calculators were looked at
