"""The declaration of a connector under test: what it is, what it claims, and how to run it.

A third party writes one small object (Flink's *ExternalContext*, Airbyte's acceptance-test config): a
:class:`SourceConnector`, :class:`SinkConnector` or :class:`AggregatorConnector`. streamcert finds it by
``module:attr`` or by the entry point group ``streamcert.connectors``, and composes a query from it and the
harness's own parts: a source under test is paired with an exactly-once sink, a sink under test is fed by a
source, an aggregator sits between both.

Where each method runs: everything here is called **in the driver process** of the query (a child process the
harness may SIGKILL and restart from its checkpoint), when the query is built, once per driver attempt, except
:meth:`Connector.unpack_output`, which the harness calls in its own process while it reads the output back.

Example (a sink that writes each micro-batch with ``foreachBatch``)::

    class MySink(SinkConnector):
        name = "my-sink"
        output_kind = "kafka"
        claims = frozenset({"SNK-5", "SNK-7", "GEN-1", "GEN-2", "GEN-3"})
        unclaimed = {"SNK-1": "at-least-once by design: a replayed batch is written again", ...}

        def write(self, frame, context):
            return (frame.writeStream.format("my-sink")
                    .option("bootstrap", context.bootstrap_servers).option("topic", context.output)
                    .option("checkpointLocation", context.checkpoint))

    CONNECTOR = MySink()          # streamcert certify --connector my_pkg.module:CONNECTOR
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.external import ExternalSystem

#: What a requirement id looks like (SRC-1, SNK-8, GEN-2, ...): a claim of this shape must name a known one.
_REQUIREMENT_ID = re.compile(r"[A-Z]{2,5}-\d+")

__all__ = ["KINDS", "MOMENTS", "DRIFT_OPTION", "QueryContext", "Connector", "SourceConnector", "SinkConnector",
           "AggregatorConnector"]

#: What a connector can be.
KINDS = ("source", "sink", "aggregator")
#: The moments of a batch a connector's kill point can mark (:attr:`Connector.kill_points`): ``window`` — Spark
#: planned the batch (``offsets/N``) and the sink has not made it visible; ``committing`` — the sink recorded its
#: decision or made (part of) the batch visible, and Spark has not written ``commits/N``.
MOMENTS = ("window", "committing")
#: The scenario option (:meth:`QueryContext.option`) that asks a source for event-time alignment (SRC-11): no
#: partition read past a slower one with input by more than this many ms of event time (the records' Kafka
#: timestamps). A source that aligns passes it on as its own setting; one that cannot ignores it, and the run
#: measures the drift it lets through.
DRIFT_OPTION = "max_event_time_drift_ms"


@dataclass(frozen=True)
class QueryContext:
    """Everything a connector needs to build its part of one query, made by the harness for each driver attempt.

    ``bootstrap_servers`` and ``postgres_dsn`` lead *through the fault proxy*: use them, never the servers'
    own addresses, or network faults will not reach the connector. ``input_topic`` holds the workload
    (seeded by the harness), ``output`` names where the sink writes (a Kafka topic that exists, a table name,
    or a folder), ``checkpoint`` is the query's checkpoint folder, ``run_id`` is unique per run (for sink ids,
    transactional ids), ``parallelism`` the reader/writer parallelism of this attempt (a rescale fault
    restarts with another), and ``options`` the scenario's settings for the connectors (read them with
    :meth:`option`). ``connector_options`` are Spark options the harness asks *this* connector to pass to its
    reader or writer after its own (``.options(**context.connector_options)``): the GEN-2 probe sets each of
    :attr:`Connector.bad_options` there, and an unknown one, and expects the connector to refuse it.
    """

    bootstrap_servers: str
    input_topic: str
    output: str
    checkpoint: str
    run_id: str
    postgres_dsn: str | None = None
    parallelism: int = 2
    options: Mapping[str, Any] = field(default_factory=dict)
    connector_options: Mapping[str, str] = field(default_factory=dict)
    #: The endpoints of the external systems of the query's connectors (:mod:`streamcert.spi.external`), by name,
    #: each ``host:port`` of its Toxiproxy link: read them with :meth:`endpoint`.
    endpoints: Mapping[str, str] = field(default_factory=dict)
    #: The query's trigger, as the harness sets it: an interval (``"200 milliseconds"``) or ``"available_now"``. A
    #: source needs it where Spark does not tell it (Spark 4.1 has no AvailableNow hook for Python sources).
    trigger: str = "200 milliseconds"

    def option(self, name: str, default: Any = None) -> Any:
        """The scenario's value of option ``name``, else ``default``."""
        return self.options.get(name, default)

    def endpoint(self, name: str) -> str:
        """The address (through the fault proxy) of endpoint ``name`` of a connector's external system; ``kafka``
        and ``postgres`` are the stack's own (:attr:`bootstrap_servers`, :attr:`postgres_dsn`)."""
        known = {"kafka": self.bootstrap_servers, "postgres": self.postgres_dsn, **self.endpoints}
        if not known.get(name):
            raise ConfigurationError(f"This query has no endpoint {name!r}.",
                                     hint=f"Endpoints: {', '.join(sorted(k for k, v in known.items() if v))}; an "
                                          "external system names its own in ExternalSystem.endpoints().")
        return str(known[name])

    def to_dict(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, "input_topic": self.input_topic,
                "output": self.output, "checkpoint": self.checkpoint, "run_id": self.run_id,
                "postgres_dsn": self.postgres_dsn, "parallelism": self.parallelism, "options": dict(self.options),
                "connector_options": dict(self.connector_options), "endpoints": dict(self.endpoints),
                "trigger": self.trigger}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "QueryContext":
        return cls(**{**data, "options": dict(data.get("options") or {}),
                      "connector_options": dict(data.get("connector_options") or {}),
                      "endpoints": dict(data.get("endpoints") or {})})


