"""When a run stops waiting for records that have not arrived: all seen, the pipeline settled, or a quiet bound.

A run waits for every acknowledged record to become visible. A connector that lost records never shows them, and
waiting out a fixed silence (``quiet_timeout_s``, a minute or more: a restarted driver on a loaded machine may show
nothing for that long) costs every lossy run that minute. The pipeline itself says sooner that nothing more will
come:

- without an aggregator, the query is *idle*: Spark reported it idle (a trigger found no new data in any source:
  the driver's ``idle`` event) after the current attempt's last batch, no batch is pending in the checkpoint, and
  neither the checkpoint nor the output changed for ``settle_s``;
- with an aggregator, batches keep running (timers, ticks), so it is *drained*: the output has not changed for
  ``settle_s`` plus the aggregator's longest wait, while at least :data:`DRAIN_BATCHES` batches committed (each
  fires the timers that are due: a record still buffered then is overdue, which is the aggregator's finding);
- the driver is no longer running (it failed, or a bounded query ended): nothing more can come once the output
  stayed unchanged for ``settle_s``.

The reason is recorded in the run's history (``quiesced``), so a verdict says why the run stopped waiting.

Runs in the harness process, polled by :func:`wait_until_seen` from :func:`~streamcert.harness.scenario.run_scenario`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUSY_QUIET_FACTOR", "DRAIN_BATCHES", "Settling", "wait_until_seen"]

#: Batches an aggregator's query must commit with no new output before it counts as drained.
DRAIN_BATCHES = 3
#: While batches keep running, the quiet bound on the output alone is this many times ``quiet_timeout_s``.
BUSY_QUIET_FACTOR = 3


@dataclass
class Settling:
    """What the wait has seen so far; :meth:`settled` says whether the pipeline settled ``now``.

    ``aggregator_wait_s`` is the aggregator's longest wait (None without an aggregator); ``settle_s`` 0 disables
    settling (only all-seen or the quiet bound end the wait).
    """

    settle_s: float
    aggregator_wait_s: float | None = None
    output_count: int = -1
    output_changed_at: float = field(default_factory=time.monotonic)
    checkpoint: tuple[int | None, int | None] | None = None
    checkpoint_changed_at: float = field(default_factory=time.monotonic)
    commit_at_output_change: int | None = None

    def observe(self, output_count: int, checkpoint: tuple[int | None, int | None], now: float) -> None:
        """Note the output's row count and the checkpoint's (latest commit, pending batch) at ``now``."""
        if checkpoint != self.checkpoint:
            self.checkpoint, self.checkpoint_changed_at = checkpoint, now
        if output_count != self.output_count:
            self.output_count, self.output_changed_at = output_count, now
            self.commit_at_output_change = checkpoint[0]

    def settled(self, now: float, driver_running: bool, reported_idle: bool) -> str | None:
        """Why nothing more will come (``idle``, ``drained``, ``driver_exited``), or None."""
        if self.settle_s <= 0:
            return None
        output_still = now - self.output_changed_at
        if not driver_running:
            return "driver_exited" if output_still >= self.settle_s else None
        if self.checkpoint is None:
            return None
        latest_commit, pending = self.checkpoint
        if self.aggregator_wait_s is None:
            still = min(output_still, now - self.checkpoint_changed_at)
            return "idle" if reported_idle and pending is None and still >= self.settle_s else None
        ran = (latest_commit or -1) - (-1 if self.commit_at_output_change is None else self.commit_at_output_change)
        if output_still >= self.settle_s + self.aggregator_wait_s and ran >= DRAIN_BATCHES:
            return "drained"
        return None


def wait_until_seen(observer: Any, driver: Any, expected: set[int], quiet_timeout_s: float,
                    settling: Settling) -> dict[str, Any]:
    """Wait until every ``expected`` id is visible, the pipeline settled, or nothing new arrived and the checkpoint
    did not move for ``quiet_timeout_s``; returns why (``reason``: ``all_seen``, a :meth:`Settling.settled` reason, or
    ``quiet_timeout``) and how long it waited."""
    began = time.monotonic()
    while True:
        now = time.monotonic()
        frame = observer.frame()
        if expected <= set(frame["id"]):
            time.sleep(1.0)  # let late duplicates arrive: they are findings too
            return {"reason": "all_seen", "waited_s": round(time.monotonic() - began, 3)}
        state = driver.checkpoint()
        settling.observe(len(frame), (state.latest_commit, state.pending), now)
        # quiet: no new output and no batch planned or committed (a slow first batch on a loaded machine is not);
        # batches that go on and on without output (an aggregator's ticks) get a longer bound, never none
        if (now - max(settling.output_changed_at, settling.checkpoint_changed_at) >= quiet_timeout_s
                or now - settling.output_changed_at >= BUSY_QUIET_FACTOR * quiet_timeout_s):
            return {"reason": "quiet_timeout", "waited_s": round(now - began, 3)}
        if now - settling.output_changed_at < settling.settle_s:
            time.sleep(0.2)
            continue
        running = driver.is_running()
        reason = settling.settled(now, running, running and _reported_idle(driver))
        if reason:
            return {"reason": reason, "waited_s": round(now - began, 3)}
        time.sleep(0.2)


def _reported_idle(driver: Any) -> bool:
    """The current attempt's latest query event is ``idle``: no batch ran since Spark found no new data."""
    states = [e["event"] for e in driver.events(driver.attempt) if e.get("event") in ("started", "progress", "idle")]
    return bool(states) and states[-1] == "idle"
