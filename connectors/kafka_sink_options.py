"""Options of the Kafka two-phase-commit sink, checked on the driver when Spark creates the writer.

``writeStream.format("streamcert-kafka-2pc").option(...)``; names are case-insensitive (Spark may
hand them over lower-cased), errors name the option and what it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamcert.spi.errors import ConfigurationError

from streamcert.spi.options import OptionRules
from .twophase import validate_sink_id

__all__ = ["SINK_NAME", "SinkOptions", "parse_sink_options", "KNOWN_SINK_OPTIONS"]

SINK_NAME = "streamcert-kafka-2pc"

#: option -> what it takes (shown in errors)
KNOWN_SINK_OPTIONS: dict[str, str] = {
    "kafka.bootstrap.servers": "host:port[,host:port] (required)",
    "topic": "the output topic, which must exist (required)",
    "sinkId": "a stable id of 1-64 letters, digits, '_' or '-', one per checkpoint (required)",
    "stagingTopic": "the write-ahead topic (default <topic>.<sinkId>.staging; created if missing)",
    "ledgerTopic": "the one-partition ledger topic (default <topic>.<sinkId>.ledger; created if missing)",
    "stagingPartitions": "a positive integer (default 8): partitions of a staging topic the sink creates",
    "stagingBlockBytes": "an integer from 1 to 8388608 (default 524288): bytes of keys and values staged per "
                         "staging record (rows are staged in blocks; a block holds one row more at most)",
    "transactionTimeoutMs": "an integer >= 1000 (default 60000): Kafka transaction timeout of the sink's producers",
    "copyTimeoutMs": "a positive integer (default 60000): how long commit waits for staged records known to exist",
}
# librdkafka settings the sink owns: letting users set them would break exactly-once.
_RESERVED_KAFKA = {"kafka.transactional.id", "kafka.enable.idempotence", "kafka.isolation.level",
                   "kafka.acks", "kafka.group.id", "kafka.enable.auto.commit", "kafka.transaction.timeout.ms"}
# Spark passes its own writeStream options to the sink as well.
_SPARK_OWN = {"path", "checkpointlocation"}


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str
    sink_id: str
    staging_topic: str
    ledger_topic: str
    staging_partitions: int = 8
    staging_block_bytes: int = 524288
    transaction_timeout_ms: int = 60000
    copy_timeout_ms: int = 60000
    kafka_conf: dict[str, str] = field(default_factory=dict)


_MAX_BLOCK_BYTES = 8 * 1024 * 1024
_RULES = OptionRules(KNOWN_SINK_OPTIONS, f"{SINK_NAME} sink")


def _topic_name(options: Mapping[str, str], name: str, default: str | None) -> str:
    value = str(options.get(name, default or "")).strip()
    if not value or len(value) > 249 or any(not (c.isalnum() or c in "._-") for c in value):
        raise _RULES.bad(name, options.get(name, default))
    return value


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate Spark's option map; raise :class:`ConfigurationError` on the first problem."""
    options = _RULES.canonical(options)
    unknown = sorted(k for k in options if k not in KNOWN_SINK_OPTIONS and not k.startswith("kafka.")
                     and k.lower() not in _SPARK_OWN)
    if unknown:
        raise ConfigurationError(
            f"Unknown option(s) for the {SINK_NAME} sink: {', '.join(unknown)}.",
            hint=f"Known options: {', '.join(KNOWN_SINK_OPTIONS)}; librdkafka producer settings start with 'kafka.'.")
    reserved = sorted(k for k in options if k in _RESERVED_KAFKA)
    if reserved:
        raise ConfigurationError(
            f"Option(s) {', '.join(reserved)} are set by the {SINK_NAME} sink itself and cannot be overridden.",
            hint="The sink runs transactional, idempotent producers with ids derived from sinkId; "
            "use transactionTimeoutMs for the transaction timeout.")
    bootstrap = str(options.get("kafka.bootstrap.servers", "")).strip()
    if not bootstrap:
        raise _RULES.bad("kafka.bootstrap.servers", options.get("kafka.bootstrap.servers"))
    topic = _topic_name(options, "topic", None)
    raw_sink_id = str(options.get("sinkId", "")).strip()
    if not raw_sink_id:
        raise _RULES.bad("sinkId", options.get("sinkId"))
    sink_id = validate_sink_id(raw_sink_id)
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        sink_id=sink_id,
        staging_topic=_topic_name(options, "stagingTopic", f"{topic}.{sink_id}.staging"),
        ledger_topic=_topic_name(options, "ledgerTopic", f"{topic}.{sink_id}.ledger"),
        staging_partitions=_RULES.integer(options, "stagingPartitions", 8, 1),
        # a staging record (a block) must stay well under its topic's max.message.bytes
        staging_block_bytes=_RULES.integer(options, "stagingBlockBytes", 524288, 1, _MAX_BLOCK_BYTES),
        transaction_timeout_ms=_RULES.integer(options, "transactionTimeoutMs", 60000, 1000),
        copy_timeout_ms=_RULES.integer(options, "copyTimeoutMs", 60000, 1),
        kafka_conf={k.removeprefix("kafka."): str(v) for k, v in options.items()
                    if k.startswith("kafka.") and k != "kafka.bootstrap.servers"},
    )
