"""Query builders (run in a DriverProcess) for the batch aggregator's tests: source -> aggregator -> Kafka 2PC."""

from pyspark.sql import functions as F

from streamcert.connectors.aggregator import aggregate_batches
from streamcert.connectors.kafka_sink import SINK_NAME, KafkaTwoPhaseSink
from streamcert.connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource


def kafka_batches_to_kafka(spark, params):
    spark.dataSource.register(KafkaOffsetSource)
    spark.dataSource.register(KafkaTwoPhaseSink)
    source = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
              .option("subscribe", params["topic"]).option("readerParallelism", str(params.get("parallelism", 2)))
              .option("maxRecordsPerBatch", str(params.get("max_records_per_batch", 300))).load())
    batches = aggregate_batches(source.select(F.col("key").cast("string").alias("key"), "partition", "offset",
                                              "value"),
                                max_batch_size=params["max_batch_size"], max_wait_ms=params["max_wait_ms"],
                                key_groups=params.get("key_groups", 8))
    out = batches.select(F.col("key_group").cast("string").alias("key"), F.to_json(F.struct("*")).alias("value"))
    return (out.writeStream.format(SINK_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
            .option("topic", params["output"]).option("sinkId", params["sink_id"])
            .option("checkpointLocation", params["checkpoint"])
            .trigger(processingTime=params.get("trigger", "500 milliseconds")))
