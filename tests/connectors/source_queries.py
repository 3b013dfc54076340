"""Query builders (run in a DriverProcess) for the offset source's recovery tests."""

from streamcert.connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource


def kafka_to_files(spark, params):
    """streamcert-kafka -> Spark's file sink (exactly-once); ``parallelism`` sets readerParallelism."""
    spark.dataSource.register(KafkaOffsetSource)
    frame = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
             .option("subscribe", params["topic"])
             .option("readerParallelism", str(params.get("parallelism", 1)))
             .option("maxRecordsPerBatch", str(params.get("max_records_per_batch", 250))).load())
    return (frame.select("partition", "offset", "value").writeStream.format("parquet")
            .option("path", params["path"]).option("checkpointLocation", params["checkpoint"])
            .trigger(processingTime="200 milliseconds"))
