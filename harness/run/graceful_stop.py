"""Stopping a running micro-batch query between two batches, even when its batches run back to back.

Spark's ``StreamingQuery.stop()`` interrupts the batch in flight: its offsets are written, its commit is
not, and the next start replays it. The harness needs a stop that lets the current batch commit (GEN-3's
"last batch committed", the offline state repartition). Waiting for ``isTriggerActive`` to turn false
works only when the trigger leaves gaps; a query whose batches take longer than its trigger interval
(or with ``processingTime="0 seconds"``) never shows one to a poller.

:func:`stop_between_batches` makes the gap instead. The query thread of a ``MicroBatchExecution`` takes
the query's progress lock (``awaitProgressLock``) at three places per trigger: to plan the next batch
(``constructNextBatch``), to write the commit log (end of ``runBatch``) and, once the trigger is over,
to signal progress waiters. The driver's thread (through py4j) holds that lock until the query thread
queues on it, reads where it waits from its stack, and marks the query terminated only while it waits
at the last place: the batch is committed and nothing of the next is written, so the query thread
ends at its trigger's own ``isActive`` check, as if the trigger executor had run out. Elsewhere the
lock is released and taken again. When the JVM internals are not there (another Spark line, Spark
Connect), the poll of ``isTriggerActive`` is the fallback.

Runs in the driver process (:mod:`streamcert.harness.run.driver`), on the thread that asks the stop.
"""

from __future__ import annotations

import time

__all__ = ["stop_between_batches"]

#: How long to hold the progress lock waiting for the query thread to queue on it (seconds). A batch
#: in flight queues at its commit; an idle query only at its next trigger.
_HOLD_S = 0.05

#: Where the query thread waits on the progress lock, by the method that asked for it.
_PLANNING, _COMMITTING, _TRIGGER_DONE = "planning", "committing", "trigger done"


def stop_between_batches(query, timeout: float = 30.0) -> str:
    """Stop ``query`` (a pyspark ``StreamingQuery``) with no batch left planned but uncommitted, if it can
    within ``timeout`` s; then ``query.stop()`` whatever is left. Return how it stopped: ``"between
    batches"``, ``"while idle"``, ``"ended by itself"``, or ``"interrupted"`` (the bound passed, or the
    query's internals were not reachable and no gap was seen)."""
    deadline = time.monotonic() + timeout
    try:
        execution = _JvmExecution(query)
    except Exception:  # noqa: BLE001 - not a JVM micro-batch query: poll for a gap instead
        return _stop_at_a_gap(query, deadline)
    how = "interrupted"
    while time.monotonic() < deadline and query.isActive:
        outcome = execution.try_terminate_between_batches()
        if outcome:
            how = outcome
            break
        time.sleep(0.002)
    if how != "interrupted":
        # the query thread leaves its trigger loop by itself; stop() then only cleans up
        query.awaitTermination(max(1.0, deadline - time.monotonic()))
    elif not query.isActive:
        how = "ended by itself"
    query.stop()
    return how


def _stop_at_a_gap(query, deadline: float) -> str:
    while time.monotonic() < deadline and query.isActive and query.status.get("isTriggerActive"):
        time.sleep(0.01)
    gap = query.isActive and not query.status.get("isTriggerActive")
    query.stop()
    return "while idle" if gap else "interrupted"


class _JvmExecution:
    """The query's ``MicroBatchExecution`` seen through py4j: its progress lock, its thread, its state."""

    def __init__(self, query) -> None:
        execution = query._jsq.streamingQuery()
        self._lock = execution.awaitProgressLock()
        self._thread = execution.queryExecutionThread()
        self._state = execution.state()
        self._query = query
        package = self._state.get().getClass().getPackage().getName()
        jvm = query._jsq.getClass().getClassLoader().loadClass  # the classes Spark itself loaded
        self._terminated = jvm(f"{package}.TERMINATED$").getField("MODULE$").get(None)

    def try_terminate_between_batches(self) -> str | None:
        """One look: hold the lock, see where the query thread waits, mark it terminated if that is between
        batches. Return how it stopped, or None to look again."""
        if not self._lock.tryLock():
            return None
        try:
            site = self._queued_site()
            if site == _TRIGGER_DONE:
                self._state.set(self._terminated)
                return "between batches"
            if site is None and not self._query.status.get("isTriggerActive"):
                return self._terminate_while_idle()
            return None
        finally:
            self._lock.unlock()

    def _terminate_while_idle(self) -> str | None:
        """No trigger runs and the lock is ours, so no batch can be planned now. One can have passed its
        ``isActive`` check without announcing itself yet: if it then queues to plan, take the mark back."""
        previous = self._state.get()
        self._state.set(self._terminated)
        if self._queued_site() == _PLANNING:
            self._state.set(previous)
            return None
        return "while idle"

    def _queued_site(self) -> str | None:
        hold_until = time.monotonic() + _HOLD_S
        while not self._lock.hasQueuedThread(self._thread):
            if time.monotonic() > hold_until or not self._thread.isAlive():
                return None
            time.sleep(0.001)
        return _site_of(self._thread.getStackTrace())


def _site_of(frames) -> str:
    """Which of the three callers of ``withProgressLocked`` the query thread waits in."""
    names = [frame.getMethodName() for frame in frames]
    try:
        caller = names[names.index("withProgressLocked") + 1]
    except (ValueError, IndexError):
        return _PLANNING  # not a place this module knows: never stop there
    if "constructNextBatch" in caller:
        return _PLANNING
    if "runBatch" in caller:
        return _COMMITTING
    return _TRIGGER_DONE
