"""The observer: tails a Kafka output topic with read_committed while a run goes on.

Runs in a thread of the harness process. Every record it sees gets its
visibility time (when the observer received it); values carry the workload
header, so id, seq and produced_at come back without trusting the connector.
New output partitions are picked up every second.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd

from streamcert.harness.stack.kafka_clients import client_conf
from streamcert.harness.run.workload import decode_values

__all__ = ["KafkaObserver"]


class KafkaObserver:
    """``start()`` begins tailing ``topic`` from the beginning; ``frame()`` is what was seen so far."""

    def __init__(self, bootstrap: str, topic: str, isolation: str = "read_committed") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.isolation = isolation
        self._chunks: list[pd.DataFrame] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def __enter__(self) -> "KafkaObserver":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"observer-{self.topic}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def count(self) -> int:
        with self._lock:
            return sum(len(chunk) for chunk in self._chunks)

    def frame(self) -> pd.DataFrame:
        """Deliveries in arrival order: id, key, seq, produced_at, visible_at, partition, offset, position."""
        with self._lock:
            chunks = list(self._chunks)
        if not chunks:
            return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in (
                ("id", "int64"), ("key", "object"), ("seq", "int64"), ("produced_at", "float64"),
                ("visible_at", "float64"), ("partition", "int32"), ("offset", "int64"), ("position", "int64"))})
        frame = pd.concat(chunks, ignore_index=True)
        frame["position"] = np.arange(len(frame), dtype=np.int64)
        return frame

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(client_conf(self.bootstrap, **{
            "group.id": f"streamcert-observer-{self.topic}", "enable.auto.commit": False,
            "isolation.level": self.isolation, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50}))
        assigned: set[int] = set()
        next_refresh = 0.0
        try:
            while not self._stop.is_set():
                if time.monotonic() >= next_refresh:
                    meta = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
                    partitions = set(meta.partitions) if meta is not None and meta.error is None else set()
                    if partitions - assigned:
                        assigned |= partitions
                        consumer.assign([TopicPartition(self.topic, p, 0) for p in sorted(assigned)])
                    next_refresh = time.monotonic() + 1.0
                if not assigned:
                    time.sleep(0.1)
                    continue
                messages = consumer.consume(10_000, timeout=0.1)
                seen_at = time.time()
                good = [m for m in messages if m.error() is None]
                for message in messages:
                    if message.error() is not None and message.error().code() != KafkaError._PARTITION_EOF:
                        self.error = str(message.error())
                if good:
                    self._append(good, seen_at)
        except Exception as exc:  # the run reports it; a dead observer must not look like an empty output
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            consumer.close()

    def _append(self, messages, seen_at: float) -> None:
        decoded = decode_values([m.value() for m in messages])
        decoded["key"] = [m.key().decode() if m.key() is not None else None for m in messages]
        decoded["visible_at"] = seen_at
        decoded["partition"] = np.array([m.partition() for m in messages], dtype=np.int32)
        decoded["offset"] = np.array([m.offset() for m in messages], dtype=np.int64)
        with self._lock:
            self._chunks.append(decoded[["id", "key", "seq", "produced_at", "visible_at", "partition", "offset"]])
