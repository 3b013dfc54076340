"""Query builders for the executor-fault tests, run in a driver child process (``module:function`` references)."""

from streamcert.harness.faults.executor import failure_point
from streamcert.harness.stack.smoke import CountingSource

__all__ = ["counting_to_files", "counting_through_failure_point"]


def _counting(spark, params):
    spark.dataSource.register(CountingSource)
    return (spark.readStream.format(CountingSource.name()).option("rows", str(params["rows"]))
            .option("rowsPerBatch", str(params["rows_per_batch"]))
            .option("readDelayMs", str(params.get("read_delay_ms", 0))).load())


def _to_files(frame, params):
    """Spark's file sink: Parquet files listed in _spark_metadata, exactly-once across task retries."""
    return (frame.writeStream.format("parquet").option("path", params["path"])
            .option("checkpointLocation", params["checkpoint"]).trigger(processingTime="0 seconds"))


def counting_to_files(spark, params):
    """CountingSource into the file sink: each batch is one task whose Python worker sleeps ``read_delay_ms``."""
    return _to_files(_counting(spark, params), params)


def counting_through_failure_point(spark, params):
    """The same, through the failure point a ``task_exception`` fault arms (in the driver's fault-points folder)."""
    return _to_files(failure_point(_counting(spark, params)), params)
