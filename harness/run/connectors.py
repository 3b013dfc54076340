"""Finding a connector under test: by entry point name (group ``streamcert.connectors``) or ``module:attr``.

Runs wherever a query is assembled: in the harness (to read the declaration: kind, claims, output kind) and in
the driver process (to build the query). The attribute may be a connector object or a class to instantiate
without arguments.
"""

from __future__ import annotations

import importlib.metadata

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.references import resolve
from streamcert.spi.connector import Connector

__all__ = ["ENTRY_POINT_GROUP", "available_connectors", "load_connector"]

ENTRY_POINT_GROUP = "streamcert.connectors"


def available_connectors() -> dict[str, str]:
    """Entry point name -> ``module:attr`` of every connector installed in this interpreter."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def load_connector(reference: str, kind: str | None = None) -> Connector:
    """The connector named by ``reference``, checked to be a :class:`Connector` (of ``kind``, when given)."""
    installed = available_connectors()
    target = installed.get(reference, reference)
    if ":" not in target:
        raise ConfigurationError(
            f"Connector {reference!r} is neither an installed connector nor of the form module:attr.",
            hint=f"Installed connectors: {', '.join(sorted(installed)) or 'none'}; or give my_pkg.module:CONNECTOR.")
    found = resolve(target, "connector", "my_pkg.module:CONNECTOR")
    connector = found() if isinstance(found, type) and issubclass(found, Connector) else found
    if not isinstance(connector, Connector):
        raise ConfigurationError(f"{reference!r} is a {type(connector).__name__}, not a connector declaration.",
                                 hint="Subclass streamcert.spi.connector.SourceConnector, SinkConnector or "
                                 "AggregatorConnector.")
    if kind is not None and connector.kind != kind:
        raise ConfigurationError(f"{reference!r} is a {connector.kind} connector; a {kind} is needed here.",
                                 hint=f"Pass it as the {connector.kind} of the scenario.")
    return connector
