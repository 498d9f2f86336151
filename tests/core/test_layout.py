"""The layout's rules (docs/architecture.md, "Parts"), checked on the source.

Every import counts, at module level or inside a function: an import moved into a function
to dodge a cycle is still a cycle here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("deviations", "ingest")
# Django's app registry and admin import these by convention; the models/admin modules of
# the app only list what each feature defines.
REGISTRIES = {"deviations.models", "deviations.admin"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Project modules that ``name`` imports (``from a import b`` counts ``a.b`` when it is
    a module, else ``a``)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package(module: str) -> str:
    """deviations.traces.views -> deviations.traces; deviations.stats -> deviations.stats;
    deviations.api (a module of the project package) -> deviations; ingest.traces -> ingest;
    deviations.traces.uploads.runs -> deviations.traces."""
    parts = module.split(".")
    if parts[0] == "deviations" and len(parts) > 1 and (ROOT / "deviations" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def test_the_walker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_walker_resolves_imports() -> None:
    assert "deviations.traces.models" in GRAPH["deviations.traces.analysis"]
    assert "ingest.reading" in GRAPH["ingest.traces"]
    assert "deviations.core.packing" in GRAPH["deviations.traces.models"]


def test_no_import_cycle_between_modules() -> None:
    assert _cycles(GRAPH) == []


def test_no_import_cycle_between_packages() -> None:
    """Feature packages (and ingest) form no cycle once models are set aside: every feature
    may read every feature's models (the data model is shared), nothing else."""
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        if module in REGISTRIES or module == "deviations.apps":
            continue
        for target in targets:
            if target.endswith(".models") or target in REGISTRIES:
                continue
            if _package(target) != _package(module):
                packages[_package(module)].add(_package(target))
    assert _cycles(packages) == []


#: What the pure readers of ``ingest`` may use of the project: the error base and the
#: release names, neither of which imports Django.
INGEST_MAY_IMPORT = {"deviations.core.errors", "deviations.core.versions"}


def _external_imports(path: Path) -> set[str]:
    """Top-level names of the packages outside the project that a module imports."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - set(PACKAGES)


def test_ingest_holds_pure_readers_only() -> None:
    """bytes -> plain data: no arrow from ``ingest`` back into a feature, no Django (so no
    database, no task, no view), no Django app."""
    bad = {
        (m, t) for m, ts in GRAPH.items() if m.startswith("ingest") for t in ts
        if t.startswith("deviations") and t not in INGEST_MAY_IMPORT
    }
    assert bad == set()
    frameworks = {
        (m, name) for m, path in MODULES.items() if m.startswith("ingest")
        for name in _external_imports(path) if name in ("django", "celery", "ninja", "kombu")
    }
    assert frameworks == set()
    assert not (ROOT / "ingest" / "apps.py").exists()
    assert not [a for a in settings.INSTALLED_APPS if a.split(".")[0] in PACKAGES[1:]]


def test_the_purity_check_sees_django() -> None:
    assert "django" in _external_imports(MODULES["deviations.traces.uploads.runs"])
    assert "numpy" in _external_imports(MODULES["ingest.traces"])


def test_deviations_imports_ingest_only_through_its_entry() -> None:
    bad = {
        (m, t) for m, ts in GRAPH.items() if m.startswith("deviations") for t in ts
        if t.startswith("ingest") and t != "ingest.services"
    }
    assert bad == set()


def test_statistics_import_nothing_else_of_the_project() -> None:
    bad = {
        (m, t) for m, ts in GRAPH.items() if m.startswith("deviations.stats") for t in ts
        if not t.startswith("deviations.stats")
    }
    assert bad == set()


@pytest.mark.parametrize("feature", ["traces", "histograms", "alerts", "experiments"])
def test_no_feature_imports_the_api_assembly_or_urlconf(feature: str) -> None:
    bad = {
        (m, t) for m, ts in GRAPH.items() if m.startswith(f"deviations.{feature}") for t in ts
        if t in ("deviations.api", "deviations.urls")
    }
    assert bad == set()
