"""Warming a fresh SparkSession's path to a streaming query before the query under test is built.

A driver's first Python data source query pays for everything the JVM and Python do once: classes loaded, the
Python worker daemon started and its workers forked, the micro-batch engine's first checkpoint writes, the
streaming source and sink runners' first start, Parquet's writer, the state store. Measured on two cores, an idle
machine: a first ``spark.dataSource.register`` + ``load`` 3.4 s, its first batch read 4.5 s; a second source in the
same session 0.01 + 0.04 + 0.26 s. A standby driver (:mod:`~streamcert.harness.run.driver`) runs
:func:`warm_query_path` while it waits, so the restart it serves builds and runs the connector's query warm: the
reference aggregator's first batch after a restart took 10.4 s with a whole warm-up behind it, 18.9 s with the data
source's alone (its connector's own share, its state restored and its sink's first commit, is the rest).

The warm-up runs queries of its own on a source and sink of its own (:class:`WarmUpSource`: one row per core in a
stream's first batch, a sink that keeps nothing), in a scratch folder it deletes: nothing of the connector under
test runs, since its declaration's ``read``/``write`` may have side effects (creating topics, recovering
transactions) that must not happen while the attempt before it still runs. It runs in a thread of its own
(:class:`BackgroundWarmUp`) that the standby ends when it is told to go: a restart never waits for a warm-up.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    InputPartition, WriterCommitMessage)

__all__ = ["WarmUpSource", "WARM_UP_QUERY_PREFIX", "KEEP_WORKERS_S", "BackgroundWarmUp", "warm_python_data_source_path",
           "warm_query_path", "keep_workers"]

#: The name of every query the warm-up runs (a listener tells them from the query under test by it).
WARM_UP_QUERY_PREFIX = "streamcert-warm-up"
#: The Spark job group of a warm-up's jobs (cancelled as one when the standby is told to go).
_JOB_GROUP = WARM_UP_QUERY_PREFIX
#: Seconds between a waiting standby's one-task jobs that keep its Python workers. Spark stops a worker pool's idle
#: workers once none was taken or given back for a minute (``PythonWorkerFactory.IDLE_WORKER_TIMEOUT_NS``, fixed, looked
#: at every 10 s), so a standby that waited longer after its warm-up handed its query none: the first batch forked new
#: workers and imported pyspark, pandas, pyarrow and the connector in each (a Kafka 2PC first batch after a restart:
#: 15-23 s after a 60-s wait, 7.6 s with the warm-up's workers still there, on a busy 2-core machine).
KEEP_WORKERS_S = 40.0
#: The state store the reference aggregator needs; a session set to it warms a stateful query too.
_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


class _FirstBatchReader(DataSourceStreamReader):
    """A stream with ``count`` rows (one per partition) in its first batch, and nothing after."""

    def __init__(self, count: int) -> None:
        self.count = count

    def initialOffset(self) -> dict:
        return {"at": 0}

    def latestOffset(self) -> dict:
        return {"at": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(index) for index in range(self.count)] if start["at"] < end["at"] else []

    def read(self, partition: InputPartition):
        yield (partition.value,)


class _OneRowPerPartition(DataSourceReader):
    """A batch read of ``partitions`` partitions (option), one row each: each runs in a Python worker."""

    def __init__(self, partitions: int) -> None:
        self.count = partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(index) for index in range(self.count)]

    def read(self, partition: InputPartition):
        yield (partition.value,)


class _DiscardingWriter(DataSourceStreamWriter):
    """Runs its tasks' rows through a Python worker and keeps nothing; its commit (driver) does nothing."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _row in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage], batchId: int) -> None:
        return None


class WarmUpSource(DataSource):
    """A Python data source with one column, registered as ``streamcert-warm-up``: as a stream it has one row in
    each of its ``partitions`` partitions in its first batch, then nothing; read as a batch, the same rows; as a
    stream sink it keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "streamcert-warm-up"

    def schema(self) -> str:
        return "id long"

    def _count(self) -> int:
        return int(self.options.get("partitions", "1"))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _FirstBatchReader(self._count())

    def reader(self, schema: Any) -> DataSourceReader:
        return _OneRowPerPartition(self._count())

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        return _DiscardingWriter()


def warm_python_data_source_path(spark: Any) -> None:
    """Driver: register :class:`WarmUpSource`, load it as a stream (not started), then read it as a batch in one
    partition per core: the JVM's data source classes loaded, a Python planner worker run once, and one Python worker
    per core forked and left to be reused, with pyspark's data source reading modules and pyarrow imported where
    the query's first batch will find them."""
    spark.dataSource.register(WarmUpSource)
    spark.readStream.format(WarmUpSource.name()).load()
    _read_one_row_per_core(spark)


