"""The run's history: timestamped events (fault started, fault stopped, notes), in order.

Wall-clock time lines events up with the observer's measurements; the
monotonic clock orders them even if the wall clock jumps.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["History", "fault_windows"]


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


def fault_windows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Each fault of a run's history as ``{fault, target, start_s, stop_s}``, in seconds since the run began (the
    origin of its timeline); ``stop_s`` is None for a fault still active when the run ended."""
    history = run.get("history") or []
    if not history:
        return []
    origin = history[0]["time"]
    windows: list[dict[str, Any]] = []
    open_ones: dict[tuple, dict[str, Any]] = {}
    for event in history:
        key = (event.get("fault"), event.get("target"))
        if event.get("kind") == "fault-start":
            window = {"fault": key[0], "target": key[1], "start_s": event["time"] - origin, "stop_s": None}
            windows.append(window)
            open_ones[key] = window
        elif event.get("kind") == "fault-stop" and key in open_ones:
            open_ones.pop(key)["stop_s"] = event["time"] - origin
    return windows
