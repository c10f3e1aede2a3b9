"""The mutation check (benchmarks/mutation_check.py): a 1 % change of the KV formula is caught by the
stored worked examples, and the patch is undone afterwards."""
from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "mutation_check.py"
spec = importlib.util.spec_from_file_location("mutation_check", SCRIPT)
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)


def test_kv_mutation_fails_derivation_checks():
    from calculators.domain import architecture
    from calculators.families.memory import kv_cache

    original = kv_cache.kv_sizes if hasattr(kv_cache, "kv_sizes") else architecture.kv_sizes
    report = mc.run(["kv"], include_claims=False)
    kv = report["mutations"][0]
    assert kv["name"] == "kv" and kv["caught"] is True
    assert kv["failed_checks"] >= 20 and kv["failed_records"] >= 10, kv
    assert len(kv["examples"]) == 5 and all("/" in rid for rid in kv["examples"]), kv
    # the patch is undone: the module holds the original function again
    assert (kv_cache.kv_sizes if hasattr(kv_cache, "kv_sizes") else architecture.kv_sizes) is original
    after = mc.failing(mc.bound_records(include_claims=False), mc.catalog_lookup(mc.default_catalog()))
    assert len(after) == report["baseline_failures"]   # failures counted are the mutation's, not the baseline's


def test_every_default_mutation_patches_something():
    assert set(mc.DEFAULT) == {"kv", "collective", "roofline", "formats"}
    assert set(mc.DEFAULT) <= set(mc.MUTATIONS)
