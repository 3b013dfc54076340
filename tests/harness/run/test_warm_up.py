"""The warm-up a standby driver runs while it waits: queries of its own (a Python source into a Python sink and into
Spark's file sink, a stateful one on a RocksDB session), nothing of the connector under test, ended at once when the
standby is told to go."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from streamcert.harness.waiting import wait_for

from streamcert.harness.run.warm_up import (KEEP_WORKERS_S, WARM_UP_QUERY_PREFIX, BackgroundWarmUp, WarmUpSource,
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
    assert warm_up.stop() == ended  # idempotent: nothing was left running


def _pooled_task_workers() -> set[int]:
    """The Python task workers this test's Spark forked (children of its ``pyspark.daemon pyspark.worker``)."""
    workers = set()
    for process in psutil.Process(os.getpid()).children(recursive=True):
        try:
            parent = process.parent()
            if parent is not None and "pyspark.daemon" in " ".join(parent.cmdline()) and \
                    parent.cmdline()[-1] == "pyspark.worker":
                workers.add(process.pid)
        except psutil.NoSuchProcess:
            continue
    return workers


@pytest.mark.integration
def test_a_background_warm_up_that_finished_its_steps_keeps_its_workers_until_told_to_go(stack):
    spark = stack.spark
    warm_python_data_source_path(spark)
    warm_up = BackgroundWarmUp(spark, keep_workers_s=0.2).start()
    wait_for(lambda: warm_up.kept_workers >= 2, what="two reads that keep the workers", timeout=120)
    ended = warm_up.stop()
    assert ended["cut_short"] is False and ended["error"] is None and ended["kept_workers"] >= 2, ended
    assert set(ended["steps"]) >= {"python_sink", "files"}, ended
    wait_for(lambda: warm_up.done, what="the warm-up's thread to end", timeout=30)
    kept = warm_up.kept_workers
    time.sleep(0.5)
    assert warm_up.kept_workers == kept  # told to go: no read after


@pytest.mark.integration
@pytest.mark.slow
def test_spark_stops_idle_python_workers_after_a_minute_and_a_waiting_warm_up_keeps_them(stack):
    """The premise of KEEP_WORKERS_S (Spark's idle timeout, fixed at one minute) and the keeping, on real workers."""
    spark = stack.spark
    warm_python_data_source_path(spark)
    idle = _pooled_task_workers()
    assert idle, "the warm-up forked no task worker"
    wait_for(lambda: not (idle & _pooled_task_workers()), what="Spark to stop the idle workers", timeout=100,
             interval=2)
    warm_python_data_source_path(spark)
    warm_up = BackgroundWarmUp(spark, keep_workers_s=KEEP_WORKERS_S).start()
    wait_for(lambda: warm_up.finished, what="the warm-up's steps", timeout=120)
    kept = _pooled_task_workers()
    time.sleep(80)
    ended = warm_up.stop()
    assert ended["kept_workers"] >= 1, ended
    assert kept <= _pooled_task_workers(), "the waiting warm-up did not keep its workers"


@pytest.mark.integration
def test_a_background_warm_up_runs_its_queries_in_a_session_of_its_own_whose_events_the_driver_does_not_hear(stack):
    """A listener of the driver's session must never be called for a warm-up query: Spark removes a listener whose
    call a query's stop interrupted, and the driver's progress reports then stop."""
    from pyspark.sql.streaming import StreamingQueryListener

    spark = stack.spark
    heard: list[str] = []

    class _Names(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            heard.append(event.name or "")

        def onQueryProgress(self, event) -> None:
            heard.append(event.progress.name or "")

        def onQueryIdle(self, event) -> None:
            return None

        def onQueryTerminated(self, event) -> None:
            heard.append("terminated")

    listener = _Names()
    spark.streams.addListener(listener)
    try:
        warm_python_data_source_path(spark)
        warm_up = BackgroundWarmUp(spark, keep_workers_s=60.0).start()
        assert warm_up.session is not spark and warm_up.session.sparkContext is spark.sparkContext
        wait_for(lambda: warm_up.finished, what="the warm-up's steps", timeout=120)
        warm_up.stop()
        wait_for(lambda: warm_up.done, what="the warm-up's thread to end", timeout=30)
        time.sleep(1.0)  # listener calls arrive after the queries' events
    finally:
        spark.streams.removeListener(listener)
    assert warm_up.took and heard == [], heard
