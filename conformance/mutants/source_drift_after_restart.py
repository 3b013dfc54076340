"""MUTANT, BROKEN ON PURPOSE: a source whose event-time alignment does not survive a restart.

The bug: the reader sets its alignment up in ``initialOffset()``, which Spark calls only for a query without a
checkpoint. A restarted driver resumes from the checkpoint without calling it, so every batch after a restart is
read uncapped: a partition far ahead in event time, held back until then, reaches the query at once (SRC-11's
drift). Before the restart it aligns as the reference source does.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._set_up_later, self._aligner = self._aligner, None

    def initialOffset(self) -> dict:
        # BUG: the only place the alignment is switched on; a query restarted from its checkpoint never calls it
        self._aligner = self._set_up_later
        return super().initialOffset()


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-drift-after-restart"


class DriftAfterRestart(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-drift-after-restart"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = DriftAfterRestart()