def keep_workers(spark: Any, go: threading.Event, every_s: float = KEEP_WORKERS_S,
                 read: Callable[[], None] = lambda: None) -> None:
    """Driver (a standby's warm-up thread, after its steps, until ``go`` is set): a batch read of
    :class:`WarmUpSource` in one partition per core every ``every_s``, which takes the idle Python workers and gives
    them back, so Spark does not stop them as idle (:data:`KEEP_WORKERS_S`); ``read()`` is called after each."""
    while not go.wait(every_s):
        _read_one_row_per_core(spark)
        read()


def _read_one_row_per_core(spark: Any) -> None:
    spark.read.format(WarmUpSource.name()).option("partitions", str(_cores(spark))).load().collect()


def _cores(spark: Any) -> int:
    return spark.sparkContext.defaultParallelism


def _stream(spark: Any) -> Any:
    return spark.readStream.format(WarmUpSource.name()).option("partitions", str(_cores(spark))).load()


def _run_to_end(writer: Any, name: str, checkpoint: Path, told_to_go: Callable[[], bool]) -> None:
    """Start a warm-up query, let it run its batch, stop it (its checkpoint and output are scratch); one started
    after the standby was told to go stops at once."""
    query = writer.queryName(f"{WARM_UP_QUERY_PREFIX}-{name}").option("checkpointLocation", str(checkpoint)).start()
    try:
        if not told_to_go():
            query.processAllAvailable()
    finally:
        query.stop()


def _stream_to_python_sink(spark: Any, scratch: Path, told_to_go: Callable[[], bool]) -> None:
    """A micro-batch through a Python source and a Python sink: the streaming source and sink runners, the offset
    and commit logs, the writer's commit on the driver."""
    _run_to_end(_stream(spark).writeStream.format(WarmUpSource.name()), "python-sink", scratch / "python-sink",
                told_to_go)


def _stream_to_files(spark: Any, scratch: Path, told_to_go: Callable[[], bool]) -> None:
    """A micro-batch into Spark's file sink (Parquet): the sink a source under test writes into."""
    _run_to_end(_stream(spark).writeStream.format("parquet").option("path", str(scratch / "files")), "files",
                scratch / "files-checkpoint", told_to_go)


