"""The typed records: real records validate, every rule refuses with its place, and a column is declared once."""
from __future__ import annotations

import json
import textwrap
from typing import Optional

import duckdb
import pytest
from pydantic import ValidationError

from knowledge import records as R
from knowledge import tables as T
from knowledge.build import build
from knowledge.loader import DuplicateKeys, load_yaml
from tests.store.test_build import CASES, HARDWARE, MODELS, SOURCES, _private_copy, make_data, problems_of

FRAMEWORKS = """
- id: fw
  name: FW
  kind: inference-engine
  features:
    - {feature: paged-attention, name: PagedAttention, since: "v0.1", date: "2023-06", source: src-a, locator: "p. 1"}
"""
CLAIMS = """
- id: claim-one
  topic: kv
  claim_en: A claim.
  page_value: "~1 GB"
  page_numbers: [{text: "2 B per token", value: 2, unit: B, path: bytes_per_token}]
  source: src-a
  locator: intro
  calculator: kv-cache
  request: {model: tiny-1b, tokens: 1}
  expected: {bytes_per_token: 1}
  verdict: "off"
  off_by: 2
"""
GLOSSARY = """
- id: h2o
  term: H2O
  kind: kv-eviction
  definition: A method.
  paper: src-a
  related_calculators: [kv-eviction]
"""
DERIVATION = """
- case: case-one
  name: example
  family: kv_sizing
  title: An example
  calculator: kv-cache
  request: {model: tiny-1b, tokens: 1}
  expected: {bytes_per_token: 1}
"""


@pytest.mark.parametrize("kind", sorted(R.KINDS))
def test_each_record_kind_validates_a_real_record(catalog, kind):
    model = R.KINDS[kind]
    raws = catalog.records[kind]
    assert raws, kind
    for raw in raws:
        rec = model.model_validate(raw)
        assert getattr(rec, model.key) == raw[model.key]


def test_real_records_are_typed(catalog):
    hw = R.Hardware.model_validate(catalog.by_id("hardware")["h100-sxm"])
    assert isinstance(hw.memory_bytes, R.Fact) and hw.memory_bytes.value > 0
    assert hw.scope == "device" and hw.devices_in_scope == 1
    assert hw.memory_per_device_bytes == hw.memory_bytes.value
    assert all(isinstance(p.flop_per_s, R.Fact) for p in hw.peaks)
    model = R.Model.model_validate(catalog.by_id("model")["qwen3-8b"])
    assert isinstance(model.layers, R.CountFact) and model.weight_dtype
    assert model.layer_groups and model.layer_groups[0].streams[0].dim > 0
    moe = next(m for m in catalog.records["model"] if m["kind"] == "moe")
    assert R.Model.model_validate(moe).moe.experts.value > 1


def test_per_device_memory_follows_per():
    memory = {"value": 720e9, "source": "s", "locator": "t", "basis": "decimal", "basis_source": "s",
              "basis_locator": "t", "note": "GB = 1e9 B here"}
    device = R.Hardware.model_validate({"id": "x", "name": "X", "scope": "device", "memory_bytes": memory})
    assert device.scope == "device" and device.memory_per_device_bytes == 720e9
    total = {"id": "x", "name": "X", "memory_bytes": {**memory, "per": "total"}}
    node = R.Hardware.model_validate({**total, "scope": "node", "devices_in_scope": 8})
    rack = R.Hardware.model_validate({**total, "scope": "rack", "devices_in_scope": 72})
    assert node.memory_per_device_bytes == 90e9 and rack.memory_per_device_bytes == 10e9
    per_device = R.Hardware.model_validate({**total, "scope": "rack", "devices_in_scope": 72,
                                            "memory_bytes": {**memory, "per": "device"}})
    assert per_device.memory_per_device_bytes == 720e9
    system = R.Hardware.model_validate({**total, "scope": "node", "devices_in_scope": 8,
                                        "memory_bytes": {**memory, "per": "system"}})
    assert system.memory_per_device_bytes is None


def test_old_scope_spellings_are_refused():
    for old in ("single_device", "system_aggregate"):
        with pytest.raises(ValueError):
            R.Hardware.model_validate({"id": "x", "name": "X", "scope": old})


def test_partial_records_build(tmp_path):
    """A record may hold only its id and name (the site shows what is missing)."""
    files = {"hardware.yaml": "- {id: bare-chip, name: Bare chip}\n", "links.yaml": "- {id: l1, name: Link one}\n",
             "prices.yaml": "- {id: p1, name: P, provider: X}\n", "models.yaml": "- {id: m, name: M}\n"}
    db = tmp_path / "x.duckdb"
    counts = build(db, make_data(tmp_path, **files))
    assert counts["hardware"] == counts["link"] == counts["price"] == counts["model"] == 1


