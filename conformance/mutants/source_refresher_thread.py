"""MUTANT, BROKEN ON PURPOSE: a source whose driver-side reader starts a metadata refresher and never stops it.

The bug: on its first ``latestOffset`` the reader starts a background thread that looks the input's partitions up
every second (so that the next batch's plan is ready sooner), as a plain thread: not a daemon, and ``stop()`` does
not end it. When the query stops, Spark closes the planner process's socket and the process exits its main thread,
but the interpreter waits for the refresher for ever: a process of the connector outlives the query. Every record is
read once; GEN-3 (the query stops cleanly, nothing of the connector left running) must catch it, and GEN-1 (progress
reported), judged on the same run, must still pass.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_source import KafkaOffsetSource, KafkaStreamReader

__all__ = ["CONNECTOR"]


class _Reader(KafkaStreamReader):
    def __init__(self, options) -> None:
        super().__init__(options)
        self._refresher: threading.Thread | None = None
        self._known_partitions: dict[str, list[int]] = {}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if getattr(self, "_refresher", None) is None:
            # BUG: not a daemon, and nothing ever tells it to end
            self._refresher = threading.Thread(target=self._refresh, name="partition-refresher")
            self._refresher.start()
        return super().latestOffset(start, limit)

    def _refresh(self) -> None:
        while True:
            time.sleep(1.0)
            self._known_partitions = dict(self._known_partitions)  # where a fresh lookup's result would go


class _Source(KafkaOffsetSource):
    reader_class = _Reader

    @classmethod
    def name(cls) -> str:
        return "mutant-source-refresher-thread"


class RefresherThread(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-refresher-thread"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = RefresherThread()
