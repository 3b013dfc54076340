"""MUTANT, BROKEN ON PURPOSE: a source that splits restored offsets evenly across its tasks (seed 000).

The bug: the first batch a reader plans (on a fresh start, and after every restart from restored offsets) puts
the partitions into tasks in even contiguous slices, as Flink's ListState redistribution did in seed 000, instead
of by the assignment rule every later batch uses. No record is lost or repeated, but the same partitions and
parallelism are read by different tasks after a restart. SRC-3 (balanced, deterministic assignment) must catch it.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import from_json, ranges
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader, _Range

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._restored = True

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_restored": True}

    def partitions(self, start: dict, end: dict) -> list:
        if not self._restored:
            return super().partitions(start, end)
        self._restored = False
        # BUG: restored offsets dealt out in even slices, not by the assignment rule
        work = sorted(ranges(from_json(start), from_json(end)), key=lambda r: (r[0], r[1]))
        if not work:
            return []
        tasks = min(len(work), self.options.reader_parallelism or len(work))
        size = -(-len(work) // tasks)
        return [_Range(task, work[task * size:(task + 1) * size]) for task in range(tasks) if work[task * size:]]


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-even-split"


class EvenSplit(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-even-split"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = EvenSplit()
