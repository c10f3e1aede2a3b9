"""Mutation check: do the stored worked examples notice when a core formula is 1 % off?

Each mutation changes one shared formula by 1 %, in this process only (monkeypatching the function
everywhere it was imported; no file is edited): the KV bytes of a model (architecture.kv_sizes), the
β term of every collective (collective.collective_cost: the bytes on the wire), the roofline bound
(roofline's t = max(t_c, t_m)) and the bytes of a storage format (formats.Fmt.bytes_of / entry_bytes).
Under each, every bound worked example (knowledge/data/derivations/) and every audited claim
(knowledge/data/claims.yaml) is recomputed with knowledge.derivations.recompute, exactly as
tests/test_derivations.py and tests/test_claims.py do, and the checks that fail are counted (checks
already failing without a mutation are not counted).

    .venv/bin/python benchmarks/mutation_check.py            # the default mutations, a table
    .venv/bin/python benchmarks/mutation_check.py kv --json  # one mutation, JSON

Exits 1 if any mutation is caught by no check (0 failures), 2 if the unmutated baseline fails.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from calculators.domain import architecture
from calculators.perf import collective
from calculators.domain import formats
from calculators.families.compute import roofline  # noqa: E402
from calculators.framework.registry import REGISTRY  # noqa: E402,F401  (imports every calculator module first)
from knowledge.derivations import recompute  # noqa: E402
from knowledge.loader import catalog_lookup, default_catalog  # noqa: E402

FACTOR = 1.01
#: modules whose globals may hold a patched function (imported by name)
PACKAGES = ("calculators", "knowledge", "api")


@contextmanager
def patched_everywhere(module: types.ModuleType, name: str, new: Any) -> Iterator[None]:
    """Replace `module.name` and every `from module import name` copy in the loaded project modules."""
    old = getattr(module, name)
    holders = [m for m in list(sys.modules.values())
               if isinstance(m, types.ModuleType) and (m.__name__ or "").split(".")[0] in PACKAGES
               and getattr(m, name, None) is old]
    try:
        for m in holders:
            setattr(m, name, new)
        yield
    finally:
        for m in holders:
            setattr(m, name, old)


@contextmanager
def patched_attr(owner: Any, name: str, new: Any) -> Iterator[None]:
    old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, new)
    try:
        yield
    finally:
        setattr(owner, name, old)


@contextmanager
def mutate_kv() -> Iterator[None]:
    """KV bytes per token and per request (every group, every device) 1 % larger."""
    orig = architecture.kv_sizes

    def kv_sizes(*args, **kwargs):
        s = orig(*args, **kwargs)
        return dataclasses.replace(s, bytes_per_token=s.bytes_per_token * FACTOR,
                                   device_bytes_per_token=s.device_bytes_per_token * FACTOR,
                                   bytes_per_request=s.bytes_per_request * FACTOR,
                                   device_bytes_per_request=s.device_bytes_per_request * FACTOR)
    with patched_everywhere(architecture, "kv_sizes", kv_sizes):
        yield


@contextmanager
def mutate_collective() -> Iterator[None]:
    """The β term of the α–β time 1 % larger: every collective puts 1 % more bytes on the wire."""
    orig = collective.collective_cost

    def collective_cost(*args, **kwargs):
        c = orig(*args, **kwargs)
        return {**c, "wire": c["wire"] * FACTOR}
    with patched_everywhere(collective, "collective_cost", collective_cost):
        yield


@contextmanager
def mutate_roofline() -> Iterator[None]:
    """The roofline's two terms 1 % larger: t_c = F / peak and t_m = bytes / bandwidth (the rates roofline.py
    reads through hardware_rates, 1 % lower; other calculators keep theirs)."""
    orig = roofline.hardware_rates

    def hardware_rates(*args, **kwargs):
        peak, bw, *rest = orig(*args, **kwargs)
        return (None if peak is None else peak / FACTOR, None if bw is None else bw / FACTOR, *rest)
    with patched_attr(roofline, "hardware_rates", hardware_rates):
        yield


@contextmanager
def mutate_roofline_max() -> Iterator[None]:
    """The roofline bound t = max(t_c, t_m) 1 % larger (roofline.py's numpy, maximum only)."""
    proxy = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    proxy.maximum = lambda *a, **k: np.maximum(*a, **k) * FACTOR
    with patched_attr(roofline, "np", proxy):
        yield


@contextmanager
def mutate_formats() -> Iterator[None]:
    """The bytes of every storage format 1 % larger (Fmt.bytes_of and Fmt.entry_bytes)."""
    bytes_of, entry_bytes = formats.Fmt.bytes_of, formats.Fmt.entry_bytes
    with patched_attr(formats.Fmt, "bytes_of", lambda self, v: bytes_of(self, v) * FACTOR), \
            patched_attr(formats.Fmt, "entry_bytes", lambda self, v: entry_bytes(self, v) * FACTOR):
        yield


MUTATIONS: dict[str, tuple[str, Callable[[], Any]]] = {
    "kv": ("calculators/domain/architecture.py kv_sizes: KV bytes per token ×1.01", mutate_kv),
    "collective": ("calculators/perf/collective.py collective_cost: β term (wire bytes) ×1.01", mutate_collective),
    "roofline": ("calculators/families/compute/roofline.py: t_c and t_m (peak and bandwidth ÷1.01)", mutate_roofline),
    "formats": ("calculators/domain/formats.py Fmt.bytes_of / entry_bytes ×1.01", mutate_formats),
    "roofline-max": ("calculators/families/compute/roofline.py: bound max(t_c, t_m) ×1.01", mutate_roofline_max),
}
#: run by default; the others on request (roofline-max: no stored example pins time_s with both terms yet)
DEFAULT = ("kv", "collective", "roofline", "formats")


def bound_records(include_claims: bool = True) -> list[dict]:
    """Every bound worked example (and audited claim, with its alternatives) as a recompute() input."""
    cat = default_catalog()
    out = [d for d in cat.records.get("derivation", []) if isinstance(d, dict) and d.get("calculator")
           and isinstance(d.get("request"), dict) and d.get("expected")]
    if include_claims:
        for c in cat.records.get("claim", []):
            if not isinstance(c, dict):
                continue
            out.append(c)
            out += [{**a, "id": f"{c['id']}/alt{i}"} for i, a in enumerate(c.get("alternatives") or [])]
    return out


def failing(records: list[dict], lookup) -> set[tuple[str, str]]:
    """(record id, path) of every check that fails (a calculator error fails all the record's checks)."""
    bad = set()
    for r in records:
        rid = r.get("id") or f"{r.get('case')}/{r.get('name')}"
        try:
            checks = recompute(r, lookup)
        except Exception:  # noqa: BLE001 - a refused or crashing request fails every check of the record
            bad |= {(rid, p) for p in r.get("expected") or {}}
            continue
        bad |= {(rid, c.path) for c in checks if not c.ok}
    return bad


def run(names: list[str], include_claims: bool = True) -> dict:
    cat_records = bound_records(include_claims)
    lookup = catalog_lookup(default_catalog())
    total = sum(len(r.get("expected") or {}) for r in cat_records)
    t0 = time.perf_counter()
    baseline = failing(cat_records, lookup)
    report: dict[str, Any] = {"records": len(cat_records), "checks": total, "baseline_failures": len(baseline),
                              "baseline": sorted("/".join(x) for x in baseline)[:20], "mutations": []}
    for name in names:
        label, mutate = MUTATIONS[name]
        with mutate():
            bad = failing(cat_records, lookup) - baseline
        records = sorted({rid for rid, _ in bad})
        report["mutations"].append({"name": name, "change": label, "failed_checks": len(bad),
                                    "failed_records": len(records), "examples": records[:5], "caught": bool(bad)})
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mutations", nargs="*", choices=[[], *MUTATIONS], default=[], metavar="MUTATION",
                    help=f"which to run: {', '.join(MUTATIONS)} (default {', '.join(DEFAULT)})")
    ap.add_argument("--no-claims", action="store_true", help="recompute the worked examples only")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    report = run(args.mutations or list(DEFAULT), include_claims=not args.no_claims)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(f"{report['records']} bound records, {report['checks']} checks; "
              f"{report['baseline_failures']} fail without a mutation")
        print(f"{'mutation':<11} {'failed checks':>13} {'records':>8}  change")
        for m in report["mutations"]:
            flag = "" if m["caught"] else "   <-- NOT CAUGHT"
            print(f"{m['name']:<11} {m['failed_checks']:>13} {m['failed_records']:>8}  {m['change']}{flag}")
        print(f"({report['seconds']} s)")
    if report["baseline_failures"]:
        print("the unmutated baseline fails; fix it first:", *report["baseline"], sep="\n  ", file=sys.stderr)
        return 2
    return 0 if all(m["caught"] for m in report["mutations"]) else 1


if __name__ == "__main__":
    sys.exit(main())
