"""The project's import layers and the absence of import circles, checked from the source (an AST walk).

import-linter's grimp walks a package's own folder, and this project maps ``streamcert.harness`` and its siblings
onto top-level folders (``[tool.setuptools.package-dir]``), which grimp cannot see; the walk here reads the same
mapping from ``pyproject.toml``. Every import counts (module level or inside a function), except those under
``if TYPE_CHECKING:``, which never run.

Layers, lowest first: a module may import its own layer and the ones below, never one above. The reference
connectors stand beside the harness: they see the SPI only (a third party's connector sees nothing else).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Lowest first; each layer's modules by prefix (a module belongs to the layer of its longest matching prefix).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("spi", ("streamcert", "streamcert.spi")),
    ("connectors", ("streamcert.connectors",)),
    ("harness base", ("streamcert.harness",)),
    ("stack", ("streamcert.harness.stack",)),
    ("verify", ("streamcert.harness.verify",)),
    ("run", ("streamcert.harness.run", "streamcert.harness.results")),
    ("faults", ("streamcert.harness.faults",)),
    ("systems", ("streamcert.harness.systems",)),
    ("scenario", ("streamcert.harness.scenario", "streamcert.harness.acked_writes",
                  "streamcert.harness.options_probe")),
    ("conformance", ("streamcert.conformance",)),
    ("benchmarks", ("streamcert.benchmarks",)),
    ("reports", ("streamcert.reports",)),
    ("entry points", ("streamcert.cli", "streamcert.__main__", "streamcert.conformance.pytest_plugin",
                      "streamcert.conformance.test_requirements")),
)
#: Layers that must not see one another although neither is above the other in :data:`LAYERS`' order.
APART = (("connectors", "harness base"), ("connectors", "stack"), ("connectors", "verify"), ("connectors", "run"),
         ("connectors", "faults"), ("connectors", "systems"), ("connectors", "scenario"))


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project by its dotted name, through pyproject's package-dir mapping."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found: dict[str, Path] = {}
    for package, folder in sorted(mapping.items(), key=lambda item: -len(item[0])):
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            found.setdefault(name, path)
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` (file ``path``) imports, run-time imports only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and "TYPE_CHECKING" in ast.unparse(block.test) for stmt in block.body for node in ast.walk(stmt)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "streamcert")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "streamcert":
                continue
            for alias in node.names:  # `from package import module` imports the module
                found.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = module_files(root)
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def layer_of(module: str) -> str:
    best = max(((len(prefix), layer) for layer, prefixes in LAYERS for prefix in prefixes
                if module == prefix or module.startswith(prefix + ".")), default=(0, "?"))
    return best[1]


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import of a higher layer, or of a layer kept apart."""
    order = [layer for layer, _ in LAYERS]
    apart = {frozenset(pair) for pair in APART}
    wrong = []
    for importer, imported in sorted(graph.items()):
        for target in sorted(imported):
            low, high = layer_of(target), layer_of(importer)
            if order.index(low) > order.index(high) or frozenset((low, high)) in apart:
                wrong.append(f"{importer} ({high}) -> {target} ({low})")
    return wrong


def import_circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    circle = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        circle.append(member)
                        if member == node:
                            break
                    if len(circle) > 1:
                        circles.append(sorted(circle))
    return circles


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_module_of_the_project_is_seen_and_placed_in_a_layer(graph):
    assert {"streamcert.spi.connector", "streamcert.harness.scenario", "streamcert.connectors.kafka_source",
            "streamcert.reports.render", "streamcert.cli"} <= set(graph)
    assert [module for module in graph if layer_of(module) == "?"] == []
    assert "streamcert.harness.stack.spark" in graph["streamcert.harness.stack.environment"]


def test_no_module_imports_a_layer_above_its_own(graph):
    assert upward_imports(graph) == []


def test_no_modules_import_one_another_in_a_circle(graph):
    assert import_circles(graph) == []


def test_the_checks_find_an_upward_import_and_a_circle_when_there_is_one(graph):
    broken = {name: set(targets) for name, targets in graph.items()}
    broken["streamcert.harness.stack.toxiproxy"].add("streamcert.harness.faults.network")
    broken["streamcert.spi.connector"].add("streamcert.connectors.kafka_source")
    broken["streamcert.harness.run.checkpoint"].add("streamcert.harness.run.driver")
    assert upward_imports(broken) == [
        "streamcert.harness.stack.toxiproxy (stack) -> streamcert.harness.faults.network (faults)",
        "streamcert.spi.connector (spi) -> streamcert.connectors.kafka_source (connectors)"]
    assert any("streamcert.harness.run.checkpoint" in circle and "streamcert.harness.run.driver" in circle
               for circle in import_circles(broken))


def test_imports_under_type_checking_and_relative_imports_are_read_as_python_does(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text("from typing import TYPE_CHECKING\nfrom . import sibling\nfrom ..other import thing\n"
                      "if TYPE_CHECKING:\n    from streamcert.cli import main\n")
    known = {"streamcert.harness.run.sibling"}
    assert imports_of("streamcert.harness.run.mod", module, known) == {"streamcert.harness.run.sibling",
                                                                       "streamcert.harness.other"}
