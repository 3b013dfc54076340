"""MUTANT, BROKEN ON PURPOSE: a source that plans a task for every reader slot, and whose idle tasks wait for a record.

The bug: the reader plans one task per configured reader slot whatever the partitions ("a stable task count"), and a
task reads until it has seen a record ("an empty read means the broker is slow"). A task given no partition, which
exists as soon as there are more reader tasks than partitions, polls for ever: its batch never ends and the query
stalls. With as many partitions as tasks nothing shows. SRC-10 (idle reader tasks do not stall the query) must catch
it, as records never delivered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_client import take
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader, _kept_reader, _Range

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def partitions(self, start: dict, end: dict) -> list:
        planned = super().partitions(start, end)
        if not planned:
            return planned
        slots = self.options.reader_parallelism or len(planned)
        busy = {task.task for task in planned}
        # a task for every slot, those with no partition included
        return planned + [_Range(slot, []) for slot in range(slots) if slot not in busy]

    def read(self, partition: _Range) -> Iterator:
        if partition.parts:
            yield from super().read(partition)
            return
        mine = {(topic, number) for topic, number, _begin, _until in partition.parts}
        with _kept_reader(self.options) as consumer:
            # BUG: a task reads until a record of its own came; one with no partition has none to come
            while not any(message.error() is None and (message.topic(), message.partition()) in mine
                          for message in take(consumer, 1, 0.5)):
                pass


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-idle-task-waits"


class IdleTaskWaits(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-idle-task-waits"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = IdleTaskWaits()
