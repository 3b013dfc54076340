"""Ending a fault run's schedule at its first finding: the mutation benchmark's shortcut, never a certification's.

The mutation score asks one thing of each (mutant, seed) run: does the plan catch the bug. Once the output shows a
record delivered twice, nothing later can undo that finding (the checks judge everything the output ever showed):
the rest of the schedule can only make the run slower, not change whether it is caught. :class:`FirstFindingWatch`
reads the output as the run goes on (the observer's frame, by the same :class:`DuplicateChecker` the run is judged
with) and, at the first duplicate, cuts the fault timeline short: the fault under way finishes, no further one
starts (each records ``fault-cancelled``), and the run feeds, settles and is judged as any run is. Records lost
show only once a run settled, so a run that loses records and duplicates none goes through its whole schedule.

A certification never sets it (:attr:`Scenario.stop_at_first_finding`): its verdicts rest on the whole plan, its
coverage grid and every other check. Runs in the harness's process, a thread of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from streamcert.harness.verify.checkers import DuplicateChecker

__all__ = ["CutShort", "FirstFindingWatch"]


@runtime_checkable
class CutShort(Protocol):
    """What the watch ends: a fault timeline (:class:`~streamcert.harness.faults.timeline.FaultTimeline`)."""

    def cut_short(self, reason: str) -> None: ...

    def done(self) -> bool: ...


class FirstFindingWatch:
    """Watches ``observer``'s output every ``poll_s`` while ``timeline`` runs; at the first record delivered twice
    records ``first-finding`` in ``history`` and cuts the timeline short. ``exclude`` drops what the run does not
    judge (its warm-up records). A context manager; ``stop()`` is idempotent and safe without ``start()``."""

    def __init__(self, observer: Any, timeline: CutShort, history: Any,
                 exclude: Callable[[pd.DataFrame], pd.DataFrame] = lambda frame: frame, poll_s: float = 1.0) -> None:
        self.observer, self.timeline, self.history = observer, timeline, history
        self.exclude, self.poll_s = exclude, poll_s
        self.found: dict[str, Any] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "FirstFindingWatch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "FirstFindingWatch":
        self._thread = threading.Thread(target=self._run, name="first-finding", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(10)

    def look(self) -> dict[str, Any] | None:
        """One look at the output: the duplicate finding (its counts and first violation), or None."""
        frame = self.exclude(self.observer.frame())
        if frame.empty or "id" not in frame.columns:
            return None
        keys = frame["key"].to_numpy() if "key" in frame.columns else [""] * len(frame)  # keys do not decide it
        output = pd.DataFrame({"id": frame["id"].to_numpy(), "key": keys})
        result = DuplicateChecker().check(pd.DataFrame({"id": []}), output).to_dict()
        if result["valid"] is not False:
            return None
        return {"check": result["name"], "counts": result["counts"], "first": (result["violations"] or [None])[0]}

    def _run(self) -> None:
        while not self._stopping.wait(self.poll_s):
            if self.timeline.done():
                return
            found = self.look()
            if found is not None:
                self.found = found
                self.history.record("first-finding", **found)
                self.timeline.cut_short(f"the run stopped at its first finding ({found['check']}): the rest of "
                                        "its schedule cannot change whether it is caught")
                return
