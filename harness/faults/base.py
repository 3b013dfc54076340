"""What every fault is: :class:`Fault` (start injects, stop heals, both recorded) and :class:`FaultContext`.

A fault is built from a :class:`~streamcert.harness.faults.schedule.FaultSpec` and the context of the run by
:func:`streamcert.harness.faults.registry.build_fault`. ``start()`` and ``stop()`` run in the harness process
(the scenario's fault timeline, or a test) and are idempotent; each records ``fault-start`` / ``fault-stop`` in
the run's :class:`~streamcert.harness.run.history.History`, with what the fault hit. A fault that waits for its
moment before it acts gives up on :meth:`Fault.cancel` (its timeline was cut short) by raising :class:`FaultCancelled`
from ``start()``: nothing was injected, so there is nothing to heal.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from streamcert.harness.errors import ConfigurationError, StreamcertError
from streamcert.harness.waiting import wait_for

if TYPE_CHECKING:
    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.run.driver import DriverProcess
    from streamcert.harness.run.history import History
    from streamcert.harness.run.observers.base import Observer
    from streamcert.harness.stack.environment import Environment

__all__ = ["FaultContext", "Fault", "FaultCancelled", "FaultNotApplicable", "within", "wait_for_input_read"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class FaultContext:
    """What a fault may act on in one run; built once by whoever carries out the schedule.

    ``environment`` is the started stack (servers and Toxiproxy links), ``driver`` the query's
    :class:`~streamcert.harness.run.driver.DriverProcess`; either may be None where a test has no such thing.
    ``workdir`` is where a fault writes what it leaves behind (e.g. the state repartition's log); ``observer``
    reads the run's output back (a kill timed by the output's growth watches it).
    """

    history: History
    workdir: Path
    environment: Environment | None = None
    driver: DriverProcess | None = None
    input_topic: str | None = None
    observer: Observer | None = None
    #: the run's standalone Spark cluster (master ``standalone``), whose workers a fault may kill
    spark_cluster: Any = None


class FaultNotApplicable(ConfigurationError):
    """The stack cannot carry this fault out: it has no control of the server it acts on (an external provider's
    brokers and database are the user's). The run records the fault as skipped, and a requirement exercised only
    by skipped faults is skipped with this reason, never failed."""


class FaultCancelled(Exception):
    """A fault waiting for its moment was cancelled before it struck (:meth:`Fault.cancel`): it injected nothing.
    The timeline records it as ``fault-cancelled``, as it does a fault that never started."""


class Fault(ABC):
    """One fault of a schedule. Subclasses define ``_inject`` and ``_heal`` (each returns the event's details).

    ``needs`` names what the fault acts on (``"driver"``, ``"environment"``, ``"input_topic"``, ``"observer"``,
    ``"spark_cluster"``): building it with a context that lacks one is a ConfigurationError at once, before the
    run, not when the fault strikes.
    """

    needs: tuple[str, ...] = ()
    #: Spark settings the query's driver needs for this fault to act on it (e.g. the status API a kill timed by
    #: the query's moments reads); the scenario runner adds them to the driver of a run whose schedule has the kind.
    spark_conf: dict[str, str] = {}

    @classmethod
    def driver_conf(cls) -> dict[str, str]:
        """The Spark settings a run's driver gets for this kind (:attr:`spark_conf`; a kind whose settings must be
        worked out, a jar built on first use, overrides it). ``spark.jars`` is joined with the run's other jars."""
        return dict(cls.spark_conf)

    def __init__(self, spec: FaultSpec, context: FaultContext) -> None:
        self.spec = spec
        self.context = context
        self.history = context.history
        #: The spec's parameters, checked and typed by its kind's model (defaults filled in).
        self.params: Any = spec.typed_params()
        self.active = False
        self._cancelled = threading.Event()
        for need in self.needs:
            _REQUIRE[need](self)

    def start(self) -> None:
        """Inject the fault; called once at its time by the fault timeline (again: a no-op)."""
        if self.active:
            return
        details = self._inject()
        self.active = True
        self.history.record("fault-start", fault=self.spec.fault, target=self.spec.target,
                            params=self.spec.params, stream=self.spec.stream, **(details or {}))

    def cancel(self) -> None:
        """Ask the fault to act no more: called by the fault timeline, from another thread, when the timeline is cut
        short (a run's first finding ends its schedule). A fault that waits for a moment of the query gives up at its
        next look; one that acts at once has nothing to give up. Idempotent."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled.is_set()

    def stop(self) -> None:
        """Heal the fault; called after its duration and again at teardown (a no-op unless started)."""
        if not self.active:
            return
        details = self._heal()
        self.active = False
        self.history.record("fault-stop", fault=self.spec.fault, target=self.spec.target, **(details or {}))

    @abstractmethod
    def _inject(self) -> dict[str, Any] | None:
        """Carry the fault out; what it returns goes into the ``fault-start`` event."""

    @abstractmethod
    def _heal(self) -> dict[str, Any] | None:
        """Undo the fault (or let the system heal); what it returns goes into the ``fault-stop`` event."""

    # -- what the context holds for this fault -----------------------------------------------

    @property
    def driver(self) -> DriverProcess:
        """The run's driver process; a ConfigurationError when the context has none."""
        if self.context.driver is None:
            raise _missing(self.spec, "the query's driver process", "driver=<the DriverProcess>")
        return self.context.driver

    @property
    def environment(self) -> Environment:
        """The started stack; a ConfigurationError when the context has none."""
        if self.context.environment is None:
            raise _missing(self.spec, "the stack's servers or links", "environment=<the started Environment>")
        return self.context.environment

    @property
    def observer(self) -> Observer:
        """The run's output observer; a ConfigurationError when the context has none."""
        if self.context.observer is None:
            raise _missing(self.spec, "the observer of the run's output", "observer=<the Observer>")
        return self.context.observer

    @property
    def spark_cluster(self) -> Any:
        """The run's standalone Spark cluster; a ConfigurationError when the run has none."""
        if self.context.spark_cluster is None:
            raise ConfigurationError(
                f"Fault {self.spec.fault!r} acts on a worker of a standalone Spark cluster, and this run has none.",
                hint='Run the scenario with master "standalone" (a cluster of spark_workers workers).')
        return self.context.spark_cluster

    @property
    def input_topic(self) -> str:
        """The run's input topic; a ConfigurationError when the context names none."""
        if self.context.input_topic is None:
            raise _missing(self.spec, "the run's input topic", "input_topic=<the topic>")
        return self.context.input_topic


def _missing(spec: FaultSpec, what: str, field: str) -> ConfigurationError:
    return ConfigurationError(f"Fault {spec.fault!r} (target {spec.target!r}) acts on {what}, and its fault "
                              "context has none.", hint=f"Build the fault with FaultContext({field}, ...).")


_REQUIRE = {"driver": lambda fault: fault.driver, "environment": lambda fault: fault.environment,
            "input_topic": lambda fault: fault.input_topic, "observer": lambda fault: fault.observer,
            "spark_cluster": lambda fault: fault.spark_cluster}


class _NotWithin(StreamcertError):
    """What :func:`within` has :func:`wait_for` raise; never escapes."""


def within(probe: Callable[[], T], *, what: str, timeout: float, interval: float = 0.05,
           abort: Callable[[], str | None] | None = None) -> T | None:
    """``probe()``'s first truthy value, or None once ``timeout`` passed or ``abort`` gave a reason.

    For the waits of a fault whose outcome is recorded rather than raised (the driver did not reach the point in
    time: the event says ``reached: false``, and the checkers judge the run).
    """
    try:
        return wait_for(probe, what=what, timeout=timeout, interval=interval, abort=abort, error=_NotWithin)
    except _NotWithin:
        return None


def wait_for_input_read(fault: Fault, timeout: float) -> dict[str, Any]:
    """Wait at most ``timeout`` seconds for the driver's current attempt to commit a batch that read input, before
    ``fault`` acts: the attempt a fault is about to end is seen doing what it was started for (a rescale's reading
    with its task count). Says which attempt, whether it read, and how long it was waited for (an attempt that read
    nothing while records waited is the ``progress`` check's finding)."""
    import time

    driver = fault.driver
    attempt, began = driver.attempt, time.monotonic()
    read = within(lambda: any(e.get("event") == "progress" and (e.get("numInputRows") or 0) > 0
                              for e in driver.events(attempt)),
                  what="a batch that read input", timeout=timeout, interval=0.2,
                  abort=lambda: None if driver.is_running() and not fault.cancelled else "the driver stopped")
    return {"waited_for_attempt": attempt, "attempt_read_input": bool(read),
            "waited_s": round(time.monotonic() - began, 3)}
