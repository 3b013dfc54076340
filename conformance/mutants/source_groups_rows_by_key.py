"""MUTANT, BROKEN ON PURPOSE: a source whose reader groups each chunk's records by key with an unstable sort.

The bug: before handing a chunk of records to Spark, the reader sorts it by key ("so a downstream aggregation finds
a key's records together") with NumPy's default sort, quicksort, which is not stable: a key's records of one
partition come out in another order than their offsets. Nothing is lost or repeated; SRC-2 (a partition's records
reach the query in offset order) must catch it, and SRC-6, judged on the same baseline run, must still pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def read(self, partition) -> Iterator[pa.RecordBatch]:
        for batch in super().read(partition):
            keys = np.array([b"" if key is None else key for key in batch.column("key").to_pylist()], dtype=object)
            # BUG: quicksort reorders the records of one key
            yield batch.take(pa.array(np.argsort(keys, kind="quicksort")))


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-groups-rows-by-key"


class GroupsRowsByKey(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-groups-rows-by-key"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = GroupsRowsByKey()
