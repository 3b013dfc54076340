"""Input that arrives while a run's faults happen, and stops with them.

A fault run needs full batches until its last fault struck (a kill aimed at a steady batch waits for several to
commit first, and one that missed tries the next). Written all at once, its workload must be sized for the worst
case, and whatever the faults did not use is drained after the last one: measured on the quick plan's kill runs,
17-34 batches after the last fault, 10-83 s a run (the aggregator's, at ~2 s a batch, the most).

A :class:`FeedGate` lets the load write its next transaction only while the input's readable records (those of
committed transactions: an aborted one's never are) are less than ``ahead`` batches ahead of what the query has
read, by Spark's progress reports of every attempt: the records they count, or a whole batch for each report that
read any, whichever is more (a source that loses records, or reads fewer than a batch's worth each time, must not
starve its query of input; a replayed batch counts again: both err on the side of more input, never of an empty
batch). A query that says it found nothing to read (an ``idle`` event, Spark's ``onQueryIdle``) after the gate began
holding a transaction back gets that transaction: its source is past what the reports count (a source that skipped
ahead when it restarted, say) and, held back, it would read nothing until the faults gave up on it. Once the fault
schedule is over it lets ``after`` more batches through and the load stops there: the ledger holds what was written,
and the rest of the planned workload never exists. The faults end the feed: each waits for its moment a bounded
time, so the schedule is over in bounded time whatever the query does. A query that reads nothing for ``stalled_s``
stops it too, a bound far above any fault's (kills that strike first batches keep a query from reporting any
progress for minutes: a restart, then a kill before its first batch ends, again and again).

Runs in the harness's process, called by the load (:func:`~streamcert.harness.run.workload.load_topic` or
:func:`~streamcert.harness.run.input_writer.load_with_writer`) before each planned transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["FeedGate", "consumed"]


def consumed(events: list[dict[str, Any]], batch: int) -> int:
    """Records the query read by its progress reports (every attempt's; a replayed batch counts again): what they
    count, or ``batch`` for each report that read any, whichever is more."""
    rows = [int(event.get("numInputRows") or 0) for event in events if event.get("event") == "progress"]
    return max(sum(rows), batch * sum(1 for count in rows if count > 0))


class FeedGate:
    """``gate(readable)``: may the load write its next transaction, ``readable`` records of committed transactions
    written so far? Blocks until it may (the query caught up), or returns False: the feed is over. ``ahead`` and
    ``after`` count batches of ``batch`` records; ``stopped_at`` says where it stopped (in readable records) and
    why."""

    def __init__(self, driver: Any, batch: int, ahead: int, after: int, faults_done: Callable[[], bool],
                 stalled_s: float = 900.0, poll_s: float = 0.25) -> None:
        if batch < 1 or ahead < 1 or after < 0:
            raise ValueError(f"batch and ahead must be at least 1, after at least 0 (got {batch}, {ahead}, {after})")
        self.driver, self.batch, self.faults_done = driver, batch, faults_done
        self.ahead, self.after = ahead * batch, after * batch
        self.stalled_s, self.poll_s = stalled_s, poll_s
        self.stopped_at: dict[str, Any] | None = None
        self._last_at: int | None = None

    def __call__(self, written: int) -> bool:
        if self.stopped_at is not None:
            return False
        read, moved_at, held_since = -1, time.monotonic(), time.time()
        while True:
            if self._last_at is None and self.faults_done():
                self._last_at = written + self.after
            if self._last_at is not None:
                return written < self._last_at or self._stop(written, "faults done", read)
            events = self.driver.events()
            now_read = consumed(events, self.batch)
            if now_read != read:
                read, moved_at = now_read, time.monotonic()
            if written - read < self.ahead or _idle_since(events, held_since):
                return True
            if time.monotonic() - moved_at >= self.stalled_s:
                return self._stop(written, "query read nothing", read)
            time.sleep(self.poll_s)

    def _stop(self, written: int, why: str, read: int) -> bool:
        self.stopped_at = {"records": written, "why": why, "read": read if read >= 0 else None}
        return False


def _idle_since(events: list[dict[str, Any]], since: float) -> bool:
    """Whether the query reported finding nothing to read after ``since`` (a wall-clock time)."""
    return any(event.get("event") == "idle" and float(event.get("time") or 0) > since for event in events)
