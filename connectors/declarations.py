"""The reference connectors declared for certification (the objects ``streamcert certify`` runs).

Each one says what it is, what it claims and how to build its part of a query from the
:class:`~streamcert.spi.connector.QueryContext`; they are installed as entry points of the group
``streamcert.connectors`` (``streamcert-kafka``, ``streamcert-kafka-2pc``, ``streamcert-pg-2pc``,
``streamcert-batch-aggregator``). The methods run in the driver process when the query is built, except
``unpack_output`` (in the harness, on what it reads back). Scenario options they read: ``max_records_per_batch``,
``sink_id``, ``staging_partitions``, ``staging_block_bytes``, ``max_batch_size``, ``max_wait_ms``, ``key_groups``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pandas as pd

from streamcert.spi.connector import DRIFT_OPTION, AggregatorConnector, QueryContext, SinkConnector, SourceConnector

__all__ = ["KafkaOffsetSourceUnderTest", "KafkaTwoPhaseSinkUnderTest", "PostgresTwoPhaseSinkUnderTest",
           "BatchAggregatorUnderTest"]

_GENERAL = frozenset({"GEN-1", "GEN-2", "GEN-3"})


def _sink_id(context: QueryContext) -> str:
    return str(context.option("sink_id") or f"s{context.run_id}")


class KafkaOffsetSourceUnderTest(SourceConnector):
    """``streamcert-kafka``: offsets from the broker's durable state, kept in Spark's checkpoint."""

    name = "streamcert-kafka"
    claims = frozenset({f"SRC-{n}" for n in range(1, 12)} | _GENERAL
                       | {"exactly-once", "read_committed", "rescale", "admission-control", "event-time-alignment"})
    bad_options = {"maxRecordsPerBatch": "0", "isolationLevel": "dirty", "startingOffsets": "yesterday",
                   "kafka.group.id": "mine", "maxAllowedDriftMs": "-1"}

    def datasource(self) -> Any:
        """The Python data source class the query reads with (registered under its ``name()``)."""
        from streamcert.connectors.kafka_source import KafkaOffsetSource

        return KafkaOffsetSource

    def read(self, spark: Any, context: QueryContext) -> Any:
        source = self.datasource()
        spark.dataSource.register(source)
        return (spark.readStream.format(source.name())
                .option("kafka.bootstrap.servers", context.endpoint("kafka"))
                .option("subscribe", context.input_topic)
                .option("readerParallelism", str(context.parallelism))
                .option("maxRecordsPerBatch", str(context.option("max_records_per_batch", 300)))
                .option("trigger", "availableNow" if context.trigger == "available_now" else "processingTime")
                .options(**_alignment(context))
                .options(**context.connector_options).load())


def _alignment(context: QueryContext) -> dict[str, str]:
    """The run's event-time drift bound (SRC-11) as the source's maxAllowedDriftMs; none when the run sets none."""
    drift = context.option(DRIFT_OPTION)
    return {"maxAllowedDriftMs": str(int(drift))} if drift is not None else {}


class KafkaTwoPhaseSinkUnderTest(SinkConnector):
    """``streamcert-kafka-2pc``: write-ahead two-phase commit into a Kafka topic (read it with read_committed)."""

    name = "streamcert-kafka-2pc"
    output_kind = "kafka"
    output_partitions = 2
    claims = frozenset({f"SNK-{n}" for n in range(1, 9)} | _GENERAL | {"exactly-once", "read_committed", "rescale"})
    kill_points = {"kafka-2pc.after-stage": "window", "kafka-2pc.before-copy": "window",
                   "kafka-2pc.before-commit": "window", "kafka-2pc.after-commit": "committing"}
    fail_points = ("kafka-2pc.after-stage",)
    bad_options = {"stagingBlockBytes": "0", "transactionTimeoutMs": "5", "stagingTopic": "no spaces allowed",
                   "kafka.transactional.id": "mine"}

    def datasource(self) -> Any:
        """The Python data source class the query writes with (registered under its ``name()``)."""
        from streamcert.connectors.kafka_sink import KafkaTwoPhaseSink

        return KafkaTwoPhaseSink

    def write(self, frame: Any, context: QueryContext) -> Any:
        sink = self.datasource()
        frame.sparkSession.dataSource.register(sink)
        return (frame.select("key", "value").writeStream.format(sink.name())
                .option("kafka.bootstrap.servers", context.endpoint("kafka")).option("topic", context.output)
                .option("sinkId", _sink_id(context))
                .option("stagingPartitions", str(context.option("staging_partitions", 8)))
                .option("stagingBlockBytes", str(context.option("staging_block_bytes", 512 * 1024)))
                .options(**context.connector_options).option("checkpointLocation", context.checkpoint))


class PostgresTwoPhaseSinkUnderTest(SinkConnector):
    """``streamcert-pg-2pc``: PostgreSQL prepared transactions in tasks, ``COMMIT PREPARED`` on the driver."""

    name = "streamcert-pg-2pc"
    output_kind = "postgres"
    claims = frozenset({f"SNK-{n}" for n in range(1, 9)} | _GENERAL | {"exactly-once", "rescale"})
    kill_points = {"pg-2pc.after-prepare": "window", "pg-2pc.before-decision": "window",
                   "pg-2pc.after-decision": "committing"}
    fail_points = ("pg-2pc.after-prepare",)
    bad_options = {"sinkId": "no spaces allowed", "table": " "}

    def datasource(self) -> Any:
        """The Python data source class the query writes with (registered under its ``name()``)."""
        from streamcert.connectors.pg_sink import PostgresTwoPhaseSink

        return PostgresTwoPhaseSink

    def write(self, frame: Any, context: QueryContext) -> Any:
        sink = self.datasource()
        frame.sparkSession.dataSource.register(sink)
        return (frame.select("partition", "offset", "value").writeStream.format(sink.name())
                .option("dsn", context.endpoint("postgres")).option("table", context.output)
                .option("sinkId", _sink_id(context)).options(**context.connector_options)
                .option("checkpointLocation", context.checkpoint))


class BatchAggregatorUnderTest(AggregatorConnector):
    """The batch aggregator: per-key-ordered lists flushed at ``max_batch_size`` records or ``max_wait_ms``.

    Its output rows are JSON batches (``key_group``, ``group_batch``, ``reason``, ``items``: key and base64
    value of each record, ...): :meth:`unpack_output` gives one row per record, with ``batch_id`` and
    ``emitted_at`` for the aggregator checker.
    """

    name = "streamcert-batch-aggregator"
    claims = frozenset({f"AGG-{n}" for n in range(1, 7)} | _GENERAL | {"rescale"})
    spark_conf = {"spark.sql.streaming.stateStore.providerClass":
                  "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"}

    bad_options = {"maxBatchSize": "0", "maxWaitMs": "-1", "keyGroups": "many"}

    def processor(self) -> Any:
        """The stateful processor class the query aggregates with."""
        from streamcert.connectors.aggregator import BatchAggregator

        return BatchAggregator

    def transform(self, frame: Any, context: QueryContext) -> Any:
        from pyspark.sql import functions as F

        from streamcert.connectors.aggregator import aggregate_batches, parse_aggregator_options

        settings = parse_aggregator_options({
            "maxBatchSize": context.option("max_batch_size", 100), "maxWaitMs": context.option("max_wait_ms", 1000),
            "keyGroups": context.option("key_groups", 8), **context.connector_options})
        batches = aggregate_batches(
            frame.select(F.col("key").cast("string").alias("key"), "partition", "offset", "value"),
            processor=self.processor(), **settings)
        return batches.select(F.col("key_group").cast("string").alias("key"),
                              F.to_json(F.struct("*")).alias("value"))

    def batch_bounds(self, context: QueryContext) -> tuple[int, float]:
        return int(context.option("max_batch_size", 100)), int(context.option("max_wait_ms", 1000)) / 1000

    def unpack_output(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One row per record of each JSON batch, with the batch's id, emission time (seconds), flush reason
        (``size`` or ``time``) and the arrival time of its oldest record (seconds)."""
        batches = [json.loads(value) for value in frame["value"]]
        items = [(batch, item) for batch in batches for item in batch["items"]]
        return pd.DataFrame({
            "key": [item["key"] for _batch, item in items],
            "value": [base64.b64decode(item["value"]) for _batch, item in items],
            "batch_id": [f"{batch['key_group']}-{batch['group_batch']}" for batch, _item in items],
            "emitted_at": [batch["emitted_at_ms"] / 1000 for batch, _item in items],
            "batch_reason": [batch["reason"] for batch, _item in items],
            "batch_oldest_arrived_at": [batch["oldest_arrived_ms"] / 1000 for batch, _item in items],
        })
