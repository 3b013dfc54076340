"""The warm-up a standby driver runs while it waits: queries of its own (a Python source into a Python sink and into
Spark's file sink, a stateful one on a RocksDB session), nothing of the connector under test, ended at once when the
standby is told to go."""

from __future__ import annotations

import pytest

import time

from streamcert.harness.waiting import wait_for

from streamcert.harness.run.warm_up import (WARM_UP_QUERY_PREFIX, BackgroundWarmUp, WarmUpSource,
                                            warm_python_data_source_path, warm_query_path)

_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def test_the_warm_up_source_streams_one_row_per_partition_in_its_first_batch_and_its_sink_keeps_nothing():
    from pyspark.sql.datasource import DataSource, WriterCommitMessage

    source = WarmUpSource(options={"partitions": "3"})
    assert isinstance(source, DataSource) and WarmUpSource.name() == "streamcert-warm-up"
    stream = source.streamReader(None)
    start, end = stream.initialOffset(), stream.latestOffset()
    first = stream.partitions(start, end)
    assert [list(stream.read(partition)) for partition in first] == [[(0,)], [(1,)], [(2,)]]
    assert stream.partitions(end, stream.latestOffset()) == []  # nothing after the first batch
    batch = source.reader(None)
    assert [list(batch.read(partition)) for partition in batch.partitions()] == [[(0,)], [(1,)], [(2,)]]
    writer = source.streamWriter(None, False)
    assert isinstance(writer.write(iter([(1,), (2,)])), WriterCommitMessage) and writer.commit([], 0) is None


@pytest.mark.integration
def test_the_warm_up_runs_a_python_worker_per_core_and_leaves_the_stream_unstarted(stack):
    spark = stack.spark
    active = len(spark.streams.active)
    warm_python_data_source_path(spark)
    cores = spark.sparkContext.defaultParallelism
    rows = spark.read.format(WarmUpSource.name()).option("partitions", str(cores)).load().collect()
    assert sorted(row.id for row in rows) == list(range(cores))
    assert len(spark.streams.active) == active  # loaded, never started


@pytest.mark.integration
def test_the_warm_up_runs_each_path_s_query_to_its_end_and_leaves_none_running(stack):
    spark = stack.spark
    before = {query.id for query in spark.streams.active}
    previous = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", _ROCKSDB)
    try:
        warm_python_data_source_path(spark)
        took = warm_query_path(spark)
    finally:
        if previous is None:
            spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
        else:
            spark.conf.set("spark.sql.streaming.stateStore.providerClass", previous)
    assert list(took) == ["python_sink", "files", "stateful"], took
    assert {query.id for query in spark.streams.active} == before
    assert list(warm_query_path(spark, told_to_go=lambda: True)) == []  # told to go: no step starts


@pytest.mark.integration
def test_a_background_warm_up_told_to_go_ends_the_step_under_way_at_once(stack):
    spark = stack.spark
    warm_python_data_source_path(spark)
    warm_up = BackgroundWarmUp(spark).start()
    time.sleep(0.3)  # inside its first step
    began = time.monotonic()
    ended = warm_up.stop()
    assert time.monotonic() - began < 2.0, ended  # the take-over does not wait for the step
    assert ended["cut_short"] is True and ended["error"] is None, ended
    wait_for(lambda: warm_up.done, what="the warm-up's thread to end", timeout=30)
    assert not any((query.name or "").startswith(WARM_UP_QUERY_PREFIX) for query in spark.streams.active)
    assert warm_up.stop()["cut_short"] is False  # idempotent: nothing was left running
