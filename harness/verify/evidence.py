"""Evidence checks: verdicts read from a run's own history rather than its output.

``fault_reached`` says whether the faults of a schedule struck where they were aimed. A driver kill aimed at
Spark's offsets/commits window records ``in_window``; a kill or task failure at a connector's fault point
records ``reached``; a fault that could not be started records ``fault-error``. A kill at a random moment
(``aimed`` false) has no target to miss: it counts as struck wherever it landed; one that watched for a moment the
connector never showed (``absent``: output seen while tasks ran, which a correct sink never shows) is neither. When
one missed, the run did not test what it meant to, so the verdict is ``"unknown"``: never a pass, and not a failure
of the connector either.
Called in the harness's process after the run, on :meth:`~streamcert.harness.run.history.History.events`.

``query_failures`` says whether the query ever failed by itself: an attempt that Spark reports terminated with an
exception (the driver's ``terminated`` event carries it), rather than ended by the harness's kill or stop. A
connector that crashes its query when it resumes from a checkpoint has not resumed, whatever the output holds.
Errors of the driver child's own bridge to its JVM (a ``failed`` event without a ``terminated`` one) are not the
query's and are not counted, nor is a termination the driver child answered by starting the query again (a
``query_restarted`` event whose ``why`` the error carries: Spark failing to start one of its Python processes on
a busy machine).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from streamcert.harness.verify.checkers import MAX_VIOLATIONS, UNKNOWN, CheckResult

__all__ = ["fault_reached", "query_failures"]

#: Fields of a ``fault-start`` event that say whether the fault struck its target (the first one present).
_STRUCK_FIELDS = ("reached", "in_window")


def fault_reached(events: Iterable[dict[str, Any]]) -> CheckResult:
    """True when every fault of the run struck where it was aimed; ``"unknown"`` when one missed or none ran.

    Counts: ``faults`` (started or failed to start), ``struck``, ``missed``. Violations name each miss: the
    fault, its target, and what it recorded (the point, the pending batch).
    """
    struck, missed = 0, []
    for event in events:
        if event["kind"] == "fault-error":
            missed.append({"kind": "fault_error", "fault": event.get("fault"), "phase": event.get("phase"),
                           "error": event.get("error")})
        elif event["kind"] == "fault-start":
            if event.get("absent"):  # it watched for a moment the connector never showed (output seen from tasks)
                continue
            if event.get("cancelled") and not event.get("reached"):  # the run's first finding ended its watch
                continue
            hit = event.get("aimed") is False or next(
                (bool(event[name]) for name in _STRUCK_FIELDS if name in event), True)
            if hit:
                struck += 1
            else:
                missed.append({"kind": "missed", "fault": event.get("fault"), "target": event.get("target"),
                               **{k: event[k] for k in ("point", "pending_batch", "latest_commit") if k in event}})
    counts = {"faults": struck + len(missed), "struck": struck, "missed": len(missed)}
    valid: bool | str = True if struck and not missed else UNKNOWN
    result = CheckResult("fault_reached", valid, counts, missed[:MAX_VIOLATIONS])
    if valid is not True:
        result.error = ("no fault struck: the run did not exercise what it was meant to" if not missed else
                        f"{len(missed)} fault(s) missed their target: the verdict cannot rest on this run")
    return result


def query_failures(driver_events: Iterable[dict[str, Any]]) -> CheckResult:
    """True when no attempt's query terminated with an exception of its own; False, naming each one, otherwise.

    Counts: ``attempts`` (that started a query), ``failed``. Each violation: the attempt, the batches it had
    committed, and the exception's first lines (where Spark or the connector raised it).
    """
    started, failed, committed = set(), [], {}
    events = list(driver_events)
    # the driver started these again itself: Spark's own start-up failed (a Python process that did not connect
    # back in time on a busy machine), as many times as each attempt says
    restarts = [event for event in events if event.get("event") == "query_restarted"]
    excused = Counter((event.get("attempt"), event.get("why")) for event in restarts)
    for event in events:
        attempt = event.get("attempt")
        if event.get("event") == "started":
            started.add(attempt)
        elif event.get("event") == "progress":
            committed[attempt] = committed.get(attempt, 0) + 1
        elif event.get("event") == "terminated" and event.get("error"):
            why = next((why for (at, why), left in excused.items() if at == attempt and left and why
                        and why in str(event["error"])), None)
            if why is not None:
                excused[(attempt, why)] -= 1
                continue
            lines = [line.strip() for line in str(event["error"]).splitlines() if line.strip()]
            failed.append({"kind": "query_failed", "attempt": attempt, "batches_committed": committed.get(attempt, 0),
                           "error": " | ".join(lines[:3])[:600]})
    counts = {"attempts": len(started), "failed": len(failed), **({"restarted_by_driver": len(restarts)} if restarts
                                                                   else {})}
    result = CheckResult("query_failures", not failed, counts, failed[:MAX_VIOLATIONS])
    if failed:
        result.error = (f"the query failed by itself in {len(failed)} of {len(started)} attempt(s): "
                        f"{failed[0]['error'][:200]}")
    return result