def _hw(text: str) -> dict:
    return {"hardware.yaml": text}


@pytest.mark.parametrize("files, expected", [
    # hardware
    (_hw(HARDWARE.replace("scope: device", "scope: device\n  devices_in_scope: 2")),
     "hardware.yaml: gpu-x: devices_in_scope: a device-scope record covers exactly 1 device"),
    (_hw(HARDWARE.replace("scope: device", "scope: galaxy")), "hardware.yaml: gpu-x: scope: must be one of"),
    (_hw(HARDWARE.replace("scope: device", "scope: rack\n  devices_in_scope: 0")),
     "hardware.yaml: gpu-x: devices_in_scope: Input should be greater than or equal to 1"),
    (_hw(HARDWARE.replace("sparsity: dense", "sparsity: sparse")),
     "hardware.yaml: gpu-x: peaks.0.sparsity: must be dense, structured or unspecified"),
    (_hw(HARDWARE.replace("unit: tensor, ", "")), "hardware.yaml: gpu-x: peaks.0.unit: required field is missing"),
    (_hw(HARDWARE.replace('as_published: "80 GB"', 'as_published: "80 GB", per: everything')),
     "hardware.yaml: gpu-x: memory_bytes.per: must be one of"),
    (_hw(HARDWARE.replace("basis: decimal,", "")), "hardware.yaml: gpu-x: memory_bytes.basis: basis_source given without basis"),
    (_hw(HARDWARE.replace("basis: decimal,", "basis: octal,")), "hardware.yaml: gpu-x: memory_bytes.basis: must be one of"),
    (_hw(HARDWARE.replace(', basis_locator: "Table 1, footnote"', "")),
     "hardware.yaml: gpu-x: memory_bytes: a memory capacity needs basis_locator"),
    (_hw(HARDWARE.replace(', note: "the datasheet defines GB as 1e9 bytes"', "")),
     "hardware.yaml: gpu-x: memory_bytes.note: a decimal memory capacity needs a note"),
    (_hw(HARDWARE.replace('locator: "Table 2"', 'locator: "Table 2", per: device')),
     "hardware.yaml: gpu-x: peaks.0.flop_per_s.per: a device record's facts are per device"),
    (_hw(HARDWARE.replace("scope: device", "scope: rack\n  devices_in_scope: 72")),
     "hardware.yaml: gpu-x: memory_bandwidth_bytes_per_s.per: on a rack record say what the figure counts"),
    (_hw(HARDWARE.replace('as_published: "80 GB"', 'as_published: "80 GB", sauce: src-a')),
     "hardware.yaml: gpu-x: memory_bytes.sauce: unknown field"),
    (_hw(HARDWARE.replace("  peaks:", "  hbm_bytes: 5\n  peaks:")), "hardware.yaml: gpu-x: hbm_bytes: fact has no source"),
    (_hw(HARDWARE.replace("  peaks:", "  cache: {l2_bytes: {value: 0, source: src-a, locator: x}}\n  peaks:")),
     "hardware.yaml: gpu-x: cache.l2_bytes: impossible value: must be > 0"),
    (_hw(HARDWARE.replace("3.35e12", ".nan")),
     "hardware.yaml: gpu-x: memory_bandwidth_bytes_per_s: value must be a finite number"),
    (_hw(HARDWARE.replace("  peaks:", "  links: [no-such-link]\n  peaks:")),
     "hardware.yaml: gpu-x: links: reference to unknown link 'no-such-link'"),
    (_hw(HARDWARE.replace("- id: gpu-x", "- id: GPU X")), "hardware.yaml: GPU X: id: id 'GPU X' is not a lowercase slug"),
    (_hw(HARDWARE.replace("  name: GPU X\n", "")), "hardware.yaml: gpu-x: name: required field is missing"),
    (_hw(HARDWARE.replace("  vendor: Acme\n", "  vendor: Acme\n  vendor: Acme2\n")),
     "hardware.yaml: gpu-x: vendor: duplicate key in a mapping (line"),
    (_hw(HARDWARE.replace("accumulator: FP32,", "accumulator: FP32, accumulator: FP16,")),
     "hardware.yaml: gpu-x: accumulator: duplicate key in a mapping (line"),
    # models
    ({"models.yaml": MODELS.replace("value: 4,", "value: 4.5,")}, "models.yaml: tiny-1b: layers: a count must be an integer"),
    ({"models.yaml": MODELS.replace("  layer_groups_provenance: {source: src-a, locator: \"config.json\"}\n", "")},
     "models.yaml: tiny-1b: layer_groups_provenance: layer groups have no source"),
    ({"models.yaml": MODELS.replace("count: 4,", "count: 0,")},
     "models.yaml: tiny-1b: layer_groups.0.count: impossible value: a positive integer is required"),
    ({"models.yaml": MODELS.replace("window: null", "window: -1")},
     "models.yaml: tiny-1b: layer_groups.0.streams.0.window: must be a positive integer or null"),
    ({"models.yaml": MODELS.replace("kind: dense", "kind: moe")}, "models.yaml: tiny-1b: moe: an MoE model needs its moe block"),
    ({"models.yaml": MODELS + "  config_provenance: {repository: acme/tiny, path: config.json}\n"},
     "models.yaml: tiny-1b: config_provenance.revision: config provenance needs a revision (commit) or a file_sha256"),
    ({"models.yaml": MODELS + "  config_provenance: {repository: acme/tiny, path: config.json, revision: main}\n"},
     "models.yaml: tiny-1b: config_provenance.revision: String should match pattern"),
    # sources, cases, frameworks, derivations, claims, glossary
    ({"sources.yaml": SOURCES.replace("  url: https://example.org/a.pdf\n", "")},
     "sources.yaml: src-a: url: required field is missing"),
    ({"sources.yaml": SOURCES.replace("kind: datasheet", "kind: rumour")}, "sources.yaml: src-a: kind: must be one of"),
    ({"cases.yaml": CASES + "  uses: {gadgets: [x]}\n"}, "cases.yaml: case-one: uses.gadgets: unknown kind of fact"),
    ({"cases.yaml": CASES + "  uses: {models: [no-such-model]}\n"},
     "cases.yaml: case-one: uses.models: reference to unknown model 'no-such-model'"),
    ({"cases.yaml": CASES.replace("  summary: A case.\n", "")}, "cases.yaml: case-one: summary: required field is missing"),
    ({"frameworks.yaml": FRAMEWORKS.replace("source: src-a, ", "")},
     "frameworks.yaml: fw: features.0.source: feature row has no source"),
    ({"frameworks.yaml": FRAMEWORKS.replace("source: src-a", "source: nowhere")},
     "frameworks.yaml: fw: features.0.source: reference to unknown source 'nowhere'"),
    ({"claims.yaml": CLAIMS.replace("  off_by: 2\n", "")}, "claims.yaml: claim-one: off_by: off_by is given exactly when"),
    ({"claims.yaml": CLAIMS.replace("calculator: kv-cache", "calculator: no-such")},
     "claims.yaml: claim-one: calculator: unknown calculator"),
    ({"claims.yaml": CLAIMS.replace("  off_by: 2\n", "  off_by: 3\n")},
     "claims.yaml: claim-one: page_numbers: off_by 3.0 does not match the computed factor 2"),
    ({"claims.yaml": CLAIMS.replace('verdict: "off"\n  off_by: 2\n', "verdict: holds\n")},
     "claims.yaml: claim-one: page_numbers: 2 B per token: ratio 0.5 is outside"),
    ({"glossary.yaml": GLOSSARY.replace("[kv-eviction]", "[no-such]")},
     "glossary.yaml: h2o: related_calculators.0: unknown calculator 'no-such'"),
    ({"glossary.yaml": GLOSSARY + GLOSSARY}, "glossary.yaml: h2o: id: duplicate id 'h2o'"),
    ({"derivations/kv_sizing.yaml": DERIVATION.replace("  request: {model: tiny-1b, tokens: 1}\n", "")},
     "derivations/kv_sizing.yaml: case-one/example: request: a bound derivation needs a request body"),
    ({"derivations/kv_sizing.yaml": DERIVATION.replace("case: case-one", "case: no-case")},
     "derivations/kv_sizing.yaml: no-case/example: case: reference to unknown case 'no-case'"),
])
def test_each_rule_refuses_with_its_place(tmp_path, files, expected):
    found = problems_of(make_data(tmp_path, **files))
    assert any(p.startswith(expected) for p in found), found


