"""Spark's own connectors declared for certification: the first third parties.

They are certified like any connector a user brings, with claims that follow their documentation:

- ``spark-files``: the file sink (Parquet with its ``_spark_metadata`` log), exactly-once by design; also the
  sink the harness pairs with a source under test.
- ``spark-kafka``: the Kafka source (``format("kafka")``, read_committed), exactly-once with a replayable sink.
- ``spark-kafka-sink``: the Kafka sink, documented at-least-once (a batch replayed after a failure is written
  again; readers see the records of a failed attempt).

The Kafka connector's jars come from Maven Central, where the newest release is 4.2.0 (no 4.3.0 is published; its
token provider resolves only at 4.0.0): the 4.2.0 connector loads into pyspark 4.3 and reads plain-text brokers,
which is measured here, not an official pairing. Verdicts on these two depend on that pairing. The methods run in
the driver process when the query is built.
"""

from __future__ import annotations

from typing import Any

from streamcert.spi.connector import QueryContext, SinkConnector, SourceConnector

__all__ = ["SPARK_KAFKA_PACKAGES", "SparkFileSink", "SparkKafkaSource", "SparkKafkaSink"]

#: Spark's Kafka connector and the jars it needs that pyspark does not ship.
SPARK_KAFKA_PACKAGES = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0",
    "org.apache.kafka:kafka-clients:3.9.2",
    "org.apache.commons:commons-pool2:2.13.1",
)
_GENERAL = frozenset({"GEN-1", "GEN-2", "GEN-3"})
_AT_LEAST_ONCE = ("Spark's Kafka sink is documented at-least-once: a batch replayed after a failure is written "
                  "again, and its writes are not transactional")


class SparkFileSink(SinkConnector):
    """``spark-files``: ``writeStream.format("parquet")`` into the folder ``context.output``."""

    name = "spark-files"
    output_kind = "files"
    claims = frozenset({f"SNK-{n}" for n in range(1, 9)} | _GENERAL | {"exactly-once"})

    def write(self, frame: Any, context: QueryContext) -> Any:
        columns = [c for c in ("key", "value", "partition", "offset") if c in frame.columns]
        return (frame.select(*columns).writeStream.format("parquet").option("path", context.output)
                .option("checkpointLocation", context.checkpoint))


class SparkKafkaSource(SourceConnector):
    """``spark-kafka``: ``readStream.format("kafka")`` from the earliest offsets, with read_committed.

    ``context.parallelism`` becomes ``minPartitions`` (Spark splits partitions to reach it) and the option
    ``max_records_per_batch`` becomes ``maxOffsetsPerTrigger``.
    """

    name = "spark-kafka"
    spark_packages = SPARK_KAFKA_PACKAGES
    claims = frozenset({f"SRC-{n}" for n in range(1, 11)} | _GENERAL | {"exactly-once", "read_committed",
                                                                       "rescale", "admission-control"})
    unclaimed = {"SRC-11": "Spark's Kafka source has no event-time alignment between partitions"}

    def read(self, spark: Any, context: QueryContext) -> Any:
        reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", context.bootstrap_servers)
                  .option("subscribe", context.input_topic).option("startingOffsets", "earliest")
                  .option("kafka.isolation.level", "read_committed")
                  .option("minPartitions", str(context.parallelism)))
        limit = context.option("max_records_per_batch")
        if limit is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(limit))
        return reader.load()


class SparkKafkaSink(SinkConnector):
    """``spark-kafka-sink``: ``writeStream.format("kafka")`` into the topic ``context.output``."""

    name = "spark-kafka-sink"
    output_kind = "kafka"
    output_partitions = 2
    spark_packages = SPARK_KAFKA_PACKAGES
    claims = frozenset({"SNK-7", "SNK-8"} | _GENERAL)
    unclaimed = {requirement: _AT_LEAST_ONCE for requirement in ("SNK-1", "SNK-2", "SNK-3", "SNK-4", "SNK-5")}
    unclaimed["SNK-6"] = "no transactional producer: a zombie task's writes are not fenced"

    def write(self, frame: Any, context: QueryContext) -> Any:
        return (frame.select("key", "value").writeStream.format("kafka")
                .option("kafka.bootstrap.servers", context.bootstrap_servers).option("topic", context.output)
                .option("checkpointLocation", context.checkpoint))
