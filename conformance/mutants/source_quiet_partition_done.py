"""MUTANT, BROKEN ON PURPOSE: a source whose reader takes a partition that went quiet for a second as read to its end.

The bug: a reader task that gets no record for a second ("the broker is slow; the rest comes in the next batch")
ends its task with what it read, where the reference waits ``pollTimeoutMs`` and then fails the task (Spark retries
it). The batch's offsets say the whole range was read: what the task did not get is never read. On a healthy link a
task's records come in milliseconds; a link cut, a broker paused or killed while a task reads leaves it without
records for longer. SRC-8 (the source survives network and broker faults without loss) must catch it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]

#: How long the reader waits for a quiet partition.
_QUIET_MS = 1000


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(dataclasses.replace(options, poll_timeout_ms=min(options.poll_timeout_ms, _QUIET_MS)))

    def read(self, partition) -> Iterator:
        try:
            yield from super().read(partition)
        except TimeoutError:
            return  # BUG: the rest of the range is taken as read


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-quiet-partition-done"


class QuietPartitionDone(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-quiet-partition-done"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = QuietPartitionDone()
