"""The reference Kafka offset source: ``spark.readStream.format("streamcert-kafka")``.

Where each part runs (PySpark's Python data source API):

- :class:`KafkaOffsetSource` and the reader's ``initialOffset``, ``latestOffset``,
  ``partitions``, ``commit`` run on the driver, in the Python process Spark keeps
  for this source. They ask the broker for its durable state (log start and end
  offsets; the last stable offset under read_committed) and never count in memory.
- ``read`` runs on executors, once per reader task, on a pickled copy of the reader, with a consumer the Python
  worker keeps from task to task (a consumer made per task paid connections, metadata and leaders every batch).

Offsets are ``{topic: {partition: next_offset}}`` in Spark's checkpoint (``offsets/N``),
so a restart at any parallelism sees every partition's position. Reader tasks get
partitions by seed 000's rule (:mod:`streamcert.connectors.assignment`). New partitions are found
at most every ``partitionDiscoveryIntervalMs`` and read from their start. With
``maxRecordsPerBatch`` a batch reads at most that many offsets; ``Trigger.AvailableNow``
stops exactly at the end offsets seen when the query started. With ``maxAllowedDriftMs`` the partitions are aligned
in event time (the records' timestamps), seed 001's FLIP-182: no partition is read past the slowest partition that
still has input plus that drift; one without input for ``idleTimeoutMs`` holds nothing
(:mod:`streamcert.connectors.alignment`). It costs one record fetched per partition and one time-index lookup per
batch, and, on a skewed backlog, the batches that hold the leading partitions back.

Spark 4.1 tells a Python source neither a batch's start nor its trigger: pass ``trigger`` (``availableNow`` or
``processingTime``) there, or a new query's first batch is not capped (nor aligned: its start is unknown).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
try:
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                                  SupportsTriggerAvailableNow)
    #: Whether this Spark hands a Python source its read limit (4.2 and later)
    READ_LIMITS = True
except ImportError:  # Spark 4.1: latestOffset() gets no start and no limit; a source caps batches by itself
    READ_LIMITS = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Spark 4.1 has no AvailableNow hook for Python sources (it runs them to the latest offsets it sees)."""

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

from .alignment import EventTimeAligner
from .assignment import assign
from .kafka_client import KeptConsumers
from .kafka_offsets import Offsets, from_json, limit_rows, ranges, to_json
from .kafka_options import SourceOptions, parse_source_options
from .worker_gc import freeze_imports

__all__ = ["SOURCE_NAME", "SCHEMA", "ARROW_SCHEMA", "KafkaOffsetSource", "KafkaStreamReader"]

SOURCE_NAME = "streamcert-kafka"
SCHEMA = ("topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
          "headers array<struct<key: string, value: binary>>")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])
_CHUNK = 10_000


class KafkaOffsetSource(DataSource):
    """Registered as ``streamcert-kafka``; options are checked when the query is defined."""

    #: the reader the driver builds (set below its class)
    reader_class: type["KafkaStreamReader"]

    def __init__(self, options) -> None:
        super().__init__(options)
        self.parsed = parse_source_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "KafkaStreamReader":
        return self.reader_class(self.parsed)


