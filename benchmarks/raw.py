"""The raw ceiling of this machine: librdkafka (confluent-kafka) producing to and consuming from the broker directly,
no Spark and no Toxiproxy. Every connector figure of a benchmark is also given as a fraction of it, measured in the
same run (absolute numbers on a shared machine drift; ratios measured side by side hold).

It also measures the harness's own parts at their limit: the Kafka observer that stamps each output record visible,
reading the same records alone (a case whose output comes near that rate measures the observer as much as the
connector), and the open-loop load generator alone, asked for far more than it can send through the link the cases'
load takes (a case searched up to that rate is load-bound, not measured)."""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import asdict, dataclass

__all__ = ["RawCeiling", "generator_ceiling", "measure_raw_ceiling", "raw_consume"]

#: Records a ceiling is measured with: enough for a steady rate (~1 s at librdkafka's pace here), bounded in time.
_CEILING_RECORDS = 200_000
#: The generator's ceiling: asked for this many records/s (above what librdkafka alone takes here) for this long.
_GENERATOR_ASKED = 1_000_000.0
_GENERATOR_SECONDS = 2.0


@dataclass(frozen=True)
class RawCeiling:
    """Records/s and MB/s of a producer (acks=all, idempotent, as a careful application) and of a read_committed
    consumer, straight to the broker."""

    produce_records_per_s: float
    produce_mb_per_s: float
    consume_records_per_s: float
    consume_mb_per_s: float
    records: int
    record_bytes: int
    #: the harness's Kafka observer reading the same records alone (no load generator beside it); None: not measured
    observer_records_per_s: float | None = None
    #: the open-loop load generator alone (locust, the cases' users and processes), asked for more than it can send
    load_generator_records_per_s: float | None = None

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def raw_consume(bootstrap: str, topic: str) -> int:
    """Read ``topic`` from the beginning to its end (read_committed) in this process; the records read."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from streamcert.harness.stack.kafka_clients import client_conf, end_offsets

    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(client_conf(bootstrap, **{"group.id": f"bench-{uuid.uuid4().hex[:6]}",
                                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                                  "enable.partition.eof": True}))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    count, done = 0, {p for p, end in ends.items() if end == 0}
    try:
        while len(done) < len(ends):
            for msg in consumer.consume(10000, timeout=0.2):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                        continue
                    raise RuntimeError(msg.error().str())
                count += 1
    finally:
        consumer.close()
    return count


def _raw_produce(bootstrap: str, topic: str, records: int, record_bytes: int, partitions: int) -> float:
    """Seconds to produce ``records`` values of ``record_bytes`` and have every one acknowledged."""
    from confluent_kafka import Producer

    from streamcert.harness.stack.kafka_clients import client_conf

    producer = Producer(client_conf(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                                  "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}))
    value = bytes(record_bytes)
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(err.str())

    began = time.perf_counter()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=str(index % 1000).encode(), partition=index % partitions,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    seconds = time.perf_counter() - began
    if remaining or failures:
        raise RuntimeError(f"the raw producer lost {remaining} record(s) in flight and {len(failures)} failed "
                           f"(first: {failures[:1]})")
    return seconds


def measure_raw_ceiling(bootstrap_direct: str, record_bytes: int, partitions: int = 4,
                        records: int = _CEILING_RECORDS, load: tuple[str, int] | None = None) -> RawCeiling:
    """Produce ``records`` into a new topic, then read them back; both timed. ``bootstrap_direct``: the broker's
    own address, not the proxy's. ``load``: the bootstrap and users of the cases' open-loop load, whose
    generator is then measured alone too (:func:`generator_ceiling`)."""
    from streamcert.harness.stack.kafka_clients import create_topic

    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap_direct, topic, partitions=partitions)
    produce_s = _raw_produce(bootstrap_direct, topic, records, record_bytes, partitions)
    began = time.perf_counter()
    read = raw_consume(bootstrap_direct, topic)
    consume_s = time.perf_counter() - began
    if read != records:
        raise RuntimeError(f"the raw consumer read {read} of the {records} records produced")
    observer_s = _observer_read_seconds(bootstrap_direct, topic, records)
    generator = generator_ceiling(load[0], load[1], record_bytes, partitions) if load else None
    mb = records * record_bytes / 1e6
    return RawCeiling(produce_records_per_s=round(records / produce_s, 1), produce_mb_per_s=round(mb / produce_s, 3),
                      consume_records_per_s=round(records / consume_s, 1), consume_mb_per_s=round(mb / consume_s, 3),
                      records=records, record_bytes=record_bytes,
                      observer_records_per_s=round(records / observer_s, 1) if observer_s else None,
                      load_generator_records_per_s=generator)


def generator_ceiling(bootstrap: str, users: int, record_bytes: int, partitions: int,
                      asked: float = _GENERATOR_ASKED, seconds: float = _GENERATOR_SECONDS) -> float | None:
    """Records/s the open-loop load generator sends when asked for ``asked`` records/s over ``seconds``: its rate
    over the records it sent (it falls behind at once and sends whatever is overdue as fast as it can). None when
    it sent fewer than two records."""
    import tempfile
    from pathlib import Path

    from streamcert.harness.run.load import run_open_loop
    from streamcert.harness.run.workload import WorkloadSpec
    from streamcert.harness.stack.kafka_clients import create_topic

    topic = f"bench-generator-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=partitions)
    spec = WorkloadSpec(total=int(asked * seconds), keys=max(users, 1000), partitions=partitions,
                        record_bytes=record_bytes, rate=asked, seed=1)
    with tempfile.TemporaryDirectory(prefix="streamcert-generator-") as workdir:
        result = run_open_loop(bootstrap, topic, spec, seconds, users, Path(workdir))
    return round(result.achieved_rate, 1) if math.isfinite(result.achieved_rate) else None


def _observer_read_seconds(bootstrap: str, topic: str, records: int, timeout_s: float = 120.0) -> float | None:
    """Seconds the run's Kafka observer takes to read and decode ``records`` of ``topic`` from the start; None when
    it did not finish within ``timeout_s``."""
    from streamcert.harness.run.observers.base import OutputTarget
    from streamcert.harness.run.observers.kafka import KafkaObserver

    observer = KafkaObserver(OutputTarget("kafka", topic, bootstrap_servers=bootstrap))
    began = time.perf_counter()
    with observer:
        deadline = began + timeout_s
        while observer.count() < records and time.perf_counter() < deadline and observer.error is None:
            time.sleep(0.01)
        seconds = time.perf_counter() - began
        done = observer.count() >= records
    return seconds if done else None
