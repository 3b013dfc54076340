"""The broker's answers the event-time alignment needs (:class:`~streamcert.connectors.alignment.TimeProbe`).

Runs on the driver, in the source's Python process, with one consumer of its own (no group, no commits), reading
with the source's isolation level: a head is the first record a reader task would emit. Timestamps are the records'
``CreateTime`` in milliseconds.

The cut (a partition's first offset past a time) comes from the broker's time index (``offsets_for_times``), checked
against the record it names. The index cannot be trusted on a transactional topic whose records carry event times
older than its transaction markers (a backfill, a replayed backlog: the broker stamps a marker when the
transaction ends, and its search stops at the first batch stamped past the time asked, a marker): there the cut is
found by reading the partition's records from the batch's start up to it, at most ``scan_limit`` of them (the
batch's own limit), which the batch reads anyway.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = ["KafkaTimeProbe"]

TopicPartition = tuple[str, int]


class KafkaTimeProbe:
    """A :class:`~streamcert.connectors.alignment.TimeProbe` over one consumer; ``close()`` is idempotent."""

    def __init__(self, bootstrap_servers: str, isolation_level: str, kafka_conf: Mapping[str, str],
                 timeout_s: float) -> None:
        self.conf = {"bootstrap.servers": bootstrap_servers, "group.id": "streamcert-kafka-alignment",
                     "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation_level,
                     "auto.offset.reset": "earliest",
                     # a probe reads a record or a few from each partition, often at its end: the broker's default
                     # 500 ms wait for more data would be paid on every batch
                     "fetch.wait.max.ms": 5, **kafka_conf}
        self.timeout_s = timeout_s
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            from .kafka_client import LIBRDKAFKA_LOGGER

            self._consumer = Consumer({**self.conf, "logger": LIBRDKAFKA_LOGGER})
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def head_times(self, ranges: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int]:
        return self._first_records({tp: begin for tp, (begin, _until) in ranges.items()},
                                   {tp: until for tp, (_begin, until) in ranges.items()})

    def last_times(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The last record before each offset: looked for a few offsets back at a time (transaction markers and
        aborted records are not returned), at most 64 back."""
        found: dict[TopicPartition, int] = {}
        for back in (1, 8, 64):
            wanted = {tp: offset for tp, offset in before.items() if tp not in found and offset > 0}
            if not wanted:
                break
            starts = {tp: max(0, offset - back) for tp, offset in wanted.items()}
            found.update(self._last_records(starts, wanted))
        return found

    def first_offsets_after(self, times: Mapping[TopicPartition, int],
                            ranges: Mapping[TopicPartition, tuple[int, int]],
                            scan_limit: int | None = None) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if not times:
            return {}
        asked = [KafkaTopicPartition(t, p, int(ms) + 1) for (t, p), ms in times.items()]
        hints = {(tp.topic, tp.partition): tp.offset
                 for tp in self._client().offsets_for_times(asked, timeout=self.timeout_s)}
        out: dict[TopicPartition, int] = {}
        doubtful: dict[TopicPartition, int] = {}
        checks = {tp: (hint, ranges[tp][1]) for tp, hint in hints.items() if ranges[tp][0] <= hint < ranges[tp][1]}
        named = {tp: (offset, stamp) for tp, offset, stamp in self._scan(
            {tp: hint for tp, (hint, _end) in checks.items()}, {tp: end for tp, (_hint, end) in checks.items()},
            first_only=True)} if checks else {}
        for tp, cap in times.items():
            hint = hints.get(tp, -1)
            if hint < 0 or hint >= ranges[tp][1]:
                continue  # no batch in the range stamped past the cap, not even a marker: nothing to cut
            offset, stamp = named.get(tp, (None, None))
            if offset == hint and stamp > cap:
                out[tp] = hint  # the index named a record stamped past the cap: records before it are not
            else:
                doubtful[tp] = cap
        if doubtful:
            out.update(self._cut_by_reading(doubtful, ranges, scan_limit))
        return out

    def _cut_by_reading(self, caps: Mapping[TopicPartition, int], ranges: Mapping[TopicPartition, tuple[int, int]],
                        scan_limit: int | None) -> dict[TopicPartition, int]:
        """The first offset of each partition whose record is stamped past its cap, read from the range's start; a
        partition whose first ``scan_limit`` records are all within the cap is cut after them."""
        starts = {tp: ranges[tp][0] for tp in caps}
        ends = {tp: ranges[tp][1] for tp in caps}
        if scan_limit is not None:
            ends = {tp: min(end, starts[tp] + scan_limit) for tp, end in ends.items()}
        cut: dict[TopicPartition, int] = {}
        for tp, offset, stamp in self._scan(starts, ends, first_only=False):
            if tp not in cut and stamp > caps[tp]:
                cut[tp] = offset
        for tp in caps:
            if tp not in cut and scan_limit is not None and ends[tp] < ranges[tp][1]:
                cut[tp] = ends[tp]  # the batch reads no more than the limit of this partition anyway
        return cut

    def _first_records(self, starts: Mapping[TopicPartition, int],
                       ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Timestamp of the first readable record in ``[start, end)`` of each partition."""
        out: dict[TopicPartition, int] = {}
        for (tp, _offset, timestamp) in self._scan(starts, ends, first_only=True):
            out.setdefault(tp, timestamp)
        return out

    def _last_records(self, starts: Mapping[TopicPartition, int],
                      ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for (tp, _offset, timestamp) in self._scan(starts, ends, first_only=False):
            out[tp] = timestamp
        return out

    def _scan(self, starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
              first_only: bool) -> list[tuple[TopicPartition, int, int]]:
        """(partition, offset, timestamp) of the readable records in ``[start, end)``, in order per partition;
        with ``first_only`` a partition is done at its first one."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        from .kafka_client import take

        consumer = self._client()
        pending = {tp for tp in starts if ends[tp] > starts[tp]}
        consumer.assign([KafkaTopicPartition(t, p, starts[(t, p)]) for t, p in pending])
        seen: list[tuple[TopicPartition, int, int]] = []
        deadline = time.monotonic() + self.timeout_s
        try:
            while pending and time.monotonic() < deadline:
                for message in take(consumer, 500, 0.05):
                    tp = (message.topic(), message.partition())
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            pending.discard(tp)
                            continue
                        raise KafkaException(error)
                    if tp not in pending:
                        continue
                    if message.offset() >= ends[tp]:
                        pending.discard(tp)
                        continue
                    seen.append((tp, message.offset(), message.timestamp()[1]))
                    if first_only or message.offset() + 1 >= ends[tp]:
                        pending.discard(tp)
                for position in consumer.position([KafkaTopicPartition(t, p) for t, p in pending]):
                    tp = (position.topic, position.partition)
                    if position.offset >= 0 and position.offset >= ends[tp]:
                        pending.discard(tp)  # only markers or aborted records were left in the range
        finally:
            consumer.unassign()
        if pending:
            raise TimeoutError(f"streamcert-kafka: no answer reading the event times of {sorted(pending)} within "
                               "pollTimeoutMs (maxAllowedDriftMs needs them)")
        return seen
