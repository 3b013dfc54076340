"""The reference batch aggregator (SPEC §3.3, seed 004): keyed records into per-key-ordered lists for bulk writes.

``aggregate_batches(frame, max_batch_size=..., max_wait_ms=...)`` turns a stream of keyed
records into a stream of *batches*: one row per emitted batch, holding an ordered list of
records of one key group. A batch is emitted when ``max_batch_size`` records of a key group
are buffered, or ``max_wait_ms`` after its oldest buffered record arrived, whichever comes first.
Within a batch each key's records are contiguous and in source order; across batches a key's
records keep that order; under failure nothing is lost or emitted twice (with an exactly-once
sink such as ``streamcert-kafka-2pc``, which skips a replayed batch id).

How it avoids the seed's three traps:

1. *Virtual keys break per-key order after rescale.* The seed mapped keys to ``key % parallelism``,
   so a rescale moved a key to another buffer while older records of it still waited in the old
   one. Here a key's group is ``pmod(xxhash64(key), key_groups)`` with ``key_groups`` fixed for the
   life of the checkpoint (recorded in state; a change is refused with an error), and each group's
   buffer is its own state. Spark's state partitions play Flink's key groups: their number is pinned
   by the checkpoint, and a rescale (pyspark's offline ``_streamingCheckpointManager.repartition``, which
   the test suite's state rescale runs) moves whole groups, with their buffers and timers.
2. *Restored state cannot emit until new input arrives.* Flush deadlines are processing-time
   timers in the state store (``timeMode="ProcessingTime"``), and Spark runs no-data micro-batches
   for them. But Spark has the seed's trap too: after a restart it runs no batch until a source
   has new data (no-data batches only follow a batch of the same run), so the timers of a buffer
   restored from the checkpoint would wait for input that may never come. The aggregator therefore
   unions a *tick* stream into its input (Spark's ``rate`` source, one row per second, key group
   -1, ignored by the processor): a batch runs within a second of every restart, and the due
   timers fire in it. Found by the rescale test, which restarts after the input has ended.
3. *Emitting during the snapshot puts records behind the barrier.* There is no barrier: a
   micro-batch commits its output (through the 2PC sink), its state and its source offsets
   together. Emission happens inside the batch that changes the state; a crash anywhere replays the
   whole batch from the previous state, and the replay emits the same batches (input sorted by
   source position, the batch's timestamp taken from the offset log), which the sink recognises.

Use a processing-time trigger (the tick stream never ends, so ``Trigger.AvailableNow`` would not either).
Records without a key share the key ``""``.

Runs: :func:`aggregate_batches` on the driver when the query is built; :class:`BatchAggregator`
on executors, one instance per state partition and batch (``init`` then a ``handle*`` call per
key group with input or a due timer); :func:`plan_flush` is the pure flush rule both handlers use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.options import OptionRules

from .worker_gc import freeze_imports

__all__ = ["ROCKSDB_PROVIDER", "TICK_GROUP", "OUTPUT_SCHEMA", "ITEM_FIELDS", "Flush", "plan_flush", "BatchAggregator",
           "aggregate_batches", "parse_aggregator_options"]

#: The key group of the tick stream (see trap 2 above): never a real group, which are 0..keyGroups-1.
TICK_GROUP = -1
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: A buffered record: its key, source position (the order), payload, and when the aggregator got it.
ITEM_FIELDS = ("key", "partition", "offset", "value", "arrived_ms")
_BUFFER_SCHEMA = "key string, partition int, offset long, value binary, arrived_ms long"
_META_SCHEMA = "next_batch long, deadline_ms long, key_groups int"
OUTPUT_SCHEMA = ("key_group int, group_batch long, reason string, emitted_at_ms long, oldest_arrived_ms long, "
                 "items array<struct<key: string, partition: int, offset: long, value: binary>>")
#: The options of :func:`aggregate_batches` (keyword arguments, named here as in Spark's camelCase).
_RULES = OptionRules({"maxBatchSize": "an integer >= 1: records of a key group per batch",
                      "maxWaitMs": "an integer >= 1: milliseconds the oldest buffered record may wait",
                      "keyGroups": "an integer >= 1, fixed for the life of the checkpoint (default 16)"},
                     "batch aggregator")


@dataclass(frozen=True)
class Flush:
    """What :func:`plan_flush` decided: batches to emit (with their reason), what stays, the next deadline."""

    batches: list[tuple[str, list[tuple]]]
    remaining: list[tuple]
    deadline_ms: int | None


def plan_flush(buffered: Sequence[tuple], incoming: Sequence[tuple], now_ms: int, max_batch_size: int,
               max_wait_ms: int, timer_due: bool = False) -> Flush:
    """The flush rule, on :data:`ITEM_FIELDS` tuples in arrival order (``incoming`` already source-ordered).

    Full batches of ``max_batch_size`` are cut from the front ("size"); if the oldest remaining record
    is due (``timer_due`` or its deadline passed), everything remaining goes too ("time"). Each batch is
    stable-sorted by key, so a key's records are contiguous and keep their order.
    """
    pending = list(buffered) + list(incoming)
    batches: list[tuple[str, list[tuple]]] = []
    while len(pending) >= max_batch_size:
        batches.append(("size", _by_key(pending[:max_batch_size])))
        pending = pending[max_batch_size:]
    if pending and (timer_due or pending[0][4] + max_wait_ms <= now_ms):
        batches.append(("time", _by_key(pending)))
        pending = []
    deadline = pending[0][4] + max_wait_ms if pending else None
    return Flush(batches, pending, deadline)


def _by_key(items: list[tuple]) -> list[tuple]:
    return sorted(items, key=lambda item: item[0])  # sorted() is stable: per-key arrival order stays


def _ordered_items(frames: Iterator[pd.DataFrame], now_ms: int) -> list[tuple]:
    frames = [f for f in frames if len(f)]
    if not frames:
        return []
    frame = pd.concat(frames, ignore_index=True).sort_values(["partition", "offset"], kind="mergesort")
    return [("" if k is None else str(k), int(p), int(o), bytes(v) if v is not None else None, now_ms)
            for k, p, o, v in zip(frame["key"], frame["partition"], frame["offset"], frame["value"], strict=True)]


class BatchAggregator:
    """The stateful processor (a ``pyspark.sql.streaming.stateful_processor.StatefulProcessor``).

    Built on the driver, pickled to executors. Per key group it keeps a buffer (``ListState``) and a
    meta row (``ValueState``: next batch number, registered deadline, key-group count) and at most one
    processing-time timer, the buffer's flush deadline.
    """

    def __init__(self, max_batch_size: int, max_wait_ms: int, key_groups: int) -> None:
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.key_groups = key_groups

    def init(self, handle) -> None:
        """Executors (and once on the driver, for the state schemas): declare the state."""
        from pyspark import TaskContext

        if TaskContext.get() is not None:  # a worker's; the driver's call runs in the user's own process
            freeze_imports()
        self.handle = handle
        self.buffer = handle.getListState("buffer", _BUFFER_SCHEMA)
        self.meta = handle.getValueState("meta", _META_SCHEMA)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        """Executors, per key group with input in this batch: buffer, cut full batches, set the deadline."""
        now = timerValues.getCurrentProcessingTimeInMs()
        group = int(key[0])
        if group == TICK_GROUP:  # the tick stream only makes a batch run; it has no records and no state
            for _frame in rows:
                pass
            return
        next_batch, deadline = self._meta(group)
        flush = plan_flush(list(self.buffer.get()), _ordered_items(rows, now), now, self.max_batch_size,
                           self.max_wait_ms)
        yield from self._finish(group, flush, next_batch, deadline, now)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        """Executors, per key group whose deadline passed, with or without input: flush everything."""
        now = timerValues.getCurrentProcessingTimeInMs()
        group = int(key[0])
        next_batch, _deadline = self._meta(group)
        flush = plan_flush(list(self.buffer.get()), [], now, self.max_batch_size, self.max_wait_ms, timer_due=True)
        yield from self._finish(group, flush, next_batch, None, now)  # Spark removed the fired timer

    def close(self) -> None:
        pass

    def _meta(self, key_group: int) -> tuple[int, int | None]:
        if not self.meta.exists():
            return 0, None
        next_batch, deadline, key_groups = self.meta.get()
        if key_groups != self.key_groups:
            raise ConfigurationError(
                f"The batch aggregator's checkpoint was written with keyGroups={key_groups}, this query has "
                f"{self.key_groups} (key group {key_group}).",
                hint="Key groups are fixed for the life of a checkpoint (changing them would move buffered "
                "records of a key behind newer ones); change parallelism with the state repartition instead.")
        return int(next_batch), (int(deadline) if deadline is not None and deadline >= 0 else None)

    def _finish(self, key_group: int, flush: Flush, next_batch: int, registered: int | None,
                now: int) -> Iterator[pd.DataFrame]:
        if flush.remaining:
            self.buffer.put(flush.remaining)
        else:
            self.buffer.clear()
        if registered is not None and registered != flush.deadline_ms:
            self.handle.deleteTimer(registered)
        if flush.deadline_ms is not None and flush.deadline_ms != registered:
            self.handle.registerTimer(flush.deadline_ms)
        self.meta.update((next_batch + len(flush.batches), -1 if flush.deadline_ms is None else flush.deadline_ms,
                          self.key_groups))
        if flush.batches:
            yield pd.DataFrame({
                "key_group": [key_group] * len(flush.batches),
                "group_batch": list(range(next_batch, next_batch + len(flush.batches))),
                "reason": [reason for reason, _items in flush.batches],
                "emitted_at_ms": [now] * len(flush.batches),
                "oldest_arrived_ms": [min(item[4] for item in items) for _reason, items in flush.batches],
                "items": [[{"key": k, "partition": p, "offset": o, "value": v} for k, p, o, v, _a in items]
                          for _reason, items in flush.batches],
            })


def _processor_class(base: type[BatchAggregator]):
    # Imported lazily: pyspark's stateful processor module needs protobuf, not every caller does.
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return type(f"Stateful{base.__name__}", (base, StatefulProcessor), {})


def parse_aggregator_options(options: Mapping[str, object]) -> dict[str, int]:
    """Driver: :func:`aggregate_batches`' keyword arguments from options named as in Spark (``maxBatchSize``,
    ``maxWaitMs``, ``keyGroups``; names case-insensitive); a :class:`ConfigurationError` naming a bad or unknown
    option."""
    values = _RULES.read(options)
    return {"max_batch_size": values.integer("maxBatchSize", None, 1),
            "max_wait_ms": values.integer("maxWaitMs", None, 1),
            "key_groups": values.integer("keyGroups", 16, 1)}


def aggregate_batches(frame, *, max_batch_size: int, max_wait_ms: int, key_groups: int = 16,
                      key_column: str = "key", processor: type[BatchAggregator] = BatchAggregator):
    """Driver: the aggregated stream of ``frame`` (columns ``key_column``, ``partition``, ``offset``, ``value``);
    ``processor`` is the stateful processor's class (a subclass of :class:`BatchAggregator`).

    The query needs the RocksDB state store provider (``spark.sql.streaming.stateStore.providerClass``)
    and a sink that supports append; output columns are :data:`OUTPUT_SCHEMA`.
    """
    from pyspark.sql import functions as F

    for name, value in (("maxBatchSize", max_batch_size), ("maxWaitMs", max_wait_ms), ("keyGroups", key_groups)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _RULES.bad(name, value)
    provider = frame.sparkSession.conf.get("spark.sql.streaming.stateStore.providerClass", "")
    if provider != ROCKSDB_PROVIDER:
        raise ConfigurationError(
            f"The batch aggregator needs the RocksDB state store; this session uses {provider or 'the default'}.",
            hint=f"Set spark.sql.streaming.stateStore.providerClass={ROCKSDB_PROVIDER} before starting the query.")
    missing = [c for c in (key_column, "partition", "offset", "value") if c not in frame.columns]
    if missing:
        raise ConfigurationError(f"The batch aggregator needs column(s) {', '.join(missing)}; the stream has "
                                 f"{', '.join(frame.columns)}.",
                                 hint="Feed it the offset source's rows (key, partition, offset, value).")
    columns = ("key_group", "key", "partition", "offset", "value")
    keyed = frame.select(
        F.pmod(F.xxhash64(F.col(key_column).cast("string")), F.lit(key_groups)).cast("int").alias("key_group"),
        F.col(key_column).cast("string").alias("key"), F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"), F.col("value").cast("binary").alias("value"))
    tick = frame.sparkSession.readStream.format("rate").option("rowsPerSecond", 1).load().select(
        F.lit(TICK_GROUP).cast("int").alias("key_group"), F.lit(None).cast("string").alias("key"),
        F.lit(-1).cast("int").alias("partition"), F.col("value").cast("long").alias("offset"),
        F.lit(None).cast("binary").alias("value"))
    return keyed.select(*columns).unionByName(tick.select(*columns)).groupBy("key_group").transformWithStateInPandas(
        statefulProcessor=_processor_class(processor)(max_batch_size, max_wait_ms, key_groups),
        outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="ProcessingTime")
