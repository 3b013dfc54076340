"""What the stack's own systems share: they are started by the stack, not by :meth:`ExternalSystem.start`, and each
run binds one to its addresses (:class:`StackAddresses`).

Runs in the harness's process. An unbound system (``KafkaTopics()``) still knows its name, endpoint names and how it
names a run's input and output: what a certification's plans need before any stack starts.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.observers.base import Observer
from streamcert.harness.stack.kafka_clients import TopicSettings
from streamcert.spi.external import ExternalSystem, Leftovers, OutputReader

__all__ = ["StackAddresses", "StackSystem"]


@dataclass(frozen=True)
class StackAddresses:
    """Where one run reaches the stack's servers. ``bootstrap_servers`` and ``postgres_dsn`` are the run's own paths
    (through the fault proxy, or direct on a ``kafka_path='direct'`` scenario): the query, the load and the observer
    use them, so all three see one cluster. The ``*_direct`` ones are the servers' own addresses: a fault timed by the
    output asks them, so it sees a commit at once even while a toxic slows the link."""

    bootstrap_servers: str | None = None
    kafka_direct: str | None = None
    postgres_dsn: str | None = None
    postgres_direct_dsn: str | None = None
    #: the run's Kafka topics' durability settings (None: the cluster's defaults)
    topics: TopicSettings | None = None
    #: the run's start (epoch s): a shared server's leftovers from before it are another run's
    since: float | None = None


class StackSystem(ExternalSystem):
    """A system of streamcert's own stack, bound to one run's :class:`StackAddresses` (empty: unbound).

    Its clients (writer, reader) use the bound addresses, not the ``endpoints`` argument the SPI hands a connector's
    own system: the stack proxies its servers itself (a Kafka cluster's brokers each behind a link of their own).
    """

    #: The plans' restart of this system's server (fault, target, parameters, gap s), or None: a stack system's
    #: process is the stack's, so its faults are the stack's fault families, not the SPI's kill/restart.
    restart_fault: tuple[str, str, dict, float] | None = None

    def __init__(self, addresses: StackAddresses | None = None) -> None:
        self.at = addresses or StackAddresses()

    def bound(self, addresses: StackAddresses) -> "StackSystem":
        """This system bound to one run's ``addresses``."""
        return type(self)(addresses)

    @abstractmethod
    def proxied(self) -> dict[str, str]:
        """Endpoint name -> the address the query gets (``QueryContext.endpoint(name)``)."""

    @abstractmethod
    def direct(self) -> dict[str, str]:
        """Endpoint name -> the server's own address."""

    def observer(self, name: str, unpack: Any = None) -> Observer:
        """The harness's observer of output ``name`` (not started): the stack's native reader of this system, which
        hands the observer whole frames instead of one record object each."""
        raise ConfigurationError(f"The stack's {self.name} system holds no sink's output.",
                                 hint="Give the sink an output_kind the stack reads: kafka, postgres or files.")

    def reader(self, name: str, endpoints: Mapping[str, str]) -> OutputReader:
        """An :class:`~streamcert.spi.external.OutputReader` over :meth:`observer` (for code written against the
        SPI); the harness's own runs use :meth:`observer` directly."""
        from streamcert.harness.systems.observer_reader import ObserverReader

        return ObserverReader(self.observer(name), leftovers=lambda: self.leftovers_of(name))

    def leftovers_of(self, name: str) -> Leftovers | None:
        """What a sink left behind in output ``name``, as this system shows it (None: it cannot tell)."""
        return None

    def _needs(self, address: str | None, what: str) -> str:
        if not address:
            raise ConfigurationError(f"This run has no {what}: the stack's {self.name} system is not bound to one.",
                                     hint="Use a provider whose stack runs it (local, testcontainers, or the "
                                     "STREAMCERT_* settings of an external one).")
        return address
