"""The reference Kafka connectors' client helpers: reads that do not wait out consume()'s timeout."""

from __future__ import annotations

from streamcert.connectors.kafka_client import take


class _Consumer:
    """Records each ``consume(n, timeout)`` and hands out what it holds (at most ``n``)."""

    def __init__(self, queued: list) -> None:
        self.queued, self.calls = list(queued), []

    def consume(self, num_messages: int, timeout: float) -> list:
        self.calls.append((num_messages, timeout))
        given, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return given


def test_take_waits_only_for_the_first_message_then_takes_what_is_queued():
    consumer = _Consumer(range(5))
    assert take(consumer, 1000, 0.05) == [0, 1, 2, 3, 4]
    # the timeout is spent on the first one alone: asking 1000 with a timeout held 5 messages for all of it
    assert consumer.calls == [(1, 0.05), (999, 0)]


def test_take_returns_nothing_after_the_timeout_and_asks_once_for_one():
    consumer = _Consumer([])
    assert take(consumer, 500, 0.05) == [] and consumer.calls == [(1, 0.05)]
    consumer = _Consumer(["only"])
    assert take(consumer, 1, 0.05) == ["only"] and consumer.calls == [(1, 0.05)]
