"""The warm-up query whose JVM writes the class archive of :mod:`~streamcert.harness.stack.jvm_start` as it exits.

Runs in a child process started by :func:`~streamcert.harness.stack.jvm_start.ensure_class_archive`
(``python -m streamcert.harness.stack.jvm_warm_up ARCHIVE``), never in a process that keeps a Spark session.
"""

from __future__ import annotations

import sys
import tempfile

from streamcert.harness.stack.spark import SparkConfig, spark_session

__all__ = ["warm_up"]

#: Seconds the warm-up's JVM may take to write the archive and exit once its stdin closed.
_EXIT_TIMEOUT_S = 150.0
#: The status UI a run's moment kills read (``query_status.STATUS_SPARK_CONF``): its web server and REST resources
#: are classes too. Archived, a driver's first status request costs ~1.0 s of its JVM's CPU instead of ~1.4 s.
_STATUS_UI = {"spark.ui.enabled": "true", "spark.ui.port": "0"}


def _ask_status_api(context) -> None:
    """Ask the REST API what a moment kill's look asks (jobs, active stages), so its classes are archived."""
    import requests

    base = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
    for path in ("/jobs", "/stages?status=active"):
        requests.get(base + path, timeout=60).raise_for_status()


def warm_up(target: str) -> None:
    """Run what a certification's driver runs (the status UI's REST API, a batch job, a Python UDF, a stateful
    streaming query into Parquet, a Python streaming data source), then stop cleanly: the JVM writes the archive as
    it exits."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from pyspark import SparkContext

    class _Ticks(DataSource):
        @classmethod
        def name(cls) -> str:
            return "streamcert_warm_up"

        def schema(self) -> str:
            return "id long"

        def streamReader(self, schema):  # noqa: N802 - Spark's name
            return _TickReader()

    class _TickReader(DataSourceStreamReader):
        def initialOffset(self) -> dict:  # noqa: N802
            return {"at": 0}

        def latestOffset(self) -> dict:  # noqa: N802
            return {"at": 100}

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition(i) for i in range(2)]

        def read(self, partition):
            yield from ((n,) for n in range(partition.value, 100, 2))

    spark = spark_session(SparkConfig(master="local[2]", app_name="streamcert-class-archive", conf=_STATUS_UI,
                                      java_options=f"-XX:ArchiveClassesAtExit={target}"))
    try:
        from pyspark.sql.functions import udf

        _ask_status_api(spark.sparkContext)

        spark.range(0, 20000, numPartitions=4).selectExpr("id % 7 as k").groupBy("k").count().collect()
        spark.range(10).select(udf(lambda x: x + 1, "long")("id")).collect()
        spark.dataSource.register(_Ticks)
        with tempfile.TemporaryDirectory() as scratch:
            counts = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
                      .selectExpr("value % 5 as k").groupBy("k").count())
            query = (counts.writeStream.outputMode("update").format("console").trigger(once=True)
                     .option("checkpointLocation", f"{scratch}/agg").start())
            query.awaitTermination()
            query = (spark.readStream.format("streamcert_warm_up").load().writeStream.format("parquet")
                     .option("path", f"{scratch}/out").option("checkpointLocation", f"{scratch}/files")
                     .trigger(availableNow=True).start())
            query.awaitTermination()
    finally:
        spark.stop()
    # The JVM exits by itself when its stdin closes (and writes the archive on the way out); a stop that
    # signals it would lose the archive.
    process = SparkContext._gateway.proc
    process.stdin.close()
    process.wait(timeout=_EXIT_TIMEOUT_S)


if __name__ == "__main__":
    warm_up(sys.argv[1])
