"""MUTANT, BROKEN ON PURPOSE: a source off by one at the end of each range.

The bug: each task stops one record before the ``until`` offset of its range (the end treated as inclusive and
then decremented), and the next batch starts at ``until``: the last record of every range is never read. Every
requirement that counts what was delivered must catch it (SRC-2's gaps, SRC-6 and SRC-9's lost records).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader, _Range

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def read(self, partition: _Range) -> Iterator:
        # BUG: one short at the end of every range
        short = _Range(partition.task, [(t, p, b, max(b, u - 1)) for t, p, b, u in partition.parts])
        yield from super().read(short)


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-off-by-one"


class OffByOne(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-off-by-one"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = OffByOne()
