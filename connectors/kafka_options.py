"""Options of the Kafka offset source, checked up front with errors that name the option and the allowed values.

Runs on the driver when Spark creates the reader (``spark.readStream.format("streamcert-kafka").options(...).load()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamcert.spi.options import SPARK_READER_OPTIONS, OptionRules

from .alignment import DEFAULT_IDLE_TIMEOUT_MS

__all__ = ["SourceOptions", "parse_source_options", "KNOWN_OPTIONS"]

#: option -> what it takes (shown in errors)
KNOWN_OPTIONS: dict[str, str] = {
    "kafka.bootstrap.servers": "host:port[,host:port] (required)",
    "subscribe": "comma-separated topic names (required)",
    "startingOffsets": "earliest (default) or latest",
    "isolationLevel": "read_committed (default) or read_uncommitted",
    "maxRecordsPerBatch": "a positive integer (default: no limit)",
    "readerParallelism": "a positive integer: reader tasks per batch (default: the number of partitions)",
    "partitionDiscoveryIntervalMs": "an integer >= 0 (default 1000): how often new partitions are looked for",
    "commitToGroup": "a consumer group id: offsets are committed there after each batch, for lag monitoring",
    "pollTimeoutMs": "a positive integer (default 30000): how long a task waits for records known to exist",
    "maxAllowedDriftMs": "an integer >= 0: event-time alignment (seed 001, FLIP-182): no partition is read past "
                         "the slowest partition with input plus this many ms of record timestamps (default: off)",
    "idleTimeoutMs": "an integer >= 0 (default 5000): with maxAllowedDriftMs, how long a partition without input "
                     "still holds the others back before it counts as idle",
    "trigger": "availableNow or processingTime: the query's trigger, for Spark 4.1 (which tells a Python source "
               "neither its trigger nor a batch's start); unset, a new query's first batch there is not capped",
}


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str = "earliest"
    isolation_level: str = "read_committed"
    max_records_per_batch: int | None = None
    reader_parallelism: int | None = None
    partition_discovery_interval_ms: int = 1000
    commit_to_group: str | None = None
    poll_timeout_ms: int = 30000
    trigger: str | None = None
    max_allowed_drift_ms: int | None = None
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    kafka_conf: dict[str, str] = field(default_factory=dict)


_RULES = OptionRules(
    KNOWN_OPTIONS, "streamcert-kafka source", required=("kafka.bootstrap.servers", "subscribe"),
    passthrough="kafka.", passthrough_hint="settings for librdkafka start with 'kafka.'",
    # librdkafka settings the source owns: letting users set them would break its guarantees.
    reserved=frozenset({"kafka.isolation.level", "kafka.group.id", "kafka.enable.auto.commit",
                        "kafka.auto.offset.reset", "kafka.enable.partition.eof"}),
    reserved_hint="Use isolationLevel for the isolation level; the source keeps offsets in Spark's checkpoint, "
                  "so it uses no consumer group for reading.",
    spark_own=SPARK_READER_OPTIONS)


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate Spark's option map (names case-insensitive); raise :class:`ConfigurationError` on the first problem."""
    values = _RULES.read(options)
    topics = tuple(t.strip() for t in values.text("subscribe").split(",") if t.strip())
    if not topics:
        raise values.bad("subscribe")
    return SourceOptions(
        bootstrap_servers=values.text("kafka.bootstrap.servers"),
        topics=topics,
        starting_offsets=values.choice("startingOffsets", ("earliest", "latest")),
        isolation_level=values.choice("isolationLevel", ("read_committed", "read_uncommitted")),
        max_records_per_batch=values.integer("maxRecordsPerBatch", None, 1),
        reader_parallelism=values.integer("readerParallelism", None, 1),
        partition_discovery_interval_ms=values.integer("partitionDiscoveryIntervalMs", 1000, 0),
        commit_to_group=values.text("commitToGroup"),
        poll_timeout_ms=values.integer("pollTimeoutMs", 30000, 1),
        trigger=values.choice("trigger", ("", "availableNow", "processingTime")) or None,
        max_allowed_drift_ms=values.integer("maxAllowedDriftMs", None, 0),
        idle_timeout_ms=values.integer("idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS, 0),
        kafka_conf=values.passthrough(),
    )
