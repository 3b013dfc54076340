"""Packaging: the user's folders install under the one ``streamcert`` namespace, every package is listed, and the
entry points name connectors that load."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    """Every folder with an ``__init__.py`` under a mapped root, as its import name."""
    found = set()
    for name, folder in SETUPTOOLS["package-dir"].items():
        root = ROOT / folder
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join([name, *relative.parts]))
    return found


def test_every_package_on_disk_is_listed_in_pyproject():
    listed = set(SETUPTOOLS["packages"])
    assert _packages_on_disk() - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - _packages_on_disk() == set(), "these listed packages have no folder"


def test_nothing_installs_under_a_generic_top_level_name():
    generic = [name for name in [*SETUPTOOLS["packages"], *SETUPTOOLS["package-dir"]]
               if name.split(".")[0] != "streamcert"]
    assert generic == []


def test_every_connector_entry_point_loads_a_declaration():
    from streamcert.spi.connector import Connector

    declared = PYPROJECT["project"]["entry-points"]["streamcert.connectors"]
    installed = {ep.name: ep for ep in importlib.metadata.entry_points(group="streamcert.connectors")}
    assert set(declared) <= set(installed), "reinstall the project (pip install -e .)"
    for name in declared:
        loaded = installed[name].load()
        connector = loaded() if isinstance(loaded, type) else loaded
        assert isinstance(connector, Connector) and connector.name == name
