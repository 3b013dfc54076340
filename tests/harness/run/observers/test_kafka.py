"""The Kafka observer on the real broker: read_committed sees committed transactions only, in offset order."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from streamcert.harness.run.observers import OutputTarget, observer_for
from streamcert.harness.run.observers.kafka import KafkaObserver
from streamcert.harness.run.workload import encode_value
from streamcert.harness.stack.kafka_clients import client_conf, create_topic
from streamcert.harness.waiting import wait_for

def _produce_transactions(bootstrap: str, topic: str) -> None:
    """Ids 0-9 committed, 10-14 aborted, 15-19 committed: one partition, so offsets follow ids."""
    producer = Producer(client_conf(bootstrap, **{"transactional.id": f"obs-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(30)
    for ids, abort in ((range(0, 10), False), (range(10, 15), True), (range(15, 20), False)):
        producer.begin_transaction()
        for record_id in ids:
            producer.produce(topic, key=f"k{record_id % 3}".encode(), value=encode_value(record_id, record_id, 1.0, 64))
        producer.flush(30)  # an abort purges what is still queued: the aborted records must reach the log
        (producer.abort_transaction if abort else producer.commit_transaction)(30)


@pytest.mark.integration
@pytest.mark.parametrize(("isolation", "expected"), [
    ("read_committed", [*range(0, 10), *range(15, 20)]),
    ("read_uncommitted", list(range(20))),  # the same observer shows aborted records when asked to: it can fail
])
def test_the_observer_sees_what_a_reader_with_its_isolation_sees(stack, isolation, expected):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"obs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    observer = observer_for(OutputTarget("kafka", topic, bootstrap))
    observer.isolation = isolation
    with observer:
        _produce_transactions(bootstrap, topic)
        wait_for(lambda: observer.count() >= len(expected), what=f"{len(expected)} records", timeout=60)
    frame = observer.frame()
    assert list(frame["id"]) == expected and observer.error is None
    assert list(frame["key"][:3]) == ["k0", "k1", "k2"]
    assert list(frame["offset"]) == sorted(frame["offset"]) and set(frame["partition"]) == {0}


@pytest.mark.integration
def test_the_observer_knows_what_it_left_unread_from_its_client_without_asking_the_broker(stack):
    """The end a read_committed reader sees (the last stable offset, from the client's statistics) less what it
    was handed: none left once it read everything, and an open transaction's records are not unread (the high
    watermark counts them; a transaction's commit marker takes an offset no reader is given, so one may show)."""
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"obs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    observer = observer_for(OutputTarget("kafka", topic, bootstrap))
    open_transaction = Producer(client_conf(bootstrap, **{"transactional.id": f"obs-{uuid.uuid4().hex[:8]}"}))
    open_transaction.init_transactions(30)
    with observer:
        _produce_transactions(bootstrap, topic)
        open_transaction.begin_transaction()
        for record_id in range(100, 150):
            open_transaction.produce(topic, value=encode_value(record_id, record_id, 1.0, 64))
        open_transaction.flush(30)
        wait_for(lambda: observer.count() >= 15, what="15 records", timeout=60)
        first = observer.read_lag()
        wait_for(lambda: observer.read_lag() is not None and observer.read_lag().samples >= 3 + (
            first.samples if first else 0), what="three samples after reading everything", timeout=30)
        lag = observer.read_lag()
    open_transaction.abort_transaction(30)
    assert 0 <= lag.max_unread <= 20 and lag.behind_share == 0.0
    assert observer._unread[-1] <= 1  # everything read: nothing left but, at most, the last commit's marker


def _stats(partitions: dict[str, dict]) -> str:
    return json.dumps({"topics": {"out": {"partitions": {
        number: {"lo_offset": 0, "app_offset": -1001, **fields} for number, fields in partitions.items()}}}})


@pytest.mark.parametrize(("isolation", "expected"), [("read_committed", 10 + 40), ("read_uncommitted", 30 + 40 + 5)])
def test_unread_is_the_end_a_reader_of_the_isolation_level_sees_less_what_was_handed_over(isolation, expected):
    """read_committed: the last stable offset (an open transaction's records are not visible, so not unread);
    read_uncommitted: the high watermark. A partition nothing was handed from counts from its start; the
    client's placeholder partition -1 and ends not known yet count nothing."""
    observer = KafkaObserver(OutputTarget("kafka", "out", "127.0.0.1:1"), isolation=isolation)
    assert observer._unread_count() is None  # no statistics yet: it cannot tell
    observer._on_stats(_stats({"0": {"app_offset": 100, "ls_offset": 110, "hi_offset": 130},
                               "1": {"ls_offset": 40, "hi_offset": 40},  # nothing handed over yet
                               "2": {"app_offset": 7, "ls_offset": -1001, "hi_offset": 12},
                               "-1": {"ls_offset": 99, "hi_offset": 99}}))
    assert observer._unread_count() == expected
    observer._on_stats("not json")  # a garbled report keeps the last reading
    assert observer._unread_count() == expected


class _QueuedConsumer:
    """Hands over queued messages as librdkafka's ``consume(n, timeout)`` does: at once when ``n`` are queued,
    else after waiting out the whole timeout (counted in ``waited``, not slept)."""

    def __init__(self, queued: int) -> None:
        self.queued = [_Message(offset) for offset in range(queued)]
        self.waited = 0.0

    def consume(self, num_messages: int, timeout: float) -> list:
        if len(self.queued) < num_messages:
            self.waited += timeout
        taken, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return taken


class _Message:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self):
        return None

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return encode_value(self._offset, self._offset, 1.0, 64)

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


@pytest.mark.parametrize(("queued", "expected_rows"), [(5, 5), (25_000, 10_000), (0, 0)])
def test_a_round_takes_what_is_queued_at_once_and_waits_only_while_nothing_is(queued, expected_rows):
    """Rows are stamped visible when their round returns: a round that held five queued records until a
    10,000-record call timed out stamped them up to 0.1 s late. Only an empty queue may be waited on."""
    observer = KafkaObserver(OutputTarget("kafka", "out", "127.0.0.1:1"))
    observer._consumer = _QueuedConsumer(queued)
    observer._assigned = {0}
    observer._next_refresh = float("inf")
    rows = observer._read_new()
    assert (0 if rows is None else len(rows)) == expected_rows
    assert observer._consumer.waited == (0.1 if queued == 0 else 0.0)


def test_rounds_of_a_trickle_begin_at_least_a_round_period_apart(monkeypatch):
    """A trickle of output must not be read a record per round, hundreds of rounds a second: the next round
    waits out what is left of the period since the last one began (rows wait at most that long to be stamped)."""
    from streamcert.harness.run.observers import kafka

    slept: list[float] = []
    monkeypatch.setattr(kafka.time, "sleep", slept.append)
    observer = KafkaObserver(OutputTarget("kafka", "out", "127.0.0.1:1"))
    observer._consumer = _QueuedConsumer(3)
    observer._take_round()
    observer._consumer.queued = [_Message(7)]
    observer._take_round()
    assert slept[0] == 0.0 and 0.0 < slept[1] <= kafka._ROUND_PERIOD_S
