"""Query builders (run in a DriverProcess) for the 2PC sinks' tests: the offset source into each sink."""

from streamcert.connectors.kafka_sink import SINK_NAME as KAFKA_SINK_NAME
from streamcert.connectors.kafka_sink import KafkaTwoPhaseSink
from streamcert.connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource
from streamcert.connectors.pg_sink import SINK_NAME, PostgresTwoPhaseSink


def _source(spark, params):
    spark.dataSource.register(KafkaOffsetSource)
    return (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
            .option("subscribe", params["topic"]).option("readerParallelism", str(params.get("parallelism", 2)))
            .option("maxRecordsPerBatch", str(params.get("max_records_per_batch", 300))).load())


def kafka_to_postgres(spark, params):
    spark.dataSource.register(PostgresTwoPhaseSink)
    return (_source(spark, params).select("partition", "offset", "value").writeStream.format(SINK_NAME)
            .option("dsn", params["dsn"]).option("table", params["table"]).option("sinkId", params["sink_id"])
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="200 milliseconds"))


def kafka_to_kafka(spark, params):
    spark.dataSource.register(KafkaTwoPhaseSink)
    return (_source(spark, params).select("key", "value").writeStream.format(KAFKA_SINK_NAME)
            .option("kafka.bootstrap.servers", params["bootstrap"]).option("topic", params["output"])
            .option("sinkId", params["sink_id"]).option("stagingPartitions", str(params.get("staging_partitions", 8)))
            .option("stagingBlockBytes", str(params.get("staging_block_bytes", 2048)))  # several records a task
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="200 milliseconds"))
