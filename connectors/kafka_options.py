"""Options of the Kafka offset source, checked up front with errors that name the option and the allowed values.

Runs on the driver when Spark creates the reader (``spark.readStream.format("streamcert-kafka").options(...).load()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamcert.spi.errors import ConfigurationError

from streamcert.spi.options import OptionRules

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
}
# librdkafka settings the source owns: letting users set them would break its guarantees.
_RESERVED_KAFKA = {"kafka.isolation.level", "kafka.group.id", "kafka.enable.auto.commit",
                   "kafka.auto.offset.reset", "kafka.enable.partition.eof"}


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
    kafka_conf: dict[str, str] = field(default_factory=dict)


_RULES = OptionRules(KNOWN_OPTIONS, "streamcert-kafka source")


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate Spark's option map (names case-insensitive); raise :class:`ConfigurationError` on the first problem."""
    options = _RULES.canonical(options)
    unknown = sorted(k for k in options if k not in KNOWN_OPTIONS and not k.startswith("kafka.")
                     and k not in ("path",))
    if unknown:
        raise ConfigurationError(
            f"Unknown option(s) for the streamcert-kafka source: {', '.join(unknown)}.",
            hint=f"Known options: {', '.join(KNOWN_OPTIONS)}; settings for librdkafka start with 'kafka.'.")
    reserved = sorted(k for k in options if k in _RESERVED_KAFKA)
    if reserved:
        raise ConfigurationError(
            f"Option(s) {', '.join(reserved)} are set by the source itself and cannot be overridden.",
            hint="Use isolationLevel for the isolation level; the source keeps offsets in Spark's checkpoint, "
            "so it uses no consumer group for reading.")
    bootstrap = str(options.get("kafka.bootstrap.servers", "")).strip()
    if not bootstrap:
        raise _RULES.bad("kafka.bootstrap.servers", options.get("kafka.bootstrap.servers"))
    topics = tuple(t.strip() for t in str(options.get("subscribe", "")).split(",") if t.strip())
    if not topics:
        raise _RULES.bad("subscribe", options.get("subscribe"))
    return SourceOptions(
        bootstrap_servers=bootstrap,
        topics=topics,
        starting_offsets=_RULES.choice(options, "startingOffsets", ("earliest", "latest")),
        isolation_level=_RULES.choice(options, "isolationLevel", ("read_committed", "read_uncommitted")),
        max_records_per_batch=_RULES.integer(options, "maxRecordsPerBatch", None, 1),
        reader_parallelism=_RULES.integer(options, "readerParallelism", None, 1),
        partition_discovery_interval_ms=_RULES.integer(options, "partitionDiscoveryIntervalMs", 1000, 0) or 0,
        commit_to_group=(str(options["commitToGroup"]).strip() or None) if "commitToGroup" in options else None,
        poll_timeout_ms=_RULES.integer(options, "pollTimeoutMs", 30000, 1) or 30000,
        kafka_conf={k.removeprefix("kafka."): str(v) for k, v in options.items()
                    if k.startswith("kafka.") and k != "kafka.bootstrap.servers"},
    )
