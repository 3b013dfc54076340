"""MUTANT, BROKEN ON PURPOSE: a source that applies its per-batch record limit to each partition.

The bug: ``maxRecordsPerBatch`` caps each partition's range in a batch instead of the batch's whole range (the
reading of "max records per batch" a per-partition reader suggests), so a batch over N partitions with a backlog
reads up to N times the limit. SRC-9 must catch it: a batch of a backlog read over three partitions holds more rows
than the limit.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import from_json, to_json
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader, ReadAllAvailable, ReadMaxRows

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if not isinstance(limit, ReadMaxRows) or start is None:
            return super().latestOffset(start, limit)
        end = from_json(super().latestOffset(start, ReadAllAvailable()))
        begin = from_json(start)
        # BUG: the limit caps each partition, not the batch
        capped = {topic: {partition: min(until, begin.get(topic, {}).get(partition, 0) + limit.max_rows)
                          for partition, until in parts.items()} for topic, parts in end.items()}
        self._planned_end = to_json(capped)
        return self._planned_end


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-limit-per-partition"


class LimitPerPartition(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-limit-per-partition"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = LimitPerPartition()
