"""MUTANT, BROKEN ON PURPOSE: a source that keeps its read position in driver memory.

The bug: ``partitions`` plans each batch from the end offsets this driver remembers planning last, ignoring the
start offsets Spark hands it from the checkpoint. A restarted driver remembers nothing and plans from the earliest
offsets, so every record before the restart is read again. SRC-1 (no loss or duplicate across a driver kill) must
catch it, as duplicates.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import to_json
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._planned_to: dict | None = None

    def partitions(self, start: dict, end: dict) -> list:
        # BUG: the driver's memory, not Spark's checkpointed start; empty after a restart
        begin = self._planned_to if self._planned_to is not None else to_json(self._broker_offsets("earliest"))
        self._planned_to = end
        return super().partitions(begin, end)


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-offsets-in-memory"


class OffsetsInMemory(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-offsets-in-memory"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = OffsetsInMemory()
