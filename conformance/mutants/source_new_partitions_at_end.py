"""MUTANT, BROKEN ON PURPOSE: a source that starts a partition discovered mid-run where that partition is when found.

The bug: when a batch's end offsets name a partition its start offsets do not (the topic grew while the query ran),
the source plans that partition from its end offset ("just found: nothing of it is ours yet", the habit of a
consumer whose ``auto.offset.reset`` is ``latest``) instead of from its earliest record. Whatever was written into
the new partition before the batch that found it is never read. SRC-5 must catch it as lost records, on a run that
writes into the added partition as soon as it exists (its witness); a run that adds a partition and writes nothing
into it passes this source.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import from_json, to_json
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def partitions(self, start: dict, end: dict) -> list:
        begin = from_json(start)
        # BUG: a partition the start offsets do not know starts at the end offset it was found with, not at 0
        found_at = {topic: {partition: begin.get(topic, {}).get(partition, until) for partition, until in parts.items()}
                    for topic, parts in from_json(end).items()}
        return super().partitions(to_json(found_at), end)


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-new-partitions-at-end"


class NewPartitionsAtEnd(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-new-partitions-at-end"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = NewPartitionsAtEnd()
