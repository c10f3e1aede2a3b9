"""Tests without escapes: a scan of tests/**/*.py (with `ast`, never by regex) that fails on

- skips and expected failures: `pytest.skip(...)`, `pytest.xfail(...)`, `pytest.importorskip(...)`,
  `pytest.mark.skip`, `pytest.mark.skipif`, `pytest.mark.xfail` — except the one allowed skip, the
  Chromium-binary `skipif(not CHROMIUM.exists(), ...)` of the browser tests;
- `assert A or B` where a later operand is a string-membership test (`"kv-cache" in html`): the escape
  that makes an assertion true on almost any page;
- asserts nested inside an `if` whose test checks membership in a calculator REGISTRY (`if "x" in
  REGISTRY: assert …`): the assertion silently disappears when the calculator does.

The detectors are tested on small snippets below, both ways, so the scan stays precise.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: (file relative to the repository, condition as ast.unparse writes it): the Chromium-binary skip of the
#: browser tests (the same skip in the two modules that drive headless Chromium)
ALLOWED_SKIPIF = {("tests/site/test_browser.py", "not CHROMIUM.exists()"),
                  ("tests/site/test_docs_offline.py", "not CHROMIUM.exists()")}
SKIP_CALLS = {"skip", "xfail", "importorskip"}
SKIP_MARKS = {"skip", "skipif", "xfail"}


def _dotted(node: ast.AST) -> str:
    """`pytest.mark.skipif` for an Attribute/Name chain, "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def skip_findings(tree: ast.AST, rel: str) -> list[str]:
    """Every skip or xfail in a module but the allowed Chromium skipif."""
    out = []
    allowed_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) == "pytest.mark.skipif" and node.args:
            if (rel, ast.unparse(node.args[0])) in ALLOWED_SKIPIF:
                allowed_nodes.add(id(node.func))
    for node in ast.walk(tree):
        name = _dotted(node) if isinstance(node, ast.Attribute) else ""
        if not name or id(node) in allowed_nodes:
            continue
        if name in {f"pytest.{c}" for c in SKIP_CALLS} or name in {f"pytest.mark.{m}" for m in SKIP_MARKS}:
            out.append(f"{rel}:{node.lineno}: {name}")
    for node in ast.walk(tree):                      # `from pytest import skip` and friends
        if isinstance(node, ast.ImportFrom) and node.module in ("pytest", "_pytest.outcomes"):
            for alias in node.names:
                if alias.name in SKIP_CALLS:
                    out.append(f"{rel}:{node.lineno}: from {node.module} import {alias.name}")
    return out


def _string_membership(node: ast.AST) -> bool:
    """`"x" in <anything>` (one comparison, a string constant on the left)."""
    return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In)
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str))


def escape_findings(tree: ast.AST, rel: str) -> list[str]:
    """`assert A or B` with a string-membership test among the operands after the first (also an `or`
    nested in the assert's condition, `assert x and (A or "b" in html)`; not inside a call such as any())."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        stack = [node.test]
        while stack:
            expr = stack.pop()
            if isinstance(expr, ast.BoolOp):
                if isinstance(expr.op, ast.Or) and any(_string_membership(v) for v in expr.values[1:]):
                    out.append(f"{rel}:{node.lineno}: assert … or {ast.unparse(expr.values[-1])}")
                    break
                stack.extend(expr.values)
            elif isinstance(expr, ast.UnaryOp):
                stack.append(expr.operand)
    return out


def _registry_membership(test: ast.AST) -> bool:
    """The condition checks (not-)membership in REGISTRY (a name or an attribute such as registry.REGISTRY)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            for side in node.comparators:
                if (isinstance(side, ast.Name) and side.id == "REGISTRY") or \
                        (isinstance(side, ast.Attribute) and side.attr == "REGISTRY"):
                    return True
    return False


