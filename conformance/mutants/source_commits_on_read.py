"""MUTANT, BROKEN ON PURPOSE: a source whose reader tasks commit their progress to a consumer group as they read,
and that resumes from there.

The bug: each reader task commits the end of the range it read to a consumer group when it is done ("auto-commit
after processing") and the source plans its first batch after a start from the group's offsets rather than the
``start`` Spark restored. A driver that dies after a batch's tasks read and before Spark committed the batch (read
done, writing, the commit in flight) restarts past the records of that batch: the replay reads nothing of them and
they never reach the output. SRC-1 must catch it as lost records.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.conformance.mutants.source_resumes_from_group import commit_to_group, group_offsets
from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_offsets import from_json, to_json
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._resumed = False

    def partitions(self, start: dict, end: dict) -> list:
        if not self._resumed:  # a fresh driver resumes where the group says the readers got to
            self._resumed = True
            start = to_json(group_offsets(self.options, from_json(start)))
        return super().partitions(start, end)

    def read(self, partition) -> Iterator:
        yield from super().read(partition)
        # BUG: the progress is committed when the task read it, before Spark committed the batch
        ends: dict = {}
        for topic, part, _begin, until in partition.parts:
            ends.setdefault(topic, {})[part] = until
        commit_to_group(self.options, ends)


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-commits-on-read"


class CommitsOnRead(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-commits-on-read"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = CommitsOnRead()
