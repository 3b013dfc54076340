"""The Kafka observer on the real broker: read_committed sees committed transactions only, in offset order."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from streamcert.harness.run.observers import OutputTarget, observer_for
from streamcert.harness.run.workload import encode_value
from streamcert.harness.stack.kafka_clients import client_conf, create_topic
from streamcert.harness.waiting import wait_for

pytestmark = pytest.mark.integration


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


def test_the_observer_knows_what_it_left_unread_from_its_client_without_asking_the_broker(stack):
    """The end offsets the client last fetched less its positions: none left once it read everything (a
    transaction's commit marker takes an offset no reader is given, so a marker or two per partition may show)."""
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"obs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    observer = observer_for(OutputTarget("kafka", topic, bootstrap))
    with observer:
        _produce_transactions(bootstrap, topic)
        wait_for(lambda: observer.count() >= 15, what="15 records", timeout=60)
        first = observer.read_lag()
        wait_for(lambda: observer.read_lag() is not None and observer.read_lag().samples >= 3 + (
            first.samples if first else 0), what="three samples after reading everything", timeout=30)
        lag = observer.read_lag()
    assert 0 <= lag.max_unread <= 20 and lag.behind_share == 0.0
    assert observer._unread[-1] <= 1  # everything read: nothing left but, at most, the last commit's marker
