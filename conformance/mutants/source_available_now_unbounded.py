"""MUTANT, BROKEN ON PURPOSE: a source that does not fix the end of a bounded (AvailableNow) run.

The bug: ``prepareForTriggerAvailableNow`` is left a no-op ("Spark stops the query once a batch finds nothing new"),
so each batch of an AvailableNow query reads up to the broker's latest offsets at that batch, not at the query's
start: records produced while the query runs are read too, and a topic that keeps receiving records never lets the
query end. SRC-7 must catch it: the bounded run's last committed offsets are past the end offsets taken at its start.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def prepareForTriggerAvailableNow(self) -> None:
        return None  # BUG: no end fixed at the start: every batch reads to the broker's latest


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-available-now-unbounded"


class AvailableNowUnbounded(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-available-now-unbounded"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = AvailableNowUnbounded()