class Connector(ABC):  # noqa: B024 - each kind below adds its one abstract method
    """What every connector under test declares.

    ``name``: how reports call it. ``claims``: the requirement IDs (``SRC-1``, ``SNK-6``...) and capabilities
    (``exactly-once``, ``read_committed``, ``rescale``, ``event-time-alignment``) it stands behind.
    ``unclaimed``: requirement ID -> why it does not apply (Airbyte's ``bypass_reason``); a requirement of
    the connector's kind that is neither claimed nor given a reason is an error in strict mode.
    """

    kind: ClassVar[str] = ""
    name: str = ""
    claims: frozenset[str] = frozenset()
    unclaimed: Mapping[str, str] = {}
    #: Spark settings the query's session needs for this connector (a state store provider, say).
    spark_conf: Mapping[str, str] = {}
    #: The Spark versions (``major.minor``: ``"4.1"``) the connector runs on, when not every one: a jar built for
    #: one Spark (Delta Lake's) breaks on another. On any other, its runs are skipped with the reason. Empty: any.
    spark_versions: tuple[str, ...] = ()
    #: Maven coordinates (``group:artifact:version``) of the jars Spark must load for it, e.g. Spark's own Kafka
    #: connector. The harness resolves each one alone, not its dependencies (pyspark ships most of them): list
    #: every jar pyspark lacks. They reach the query as ``spark.jars``. Jars built per Spark version: override
    #: :meth:`packages_for`.
    spark_packages: tuple[str, ...] = ()
    #: Named fault points (:mod:`streamcert.spi.fault_points`) the connector reaches, each with the moment of
    #: :data:`MOMENTS` it marks: the certification also kills the driver there. A bonus: the suite kills at
    #: seeded random moments and when the output grows whether or not a connector names any.
    kill_points: Mapping[str, str] = {}
    #: Fault points reached in tasks after they wrote something (prepared, staged): the certification fails the
    #: task attempt there, and the connector must never make that attempt's writes visible.
    fail_points: tuple[str, ...] = ()
    #: For GEN-2: documented options of the connector and a value each must refuse (``{"maxRecordsPerBatch":
    #: "0"}``). The harness builds and starts the query once per entry, with the option in
    #: ``QueryContext.connector_options``, and once with an unknown option; each must fail before the first batch
    #: commits, with an error that names the option.
    bad_options: Mapping[str, str] = {}

    def packages_for(self, spark_version: str) -> tuple[str, ...]:
        """The Maven coordinates of the jars this connector needs on Spark ``spark_version`` (``"4.1.1"``): its
        :attr:`spark_packages` unless a connector whose jars are built per Spark version says otherwise. Called in
        the harness's process before each run; the jars used are recorded with the run."""
        return tuple(self.spark_packages)

    def unpack_output(self, frame: Any) -> Any:
        """Rows as read back -> one row per workload record (a ``value`` column carrying the record's bytes).

        Called in the harness's process on each chunk the observer reads (a pandas DataFrame with ``key`` and
        ``value``). The default is the identity: one output row per record. An aggregator that emits lists
        unpacks them here, adding columns the checkers use (``batch_id``, ``emitted_at``).
        """
        return frame

    def coverage(self, requirements: Iterable[str]) -> dict[str, str]:
        """Requirement ID -> ``claimed`` | ``unclaimed: <reason>`` | ``undeclared``, for the IDs given."""
        out = {}
        for requirement in requirements:
            if requirement in self.claims:
                out[requirement] = "claimed"
            elif str(self.unclaimed.get(requirement, "")).strip():
                out[requirement] = f"unclaimed: {self.unclaimed[requirement].strip()}"
            else:
                out[requirement] = "undeclared"
        return out

    def check_declaration(self, requirements: Iterable[str] = (), *, strict: bool = True,
                          capabilities: Mapping[str, Iterable[str]] | None = None) -> None:
        """Raise :class:`ConfigurationError` on a malformed declaration, and (``strict``) on any requirement of
        ``requirements`` that is neither claimed nor given a reason. ``capabilities`` (name -> the requirement IDs
        that back it, for this kind), when given: a claim that is not a requirement ID must be one of them, and
        claiming it means claiming each requirement behind it or waiving it with a reason (a sink whose tasks write
        nothing has no zombie to fence), at least one claimed."""
        where = f"connector {self.name or type(self).__name__!r}"
        if self.kind not in KINDS:
            raise ConfigurationError(f"The {where} has kind {self.kind!r}.",
                                     hint="Subclass SourceConnector, SinkConnector or AggregatorConnector.")
        if not self.name:
            raise ConfigurationError(f"The {where} has no name.", hint="Set the class attribute name = '...'.")
        self._check_system(where)
        both = sorted(set(self.claims) & set(self.unclaimed))
        if both:
            raise ConfigurationError(f"The {where} both claims and waives {', '.join(both)}.",
                                     hint="A requirement is either claimed or unclaimed with a reason.")
        moments = sorted(f"{point}: {moment!r}" for point, moment in self.kill_points.items() if moment not in MOMENTS)
        if moments:
            raise ConfigurationError(f"The {where} marks kill points with unknown moments ({'; '.join(moments)}).",
                                     hint=f"A kill point marks one of: {', '.join(MOMENTS)}.")
        known = set(requirements)
        unknown = sorted(req for req in set(self.claims) | set(self.unclaimed)
                         if known and _REQUIREMENT_ID.fullmatch(str(req)) and req not in known)
        if unknown:
            raise ConfigurationError(
                f"The {where} declares {', '.join(unknown)}, which the catalogue has no such requirement of a "
                f"{self.kind} for.", hint=f"A {self.kind} claims or waives: {', '.join(sorted(known))} "
                "(`streamcert requirements --kind " + self.kind + "` lists them).")
        if capabilities is not None:
            self._check_capabilities(where, capabilities)
        empty = sorted(req for req, reason in self.unclaimed.items() if not str(reason).strip())
        if empty:
            raise ConfigurationError(f"The {where} waives {', '.join(empty)} without a reason.",
                                     hint="Give every unclaimed requirement a reason a reader can check.")
        if strict:
            undeclared = [req for req, verdict in self.coverage(requirements).items() if verdict == "undeclared"]
            if undeclared:
                raise ConfigurationError(
                    f"The {where} neither claims nor waives {', '.join(undeclared)}.",
                    hint="Add each to claims, or to unclaimed with the reason it does not apply.")

    def _check_system(self, where: str) -> None:
        """A declared system is an :class:`ExternalSystem` that does its part: a source's writes the input, a
        sink's reads the output back."""
        for attribute, method, part in (("input_system", "writer", "load the workload into what it reads"),
                                        ("output_system", "reader", "read back what it wrote")):
            system = getattr(self, attribute, None)
            if system is None:
                continue
            if not isinstance(system, ExternalSystem):
                raise ConfigurationError(f"The {where}'s {attribute} is a {type(system).__name__}, not an "
                                         "ExternalSystem.", hint="Declare an instance of a subclass of "
                                         "streamcert.spi.external.ExternalSystem.")
            if getattr(type(system), method) is getattr(ExternalSystem, method):
                raise ConfigurationError(f"The {where}'s {attribute} {system.name or type(system).__name__!r} has no "
                                         f"{method}(): the harness could not {part}.", hint=f"Override "
                                         f"{type(system).__name__}.{method}() (see streamcert.spi.external).")

    def _check_capabilities(self, where: str, capabilities: Mapping[str, Iterable[str]]) -> None:
        claimed = sorted(str(claim) for claim in self.claims if not _REQUIREMENT_ID.fullmatch(str(claim)))
        unknown = [claim for claim in claimed if claim not in capabilities]
        if unknown:
            raise ConfigurationError(
                f"The {where} claims {', '.join(map(repr, unknown))}, which is neither a requirement ID nor a "
                f"capability of a {self.kind}.", hint=f"A {self.kind} may claim the capabilities "
                f"{', '.join(sorted(capabilities)) or '(none)'}; anything else it stands behind is a requirement ID.")
        for claim in claimed:
            backing = list(capabilities[claim])
            missing = [req for req in backing if req not in self.claims and req not in self.unclaimed]
            if missing:
                raise ConfigurationError(
                    f"The {where} claims {claim!r} but neither claims nor waives {', '.join(missing)}, which back "
                    "it.", hint=f"Claim {', '.join(missing)}, or waive each with the reason it does not apply to "
                                "this connector: a capability is certified by its requirements.")
            if not any(req in self.claims for req in backing):
                raise ConfigurationError(
                    f"The {where} claims {claim!r} and waives every requirement behind it ({', '.join(backing)}).",
                    hint=f"Claim those of {', '.join(backing)} it meets, or drop {claim!r}.")


