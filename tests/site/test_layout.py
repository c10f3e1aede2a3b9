"""The shape of the site's code: small modules, and no URL spelled outside the URL builder."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 500


def test_no_site_module_is_over_500_lines():
    modules = sorted((ROOT / "api" / "site").glob("*.py")) + [ROOT / "api" / "urls.py", ROOT / "api" / "queries.py"]
    assert len(modules) > 5
    too_long = {m.name: n for m in modules if (n := len(m.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not too_long, f"modules over {LIMIT} lines: {too_long}"


def test_templates_build_internal_urls_with_the_builder():
    """`href="/…"`, `action="/…"` and `src="/…"` are spelled by `urls.…` instead."""
    literal = re.compile(r'\b(?:href|action|src)="/')
    offenders = [f"{t.name}:{i}" for t in sorted((ROOT / "api" / "templates").glob("*.j2"))
                 for i, line in enumerate(t.read_text(encoding="utf-8").splitlines(), 1) if literal.search(line)]
    assert not offenders, offenders


def test_site_views_spell_no_paths_outside_their_route_decorators():
    """Python views ask `api.urls.urls` for URLs; the only path literals are the routes they serve."""
    pattern = re.compile(r'''f?["']/(?:cases|hardware|models|links|frameworks|prices|sources|calculators|claims|glossary|search|api)\b''')
    offenders = []
    for m in sorted((ROOT / "api" / "site").glob("*.py")):
        for i, line in enumerate(m.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not line.lstrip().startswith("@router."):
                offenders.append(f"{m.name}:{i}: {line.strip()}")
    assert not offenders, offenders
