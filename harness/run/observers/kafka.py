"""The Kafka observer: tails an output topic with ``isolation.level=read_committed`` while a run goes on.

Records of open or aborted transactions stay invisible to it, as to any read_committed consumer; new output
partitions are picked up every second. It outlives broker outages (a killed, paused or cut-off broker is what
faults do): errors the client retries by itself are counted in ``transient_errors`` and reading goes on; only
a fatal client error stops the observer.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd

from streamcert.harness.run.observers.base import Observer, OutputTarget
from streamcert.harness.stack.kafka_clients import client_conf, create_topic

__all__ = ["KafkaObserver"]

#: How often the client reports its statistics (what the observer left unread among them).
_STATS_INTERVAL_MS = 500
#: Shortest time from one round's start to the next: a trickle of output would otherwise be read a few records
#: per round, hundreds of rounds a second (each a frame to decode); rows wait at most this long to be stamped.
_ROUND_PERIOD_S = 0.02


class KafkaObserver(Observer):
    """Location columns: ``partition``, ``offset``."""

    kind = "kafka"
    idle_s = 0.0  # consume() already waits
    round_records = 10_000

    def __init__(self, target: OutputTarget, unpack=None, isolation: str = "read_committed") -> None:
        super().__init__(target, unpack)
        self.isolation = isolation
        self._consumer = None
        self._assigned: set[int] = set()
        self._next_refresh = 0.0
        self._mark_consumer = None
        self._stats_unread: int | None = None
        self._round_began = 0.0

    def prepare(self, partitions: int) -> None:
        """Create the output topic with ``partitions`` and the target's topic settings (the sink writes to a topic
        that exists)."""
        create_topic(self.target.bootstrap_servers, self.target.name, partitions,
                     settings=self.target.topic_settings)

    def visible_mark(self) -> int:
        """The sum of the topic's end offsets as a read_committed reader sees them (the last stable offsets), asked
        on a consumer of its own, so a fault timed by the output sees a commit at once; the rounds' count when the
        broker does not answer."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            if self._mark_consumer is None:
                address = self.target.mark_address or self.target.bootstrap_servers
                self._mark_consumer = Consumer(client_conf(address, **{
                    "group.id": f"streamcert-mark-{self.target.name}", "enable.auto.commit": False,
                    "isolation.level": self.isolation}))
            meta = self._mark_consumer.list_topics(self.target.name, timeout=2).topics[self.target.name]
            return sum(self._mark_consumer.get_watermark_offsets(TopicPartition(self.target.name, p), timeout=2)[1]
                       for p in meta.partitions)
        except (KafkaException, KeyError):
            return self.count()

    def stop(self) -> None:
        super().stop()
        if self._mark_consumer is not None:
            self._mark_consumer.close()
            self._mark_consumer = None

    def _open(self) -> None:
        from confluent_kafka import Consumer

        self._consumer = Consumer(client_conf(self.target.bootstrap_servers, **{
            "group.id": f"streamcert-observer-{self.target.name}", "enable.auto.commit": False,
            "isolation.level": self.isolation, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
            "statistics.interval.ms": _STATS_INTERVAL_MS, "stats_cb": self._on_stats}))

    def _close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    def _read_new(self) -> pd.DataFrame | None:
        from confluent_kafka import KafkaError

        if time.monotonic() >= self._next_refresh:
            self._assign_new_partitions()
            self._next_refresh = time.monotonic() + 1.0
        if not self._assigned:
            time.sleep(0.1)
            return None
        messages = self._take_round()
        for message in messages:
            error = message.error()
            if error is None or error.code() == KafkaError._PARTITION_EOF:
                continue
            if error.fatal():
                raise RuntimeError(f"the output consumer failed for good: {error}")
            self.transient_errors += 1  # librdkafka retries these itself
        good = [m for m in messages if m.error() is None]
        if not good:
            return None
        return pd.DataFrame({
            "key": [m.key() for m in good], "value": [m.value() for m in good],
            "partition": np.array([m.partition() for m in good], dtype=np.int32),
            "offset": np.array([m.offset() for m in good], dtype=np.int64)})

    def _take_round(self) -> list:
        """Up to :attr:`round_records` messages: waits up to 0.1 s for the first, then takes what the client has
        queued without waiting; rounds begin at least :data:`_ROUND_PERIOD_S` apart. (One ``consume(n, timeout)``
        call waits until it has ``n`` messages or the timeout passes, so a round that found fewer than a full one
        held what it had for the whole timeout, and its rows were stamped visible up to 0.1 s late.)"""
        time.sleep(max(0.0, self._round_began + _ROUND_PERIOD_S - time.monotonic()))
        self._round_began = time.monotonic()
        first = self._consumer.consume(1, timeout=0.1)
        if not first:
            return first
        return first + self._consumer.consume(self.round_records - 1, timeout=0)

    def _unread_count(self) -> int | None:
        """What the client's last statistics said was visible to this observer's isolation level and not yet
        handed to it (None before the first statistics)."""
        return self._stats_unread

    def _on_stats(self, stats: str) -> None:
        """librdkafka's statistics, every :data:`_STATS_INTERVAL_MS`, from the observer's own ``consume`` calls:
        per partition, the end a reader of this isolation level sees (the last stable offset for read_committed,
        the high watermark otherwise: records of an open transaction are not unread) less the offset after the
        last record handed over. No request to the broker; the ends are those of the last fetch responses."""
        try:
            partitions = json.loads(stats).get("topics", {}).get(self.target.name, {}).get("partitions", {})
        except ValueError:
            return
        end_key = "ls_offset" if self.isolation == "read_committed" else "hi_offset"
        unread = 0
        for number, partition in partitions.items():
            end = partition.get(end_key, -1)
            if number == "-1" or end < 0:  # -1: the client's placeholder for unassigned messages
                continue
            handed = partition.get("app_offset", -1)
            unread += max(0, end - (handed if handed >= 0 else max(partition.get("lo_offset", 0), 0)))
        self._stats_unread = unread

    def _assign_new_partitions(self) -> None:
        """Add partitions the topic gained; while the broker is unreachable, keep what is assigned."""
        from confluent_kafka import TopicPartition

        topic = self.target.name
        meta = self._consumer.list_topics(topic, timeout=5).topics.get(topic)
        partitions = set(meta.partitions) if meta is not None and meta.error is None else set()
        if partitions - self._assigned:
            self._assigned |= partitions
            self._consumer.assign([TopicPartition(topic, p, 0) for p in sorted(self._assigned)])

    def _transient(self, error: Exception) -> bool:
        from confluent_kafka import KafkaException

        return isinstance(error, KafkaException) and not (error.args and error.args[0].fatal())
