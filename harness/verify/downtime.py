"""The time a run's query was down: from a fault that took its driver away (a kill, a rescale's stop) until the
restarted query finished its first batch.

A batch aggregator's time flush cannot fire while no query runs, so its flush rule does not count this time
against a record's wait (:class:`~streamcert.harness.verify.checkers.AggregatorBatchChecker`'s ``pauses``): the
allowance is what the run measured, not a flat guess that a slower machine outgrows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["driver_downtime", "overlap_s"]


def driver_downtime(history: Iterable[dict[str, Any]], driver_events: Iterable[dict[str, Any]],
                    run_end: float | None = None) -> list[tuple[float, float]]:
    """Periods ``(start, end)`` in epoch seconds, sorted and merged, when the query was down.

    ``history`` is the run's (a driver fault's ``fault-stop`` names the ``attempt`` it started); ``driver_events``
    the driver's (``progress`` events with ``attempt`` and ``time``). A period ends at the first progress of that
    attempt or a later one; without any, at ``run_end`` (or never: infinity).
    """
    progress = sorted((event["time"], event["attempt"]) for event in driver_events
                      if event.get("event") == "progress" and "time" in event and "attempt" in event)
    periods, began = [], None
    for event in history:
        if event.get("target") != "driver":
            continue
        if event.get("kind") == "fault-start":
            began = event["time"]
        elif event.get("kind") == "fault-stop" and began is not None and event.get("attempt") is not None:
            periods.append((began, _first_progress(progress, event["attempt"], began, run_end)))
            began = None
    return _merged(periods)


def overlap_s(starts: np.ndarray, ends: np.ndarray, periods: Sequence[tuple[float, float]]) -> np.ndarray:
    """Seconds of each interval ``[starts[i], ends[i]]`` that fall in ``periods`` (disjoint)."""
    total = np.zeros(np.shape(starts), dtype=np.float64)
    for start, end in periods:
        total += np.clip(np.minimum(ends, end) - np.maximum(starts, start), 0.0, None)
    return total


def _first_progress(progress: list[tuple[float, int]], attempt: int, after: float, run_end: float | None) -> float:
    for time, seen_attempt in progress:
        if seen_attempt >= attempt and time >= after:
            return time
    return run_end if run_end is not None else float("inf")


def _merged(periods: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(periods):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
