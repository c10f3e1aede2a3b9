"""Typed records of the data files: one pydantic model per record kind, validated by `casebook build`.

The models are the single declaration of a record's shape: the builder validates every data file
through them (`knowledge.validate`), `knowledge.tables` derives the store's columns from them, and
`api.schemas` publishes them.
"""
from __future__ import annotations

from knowledge.records.base import (COUNT_FIELDS, STRUCTURAL, UNIT_SUFFIXES, Calculator, CountFact, Fact, FactGroup,
                                    Label, PositiveInt, Problems, Record, Slug, SourceId, Text, describe, fact_rule,
                                    join, refs, refuse)
from knowledge.records.benchmark import FRAMEWORKS as BENCHMARK_FRAMEWORKS
from knowledge.records.benchmark import Benchmark, BenchmarkLatency, BenchmarkLoad, Measured
from knowledge.records.book import (Case, Check, Claim, ClaimAlternative, Derivation, Feature, Framework, Glossary,
                                    Uses)
from knowledge.records.facts import (MLA, SCOPES, ConfigProvenance, Hardware, Link, Model, ModelLayerGroup,
                                     ModelStream, MoE, Peak, Price, Provenance, Source)

#: kind (as in the loader and the store) -> record model
KINDS: dict[str, type[Record]] = {
    "source": Source, "hardware": Hardware, "link": Link, "model": Model, "framework": Framework,
    "price": Price, "case": Case, "derivation": Derivation, "glossary": Glossary, "claim": Claim,
    "benchmark": Benchmark,
}

__all__ = [
    "BENCHMARK_FRAMEWORKS", "Benchmark", "BenchmarkLatency", "BenchmarkLoad", "Measured",
    "COUNT_FIELDS", "KINDS", "MLA", "SCOPES", "STRUCTURAL", "UNIT_SUFFIXES", "Calculator", "Case", "Check", "Claim",
    "ClaimAlternative", "ConfigProvenance", "CountFact", "Derivation", "Fact", "FactGroup", "Feature", "Framework",
    "Glossary", "Hardware", "Label", "Link", "MoE", "Model", "ModelLayerGroup", "ModelStream", "Peak", "PositiveInt",
    "Price", "Problems", "Provenance", "Record", "Slug", "Source", "SourceId", "Text", "Uses", "describe",
    "fact_rule", "join", "refs", "refuse",
]
