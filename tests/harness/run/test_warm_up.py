"""The warm-up a standby driver runs before it waits: a Python source of its own, loaded as a stream and read as a
batch on every core, and nothing of the connector under test."""

from __future__ import annotations

import pytest

from streamcert.harness.run.warm_up import WarmUpSource, warm_python_data_source_path


def test_the_warm_up_source_is_a_python_data_source_with_a_stream_that_never_moves():
    from pyspark.sql.datasource import DataSource

    source = WarmUpSource(options={"partitions": "3"})
    assert isinstance(source, DataSource) and WarmUpSource.name() == "streamcert-warm-up"
    stream = source.streamReader(None)
    assert stream.initialOffset() == stream.latestOffset() and stream.partitions({"at": 0}, {"at": 0}) == []
    batch = source.reader(None)
    assert [list(batch.read(partition)) for partition in batch.partitions()] == [[(0,)], [(1,)], [(2,)]]


@pytest.mark.integration
def test_the_warm_up_runs_a_python_worker_per_core_and_leaves_the_stream_unstarted(stack):
    spark = stack.spark
    active = len(spark.streams.active)
    warm_python_data_source_path(spark)
    cores = spark.sparkContext.defaultParallelism
    rows = spark.read.format(WarmUpSource.name()).option("partitions", str(cores)).load().collect()
    assert sorted(row.id for row in rows) == list(range(cores))
    assert len(spark.streams.active) == active  # loaded, never started
