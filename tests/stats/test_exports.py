"""The package's documented names and its module graph.

Each check of the names runs in a fresh interpreter: what an earlier import left in
``sys.modules`` or in the package's namespace is exactly what could hide a name that
resolves to the wrong object (a submodule named like a function did).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import deviations.stats

STATS = Path(deviations.stats.__file__).resolve().parent
ROOT = STATS.parents[1]

# DESIGN.md, "Statistics API", and the other names the package exports.
FUNCTIONS = [
    "median_ci", "mean_ci", "median_diff_ci", "mean_diff_ci", "compare", "compare_matrix",
    "bhattacharyya", "hellinger", "detect_changes", "paired_ci", "welch_ci", "holm",
    "benjamini_hochberg", "compare_two",
]
CLASSES = ["Interval", "IntervalArray", "Comparison", "ComparisonMatrix", "SequentialTest"]
# Modules and packages (``releases/``) of deviations.stats, by the name imports use.
SUBMODULES = sorted({p.stem for p in STATS.glob("*.py") if p.stem != "__init__"}
                    | {p.parent.name for p in STATS.glob("*/__init__.py")})

_PROBE = """
import importlib, inspect, json, sys, typing
mode, names, submodules = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
def kind(obj):
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class:" + obj.__module__
    if inspect.isfunction(obj):
        return "function:" + obj.__module__
    if typing.get_origin(obj) is typing.Literal:
        return "literal:" + ",".join(typing.get_args(obj))
    return type(obj).__name__
out = {}
for name in names:
    if mode == "submodules_first":
        for m in submodules:
            importlib.import_module("deviations.stats." + m)
    if mode == "attribute_twice":
        import deviations.stats as s
        first, second = getattr(s, name), getattr(s, name)
        out[name] = [kind(first), kind(second), first is second]
        continue
    ns = {}
    exec(f"from deviations.stats import {name}", ns)
    out[name] = [kind(ns[name])]
print(json.dumps(out))
"""


def _probe(mode: str, names: list[str]) -> dict[str, list]:
    """Kinds of ``names`` in a fresh interpreter (alone: one interpreter per name)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode, json.dumps(names), json.dumps(SUBMODULES)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    return json.loads(done.stdout)


def _expected(name: str) -> str:
    return "function" if name in FUNCTIONS else "class"


@pytest.mark.parametrize("name", FUNCTIONS + CLASSES)
def test_each_name_alone_in_a_fresh_interpreter(name):
    (kind,) = _probe("alone", [name])[name]
    assert kind.split(":")[0] == _expected(name), kind
    assert kind.split(":")[1].startswith("deviations.stats.")


def test_names_after_importing_every_submodule_first():
    got = _probe("submodules_first", FUNCTIONS + CLASSES)
    for name, (kind,) in got.items():
        assert kind.split(":")[0] == _expected(name), (name, kind)


def test_attribute_access_twice_gives_the_same_object():
    got = _probe("attribute_twice", FUNCTIONS + CLASSES)
    for name, (first, second, same) in got.items():
        assert first.split(":")[0] == _expected(name), (name, first)
        assert second == first, (name, second)
        assert same, name


def test_direction_is_the_literal_of_both_directions():
    got = _probe("alone", ["Direction"])["Direction"]
    assert got == ["literal:lower_is_better,higher_is_better"]


def test_every_exported_name_is_documented_here_and_no_module_shares_it():
    exported = set(deviations.stats.__all__)
    assert exported == set(FUNCTIONS) | set(CLASSES) | {"Direction"}
    assert not exported & set(SUBMODULES)


def _stats_imports(name: str) -> set[str]:
    """Sibling modules or packages of ``deviations.stats`` that the module or package
    ``name`` imports (a package: any of its files; imports inside the package left out)."""
    inside = STATS / name
    files = sorted(inside.rglob("*.py")) if inside.is_dir() else [STATS / f"{name}.py"]
    found: set[str] = set()
    for path in files:
        # Relative imports reaching deviations.stats: level 1 from a module, 2 from a
        # file of a package (``from ..ranks import``).
        top = 2 if inside.is_dir() else 1
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level == top:
                    base = node.module
                elif node.level == 0 and node.module and node.module.startswith(
                        "deviations.stats"):
                    base = node.module.removeprefix("deviations.stats").lstrip(".") or None
                else:
                    continue
                if base:
                    found.add(base.split(".")[0])
                else:  # from . import x / from deviations.stats import x
                    found.update(a.name for a in node.names if a.name in SUBMODULES)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("deviations.stats."):
                        found.add(alias.name.split(".")[2])
    return (found & set(SUBMODULES)) - {name}


def test_no_import_cycle_between_the_stats_modules():
    graph = {m: _stats_imports(m) for m in SUBMODULES}
    assert graph["releases"] >= {"intervals", "ranks"}  # the walk sees imports
    state: dict[str, str] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                pytest.fail("import cycle: " + " -> ".join([*path, m, n]))
            if n not in state:
                visit(n, [*path, m])
        state[m] = "done"

    for m in SUBMODULES:
        if m not in state:
            visit(m, [])
