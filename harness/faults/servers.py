"""Server faults: the Kafka broker or the PostgreSQL server killed, restarted or paused.

``kill``: SIGKILL at start, started again (same data) at stop. ``restart``: a clean restart at start, nothing at
stop. ``pause``: SIGSTOP at start (connections stay open, nothing answers), SIGCONT at stop.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from streamcert.harness.faults.base import Fault, FaultNotApplicable
from streamcert.harness.faults.registry import fault_kind
from streamcert.harness.stack.resources import ServerProcess

__all__ = ["BrokerFault", "DatabaseFault"]


class _ServerFault(Fault):
    """A fault on one server process; the action is the kind's name after its prefix."""

    needs = ("environment",)
    prefix = ""

    @property
    def action(self) -> str:
        return self.spec.fault.removeprefix(self.prefix)

    @abstractmethod
    def _server(self) -> Any:
        """The server process this fault acts on (None when the environment has none)."""

    def _controlled(self) -> Any:
        server = self._server()
        if not isinstance(server, ServerProcess):
            raise FaultNotApplicable(f"Fault {self.spec.fault!r} needs a server process this stack controls, and its "
                                     f"{self.spec.target} server is not one (the external provider's servers are "
                                     "the user's).", hint="Use the local or testcontainers provider for it.")
        return server

    def _inject(self) -> dict[str, Any]:
        server = self._controlled()
        before = server.pid
        if self.action == "kill":
            server.kill()
        elif self.action == "restart":
            server.restart(clean=True)
        else:
            server.pause()
        return {"pid_before": before, "pid_after": server.pid if self.action == "restart" else None}

    def _heal(self) -> dict[str, Any]:
        server = self._controlled()
        if self.action == "kill":
            server.restart(clean=False)
        elif self.action == "pause":
            server.resume()
        return {"pid": server.pid}


@fault_kind("broker_kill", targets=("kafka",))
@fault_kind("broker_restart", targets=("kafka",))
@fault_kind("broker_pause", targets=("kafka",))
class BrokerFault(_ServerFault):
    """The Kafka broker killed, restarted or paused."""

    prefix = "broker_"

    def _server(self) -> Any:
        return self.environment.kafka


@fault_kind("database_kill", targets=("postgres",))
class DatabaseFault(_ServerFault):
    """The PostgreSQL server killed (and started again at stop)."""

    prefix = "database_"

    def _server(self) -> Any:
        return self.environment.postgres
