"""An external system a connector under test reads or writes, brought by the connector's own declaration.

streamcert's stack runs three, themselves contexts of this kind (``streamcert.harness.systems``): a Kafka topic (what
a source that names no system reads), a PostgreSQL table, the folder of Spark's file sink (what a sink's
``output_kind`` names). Any other system (a lakehouse table, another database, another broker) is described by an
:class:`ExternalSystem` that the declaration names (``SourceConnector.input_system``,
``SinkConnector.output_system``), as Flink's connector testframe lets a connector's tests bring an *ExternalContext*.
It says:

- how to run the system: :meth:`ExternalSystem.start` starts a local process or a container, or connects to a server
  the user names by settings; a table on the local filesystem needs nothing;
- where it listens: :meth:`ExternalSystem.endpoints`. The harness puts a Toxiproxy link in front of every TCP endpoint
  and hands the connector the proxied address (``QueryContext.endpoint(name)``), so network faults reach it;
- the faults it takes besides its links' toxics: :meth:`ExternalSystem.kill`, :meth:`~ExternalSystem.restart`,
  :meth:`~ExternalSystem.pause` / :meth:`~ExternalSystem.resume` (a system that does not override one does not take
  that fault: a schedule that asks for it is refused before the run);
- for a source, an :class:`InputWriter` of workload records (a committed write, or one left uncommitted that the
  source must never read);
- for a sink, an :class:`OutputReader` that reads back what became visible, as the sink's users read it (committed
  rows only, with the order a reader can see them in), and says what the sink left behind (:class:`Leftovers`).

Where each method runs: everything here is called **in the harness's process**, never in the query's driver or
tasks; the query reaches the system only through its connector and the endpoints in its ``QueryContext``. One
system object serves every run of a certification: :meth:`~ExternalSystem.start` is called once, before the first
run that needs it, and :meth:`~ExternalSystem.stop` once, when the stack stops. Readers and writers are made per run.

Records are identified by their bytes: the harness decodes each workload record's id from its value, so a reader
returns values exactly as written, whatever else the table holds.

Example (a table on the local filesystem, read back by its commit log; see ``docs/certify-a-connector.md``)::

    class MyTable(ExternalSystem):
        name = "my-table"

        def output_name(self, stem, run_id, workdir):
            return f"{workdir}/{stem}-table"

        def reader(self, name, endpoints):
            return MyTableReader(name)      # an OutputReader

    class MySink(SinkConnector):
        name = "my-sink"
        output_system = MyTable()
        ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["Endpoint", "InputRecord", "VisibleRecord", "Leftovers", "InputWriter", "OutputReader", "ExternalSystem",
           "SYSTEM_FAULTS"]

#: The faults an external system may take (its links' toxics aside): each is a method it overrides.
SYSTEM_FAULTS = ("kill", "restart", "pause", "resume")


@dataclass(frozen=True)
class Endpoint:
    """A TCP endpoint of a started system (the system's own address: the harness proxies it)."""

    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class InputRecord:
    """One workload record as the harness writes it: ``partition`` is a hint a system without partitions ignores."""

    key: bytes
    value: bytes
    partition: int = 0


@dataclass(frozen=True)
class VisibleRecord:
    """One record a reader of the output can see.

    ``value``: the bytes as the sink wrote them. ``order``: when it became visible, as a reader can tell (a table's
    version or snapshot, a topic's offset): records with equal ``order`` became visible at once, a higher one
    later; None: in the order :meth:`OutputReader.read_new` returns them. ``location``: where it was found (file,
    version...), kept with the run's evidence.
    """

    value: bytes
    key: bytes | None = None
    order: int | None = None
    location: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Leftovers:
    """What the sink left behind after a run, as the system shows it (SNK-2, SNK-3).

    ``found``: the leftovers that are a finding (a prepared transaction nobody resolved, an open transaction that
    blocks readers), each a small dict a report can show. ``counts``: what was looked at (files committed and not:
    an uncommitted data file no reader sees is counted, not a finding).
    """

    found: Sequence[Mapping[str, Any]] = ()
    counts: Mapping[str, int] = field(default_factory=dict)


class InputWriter(ABC):
    """Writes workload records into the system for a source under test; made per run, used in one thread of the
    harness's process (the load), closed at the end of the load."""

    #: Whether :meth:`write` can leave records uncommitted (``commit=False``): a workload with aborted writes (what
    #: a read-committed source must skip) needs it.
    writes_uncommitted: ClassVar[bool] = False

    def prepare(self, partitions: int) -> None:  # noqa: B027 - most inputs need nothing made beforehand
        """Make the input (a table, a topic with ``partitions``) before the query starts. Called once, first."""

    @abstractmethod
    def write(self, records: Sequence[InputRecord], commit: bool = True) -> None:
        """Write ``records`` as one transaction of the system (one table commit): committed, or with ``commit``
        False written and left uncommitted or aborted, as a failed writer of this system leaves them.

        Return once the system acknowledged the commit; raise when it did not (the records are then
        indeterminate: the checks accept them seen or not).
        """

    def close(self) -> None:  # noqa: B027 - most writers hold nothing
        """Release clients; called once after the last write, also after an error."""


class OutputReader(ABC):
    """Reads back what a sink made visible, as the sink's users read it; made per run and polled by one thread of
    the harness's process while the run goes on."""

    #: Whether the output stores each record's key; where it does not, the harness takes keys from its ledger.
    carries_keys: ClassVar[bool] = True
    #: Seconds between two rounds of :meth:`read_new` that found nothing.
    idle_s: ClassVar[float] = 0.2

    def prepare(self, partitions: int) -> None:  # noqa: B027 - most outputs are made by the sink
        """Make what must exist before the query starts (``partitions``: what the sink declared). Called once."""

    @abstractmethod
    def read_new(self) -> Sequence[VisibleRecord]:
        """The records that became visible since the last call (committed ones only), empty when none.

        Called over and over in the reader's thread until the run ends; may block briefly. A record a reader sees
        twice is returned twice (a duplicate is a finding); one that was visible and is no longer is not taken back.
        """

    def visible_mark(self) -> Hashable | None:
        """A cheap value that changes as soon as the output shows something new (a table's latest version), asked
        every few milliseconds by faults timed by the output, from another thread; None: the harness counts what
        :meth:`read_new` returned instead (as fast as its rounds)."""
        return None

    def leftovers(self) -> Leftovers | None:
        """What the sink left behind, looked at right after the run while the system still runs; None: this
        system cannot tell (the requirement that needs it is then unknown, never passed)."""
        return None

    def transient(self, error: Exception) -> bool:
        """Whether ``error`` raised by :meth:`read_new` passes by itself (the system restarting under a fault): the
        round is then tried again. Default: no error does."""
        return False

    def close(self) -> None:  # noqa: B027 - most readers hold nothing
        """Release clients; called once after the last round, also after an error."""


class ExternalSystem(ABC):  # noqa: B024 - a system overrides what it supports; none of it is required alone
    """An external system a connector reads or writes (see the module's docstring for when each method is called).

    ``name`` is how reports call it. A source's system overrides :meth:`writer` and :meth:`input_name`, a sink's
    :meth:`reader` and :meth:`output_name`.
    """

    name: str = ""
    #: The names :meth:`endpoints` returns, known before the system starts: a certification plans its network faults
    #: and slowed links by them (the first is the link a sink's commit is slowed on).
    endpoint_names: tuple[str, ...] = ()

    def start(self, workdir: str) -> None:  # noqa: B027 - a filesystem table needs nothing started
        """Start the system (a local process, a container) or check the server the user named; ``workdir`` is a
        folder of its own for data and logs. Raise ``ConfigurationError`` with a hint when it cannot start."""

    def stop(self) -> None:  # noqa: B027 - paired with start; must be idempotent and safe without start
        """Stop what :meth:`start` started; idempotent, and safe when :meth:`start` was never called."""

    def endpoints(self) -> Mapping[str, Endpoint]:
        """Name -> TCP endpoint of the started system (its own address). The harness proxies each one and gives the
        connector the proxy's address as ``QueryContext.endpoint(name)``. Default: none (a filesystem table)."""
        return {}

    def spark_conf(self, endpoints: Mapping[str, str]) -> Mapping[str, str]:
        """Spark settings the query needs to reach the system, given the proxied ``endpoints`` (name -> host:port):
        a catalog's URI, say. Default: none."""
        return {}

    def input_name(self, stem: str, run_id: str, workdir: str) -> str:
        """The name of a run's input (a table's path, a topic), unique per run; it reaches the source as
        ``QueryContext.input_topic`` and the writer as ``name``."""
        return f"{workdir}/input"

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        """The name of a run's output, unique per run; it reaches the sink as ``QueryContext.output``."""
        return f"{workdir}/output"

    def writer(self, name: str, endpoints: Mapping[str, str]) -> InputWriter:
        """An :class:`InputWriter` of input ``name``; ``endpoints`` are the system's own addresses (the harness's
        writes are not slowed or cut by the faults on the connector's links)."""
        raise NotImplementedError(f"{type(self).__name__} writes no input: it serves sinks only")

    def reader(self, name: str, endpoints: Mapping[str, str]) -> OutputReader:
        """An :class:`OutputReader` of output ``name``; ``endpoints`` as for :meth:`writer`."""
        raise NotImplementedError(f"{type(self).__name__} reads no output: it serves sources only")

    # -- faults (a system takes the ones it overrides) -----------------------------------------

    def kill(self) -> None:
        """Kill the system's process or container at once (SIGKILL: no clean shutdown); :meth:`restart` follows."""
        raise NotImplementedError

    def restart(self) -> None:
        """Start the system again after :meth:`kill`, on the same data and endpoints; return once it answers."""
        raise NotImplementedError

    def pause(self) -> None:
        """Freeze the system (SIGSTOP, a paused container): it holds its connections and answers nothing."""
        raise NotImplementedError

    def resume(self) -> None:
        """Let a paused system go on."""
        raise NotImplementedError

    def faults(self) -> tuple[str, ...]:
        """The :data:`SYSTEM_FAULTS` this system takes: the ones its class overrides."""
        return tuple(fault for fault in SYSTEM_FAULTS
                     if getattr(type(self), fault) is not getattr(ExternalSystem, fault))
