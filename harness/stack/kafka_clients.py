"""Small helpers over confluent-kafka used across the harness: topics, produce, read back.

Everything takes a bootstrap address, normally the proxied one from
:attr:`Environment.endpoints`, so faults on the Kafka link affect these calls.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from streamcert.harness.waiting import retry, wait_for

__all__ = ["client_conf", "TopicSettings", "create_topic", "broker_ids", "add_partitions", "partition_leaders",
           "produce", "end_offsets", "read_topic"]

#: librdkafka's own log lines (connection refused while a fault is active, ...) go here, not to stderr.
LIBRDKAFKA_LOGGER = logging.getLogger("streamcert.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
LIBRDKAFKA_LOGGER.propagate = False


def client_conf(bootstrap: str, **extra: object) -> dict[str, object]:
    """Base configuration for any confluent-kafka client of the harness."""
    return {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOGGER, **extra}


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(client_conf(bootstrap, **{"socket.timeout.ms": 5000}))


@dataclass(frozen=True)
class TopicSettings:
    """A topic's durability settings; None keeps the cluster's default (replication factor 3, min ISR 2, no unclean
    election on a cluster of three; 1, 1, no on one broker). Seed 003's unsafe run is ``TopicSettings(
    min_insync_replicas=1, unclean_leader_election=True)`` with a producer on ``acks=1``."""

    replication_factor: int | None = None
    min_insync_replicas: int | None = None
    unclean_leader_election: bool | None = None

    def __post_init__(self) -> None:
        for name in ("replication_factor", "min_insync_replicas"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 (got {value})")
        if None not in (self.replication_factor, self.min_insync_replicas) and \
                self.min_insync_replicas > self.replication_factor:
            raise ValueError(f"min_insync_replicas {self.min_insync_replicas} exceeds replication_factor "
                             f"{self.replication_factor}: no write could ever be acknowledged with acks=all")

    def config(self) -> dict[str, str]:
        """The topic-level configuration these settings give (only what differs from the cluster's defaults)."""
        config = {}
        if self.min_insync_replicas is not None:
            config["min.insync.replicas"] = str(self.min_insync_replicas)
        if self.unclean_leader_election is not None:
            config["unclean.leader.election.enable"] = str(self.unclean_leader_election).lower()
        return config


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: Mapping[str, str] | None = None,
                 timeout: float = 30.0, replicas: Sequence[int] | None = None,
                 settings: TopicSettings | None = None) -> None:
    """Create ``topic`` (no error if it exists with the same name) and wait until it has a leader.

    ``replicas``: the brokers holding every partition, the first one its preferred leader (otherwise the cluster
    places them, with ``settings``' replication factor or its default one); ``settings``' configuration is added to
    ``config``."""
    admin = _admin(bootstrap)  # keep a reference: a collected client fails its pending futures
    settings = settings or TopicSettings()
    config = {**(config or {}), **settings.config()}
    if replicas:
        # librdkafka wants the real partition count beside an assignment (-1 is "the broker's default")
        new = NewTopic(topic, partitions, -1, replica_assignment=[list(replicas)] * partitions, config=config)
    else:
        # Replication factor -1: the cluster's default.replication.factor (1 on one broker, 3 on a cluster).
        new = NewTopic(topic, partitions, settings.replication_factor or -1, config=config)
    futures = admin.create_topics([new], request_timeout=timeout)
    try:
        futures[topic].result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    _wait_for_leaders(bootstrap, topic, partitions, timeout)


def broker_ids(bootstrap: str, timeout: float = 10.0) -> list[int]:
    """The ids of the brokers the cluster's metadata lists (alive ones: a killed broker leaves the list)."""
    return sorted(_admin(bootstrap).list_topics(timeout=timeout).brokers)


def add_partitions(bootstrap: str, topic: str, total: int, timeout: float = 30.0) -> None:
    """Grow ``topic`` to ``total`` partitions."""
    admin = _admin(bootstrap)
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=timeout)
    futures[topic].result(timeout=timeout)
    _wait_for_leaders(bootstrap, topic, total, timeout)


def partition_leaders(bootstrap: str, topic: str, timeout: float = 5.0,
                      admin: AdminClient | None = None) -> dict[int, int]:
    """Each partition of ``topic`` with its leader's id (-1: none now); empty when the topic is not known. ``admin``:
    a client to ask with (one is made otherwise)."""
    meta = (admin or _admin(bootstrap)).list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        return {}
    return {partition: info.leader for partition, info in meta.partitions.items()}


def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    admin = _admin(bootstrap)

    def all_led() -> bool:
        leaders = partition_leaders(bootstrap, topic, admin=admin)
        return len(leaders) >= partitions and all(leader >= 0 for leader in leaders.values())

    wait_for(all_led, what=f"leader for all {partitions} partitions of topic {topic!r}", timeout=timeout,
             interval=0.1, hint="Check the broker log; the broker may be overloaded or restarting.")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]],
            conf: Mapping[str, object] | None = None, timeout: float = 60.0) -> int:
    """Produce ``(key, value)`` pairs and wait for every ack; return how many were acknowledged."""
    producer = Producer(client_conf(bootstrap, **{"linger.ms": 5, "enable.idempotence": True, **(conf or {})}))
    failures: list[KafkaError] = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    def send(key: bytes | None, value: bytes) -> None:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)  # the queue is full: serve delivery reports so it drains, then try again
            raise

    count = 0
    for key, value in records:
        retry(functools.partial(send, key, value), healable=lambda exc: isinstance(exc, BufferError),
              timeout=timeout, interval=0)
        count += 1
    remaining = producer.flush(timeout)
    if remaining or failures:
        raise KafkaException(failures[0] if failures else KafkaError(KafkaError._MSG_TIMED_OUT))
    return count


def end_offsets(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 30.0) -> dict[int, int]:
    """Per partition, the offset a reader with ``isolation`` stops at (LSO for read_committed); transient errors
    (a broker that just restarted) are retried for up to ``timeout`` seconds."""
    consumer = Consumer(client_conf(bootstrap, **{"group.id": "streamcert-offsets", "isolation.level": isolation,
                                                  "enable.auto.commit": False}))

    def offsets() -> dict[int, int]:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return {partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
                for partition in meta.partitions}

    try:
        return retry(offsets, healable=_transient, timeout=timeout, interval=0.2)
    finally:
        consumer.close()


def _transient(exc: BaseException) -> bool:
    """Just after a broker (re)start, leadership is still moving: NOT_LEADER, LEADER_NOT_AVAILABLE, ..."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(error, KafkaError):
        return False
    return error.retriable() or error.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN)


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed",
               timeout: float = 60.0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Everything in ``topic`` up to its current end: ``(partition, offset, key, value)`` in offset order."""
    ends = end_offsets(bootstrap, topic, isolation)
    consumer = Consumer(client_conf(bootstrap, **{"group.id": "streamcert-reader", "isolation.level": isolation,
                                                  "enable.auto.commit": False, "enable.partition.eof": True}))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= ends[msg.partition()]:
                            pending.discard(msg.partition())
                        continue
                    raise KafkaException(msg.error())
                out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
        if pending:
            raise TimeoutError(f"read_topic({topic!r}) did not reach the end offsets of partitions {sorted(pending)} "
                               f"within {timeout:.0f}s")
        out.sort(key=lambda row: (row[0], row[1]))
        return out
    finally:
        consumer.close()
