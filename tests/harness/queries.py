"""Query builders the driver-process tests run in a child process (``module:function`` references)."""

from streamcert.harness.stack.smoke import CountingSource


def counting_to_files(spark, params):
    """CountingSource into Spark's file sink (Parquet + _spark_metadata: exactly-once)."""
    spark.dataSource.register(CountingSource)
    frame = (spark.readStream.format(CountingSource.name()).option("rows", str(params["rows"]))
             .option("rowsPerBatch", str(params["rows_per_batch"]))
             .option("readDelayMs", str(params.get("read_delay_ms", 0))).load())
    return (frame.writeStream.format("parquet").option("path", params["path"])
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="0 seconds"))


def failing_query(spark, params):
    """A query whose first batch fails: the driver must report the error, not hang."""
    from pyspark.sql.functions import col, udf

    @udf("long")
    def explode(value):
        raise ValueError(f"injected failure at {value}")

    spark.dataSource.register(CountingSource)
    frame = spark.readStream.format(CountingSource.name()).option("rows", "3").load()
    return (frame.select(explode(col("value")).alias("value")).writeStream.format("noop")
            .option("checkpointLocation", params["checkpoint"]))


def rate_to_files(spark, params):
    """Spark's rate source (the JVM's own: a restarted query replays its pending batch within half a second of its
    start, before any Python worker runs) into the file sink."""
    frame = spark.readStream.format("rate").option("rowsPerSecond", str(params.get("rows_per_second", 20))).load()
    return (frame.writeStream.format("parquet").option("path", params["path"])
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="0 seconds"))


def unbuildable(spark, params):
    """A query whose connector cannot even be imported on this Spark (the driver must say so, not hang)."""
    raise ModuleNotFoundError("No module named 'pyspark.sql.streaming.not_here'")