def test_the_extra_files_of_the_rule_table_are_clean(tmp_path):
    files = {"frameworks.yaml": FRAMEWORKS, "claims.yaml": CLAIMS, "glossary.yaml": GLOSSARY,
             "derivations/kv_sizing.yaml": DERIVATION}
    assert problems_of(make_data(tmp_path, **files)) == []


def test_duplicate_yaml_keys_are_refused_naming_file_record_and_key(tmp_path):
    path = tmp_path / "hardware.yaml"
    path.write_text(textwrap.dedent("""
        - id: a
          name: A
          peaks:
            - {unit: tensor, unit: vector}
          name: B
        - id: b
          name: B
    """), encoding="utf-8")
    with pytest.raises(DuplicateKeys) as err:
        load_yaml(path)
    assert err.value.found == [("a", "unit", 5), ("a", "name", 6)]
    assert "hardware.yaml: a: name: duplicate key (line 6)" in str(err.value)


def test_a_model_record_without_context_skips_reference_checks():
    fact = {"value": 1.0, "source": "not-in-any-catalog", "locator": "x"}
    assert R.Fact.model_validate(fact).source == "not-in-any-catalog"
    with pytest.raises(ValidationError):
        R.Fact.model_validate(fact, context={"ids": {"source": set()}})


# ---------------------------------------------------------------------------- one declaration per column

