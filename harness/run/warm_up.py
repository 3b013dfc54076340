"""Warming a fresh SparkSession's path to a Python data source query before the query under test is built.

A driver's first ``spark.dataSource.register`` and ``readStream.format(...).load()`` of a Python data source take
~2.5 s on two cores (measured: register 1.0 s, load 1.4 s; the second time, 0.06 s for both): the JVM loads the
classes of Python data sources and starts the Python worker that creates a data source and asks its schema. A
standby driver (:mod:`~streamcert.harness.run.driver`) does that once with a source of its own that does nothing,
before it waits, so the restart it serves builds the connector's query warm. Nothing of the connector under test
runs here: its declaration's ``read``/``write`` may have side effects (creating topics, recovering transactions)
that must not happen while the attempt before it still runs.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

__all__ = ["WarmUpSource", "warm_python_data_source_path"]


class _NothingReader(DataSourceStreamReader):
    """A stream that never has data (its offsets never move)."""

    def initialOffset(self) -> dict:
        return {"at": 0}

    def latestOffset(self) -> dict:
        return {"at": 0}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return []

    def read(self, partition: InputPartition):
        return iter(())


class _OneRowPerPartition(DataSourceReader):
    """A batch read of ``partitions`` partitions (option), one row each: each runs in a Python worker."""

    def __init__(self, partitions: int) -> None:
        self.count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(index) for index in range(self.count)]

    def read(self, partition: InputPartition):
        yield (partition.value,)


class WarmUpSource(DataSource):
    """A Python source with one column, registered as ``streamcert-warm-up``: as a stream it never has data; read
    as a batch it has one row in each of its ``partitions`` partitions."""

    @classmethod
    def name(cls) -> str:
        return "streamcert-warm-up"

    def schema(self) -> str:
        return "id long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _NothingReader()

    def reader(self, schema: Any) -> DataSourceReader:
        return _OneRowPerPartition(int(self.options.get("partitions", "1")))


def warm_python_data_source_path(spark: Any) -> None:
    """Driver: register :class:`WarmUpSource`, load it as a stream (not started), then read it as a batch in one
    partition per core: the JVM's data source classes loaded, a Python planner worker run once, and one Python worker
    per core forked and left to be reused, with pyspark's data source reading modules and pyarrow imported where
    the query's first batch will find them."""
    spark.dataSource.register(WarmUpSource)
    spark.readStream.format(WarmUpSource.name()).load()
    cores = spark.sparkContext.defaultParallelism
    spark.read.format(WarmUpSource.name()).option("partitions", str(cores)).load().collect()
