"""Options of the Kafka two-phase-commit sink, checked on the driver when Spark creates the writer.

``writeStream.format("streamcert-kafka-2pc").option(...)``; names are case-insensitive (Spark may
hand them over lower-cased), errors name the option and what it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamcert.spi.options import SPARK_WRITER_OPTIONS, OptionRules, OptionValues

from .twophase import validate_sink_id

__all__ = ["SINK_NAME", "SinkOptions", "parse_sink_options", "KNOWN_SINK_OPTIONS"]

SINK_NAME = "streamcert-kafka-2pc"

#: option -> what it takes (shown in errors)
KNOWN_SINK_OPTIONS: dict[str, str] = {
    "kafka.bootstrap.servers": "host:port[,host:port] (required)",
    "topic": "the output topic, which must exist (required)",
    "sinkId": "a stable id of 1-64 letters, digits, '_' or '-', one per checkpoint (required)",
    "stagingTopic": "the write-ahead topic (default <topic>.<sinkId>.staging; created if missing)",
    "decisionLogTopic": "the one-partition decision log topic (default <topic>.<sinkId>.ledger; created if "
                        "missing; formerly ledgerTopic, still accepted)",
    "stagingPartitions": "a positive integer (default 8): partitions of a staging topic the sink creates",
    "stagingBlockBytes": "an integer from 1 to 8388608 (default 524288): bytes of keys and values staged per "
                         "staging record (rows are staged in blocks; a block holds one row more at most)",
    "transactionTimeoutMs": "an integer >= 1000 (default 60000): Kafka transaction timeout of the sink's committing "
                            "producer, and how long a task keeps trying to stage its rows",
    "copyTimeoutMs": "a positive integer (default 60000): how long commit waits for staged records known to exist",
}
#: The decision log's default topic suffix. It keeps the sink's first name for it: a sink restarted on a
#: checkpoint written before the rename must find its decisions, or it would commit its batches again.
DECISION_LOG_SUFFIX = "ledger"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str
    sink_id: str
    staging_topic: str
    decision_log_topic: str
    staging_partitions: int = 8
    staging_block_bytes: int = 524288
    transaction_timeout_ms: int = 60000
    copy_timeout_ms: int = 60000
    kafka_conf: dict[str, str] = field(default_factory=dict)


_MAX_BLOCK_BYTES = 8 * 1024 * 1024
_RULES = OptionRules(
    KNOWN_SINK_OPTIONS, f"{SINK_NAME} sink", required=("kafka.bootstrap.servers", "topic", "sinkId"),
    aliases={"ledgerTopic": "decisionLogTopic"},
    passthrough="kafka.", passthrough_hint="librdkafka producer settings start with 'kafka.'",
    # librdkafka settings the sink owns: letting users set them would break exactly-once.
    reserved=frozenset({"kafka.transactional.id", "kafka.enable.idempotence", "kafka.isolation.level",
                        "kafka.acks", "kafka.group.id", "kafka.enable.auto.commit", "kafka.transaction.timeout.ms"}),
    reserved_hint="The sink runs idempotent producers, its committer a transactional one with an id derived from "
                  "sinkId; use transactionTimeoutMs for the transaction timeout.",
    spark_own=SPARK_WRITER_OPTIONS)


def _topic_name(values: OptionValues, name: str, default: str) -> str:
    """A Kafka topic name: the given one (blank is an error) or ``default``."""
    value = str(values.get(name, default)).strip()
    if not value or len(value) > 249 or any(not (c.isalnum() or c in "._-") for c in value):
        raise values.bad(name, values.get(name, default))
    return value


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate Spark's option map; raise :class:`ConfigurationError` on the first problem."""
    values = _RULES.read(options)
    topic = _topic_name(values, "topic", "")
    sink_id = validate_sink_id(values.text("sinkId"))
    return SinkOptions(
        bootstrap_servers=values.text("kafka.bootstrap.servers"),
        topic=topic,
        sink_id=sink_id,
        staging_topic=_topic_name(values, "stagingTopic", f"{topic}.{sink_id}.staging"),
        decision_log_topic=_topic_name(values, "decisionLogTopic", f"{topic}.{sink_id}.{DECISION_LOG_SUFFIX}"),
        staging_partitions=values.integer("stagingPartitions", 8, 1),
        # a staging record (a block) must stay well under its topic's max.message.bytes
        staging_block_bytes=values.integer("stagingBlockBytes", 524288, 1, _MAX_BLOCK_BYTES),
        transaction_timeout_ms=values.integer("transactionTimeoutMs", 60000, 1000),
        copy_timeout_ms=values.integer("copyTimeoutMs", 60000, 1),
        kafka_conf=values.passthrough(),
    )
