"""The external systems of a certification's connectors, started once each and proxied: the stack's part of
:mod:`streamcert.spi.external`.

:class:`ExternalSystems` belongs to an :class:`~streamcert.harness.stack.environment.Environment`. The first run
whose connector declares a system starts it (:meth:`ExternalSystems.started`) in a folder of the stack's, creates
one Toxiproxy link per TCP endpoint it lists, and keeps it for the runs after; the stack's ``stop()`` stops every one
(in the reverse order). Runs in the harness's process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.stack.ports import free_port
from streamcert.harness.stack.toxiproxy import Link
from streamcert.spi.errors import StreamcertError
from streamcert.spi.external import ExternalSystem

__all__ = ["StartedSystem", "ExternalSystems"]


@dataclass
class StartedSystem:
    """A started system: its own endpoints (``direct``: the harness's reader and writer use them), the links in
    front of them, and the proxied addresses a connector gets (``proxied``: its QueryContext's endpoints)."""

    system: ExternalSystem
    workdir: Path
    direct: dict[str, str] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)

    @property
    def proxied(self) -> dict[str, str]:
        return {name: self.links[name].listen if name in self.links else address
                for name, address in self.direct.items()}


class ExternalSystems:
    """The external systems a stack started for its runs, by identity of the declared object; ``stop()`` is
    idempotent and safe before anything started."""

    def __init__(self, workdir: Path, toxiproxy_api: Any = None, run_token: str = "") -> None:
        self.workdir = Path(workdir)
        self.toxiproxy_api = toxiproxy_api
        self.run_token = run_token
        self._started: dict[int, StartedSystem] = {}
        #: every system whose start was attempted, in order: stop() stops each (a half-started one too)
        self._stopping: list[StartedSystem] = []

    def __enter__(self) -> "ExternalSystems":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def started(self, system: ExternalSystem) -> StartedSystem:
        """``system`` started and proxied (started now when no run started it before)."""
        found = self._started.get(id(system))
        if found is not None:
            return found
        name = _folder_name(system)
        folder = self.workdir / "systems" / name
        folder.mkdir(parents=True, exist_ok=True)
        started = StartedSystem(system, folder)
        self._stopping.append(started)  # stopped with the others even when its start fails half way
        try:
            system.start(str(folder))
            endpoints = dict(system.endpoints())
        except StreamcertError:
            raise
        except Exception as exc:
            raise StartupFailed(f"The external system {name!r} ({type(system).__name__}) did not start: "
                                f"{type(exc).__name__}: {exc}", hint=f"Look at {folder}; the system's start() "
                                "is the connector author's code.") from exc
        declared = tuple(system.endpoint_names)
        if sorted(endpoints) != sorted(declared):
            raise ConfigurationError(f"The external system {name!r} declares endpoints {list(declared)} and its "
                                     f"endpoints() gave {sorted(endpoints)}.", hint="List in endpoint_names exactly "
                                     "the names endpoints() returns: plans aim network faults at them by name.")
        started.direct = {endpoint: address.address for endpoint, address in endpoints.items()}
        if self.toxiproxy_api is not None:
            for endpoint, address in started.direct.items():
                link_name = f"{name}-{endpoint}-{self.run_token[:8]}"
                started.links[endpoint] = self.toxiproxy_api.create_link(link_name, address, free_port())
        self._started[id(system)] = started
        return started

    def named(self, name: str) -> StartedSystem | None:
        """The started system called ``name`` (``system``: the only one, when exactly one started)."""
        if name == "system" and len(self._started) == 1:
            return next(iter(self._started.values()))
        return next((s for s in self._started.values() if s.system.name == name), None)

    def link(self, endpoint: str) -> Link | None:
        """The link in front of endpoint ``endpoint`` of a started system (None: no such link)."""
        return next((s.links[endpoint] for s in self._started.values() if endpoint in s.links), None)

    def stop(self) -> None:
        errors = []
        for started in reversed(self._stopping):
            for link in started.links.values():
                try:
                    link.api.destroy(link.name)
                except Exception:  # noqa: BLE001 - Toxiproxy may be gone already; its links went with it
                    pass
            try:
                started.system.stop()
            except Exception as exc:  # keep stopping the rest; report after
                errors.append(exc)
        self._started.clear()
        self._stopping.clear()
        if errors:
            raise errors[0]


def _folder_name(system: ExternalSystem) -> str:
    if not system.name:
        raise ConfigurationError(f"The external system {type(system).__name__} has no name.",
                                 hint="Set the class attribute name = '...' (reports and link names use it).")
    return re.sub(r"[^A-Za-z0-9_.-]", "-", system.name)
