"""The reference Kafka connectors' confluent-kafka settings and topic creation.

Runs wherever the connector runs (driver and executors). librdkafka's own log lines (a refused connection while
a broker restarts, say) go to a quiet logger, not to the executors' stderr.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["LIBRDKAFKA_LOGGER", "METADATA_WAIT_S", "KeptConsumers", "client_conf", "create_topic", "take",
           "wait_for_metadata"]

LIBRDKAFKA_LOGGER = logging.getLogger("streamcert.connectors.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
LIBRDKAFKA_LOGGER.propagate = False


#: The longest a new producer waits for its first metadata before it is used anyway (:func:`wait_for_metadata`).
METADATA_WAIT_S = 5.0


def client_conf(bootstrap: str, **extra: object) -> dict[str, object]:
    """Base configuration of every client a reference connector makes."""
    return {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOGGER, **extra}


def wait_for_metadata(producer: Any, topic: str, timeout: float = METADATA_WAIT_S) -> bool:
    """Right after a producer is made: wait until a broker answered it (``topic``'s metadata), so that its
    idempotent or transactional producer id is asked at once. librdkafka asks for the id when a broker is up, and
    a new producer has none up yet: it asks again on a 500-ms timer, so a new idempotent producer's first flush
    took ~510 ms (every new Python worker's first staging), a transactional one's ``init_transactions`` up to
    ~1.1 s; with the metadata first, ~65 ms and ~75 ms (the local broker through Toxiproxy). False when no broker
    answered within ``timeout`` (restarting, a network fault): the producer is used as it is, and what follows
    waits for the broker and retries as it would have."""
    from confluent_kafka import KafkaException

    try:
        producer.list_topics(topic, timeout=timeout)
        return True
    except KafkaException:
        return False


class KeptConsumers:
    """Consumers a Python process keeps from one task (or commit) to the next, one per key: Spark reuses its Python
    processes, and a consumer made each time paid its connections, metadata and partition leaders every batch."""

    def __init__(self) -> None:
        #: key -> a consumer waiting for its next use (one in use is out of here)
        self.idle: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def take(self, key: tuple, make: Callable[[], Any]) -> Iterator[Any]:
        """The kept consumer of ``key`` (``make()`` when there is none), out of the pool while in use. It goes back
        unassigned (an idle consumer must not go on fetching what it was reading); one whose user raised or stopped
        early is closed, and the next use makes a new one."""
        with self._lock:
            consumer = self.idle.pop(key, None)
        if consumer is None:
            consumer = make()
        try:
            yield consumer
            consumer.unassign()
        except BaseException:
            consumer.close()
            raise
        with self._lock:
            kept = self.idle.setdefault(key, consumer)
        if kept is not consumer:
            consumer.close()


def take(consumer, most: int, timeout: float) -> list:
    """Up to ``most`` messages (or events) of ``consumer``: waits up to ``timeout`` for the first, then takes what the
    client has queued without waiting. One ``consume(most, timeout)`` call waits until it has ``most`` messages or the
    timeout passed, so a read that asks for more than is left (the tail of every range) waited out the whole timeout:
    50 ms a staged range in the 2PC sink's commit, measured."""
    first = consumer.consume(1, timeout=timeout)
    if not first or most <= 1:
        return first
    return first + consumer.consume(most - 1, timeout=0)


def create_topic(bootstrap: str, topic: str, partitions: int, config: Mapping[str, str] | None = None,
                 timeout: float = 30.0) -> None:
    """Create ``topic`` unless it exists, then wait until every partition has a leader."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(bootstrap, **{"socket.timeout.ms": 5000}))
    # Replication factor -1: the cluster's default (1 on one broker; a cluster's min ISR needs more than 1).
    futures = admin.create_topics([NewTopic(topic, partitions, -1, config=dict(config or {}))],
                                  request_timeout=timeout)
    try:
        futures[topic].result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions and all(
                p.leader >= 0 for p in meta.partitions.values()):
            return
        if time.monotonic() >= deadline:
            raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE,
                                            f"topic {topic!r} has no leader for every partition after {timeout:.0f}s"))
        time.sleep(0.1)
