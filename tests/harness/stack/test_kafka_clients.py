"""kafka_clients without a broker: a full producer queue is retried until it drains, never forever."""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamcert.harness.stack.kafka_clients import _transient, produce


@pytest.fixture
def nowhere():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_full_queue_is_retried_while_it_drains(nowhere):
    # One message fits; each times out after 100 ms, which frees the queue for the next.
    began = time.monotonic()
    with pytest.raises(KafkaException) as info:
        produce(nowhere, "t", [(None, b"a"), (None, b"b"), (None, b"c")],
                conf={"queue.buffering.max.messages": 1, "message.timeout.ms": 100, "enable.idempotence": False},
                timeout=10)
    assert info.value.args[0].code() == KafkaError._MSG_TIMED_OUT
    assert time.monotonic() - began < 8


def test_a_queue_that_never_drains_fails_at_the_timeout(nowhere):
    began = time.monotonic()
    with pytest.raises(BufferError):
        produce(nowhere, "t", [(None, b"a"), (None, b"b")],
                conf={"queue.buffering.max.messages": 1, "message.timeout.ms": 60000, "enable.idempotence": False},
                timeout=0.5)
    assert time.monotonic() - began < 5


@pytest.mark.parametrize("error, healable", [
    (KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), True),
    (KafkaException(KafkaError(KafkaError._TRANSPORT)), True),
    (KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), False),
    (KafkaException("no error object"), False),
    (ValueError("not Kafka's"), False),
])
def test_only_transient_kafka_errors_are_retried(error, healable):
    assert _transient(error) is healable
