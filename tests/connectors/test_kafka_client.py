"""The reference Kafka connectors' client helpers: reads that do not wait out consume()'s timeout; kept consumers."""

from __future__ import annotations

import pytest

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


class _FakeConsumer:
    def __init__(self) -> None:
        self.assigned, self.closed = True, False

    def unassign(self) -> None:
        self.assigned = False

    def close(self) -> None:
        self.closed = True


def test_kept_consumers_are_reused_unassigned_and_one_whose_user_failed_is_closed_not_kept():
    from streamcert.connectors.kafka_client import KeptConsumers

    pool, made = KeptConsumers(), []

    def make():
        made.append(_FakeConsumer())
        return made[-1]

    with pool.take(("a",), make) as first:
        pass
    with pool.take(("a",), make) as again:
        assert again is first and len(made) == 1
    assert pool.idle == {("a",): first} and not first.assigned and not first.closed
    with pool.take(("a",), make) as outer, pool.take(("a",), make) as inner:  # two users at once: two consumers
        assert outer is first and inner is not first
    assert pool.idle == {("a",): inner} and outer.closed  # one is kept per key, the other closed
    with pytest.raises(RuntimeError), pool.take(("a",), make) as failing:
        raise RuntimeError("the read failed")
    assert failing.closed and pool.idle == {}
