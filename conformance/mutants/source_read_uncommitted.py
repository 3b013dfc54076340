"""MUTANT, BROKEN ON PURPOSE: a source that reads without read_committed.

The bug: its consumers and end offsets use ``isolation.level=read_uncommitted`` (librdkafka's default is
read_committed; this source forgot to keep it): records of aborted transactions are read and emitted. SRC-6
(read_committed: no aborted record) must catch it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Source(KafkaOffsetSource):
    @classmethod
    def name(cls) -> str:
        return "mutant-source-read-uncommitted"

    def streamReader(self, schema) -> KafkaStreamReader:
        # BUG: the isolation level the user asked for is dropped
        return KafkaStreamReader(dataclasses.replace(self.parsed, isolation_level="read_uncommitted"))


class ReadUncommitted(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-read-uncommitted"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = ReadUncommitted()