def guarded_findings(tree: ast.AST, rel: str) -> list[str]:
    """Asserts inside (either branch of) an `if` that tests REGISTRY membership."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _registry_membership(node.test):
            inner = [n for stmt in node.body + node.orelse for n in ast.walk(stmt) if isinstance(n, ast.Assert)]
            if inner:
                out.append(f"{rel}:{node.lineno}: if {ast.unparse(node.test)}: assert … ({len(inner)} asserts)")
    return out


def scan(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return skip_findings(tree, rel) + escape_findings(tree, rel) + guarded_findings(tree, rel)


FILES = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_scan_covers_the_test_tree():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"tests/test_hygiene.py", "tests/site/test_pages.py", "tests/test_claims.py"} <= names
    assert len(FILES) >= 20


def test_no_skips_escapes_or_registry_guarded_asserts():
    findings = [f for p in FILES for f in scan(p)]
    assert findings == []


def test_the_allowed_chromium_skip_is_still_the_only_one():
    """The allowed skip exists where it is allowed (otherwise ALLOWED_SKIPIF is stale)."""
    for rel, condition in ALLOWED_SKIPIF:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        conditions = [ast.unparse(n.args[0]) for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and _dotted(n.func) == "pytest.mark.skipif" and n.args]
        assert conditions == [condition], (rel, conditions)


# --------------------------------------------------------------------------- the detectors, both ways

def _find(src: str, rel: str = "tests/x.py") -> list[str]:
    tree = ast.parse(src)
    return skip_findings(tree, rel) + escape_findings(tree, rel) + guarded_findings(tree, rel)


@pytest.mark.parametrize("src", [
    'def test():\n    pytest.skip("later")\n',
    'import pytest\npytestmark = pytest.mark.xfail(reason="flaky")\n',
    '@pytest.mark.skipif(True, reason="x")\ndef test(): pass\n',
    '@pytest.mark.skip\ndef test(): pass\n',
    'np = pytest.importorskip("numpy")\n',
    'from pytest import skip\n',
    'def test(html):\n    assert "a" in html or "kv-cache" in html\n',
    'def test(values, html):\n    assert any(values) or "weight-memory" in html.lower()\n',
    'def test(t):\n    assert "tokens:" in t and ("≥ 0" in t or "greater than or equal to 0" in t)\n',
    'def test(html):\n    if "kv-cache" in REGISTRY:\n        assert "147,456" in html\n',
    'def test(html):\n    if "x" not in registry.REGISTRY:\n        pass\n    else:\n        assert html\n',
    'def test(html):\n    if ok and "x" in site.REGISTRY:\n        for h in html:\n            assert h\n',
])
def test_detectors_flag_the_escapes(src):
    assert len(_find(src)) == 1, _find(src)


@pytest.mark.parametrize("src", [
    'def test(html):\n    assert "a" in html and "b" in html\n',
    'def test(x):\n    assert x is None or x > 0\n',
    'def test(html):\n    assert "a" in html or html.startswith("b")\n',   # only string membership escapes
    'def test(errors):\n    assert any("m" in e.field or "m" in e.message for e in errors)\n',  # inside a call
    'def test(d):\n    assert d["calculator"] in REGISTRY\n',
    'def test(d):\n    if d.get("calculator"):\n        assert d["calculator"] in REGISTRY\n',
    'def test(names):\n    for n in names:\n        if n in REGISTRY:\n            print(n)\n',
    'ok = [d for d in ds if d["calculator"] in REGISTRY]\n',
    'def test():\n    x = pytest.approx(1.0)\n    assert 1.0 == x\n',
    'def skip(x):\n    return x\n',
])
def test_detectors_leave_legitimate_code_alone(src):
    assert _find(src) == []


def test_the_chromium_skip_is_allowed_only_where_listed():
    src = 'pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason="no chromium")]\n'
    assert _find(src, "tests/site/test_browser.py") == []
    assert len(_find(src, "tests/site/test_other.py")) == 1
    other = 'pytestmark = [pytest.mark.skipif(not GPU.exists(), reason="no gpu")]\n'
    assert len(_find(other, "tests/site/test_browser.py")) == 1