class _Range(InputPartition):
    """One reader task: ``(topic, partition, from, until)`` ranges; picklable."""

    def __init__(self, task: int, parts: list[tuple[str, int, int, int]]) -> None:
        super().__init__(task)
        self.task = task
        self.parts = parts


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin = None
        self._known: dict[str, list[int]] = {}
        self._discovered_at = 0.0
        self._target: Offsets | None = None
        #: the end offsets of the batch planned last (Spark 4.1 does not pass a batch's start)
        self._planned_end: dict | None = None
        self._aligner = (EventTimeAligner(options.max_allowed_drift_ms, options.idle_timeout_ms)
                         if options.max_allowed_drift_ms is not None else None)
        self._probe = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a copy for read(); clients are per process and rebuilt there.
        return {"options": self.options, "_admin": None, "_known": {}, "_discovered_at": 0.0, "_target": None,
                "_planned_end": None, "_aligner": None, "_probe": None}

    # -- broker state (driver) ------------------------------------------------------

    def _admin_client(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            from .kafka_client import LIBRDKAFKA_LOGGER

            self._admin = AdminClient({"bootstrap.servers": self.options.bootstrap_servers,
                                       "logger": LIBRDKAFKA_LOGGER, **self.options.kafka_conf})
        return self._admin

    def _partitions(self) -> dict[str, list[int]]:
        """Partitions of the subscribed topics, refreshed at most every discovery interval."""
        interval = self.options.partition_discovery_interval_ms / 1000
        if self._known and time.monotonic() - self._discovered_at < interval:
            return self._known
        found = self._metadata(time.monotonic() + self.options.poll_timeout_ms / 1000)
        self._known, self._discovered_at = found, time.monotonic()
        return found

    def _metadata(self, deadline: float) -> dict[str, list[int]]:
        """Partitions per topic; metadata errors (a restarting broker) are asked again until ``deadline``."""
        from confluent_kafka import KafkaError, KafkaException

        while True:
            problem = None
            try:
                metadata = self._admin_client().list_topics(timeout=max(1.0, min(10.0, deadline - time.monotonic())))
            except KafkaException as exc:
                problem, metadata = str(exc), None
                self._admin = None  # fresh metadata on the next try
            found = {}
            for topic in self.options.topics if metadata is not None else ():
                meta = metadata.topics.get(topic)
                if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                    raise RuntimeError(f"streamcert-kafka: topic {topic!r} does not exist; create it before starting "
                                       "the query")
                if meta.error is not None:
                    problem = f"topic {topic!r} has no metadata ({meta.error})"
                    break
                found[topic] = sorted(meta.partitions)
            if problem is None:
                return found
            if time.monotonic() >= deadline:
                raise RuntimeError(f"streamcert-kafka: {problem}; create the topic before starting the query, or "
                                   "check that the broker is up")
            time.sleep(0.2)

    def _broker_offsets(self, which: str) -> Offsets:
        """Log start (``earliest``) or end offsets of every partition; the LSO under read_committed."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        isolation = (IsolationLevel.READ_COMMITTED if self.options.isolation_level == "read_committed"
                     else IsolationLevel.READ_UNCOMMITTED)
        from confluent_kafka import KafkaException

        request = {TopicPartition(t, p): spec for t, parts in self._partitions().items() for p in parts}
        deadline = time.monotonic() + self.options.poll_timeout_ms / 1000
        while True:
            # A broker restart or leader change answers with retriable errors (UNKNOWN_LEADER_EPOCH,
            # NOT_LEADER...) for a while: ask again until pollTimeoutMs, rather than fail the query.
            try:
                futures = self._admin_client().list_offsets(
                    request, isolation_level=isolation,
                    request_timeout=max(1.0, min(10.0, deadline - time.monotonic())))
                out: Offsets = {}
                for tp, future in futures.items():
                    out.setdefault(tp.topic, {})[tp.partition] = future.result().offset
                return out
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"streamcert-kafka: the broker did not answer for {which} offsets within "
                                       f"pollTimeoutMs={self.options.poll_timeout_ms}: {exc}") from exc
                # A client that saw the broker before its restart keeps stale leader epochs in its metadata
                # (FENCED_LEADER_EPOCH on every retry): ask again with a fresh one.
                self._admin = None
                time.sleep(0.2)

    # -- the streaming protocol (driver) -------------------------------------------------

    def initialOffset(self) -> dict:
        """Called once, for a query without a checkpoint: where reading starts."""
        self._planned_end = to_json(self._broker_offsets(self.options.starting_offsets))
        return self._planned_end

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_batch:
            return ReadMaxRows(self.options.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Called once at the start of an AvailableNow query: fix the end it must stop at."""
        self._target = self._broker_offsets("latest")

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """Called before each batch: the end offsets the next batch may read up to.

        Spark 4.2 and later pass the batch's start and read limit. Spark 4.1 passes neither (see
        :meth:`_start_on_spark_4_1`)."""
        if start is None:
            start = self._start_on_spark_4_1()
            limit = self.getDefaultReadLimit() if start is not None else ReadAllAvailable()
        begin = from_json(start) if start is not None else {}
        end = self._target if self._target is not None else self._broker_offsets("latest")
        # Never move a partition backwards (an end below the start would mean the log was truncated).
        end = {t: {p: max(o, begin.get(t, {}).get(p, 0)) for p, o in parts.items()} for t, parts in end.items()}
        for topic, parts in begin.items():
            for partition, offset in parts.items():
                end.setdefault(topic, {}).setdefault(partition, offset)
        if self._aligner is not None and start is not None:  # Spark 4.1 without a known start: nothing to align to
            end = self._aligner.cap(begin, end, self._time_probe(), final=self._target is not None,
                                    max_rows=limit.max_rows if isinstance(limit, ReadMaxRows) else None)
        if isinstance(limit, ReadMaxRows):
            end = limit_rows(begin, end, limit.max_rows)
        self._planned_end = to_json(end)
        return self._planned_end

    def _time_probe(self):
        if self._probe is None:
            from .kafka_time_probe import KafkaTimeProbe

            self._probe = KafkaTimeProbe(self.options.bootstrap_servers, self.options.isolation_level,
                                         self.options.kafka_conf, self.options.poll_timeout_ms / 1000)
        return self._probe

    def _start_on_spark_4_1(self) -> dict | None:
        """Where the next batch starts on Spark 4.1, or None where it must not be capped.

        Spark 4.1 asks a new query's first ``latestOffset()`` before ``initialOffset()``, tells a restarted query's
        reader where its offset log ends by ``partitions(end, end)`` (its ``setLatestSeenOffset``), and runs
        ``Trigger.AvailableNow`` by asking ``latestOffset()`` once and taking the answer as the query's end: capping
        that answer would end the query early. So: never capped under ``trigger=availableNow``; else from the end
        planned last; else, for a new query, from its starting offsets when ``trigger=processingTime`` says no
        AvailableNow asks (unset: not capped, the safe side)."""
        if self.options.trigger == "availableNow":
            return None
        if self._planned_end is not None:
            return self._planned_end
        if self.options.trigger == "processingTime":
            return to_json(self._broker_offsets(self.options.starting_offsets))
        return None

    def reportLatestOffset(self) -> dict | None:
        return None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Called on the driver per batch: group the batch's ranges into reader tasks by the seed rule."""
        self._planned_end = end  # a replayed batch is planned without latestOffset: the next one starts here
        work = ranges(from_json(start), from_json(end))
        if not work:
            return []
        all_partitions = sorted({(t, p) for t, parts in from_json(end).items() for p in parts})
        tasks = self.options.reader_parallelism or max(1, len(all_partitions))
        by_partition = {(t, p): (t, p, b, u) for t, p, b, u in work}
        groups = assign(all_partitions, tasks)
        return [_Range(task, [by_partition[tp] for tp in group if tp in by_partition])
                for task, group in enumerate(groups) if any(tp in by_partition for tp in group)]

    def commit(self, end: dict) -> None:
        """Called on the driver after Spark committed the batch ending at ``end``."""
        if not self.options.commit_to_group:
            return
        from confluent_kafka import Consumer, TopicPartition

        from .kafka_client import LIBRDKAFKA_LOGGER

        consumer = Consumer({"bootstrap.servers": self.options.bootstrap_servers, "logger": LIBRDKAFKA_LOGGER,
                             "group.id": self.options.commit_to_group, "enable.auto.commit": False,
                             **self.options.kafka_conf})
        try:
            offsets = [TopicPartition(t, p, o) for t, parts in from_json(end).items() for p, o in parts.items()]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()

    def stop(self) -> None:
        self._admin = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    # -- reading (executors) ------------------------------------------------------------

    def read(self, partition: _Range) -> Iterator[pa.RecordBatch]:
        """Runs on an executor: read exactly ``[from, until)`` of each assigned partition."""
        freeze_imports()
        with _kept_reader(self.options) as consumer:
            yield from self._read_with(consumer, partition)

    def _read_with(self, consumer, partition: _Range) -> Iterator[pa.RecordBatch]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        from .kafka_client import take

        begin = {(t, p): b for t, p, b, _u in partition.parts}
        until = {(t, p): u for t, p, _b, u in partition.parts}
        pending = set(until)
        consumer.assign([TopicPartition(t, p, b) for t, p, b, _u in partition.parts])
        rows = _Columns()
        deadline = time.monotonic() + self.options.poll_timeout_ms / 1000
        while pending:
            messages = take(consumer, _CHUNK, 0.05)
            progressed = False
            for msg in messages:
                error = msg.error()
                tp = (msg.topic(), msg.partition())
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if tp in pending and msg.offset() >= until[tp]:
                            pending.discard(tp)
                        continue
                    raise KafkaException(error)
                # a kept consumer's earlier assignment cannot leak in: anything outside the range is skipped
                if tp not in pending or not begin[tp] <= msg.offset() < until[tp]:
                    continue
                rows.add(msg)
                progressed = True
                if msg.offset() + 1 >= until[tp]:
                    pending.discard(tp)
            pending -= _reached(consumer, pending, until)
            if len(rows) >= _CHUNK:
                yield rows.batch()
            if progressed:
                deadline = time.monotonic() + self.options.poll_timeout_ms / 1000
            elif pending and time.monotonic() > deadline:
                raise TimeoutError(f"streamcert-kafka: no progress reading {sorted(pending)} towards "
                                   f"{ {tp: until[tp] for tp in pending} } within pollTimeoutMs")
        if len(rows):
            yield rows.batch()


# One reader consumer per Python worker process and client settings, kept from task to task.
_readers = KeptConsumers()


def _kept_reader(options: SourceOptions):
    """This process's reader consumer for ``options``' cluster and settings (made on first use), out of the pool
    while a task reads with it (:class:`~.kafka_client.KeptConsumers`)."""
    from confluent_kafka import Consumer

    from .kafka_client import LIBRDKAFKA_LOGGER

    key = (options.bootstrap_servers, options.isolation_level, tuple(sorted(
        (k, str(v)) for k, v in options.kafka_conf.items())))
    return _readers.take(key, lambda: Consumer({
        "bootstrap.servers": options.bootstrap_servers, "logger": LIBRDKAFKA_LOGGER,
        "group.id": "streamcert-kafka-reader", "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": options.isolation_level, "auto.offset.reset": "earliest", **options.kafka_conf,
    }))


def _reached(consumer, pending: set[tuple[str, int]], until: dict[tuple[str, int], int]) -> set[tuple[str, int]]:
    """Partitions whose position passed ``until`` without a record there (aborted records, markers)."""
    from confluent_kafka import TopicPartition

    if not pending:
        return set()
    done = set()
    for tp in consumer.position([TopicPartition(t, p) for t, p in pending]):
        if tp.offset >= 0 and tp.offset >= until[(tp.topic, tp.partition)]:
            done.add((tp.topic, tp.partition))
    return done


class _Columns:
    """Accumulates messages column by column and emits Arrow record batches of :data:`ARROW_SCHEMA`."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.topic: list[str] = []
        self.partition: list[int] = []
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.headers: list[list[dict[str, Any]]] = []

    def __len__(self) -> int:
        return len(self.offset)

    def add(self, msg) -> None:
        self.topic.append(msg.topic())
        self.partition.append(msg.partition())
        self.offset.append(msg.offset())
        self.timestamp.append(msg.timestamp()[1] * 1000)
        self.key.append(msg.key())
        self.value.append(msg.value())
        self.headers.append([{"key": k, "value": v} for k, v in (msg.headers() or [])])

    def batch(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays([
            pa.array(self.topic, pa.string()),
            pa.array(self.partition, pa.int32()),
            pa.array(self.offset, pa.int64()),
            pa.array(self.timestamp, pa.timestamp("us", tz="UTC")),
            pa.array(self.key, pa.binary()),
            pa.array(self.value, pa.binary()),
            pa.array(self.headers, ARROW_SCHEMA.field("headers").type),
        ], schema=ARROW_SCHEMA)
        self._reset()
        return batch


# a subclass of the source may build another reader (one step changed, as the project's mutants do)
KafkaOffsetSource.reader_class = KafkaStreamReader
