"""Network cuts, server kills and leader failovers timed by what the query is observed doing.

The faults of :mod:`~streamcert.harness.faults.network`, :mod:`~streamcert.harness.faults.servers` and
:mod:`~streamcert.harness.faults.cluster` strike at a second of the run's clock: whether a connector's prepare,
COPY or commit is on the wire then is luck. The kinds here watch the query as the moment kills do
(:mod:`~streamcert.harness.faults.moments`: a steady batch, a moment of its lifecycle, a fraction into it, the
connector's link slowed on the answers so that a request waits for its answer there), then freeze the driver,
read what is in flight on the target's link (:mod:`~streamcert.harness.faults.in_flight`: the connections awaiting
an answer, PostgreSQL's running statements), strike, and let the driver go on into the fault:

- ``network_moment``: a cut on the link (``reset_peer``, ``timeout``, ``limit_data`` or ``down``), healed at stop;
- ``server_kill_moment``: the broker (``kafka``) or the database (``postgres``) SIGKILLed, started again at stop;
- ``node_moment``: on a 3-broker cluster, the partition leader killed (``node_kill``) or cut off from its peers
  while it answers its clients, then killed (``node_isolate_kill``).

The driver is not killed: the query lives through the fault. The ``fault-start`` event says whether the wanted moment
was reached (``reached``), what was in flight at the strike (``in_flight``: connections awaiting an answer,
``statements``), and what the struck fault reported (``struck``). The witness ``cut_in_flight`` reads it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.in_flight import SS_MISSING, awaiting, connections_to, postgres_statements
from streamcert.harness.faults.moments import DriverKillAtMoment, MomentKillParams, _agrees
from streamcert.harness.faults.registry import fault_kind, kind
from streamcert.harness.run.query_status import MOMENTS, Observation
from streamcert.harness.stack.postgres import HARNESS_APPLICATION
from streamcert.harness.verify.coverage import AIMED_FAULTS

__all__ = ["NetworkMomentParams", "ServerMomentParams", "NodeMomentParams", "FaultAtMoment", "MOMENT_FAULTS",
           "CUTS", "STRIKE_MOMENTS"]

#: The network faults that cut a connection or the link: those a moment matters to (a slowdown spans many).
CUTS = ("reset_peer", "timeout", "limit_data", "down")
#: The moments a fault here may aim at: those of a batch (output_visible is a kill's: output grown before the commit).
STRIKE_MOMENTS = tuple(moment for moment in MOMENTS if moment != "output_visible")
#: The kinds of this module (their grid: :func:`streamcert.harness.verify.coverage.strike_grid`).
MOMENT_FAULTS = AIMED_FAULTS
#: Seconds the driver stays frozen at most while the struck fault starts (a failover's start waits for metadata:
#: the query goes on into it meanwhile).
_FROZEN_AT_MOST_S = 0.2
_SERVER_KILLS = {"kafka": "broker_kill", "postgres": "database_kill"}


class _AtMomentParams(MomentKillParams):
    batch_class: Literal["steady"] = Field("steady", description="steady: the query lives through the fault, no new "
                                                                 "attempt is needed")
    tries: int = Field(10, ge=1, le=50, description="steady batches to watch before giving up")

    moment: Literal[STRIKE_MOMENTS] = Field(description="the moment of the batch to strike: "
                                                        + ", ".join(STRIKE_MOMENTS))


class NetworkMomentParams(_AtMomentParams):
    cut: Literal[CUTS] = Field(description="the network fault struck: reset_peer, timeout, limit_data or down")
    cut_params: dict[str, int] = Field(default_factory=dict, description="its Toxiproxy attributes (as the kind "
                                                                         "takes them in a schedule)")

    @model_validator(mode="after")
    def _cut_params_fit(self) -> NetworkMomentParams:
        try:
            kind(self.cut).params.model_validate(self.cut_params)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ValueError(f"cut_params do not fit {self.cut}: {problems}") from None
        return self


class ServerMomentParams(_AtMomentParams):
    pass


class NodeMomentParams(_AtMomentParams):
    action: Literal["node_kill", "node_isolate_kill"] = Field(
        "node_kill", description="the partition leader killed, or cut off from its peers and killed once they elected "
                                 "another (answering_s later)")
    partition: int = Field(0, ge=0, description="the input's partition whose leader is struck")
    answering_s: float = Field(3.0, ge=0, le=60, allow_inf_nan=False,
                               description="node_isolate_kill: seconds the cut-off leader goes on answering")


@fault_kind("network_moment", targets=("kafka", "postgres"), params=NetworkMomentParams, stream=True,
            external="endpoint")
@fault_kind("server_kill_moment", targets=("kafka", "postgres"), params=ServerMomentParams)
@fault_kind("node_moment", targets=("kafka",), params=NodeMomentParams)
class FaultAtMoment(DriverKillAtMoment):
    """A network cut, a server kill or a leader failover struck at an observed moment of a steady batch (see the
    module's docstring); ``stop`` heals what was struck."""

    needs = ("driver", "environment")
    kills_driver = False

    def __init__(self, spec, context: FaultContext) -> None:
        super().__init__(spec, context)
        inner = self._inner_spec()
        self._inner = kind(inner.fault).fault_class(inner, context)
        self._struck: dict[str, Any] | None = None
        self._activity_connection: Any = None
        #: whether the struck fault's start ran (even if it failed half-way: its heal undoes what it did)
        self._started = False

    def _inner_spec(self) -> Any:
        from streamcert.harness.faults.schedule import FaultSpec

        params, spec = self.params, self.spec
        if spec.fault == "network_moment":
            return FaultSpec(params.cut, spec.target, 0.0, 0.0, dict(params.cut_params), spec.stream)
        if spec.fault == "server_kill_moment":
            return FaultSpec(_SERVER_KILLS[spec.target], spec.target, 0.0, 0.0, {})
        extra = {"answering_s": params.answering_s} if params.action == "node_isolate_kill" else {}
        return FaultSpec(params.action, spec.target, 0.0, 0.0, {"node": "leader", "partition": params.partition,
                                                                 **extra})

    # -- striking ----------------------------------------------------------------------------

    def _freeze_and_decide(self, seen: Observation) -> dict[str, Any]:
        """Strike only with something of the query's in flight on the target's link: looked at first with the query
        running (cheap; nothing yet: a quiet look, the watch goes on in this moment), then again with the driver
        frozen, when the checkpoint still agrees with the look; the struck fault starts then, and the driver goes on
        within :data:`_FROZEN_AT_MOST_S` whatever the fault still waits for. Past half the batches it may watch it
        strikes at its aim whatever is in flight: a connector that does not use the link in this moment (a simple reader
        reads while it plans) has the fault there all the same, its event saying nothing was in flight."""
        last_chance = self._watched >= self.params.tries // 2
        if not _anything(self._in_flight()) and not last_chance:
            return self._strike(seen, landed=False, quiet=True)
        driver = self.driver
        looked = time.monotonic()
        driver.pause()
        starting = None
        try:
            frozen_ms = round(1000 * (time.monotonic() - looked), 1)
            state = driver.checkpoint()
            if not _agrees(seen, state):
                return self._strike(seen, landed=False, frozen_ms=frozen_ms, checkpoint_moved_to=state.latest_commit)
            in_flight = self._in_flight()
            if not _anything(in_flight) and not last_chance:  # answered between the two looks
                return self._strike(seen, landed=False, quiet=True)
            self._started = True
            starting = _Starting(self._inner)
            starting.join(_FROZEN_AT_MOST_S)
        finally:
            driver.resume()
        self._struck = starting.result()
        return self._strike(seen, landed=True, frozen_ms=frozen_ms, **in_flight)

    def _in_flight(self) -> dict[str, Any]:
        """What of the query is on the target's link now: its processes' connections awaiting an answer (``ss``),
        and for PostgreSQL the statements the server runs for the other sessions (``pg_stat_activity``, read
        straight from the server, not through the link)."""
        found: dict[str, Any] = {}
        link = self.environment.link(self.spec.target)
        if link is not None:
            ports = [member.listen_port for member in getattr(link, "links", [link])]
            connections = connections_to(ports, self.driver.process_ids())
            if connections is None:
                found["in_flight_unknown"] = SS_MISSING
            else:
                found["in_flight"] = awaiting(connections)
                found["connections"] = len(connections)
        if self.spec.target == "postgres" and self.environment.postgres is not None:
            found["statements"] = postgres_statements(self._activity())
        return found

    def _activity(self) -> Any:
        """A connection straight to PostgreSQL to read its activity on, opened on first use, closed with the watch."""
        import psycopg

        if self._activity_connection is None:
            self._activity_connection = psycopg.connect(self.environment.postgres.dsn, autocommit=True,
                                                        connect_timeout=5, application_name=HARNESS_APPLICATION)
        return self._activity_connection

    def _inject(self) -> dict[str, Any]:
        try:
            event = super()._inject()
        finally:
            if self._activity_connection is not None:
                self._activity_connection.close()
                self._activity_connection = None
        return {**event, "struck": self._struck, "struck_fault": self._inner.spec.fault}

    def _position(self, why: str, deadline: float) -> dict[str, Any]:
        return self._kill_now(why)

    def _kill_now(self, why: str) -> dict[str, Any]:
        return {"attempt": self.driver.attempt, "batch": None, "moments": [], "batch_class": None, "landed": False,
                "wanted": False, "gave_up": why}

    def _heal(self) -> dict[str, Any]:
        self._unslow()
        if not self._started:
            return {"struck": False}
        return {"struck_fault": self._inner.spec.fault, **(self._inner._heal() or {})}


def _anything(found: dict[str, Any]) -> bool:
    """Whether a look found something in flight: a connection of the query awaiting its answer, or a statement of
    the connector's running. Without ``ss`` and with no server to ask, a look cannot tell: the fault strikes at its
    aim, and its event says what was in flight is unknown."""
    if "in_flight_unknown" in found and "statements" not in found:
        return True
    return bool(found.get("in_flight")) or any(s.get("state") == "active" for s in found.get("statements") or [])


class _Starting:
    """The struck fault's start in a thread of its own: a failover's start waits for metadata for seconds, and the
    driver must not stay frozen that long."""

    def __init__(self, fault: Any) -> None:
        self._fault = fault
        self._details: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"strike-{fault.spec.fault}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._details = self._fault._inject() or {}
        except BaseException as error:  # noqa: BLE001 - re-raised in the fault's own thread by result()
            self._error = error

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def result(self) -> dict[str, Any]:
        """What the struck fault's start reported, once it finished; its error raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._details or {}
