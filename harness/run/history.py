"""The run's history: timestamped events (fault started, fault stopped, notes), in order.

Wall-clock time lines events up with the observer's measurements; the
monotonic clock orders them even if the wall clock jumps.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["History"]


class History:
    """Append-only, thread-safe list of events."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.started_monotonic = time.monotonic()

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"kind": kind, "time": time.time(),
                 "elapsed_s": round(time.monotonic() - self.started_monotonic, 6), **fields}
        with self._lock:
            self._events.append(event)
        return event

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._events if kind is None or e["kind"] == kind]

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)