def test_every_record_column_reaches_the_public_schema():
    """A column read from a record field is declared once, on the record, and the API's schema is the record's."""
    from api import schemas as S

    public = {"source": S.Source, "hardware": S.Hardware, "link": S.Link, "model": S.Model, "framework": S.Framework,
              "price": S.Price, "case": S.Case, "derivation": S.Derivation, "glossary": S.Glossary, "claim": S.Claim,
              "benchmark": S.Benchmark}
    for kind, table in T.TABLES.items():
        record = R.KINDS[kind]
        props = public[kind].model_json_schema(mode="serialization")["properties"]
        for col in table.columns:
            if col.name in record.model_fields:
                assert col.name in props, (kind, col.name)
                assert col.name in table.model_fields, (kind, col.name)


def test_a_new_record_field_becomes_a_typed_column_and_a_public_field():
    class Gadget(R.Record, R.FactGroup):
        """A test record."""

        id: R.Slug
        name: R.Text
        bays: Optional[int] = None
        power_w: Optional[R.Fact] = None
        cores: Optional[R.CountFact] = None

    table = T.record_table("Gadget", "test_gadget", Gadget, "id", "name", "bays", "power_w", "cores")
    fields = {k: f.annotation for k, f in table.model_fields.items()}
    assert fields == {"id": str, "name": Optional[str], "bays": Optional[int], "power_w": Optional[float],
                      "cores": Optional[int], "doc": str}
    raw = {"id": "g", "name": "G", "bays": 2, "power_w": {"value": 700, "source": "s", "locator": "t"},
           "cores": {"value": 132, "source": "s", "locator": "t"}}
    row = table.row(raw, Gadget.model_validate(raw))
    assert row["power_w"] == 700.0 and row["cores"] == 132 and row["bays"] == 2 and '"power_w"' in row["doc"]
    assert {"bays", "power_w", "cores"} <= set(Gadget.model_json_schema(mode="serialization")["properties"])


def test_build_writes_the_derived_columns(tmp_path):
    aggregate = HARDWARE + textwrap.dedent("""
        - id: box-x
          name: Box X
          scope: node
          devices_in_scope: 8
          memory_bytes: {value: 640.0e9, source: src-a, locator: "Table 3", per: total, basis: decimal,
                         basis_source: src-a, basis_locator: "Table 3", note: "decimal in this table"}
        """)
    db = tmp_path / "x.duckdb"
    build(db, make_data(tmp_path, **{"hardware.yaml": aggregate}))
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT id, scope, devices_in_scope, memory_per_device_bytes FROM hardware ORDER BY id").fetchall()
        model = con.execute("SELECT weight_dtype, layers FROM model").fetchone()
        fact = con.execute("SELECT value, as_published FROM fact WHERE field = 'memory_bytes' AND record_id = 'gpu-x'").fetchone()
    finally:
        con.close()
    assert rows == [("box-x", "node", 8, 80e9), ("gpu-x", "device", 1, 80e9)]
    assert model == (None, 4)
    assert fact == (80e9, "80 GB")


def test_stored_documents_conform_to_the_public_schema(built_db, tmp_path):
    """What the API serves (the stored `doc`) is what its OpenAPI schema (the record model) promises."""
    import jsonschema
    con = duckdb.connect(str(_private_copy(built_db, tmp_path)), read_only=True)
    try:
        for kind, table in T.TABLES.items():
            check = jsonschema.Draft202012Validator(R.KINDS[kind].model_json_schema(mode="serialization"))
            for (doc,) in con.execute(f"SELECT doc FROM {table.__tablename__}").fetchall():
                errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(json.loads(doc))]
                assert not errors, (kind, errors[:3])
    finally:
        con.close()
