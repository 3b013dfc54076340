"""Nemeses: faults that act on the environment, each recording start and stop in the run history.

A fault is built from a :class:`~streamcert.harness.faults.schedule.FaultSpec` with
:func:`fault_for`; ``start()`` injects it, ``stop()`` heals it (idempotent).
Network faults are Toxiproxy toxics (or the link taken down) on the Kafka or
PostgreSQL link; broker and database faults act on the server process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import add_partitions
from streamcert.harness.faults.schedule import FaultSpec

__all__ = ["Fault", "NetworkFault", "BrokerFault", "DatabaseFault", "AddPartitionsFault", "DriverKillFault",
           "DriverPointFault", "TaskPointFault", "RescaleFault", "fault_for"]


class Fault(ABC):
    """One fault. ``start`` and ``stop`` run in the harness process; each records an event."""

    def __init__(self, spec: FaultSpec, env: Any, history: History) -> None:
        self.spec = spec
        self.env = env
        self.history = history
        self.active = False

    def start(self) -> None:
        if self.active:
            return
        details = self._inject()
        self.active = True
        self.history.record("fault-start", fault=self.spec.fault, target=self.spec.target,
                            params=self.spec.params, stream=self.spec.stream, **(details or {}))

    def stop(self) -> None:
        if not self.active:
            return
        details = self._heal()
        self.active = False
        self.history.record("fault-stop", fault=self.spec.fault, target=self.spec.target, **(details or {}))

    @abstractmethod
    def _inject(self) -> dict[str, Any] | None: ...

    @abstractmethod
    def _heal(self) -> dict[str, Any] | None: ...


class NetworkFault(Fault):
    """A Toxiproxy toxic on a link, or the link down."""

    def _link(self):
        link = self.env.kafka_link if self.spec.target == "kafka" else self.env.postgres_link
        if link is None:
            raise ConfigurationError(f"There is no Toxiproxy link to {self.spec.target} in this environment.",
                                     hint="Network faults need the local or testcontainers provider "
                                     "(or STREAMCERT_TOXIPROXY_API with the external one).")
        return link

    def _inject(self) -> dict[str, Any]:
        link = self._link()
        if self.spec.fault == "down":
            link.disable()
            return {"link": link.name}
        self._toxic = link.add_toxic(self.spec.fault, stream=self.spec.stream, **self.spec.params)
        return {"link": link.name, "toxic": self._toxic}

    def _heal(self) -> dict[str, Any]:
        link = self._link()
        if self.spec.fault == "down":
            link.enable()
        else:
            link.remove_toxic(self._toxic)
        return {"link": link.name}


class _ServerFault(Fault):
    """kill: SIGKILL at start, start again at stop. restart: a clean restart at start. pause: SIGSTOP/SIGCONT."""

    action: str = ""

    @abstractmethod
    def _server(self) -> Any:
        """The server process this fault acts on."""

    def _inject(self) -> dict[str, Any]:
        server = self._server()
        if server is None or not hasattr(server, "kill"):
            raise ConfigurationError(f"Fault {self.spec.fault!r} needs a server process this environment controls.",
                                     hint="Use the local or testcontainers provider.")
        before = server.pid
        if self.action == "kill":
            server.kill()
        elif self.action == "restart":
            server.restart(clean=True)
        else:
            server.pause()
        return {"pid_before": before, "pid_after": server.pid if self.action == "restart" else None}

    def _heal(self) -> dict[str, Any]:
        server = self._server()
        if self.action == "kill":
            server.restart(clean=False)
        elif self.action == "pause":
            server.resume()
        return {"pid": server.pid}


class BrokerFault(_ServerFault):
    def __init__(self, spec: FaultSpec, env: Any, history: History) -> None:
        super().__init__(spec, env, history)
        self.action = spec.fault.removeprefix("broker_")

    def _server(self):
        return self.env.kafka


class DatabaseFault(_ServerFault):
    def __init__(self, spec: FaultSpec, env: Any, history: History) -> None:
        super().__init__(spec, env, history)
        self.action = spec.fault.removeprefix("database_")

    def _server(self):
        return self.env.postgres


class AddPartitionsFault(Fault):
    """Grow the input topic to ``count`` partitions (a rescale of the source); nothing to heal."""

    def __init__(self, spec: FaultSpec, env: Any, history: History, topic: str) -> None:
        super().__init__(spec, env, history)
        self.topic = topic

    def _inject(self) -> dict[str, Any]:
        add_partitions(self.env.endpoints.bootstrap_servers, self.topic, int(self.spec.params["count"]))
        return {"topic": self.topic}

    def _heal(self) -> None:
        return None


def fault_for(spec: FaultSpec, env: Any, history: History, topic: str | None = None) -> Fault:
    """The fault object that carries out ``spec`` on ``env``."""
    if spec.fault.startswith("broker_"):
        return BrokerFault(spec, env, history)
    if spec.fault.startswith("database_"):
        return DatabaseFault(spec, env, history)
    if spec.fault == "add_partitions":
        if topic is None:
            raise ConfigurationError("add_partitions needs the input topic.", hint="Pass topic= to fault_for.")
        return AddPartitionsFault(spec, env, history, topic)
    if spec.target in ("driver", "executor"):
        raise ConfigurationError(f"{spec.fault} acts on a driver process, not on the environment.",
                                 hint="The scenario runner carries it out with its DriverProcess "
                                 "(DriverKillFault, or streamcert.harness.faults.executor.executor_fault_for).")
    return NetworkFault(spec, env, history)


class DriverKillFault(Fault):
    """SIGKILL the driver when the checkpoint shows ``offsets/N`` written and ``commits/N`` not (any connector).

    ``env`` is the :class:`~streamcert.harness.run.driver.DriverProcess`; ``stop`` restarts it from the same checkpoint.
    Params: ``min_batch`` (wait for a pending batch at least this high) and ``delay_ms`` (strike this long
    into the window, e.g. after the sink wrote but before Spark committed). The event records the pending
    batch and whether the kill really landed in its window; after ``window_timeout_s`` it kills anyway.
    """

    window_timeout_s = 120.0

    def _inject(self) -> dict[str, Any]:
        import time

        driver = self.env
        min_batch = int(self.spec.params.get("min_batch", 0))
        deadline = time.monotonic() + self.window_timeout_s
        while time.monotonic() < deadline and driver.is_running():
            pending = driver.checkpoint().pending
            if pending is not None and pending >= min_batch:
                break
            time.sleep(0.005)
        first = driver.checkpoint()
        time.sleep(int(self.spec.params.get("delay_ms", 0)) / 1000)
        state = driver.checkpoint()
        driver.kill()
        return {"pending_batch": state.pending, "latest_commit": state.latest_commit,
                "in_window": state.pending is not None and state.pending == first.pending}

    def _heal(self) -> dict[str, Any]:
        self.env.restart()
        return {"attempt": self.env.attempt}


class DriverPointFault(Fault):
    """Arm the connector's named fault point ``params["point"]``; the driver dies when it gets there.

    ``env`` is the :class:`~streamcert.harness.run.driver.DriverProcess`. ``start`` arms and waits (up to
    ``window_timeout_s``) for the driver to die at the point; ``stop`` disarms an unreached point
    and restarts a dead driver from its checkpoint.
    """

    window_timeout_s = 120.0

    def _inject(self) -> dict[str, Any]:
        import time

        from streamcert.spi.fault_points import arm, claimed

        driver, point = self.env, str(self.spec.params["point"])
        arm(driver.fault_points_dir, point)
        deadline = time.monotonic() + self.window_timeout_s
        while driver.is_running() and time.monotonic() < deadline:
            time.sleep(0.01)
        state = driver.checkpoint()
        return {"point": point, "reached": claimed(driver.fault_points_dir, point),
                "pending_batch": state.pending, "latest_commit": state.latest_commit}

    def _heal(self) -> dict[str, Any]:
        from streamcert.spi.fault_points import disarm

        unreached = disarm(self.env.fault_points_dir, str(self.spec.params["point"]))
        if not self.env.is_running():
            self.env.restart()
        return {"attempt": self.env.attempt, "disarmed_unreached": unreached}


class TaskPointFault(Fault):
    """Arm the connector's fault point ``params["point"]`` to *fail* the task attempt that reaches it.

    ``env`` is the :class:`~streamcert.harness.run.driver.DriverProcess`. The attempt raises there (after it
    prepared or staged, say) and Spark retries the task: the failed attempt's work is an orphan the
    connector must never commit. ``start`` arms and waits (up to ``window_timeout_s``) for the point
    to be claimed; ``stop`` disarms an unreached point.
    """

    window_timeout_s = 120.0

    def _inject(self) -> dict[str, Any]:
        import time

        from streamcert.spi.fault_points import arm, claimed

        driver, point = self.env, str(self.spec.params["point"])
        arm(driver.fault_points_dir, point, action="fail")
        deadline = time.monotonic() + self.window_timeout_s
        while not claimed(driver.fault_points_dir, point) and time.monotonic() < deadline:
            time.sleep(0.01)
        return {"point": point, "reached": claimed(driver.fault_points_dir, point)}

    def _heal(self) -> dict[str, Any]:
        from streamcert.spi.fault_points import disarm

        return {"disarmed_unreached": disarm(self.env.fault_points_dir, str(self.spec.params["point"]))}


class RescaleFault(Fault):
    """Stop the driver and restart it with other parallelism: ``params["parallelism"]`` reaches the builder.

    Builders that support rescaling read ``params["parallelism"]`` (e.g. as the source's reader
    parallelism); ``params["master"]``, when given, replaces the Spark master (e.g. more local cores).
    Without ``params["state_partitions"]`` the driver is killed (a crash, then a restart with other
    parallelism). With it, the driver is stopped between batches and the query's state is repartitioned
    offline into that many partitions before the restart (:mod:`streamcert.harness.run.state`): the rescale of a
    stateful query.
    """

    def _inject(self) -> dict[str, Any]:
        state = self.env.checkpoint()
        if "state_partitions" not in self.spec.params:
            self.env.kill()
            return {"pending_batch": state.pending, "latest_commit": state.latest_commit}
        from streamcert.harness.run.state import repartition_state, stop_cleanly

        committed = stop_cleanly(self.env)
        moved = repartition_state(self.env.spec.checkpoint, int(self.spec.params["state_partitions"]),
                                  spark_conf=dict(self.env.spec.spark_conf or {}),
                                  log=self.env.workdir / "repartition.log")
        return {"pending_batch": None, "latest_commit": committed, "state_partitions_before": moved["before"],
                "state_partitions_after": moved["after"]}

    def _heal(self) -> dict[str, Any]:
        spec = self.env.spec
        changes: dict[str, Any] = {"params": {**spec.params, "parallelism": int(self.spec.params["parallelism"])}}
        if "master" in self.spec.params:
            changes["master"] = str(self.spec.params["master"])
        self.env.restart(**changes)
        return {"attempt": self.env.attempt, "parallelism": changes["params"]["parallelism"]}
