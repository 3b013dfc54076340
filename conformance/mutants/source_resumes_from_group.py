"""MUTANT, BROKEN ON PURPOSE: a source that records its position in a consumer group as it plans a batch, and
resumes from there rather than from the start offsets Spark restored.

The bug: ``latestOffset`` commits the end offsets it hands Spark to a consumer group ("the range is taken: note how
far we got, as a Kafka consumer would") and, once per driver, the source plans its first batch from the group's
offsets instead of the ``start`` Spark hands it. A driver that dies after a batch was planned and before Spark
committed it (planning, reading, writing, the commit) restarts with the group already past that batch: the replay
reads nothing of it, and its records never reach the output. SRC-1 must catch it as lost records.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import from_json, to_json
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR", "group_offsets", "commit_to_group"]


def _group(options) -> str:
    return "mutant-progress-" + "-".join(options.topics)


def _consumer(options):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": options.bootstrap_servers, "group.id": _group(options),
                     "enable.auto.commit": False, **options.kafka_conf})


def commit_to_group(options, offsets: dict) -> None:
    """Commit ``offsets`` ({topic: {partition: offset}}) to the mutant's group."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(options)
    try:
        consumer.commit(offsets=[TopicPartition(t, int(p), o) for t, parts in offsets.items()
                                 for p, o in parts.items()], asynchronous=False)
    finally:
        consumer.close()


def group_offsets(options, like: dict) -> dict:
    """The group's committed offsets for the partitions of ``like``; a partition the group has none for keeps its
    offset from ``like``."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(options)
    try:
        asked = [TopicPartition(t, int(p)) for t, parts in like.items() for p in parts]
        found = consumer.committed(asked, timeout=10)
    finally:
        consumer.close()
    out = {t: dict(parts) for t, parts in like.items()}
    for tp in found:
        if tp.offset >= 0:
            out[tp.topic][tp.partition] = tp.offset
    return out


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._resumed = False

    def partitions(self, start: dict, end: dict) -> list:
        if not self._resumed:  # a fresh driver resumes where the group says it got to, not at Spark's start
            self._resumed = True
            start = to_json(group_offsets(self.options, from_json(start)))
        return super().partitions(start, end)

    def latestOffset(self, start: dict, limit) -> dict:
        end = super().latestOffset(start, limit)
        commit_to_group(self.options, from_json(end))  # BUG: the position moves before Spark committed the batch
        return end


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-resumes-from-group"


class ResumesFromGroup(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-resumes-from-group"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = ResumesFromGroup()
