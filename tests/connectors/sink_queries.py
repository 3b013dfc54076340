"""Query builders (run in a DriverProcess) for the PostgreSQL 2PC sink's tests."""

from connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource
from connectors.pg_sink import SINK_NAME, PostgresTwoPhaseSink


def kafka_to_postgres(spark, params):
    spark.dataSource.register(KafkaOffsetSource)
    spark.dataSource.register(PostgresTwoPhaseSink)
    frame = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
             .option("subscribe", params["topic"]).option("readerParallelism", str(params.get("parallelism", 2)))
             .option("maxRecordsPerBatch", str(params.get("max_records_per_batch", 300))).load())
    return (frame.select("partition", "offset", "value").writeStream.format(SINK_NAME)
            .option("dsn", params["dsn"]).option("table", params["table"]).option("sinkId", params["sink_id"])
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="200 milliseconds"))