class SourceConnector(Connector):
    """A streaming source. The harness seeds ``context.input_topic`` with the workload and pairs the source with
    an exactly-once sink to judge it.

    ``input_system``: the external system the source reads (:mod:`streamcert.spi.external`), whose writer the
    harness loads the workload with; None (the default) is a Kafka topic of the stack.
    """

    kind: ClassVar[str] = "source"
    input_system: ExternalSystem | None = None

    @abstractmethod
    def read(self, spark: Any, context: QueryContext) -> Any:
        """Return the streaming DataFrame (``spark.readStream...load()``) of ``context.input_topic``.

        Called in the driver when the query is built. Its rows must carry ``key`` and ``value`` (binary, the
        bytes as produced); other columns (``partition``, ``offset``...) may follow.
        """


class SinkConnector(Connector):
    """A streaming sink; the harness reads back what it wrote at ``context.output`` by ``output_kind``.

    ``output_kind`` names the reader the harness uses, as a user of the sink would read: ``kafka`` (a topic the
    harness creates with ``output_partitions`` partitions, read with ``isolation.level=read_committed``),
    ``postgres`` (a table, read as committed rows) or ``files`` (a folder written by Spark's file sink: only
    the files its ``_spark_metadata`` log commits). ``streamcert`` lists the kinds it reads in its error when a
    sink names another.
    """

    kind: ClassVar[str] = "sink"
    output_kind: str = "kafka"
    #: The external system the sink writes (:mod:`streamcert.spi.external`), whose reader the harness reads the
    #: output back with; None (the default): the output kind's own reader.
    output_system: ExternalSystem | None = None
    #: Partitions of the output the harness makes before the query starts (a ``kafka`` topic's).
    output_partitions: int = 1

    @abstractmethod
    def write(self, frame: Any, context: QueryContext) -> Any:
        """Return the ``DataStreamWriter`` that writes ``frame`` (rows with ``key`` and ``value``) to
        ``context.output``, with ``checkpointLocation`` set to ``context.checkpoint``; the harness starts it.

        Called in the driver when the query is built. The values must reach the output unchanged: the harness
        decodes each record's identity from its bytes.
        """


class AggregatorConnector(Connector):
    """A stateful operator between a source and a sink (the batch aggregator of seed 004)."""

    kind: ClassVar[str] = "aggregator"

    @abstractmethod
    def transform(self, frame: Any, context: QueryContext) -> Any:
        """Return the DataFrame to write (rows with ``key`` and ``value``) from the source's ``frame``.

        Called in the driver when the query is built.
        """

    def batch_bounds(self, context: QueryContext) -> tuple[int, float] | None:
        """The batch contract this aggregator promises under ``context.options``: (most records in one batch,
        most seconds a record waits before the batch holding it is emitted), or None when it promises none.

        Called in the harness's process before the run; the harness then judges every emitted batch against
        it (its :meth:`Connector.unpack_output` must give each record's ``batch_id`` and ``emitted_at``).
        """
        return None
