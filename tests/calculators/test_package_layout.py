"""The layout of `calculators/` is its architecture, and this test keeps it so.

Dependencies point one way, families → perf → domain → framework, and nothing in `calculators/` imports the store
(`knowledge`) or the web (`api`). Across packages a module imports the package's face (its `__init__`, which lists
what others may use in `__all__`), never a private name; a family imports no other family (shared pieces live in
domain/ or perf/, or in a private `_module` of its own topic package). No import cycle, no module over 600 lines,
and no URL of the service spelt in the calculation layer: `api/urls.py` builds every link.

Imports are read from the source with `ast`, function-level ones included, so a lazy import counts too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "calculators"
#: the packages of calculators/, lowest first: each may import only those before it (and itself)
LAYERS = ("framework", "domain", "perf", "families")
#: framework modules that front ends and families may import by name (the rest sits behind the face)
FRAMEWORK_PUBLIC = {"registry", "runner", "limits", "headline", "suggest"}
MAX_LINES = 600


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def imports_of(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import in the file, lazy ones included."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "__future__":
                continue
            names = [a.name for a in node.names]
            # `from pkg import submodule` is an import of the submodule
            subs = [n for n in names if f"{mod}.{n}" in MODULES]
            if subs:
                found += [(f"{mod}.{n}", [], node.lineno) for n in subs]
            rest = [n for n in names if n not in subs]
            if rest or not subs:
                found.append((mod, rest, node.lineno))
    return found


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "calculators" else None


def package_of(name: str) -> str:
    """The package a module belongs to: `calculators.families.<topic>` for a family, else `calculators.<layer>`."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] == "families":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


EDGES = {name: imports_of(name, path) for name, path in MODULES.items()}


def test_the_packages_exist_with_a_face():
    for pkg in ("framework", "domain", "perf"):
        init = PKG / pkg / "__init__.py"
        assert init.exists(), pkg
        tree = ast.parse(init.read_text())
        exported = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
        assert exported, f"calculators/{pkg}/__init__.py declares no __all__"
    topics = sorted(p.name for p in (PKG / "families").iterdir() if (p / "__init__.py").exists())
    assert {"memory", "compute", "network", "serving", "training", "kernels"} <= set(topics)


def test_no_upward_import_to_the_store_or_the_web():
    bad = [f"{name}:{line} imports {mod}" for name, edges in EDGES.items() for mod, _, line in edges
           if mod.split(".")[0] in ("api", "knowledge")]
    assert not bad, "\n".join(bad)


def test_layers_point_one_way():
    bad = []
    for name, edges in EDGES.items():
        mine = layer(name)
        if mine is None:
            continue
        for mod, _, line in edges:
            theirs = layer(mod)
            if theirs is None or theirs == mine:
                continue
            if name == "calculators.framework.registry" and mod == "calculators.families":
                continue                              # the registry discovers the families by walking that package
            if LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{name}:{line} ({mine}) imports {mod} ({theirs}), a layer above it")
    assert not bad, "\n".join(bad)


def test_no_family_imports_another():
    bad = []
    for name, edges in EDGES.items():
        if layer(name) != "families" or name == "calculators.families":
            continue
        for mod, _, line in edges:
            if layer(mod) != "families" or mod in ("calculators.families",):
                continue
            same_topic = package_of(mod) == package_of(name)
            private = mod.rsplit(".", 1)[-1].startswith("_")
            if not (same_topic and private):
                bad.append(f"{name}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_across_packages_only_the_face_and_no_private_name():
    bad = []
    for name, edges in EDGES.items():
        for mod, names, line in edges:
            if not mod.startswith("calculators.") or package_of(mod) == package_of(name):
                continue
            if layer(mod) == "families" and name == "calculators.framework.registry":
                continue                              # the registry walks the families by name
            face = package_of(mod)
            if mod != face and not (face == "calculators.framework" and mod.rsplit(".", 1)[-1] in FRAMEWORK_PUBLIC):
                bad.append(f"{name}:{line} imports {mod} instead of the face {face}")
            bad += [f"{name}:{line} takes the private name {n} from {mod}" for n in names if n.startswith("_")]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    graph = {name: sorted({mod for mod, _, _ in edges if mod in MODULES and mod != name}) for name, edges in EDGES.items()}
    # a package's face imports its own modules; a module of the package importing the face back is a cycle
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


URL_MARKERS = ("/api/v1", "/calculators/", "/cases/", "/models/", "/hardware/", "/static/", "/mcp")


def test_no_service_url_in_the_calculation_layer():
    bad = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if any(m in text for m in URL_MARKERS) and "://" not in text:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:80]!r}")
    assert not bad, "URLs are built in api/ only:\n" + "\n".join(bad)


def test_the_checker_sees_a_violation(tmp_path):
    """The walk reads lazy imports and relative ones: a family importing another inside a function is found."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from calculators.families.memory import kv_cache\n    from ..perf import _private\n")
    edges = imports_of("calculators.families.serving.x", src)
    mods = {m for m, _, _ in edges}
    assert "calculators.families.memory.kv_cache" in mods
    assert ("calculators.families.perf", ("_private",)) in {(m, tuple(n)) for m, n, _ in edges}


def test_families_read_typed_records_not_dicts():
    """A family gets its records typed (`model_record` -> ModelRecord, `record(lookup, kind, id, loc)`, `hardware_spec`,
    `link_spec`): it never calls the lookup itself, nor reads a record's facts by string keys with the dict helpers."""
    banned = {"fact_value", "fact_source", "fetch", "lookup"}
    bad = []
    for name, path in MODULES.items():
        if layer(name) != "families":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in banned:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.id}(...)")
    assert not bad, "\n".join(bad)


def test_a_model_record_is_typed_and_memoised(lookup):
    from calculators.domain import ModelRecord, model_record

    class Req:
        model, hf_config = "qwen3-8b", None

    rec = model_record(Req(), lookup)
    assert isinstance(rec, ModelRecord) and rec.id == "qwen3-8b" and rec.label
    assert rec.value("layers") == 36 and rec.source("layers")["record"] == "qwen3-8b"
    assert model_record(Req(), lookup) is rec                 # one view per store record


def test_a_calculator_is_found_by_its_name():
    """One calculator per module, named after it (`kv_cache.py` is `kv-cache`), or a module of a small family whose
    docstring names each of its calculators."""
    import importlib

    from calculators.framework.registry import REGISTRY

    by_module: dict[str, list[str]] = {}
    for name, calc in REGISTRY.items():
        by_module.setdefault(calc.compute.__module__, []).append(name)
    bad = []
    for module, names in by_module.items():
        leaf = module.rsplit(".", 1)[-1]
        doc = importlib.import_module(module).__doc__ or ""
        if len(names) == 1 and leaf != names[0].replace("-", "_"):
            bad.append(f"{module} holds only {names[0]} but is named {leaf}")
        if len(names) > 1:
            bad += [f"{module}'s docstring does not name `{n}`" for n in names if f"`{n}`" not in doc]
    assert not bad, "\n".join(bad)
