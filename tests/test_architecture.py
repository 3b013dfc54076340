"""The import graph: connectors depend on the SPI and their client libraries, never on the harness; the SPI
depends on the standard library and pyspark only. A third party copies the reference connectors, so what they
import is part of the product."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module a Python file imports (absolute names; relative imports resolved against its package)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.add(f"<relative:{node.level}>.{node.module or ''}")
            elif node.module:
                found.add(node.module)
    return found


def _python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _top(module: str) -> str:
    return module.split(".")[0]


@pytest.mark.parametrize("path", _python_files("connectors"), ids=lambda p: p.name)
def test_no_connector_module_imports_the_harness(path):
    harness = sorted(m for m in imported_modules(path)
                     if m.startswith("streamcert.harness") or _top(m) in ("harness", "conformance", "reports"))
    assert harness == [], f"{path.relative_to(ROOT)} imports {harness}: connectors may use streamcert.spi only"


@pytest.mark.parametrize("path", _python_files("streamcert/spi"), ids=lambda p: p.name)
def test_the_spi_imports_only_the_standard_library_pyspark_and_itself(path):
    allowed = set(sys.stdlib_module_names) | {"pyspark", "__future__"}
    foreign = sorted(m for m in imported_modules(path)
                     if not (m.startswith("streamcert.spi") or _top(m) in allowed))
    assert foreign == [], f"{path.relative_to(ROOT)} imports {foreign}"


def test_the_import_scan_sees_a_harness_import(tmp_path):
    """The scan is only worth something if it finds the imports it forbids, in every spelling."""
    module = tmp_path / "bad.py"
    module.write_text("import os\nfrom streamcert.harness.stack import kafka_clients\n"
                      "def f():\n    import streamcert.harness.errors as e\n    from . import sibling\n")
    assert imported_modules(module) == {"os", "streamcert.harness.stack", "streamcert.harness.errors",
                                        "<relative:1>."}