def _stateful(spark: Any, scratch: Path, told_to_go: Callable[[], bool]) -> None:
    """A micro-batch through ``transformWithStateInPandas`` on the session's RocksDB state store (the reference
    aggregator's path: a shuffle, the state store's native library, the stateful Python workers)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class _Count(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.seen = handle.getValueState("seen", "n long")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            import pandas as pd

            count = sum(len(frame) for frame in rows)
            self.seen.update((count,))
            yield pd.DataFrame({"id": [int(key[0])], "n": [count]})

        def close(self) -> None:
            return None

    counted = _stream(spark).groupBy("id").transformWithStateInPandas(
        statefulProcessor=_Count(), outputStructType="id long, n long", outputMode="Append", timeMode="None")
    _run_to_end(counted.writeStream.format(WarmUpSource.name()), "stateful", scratch / "stateful", told_to_go)


def _steps(spark: Any) -> list[tuple[str, Callable[[Any, Path, Callable[[], bool]], None]]]:
    steps = [("python_sink", _stream_to_python_sink), ("files", _stream_to_files)]
    if spark.conf.get("spark.sql.streaming.stateStore.providerClass", "") == _ROCKSDB:
        steps.append(("stateful", _stateful))
    return steps


def warm_query_path(spark: Any, told_to_go: Callable[[], bool] = lambda: False,
                    took: dict[str, float] | None = None) -> dict[str, float]:
    """Driver (a standby, after :func:`warm_python_data_source_path`, until it is told to go): warm-up queries of the
    paths a certification's queries take (a Python source into a Python sink and into Spark's file sink; a stateful
    query when the session uses the RocksDB state store), each stopped after its one batch. Stops between steps
    once ``told_to_go()``; returns (and fills ``took``, as it goes) the seconds each finished step took."""
    took = {} if took is None else took
    scratch = Path(tempfile.mkdtemp(prefix="streamcert-warm-up-"))
    try:
        for name, step in _steps(spark):
            if told_to_go():
                break
            began = time.monotonic()
            step(spark, scratch, told_to_go)
            took[name] = round(time.monotonic() - began, 3)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return took


class BackgroundWarmUp:
    """:func:`warm_query_path` in a thread of a standby driver, then :func:`keep_workers` until the standby is told
    to go, which ends it: a restart never waits for these steps (on two cores, while the attempt before it runs, they
    take 15-25 s; kills may come every ten), and its queries are stopped. The data source step comes first and is
    waited for (:func:`warm_python_data_source_path`): a registration or a schema asked cannot be cut short, and one
    left running beside the query under test's build slowed that build from ~1.3 s to 5-7 s. Created and stopped in
    the standby's main thread."""

    def __init__(self, spark: Any, keep_workers_s: float = KEEP_WORKERS_S) -> None:
        #: a session of its own on the same SparkContext (the JVM, its classes and Python workers are shared): a
        #: session's streaming listeners hear only its own queries. In the standby's session, a warm-up query being
        #: stopped after the go interrupted Spark's post of its event to the driver's progress listener, and Spark
        #: removed that listener ("Interrupted while posting to PythonStreamingQueryListenerWrapper"): the attempt
        #: then ran its batches with no progress reported, its feed stopped and the kills aimed at it gave up.
        self._spark = spark.newSession()
        self._go = threading.Event()
        self._keep_workers_s = keep_workers_s
        self.took: dict[str, float] = {}
        #: whether every step finished before the go
        self.finished = False
        #: the reads :func:`keep_workers` ran after the steps
        self.kept_workers = 0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="standby-warm-up", daemon=True)
        self._stopper: threading.Thread | None = None

    def start(self) -> "BackgroundWarmUp":
        self._thread.start()
        return self

    def _run(self) -> None:
        context = self._spark.sparkContext
        # a new JVM thread has no active session: a stream's sink is looked up in it, not in the writer's session
        self._spark._jvm.SparkSession.setActiveSession(self._spark._jsparkSession)
        self._spark.dataSource.register(WarmUpSource)  # a registration belongs to its session
        context.setJobGroup(_JOB_GROUP, "a standby's warm-up", interruptOnCancel=True)
        try:
            warm_query_path(self._spark, told_to_go=self._go.is_set, took=self.took)
            self.finished = len(self.took) == len(_steps(self._spark))
            if self.finished:
                keep_workers(self._spark, self._go, self._keep_workers_s, read=self._kept)
        except Exception as exc:  # noqa: BLE001 - a warm-up is a help: a step cut short or failed costs nothing
            if not self._go.is_set():
                self.error = f"{type(exc).__name__}: {str(exc)[:300]}"

    @property
    def session(self) -> Any:
        """The warm-up's own SparkSession (on the standby's SparkContext)."""
        return self._spark

    def _kept(self) -> None:
        self.kept_workers += 1

    @property
    def done(self) -> bool:
        """Whether its thread ended (every step finished, or the one under way ended after a stop)."""
        return not self._thread.is_alive()

    def stop(self, timeout_s: float = 0.5) -> dict[str, Any]:
        """End the step under way (its jobs cancelled at once; its query stopped by a thread of its own, since a
        query's stop waits for its batch) and wait for the warm-up's thread at most ``timeout_s``; what ran:
        ``{"steps": {step: seconds}, "cut_short": bool (the go came before every step finished),
        "kept_workers": reads of :func:`keep_workers`, "error": ...}``. Idempotent."""
        running = self._thread.is_alive()
        self._go.set()
        if running:
            self._spark.sparkContext.cancelJobGroup(_JOB_GROUP)
            if self._stopper is None:
                self._stopper = threading.Thread(target=self._stop_queries, name="standby-warm-up-stop", daemon=True)
                self._stopper.start()
            self._thread.join(timeout_s)
        return {"steps": dict(self.took), "cut_short": not self.finished and self.error is None,
                "kept_workers": self.kept_workers, "error": self.error}

    def _stop_queries(self) -> None:
        """Stop the warm-up's queries until its thread ended (one it starts after the go stops itself)."""
        while self._thread.is_alive():
            for query in self._spark.streams.active:
                if (query.name or "").startswith(WARM_UP_QUERY_PREFIX):
                    query.stop()
            self._thread.join(0.05)
