"""Carrying out a fault schedule: each fault started at its time, held for its duration, then stopped.

Every kind of run carries its schedule out here (a query's scenario, the cluster's acknowledged-writes run), so
every fault goes through the registry and records its ``fault-start`` / ``fault-stop`` (or ``fault-skip`` /
``fault-error``) in the run's :class:`~streamcert.harness.run.history.History` the same way.

Schedule semantics: a fault starts ``at_s`` seconds after the timeline began; an entry with ``after`` set starts
``at_s`` seconds after that earlier entry stopped, so faults can be chained (kill at one protocol step, then at the
next). A fault's ``duration_s`` is held once its start returned. A timeline that is cut short
(:meth:`FaultTimeline.cut_short`) starts no further fault: each records ``fault-cancelled`` with the reason; a fault
under way that still waits for its moment is cancelled too (:meth:`Fault.cancel`: it gives up before it strikes, or
strikes nothing more), and the others finish. Runs in the harness's process: one thread gates the timeline, then
one thread per fault.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamcert.harness.faults.base import Fault, FaultCancelled, FaultNotApplicable

if TYPE_CHECKING:
    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.run.history import History

__all__ = ["FaultTimeline", "recorded"]


def recorded(history: History, spec: FaultSpec, phase: str, action: Callable[[], object]) -> None:
    """Run a fault's start or stop; an error is recorded in the history (the checkers judge the outcome), never
    raised: one fault that cannot act must not end the run."""
    try:
        action()
    except FaultCancelled as exc:
        history.record("fault-cancelled", fault=spec.fault, phase=phase, reason=str(exc))
    except FaultNotApplicable as exc:
        history.record("fault-skip", fault=spec.fault, phase=phase, reason=exc.message)
    except Exception as exc:  # noqa: BLE001 - see above
        history.record("fault-error", fault=spec.fault, phase=phase, error=f"{type(exc).__name__}: {exc}")


class FaultTimeline:
    """The schedule ``specs`` carried out with the built ``faults`` (one per spec, in order).

    ``gate``, when given, runs first in the timeline's thread: the timeline begins when it returns True; when it
    returns False no fault starts (the run had nothing to strike: a query that never started, say).
    """

    def __init__(self, specs: Sequence[FaultSpec], faults: Sequence[Fault], history: History,
                 gate: Callable[[], bool] | None = None) -> None:
        if len(specs) != len(faults):
            raise ValueError(f"{len(specs)} scheduled faults, {len(faults)} built")
        self.specs, self.faults, self.history, self.gate = list(specs), list(faults), history, gate
        self._stopped = [threading.Event() for _ in self.specs]
        #: set when each fault's stop begins (its heal may restart the driver: the last such restart needs no standby)
        self._stopping = [threading.Event() for _ in self.specs]
        self._thread: threading.Thread | None = None
        self._cut_short: str | None = None
        self._cut = threading.Event()
        #: set by :meth:`abandon`: faults held for their duration are stopped at once
        self._abandoned = threading.Event()

    def start(self) -> "FaultTimeline":
        """Begin in the background; returns at once."""
        self._thread = threading.Thread(target=self._run, name="fault-timeline", daemon=True)
        self._thread.start()
        return self

    def done(self) -> bool:
        """Every fault stopped (or none will start): True also before :meth:`start` only if there is nothing to do."""
        return (self._thread is not None and not self._thread.is_alive()) or (self._thread is None and not self.specs)

    def may_still_act_on(self, target: str) -> bool:
        """Whether a fault on ``target`` may still start or heal: one of the schedule's faults on it has not begun to
        stop, and the timeline was neither cut short nor gated out. A driver asks before it warms standbys for its next
        attempts: once the last fault on the driver is stopping, the restart its heal makes is the last one."""
        if self._cut_short is not None:
            return False
        return any(spec.target == target and not stopping.is_set()
                   for spec, stopping in zip(self.specs, self._stopping, strict=True))

    def cut_short(self, reason: str) -> None:
        """Start no further fault, and cancel those under way (a fault waiting for its moment gives up; one that
        struck finishes); idempotent, the first reason stays."""
        if self._cut_short is None:
            self._cut_short = reason
            self._cut.set()
            for fault in self.faults:
                fault.cancel()

    def abandon(self, reason: str) -> None:
        """The run is ending before its schedule did (interrupted, or failed): :meth:`cut_short`, and a fault held
        for its duration is stopped at once. Its stop still runs in the timeline's thread (a driver kill's heal
        restarts the driver): :meth:`join` before stopping what the faults act on, or a heal restarts it after."""
        self.cut_short(reason)
        self._abandoned.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait until every fault stopped (or was never started because the gate said no)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        if self.gate is not None and not self.gate():
            for stopping, stopped in zip(self._stopping, self._stopped, strict=True):
                stopping.set()
                stopped.set()
            return
        began = time.monotonic()
        threads = [threading.Thread(target=self._carry_out, args=(index, began), name=f"fault-{spec.fault}",
                                    daemon=True) for index, spec in enumerate(self.specs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _carry_out(self, index: int, began: float) -> None:
        spec, fault = self.specs[index], self.faults[index]
        if spec.after is not None:
            self._stopped[spec.after].wait()
            began = time.monotonic()
        self._cut.wait(max(0.0, began + spec.at_s - time.monotonic()))  # its time, or at once when cut short
        if self._cut_short is not None:
            self.history.record("fault-cancelled", fault=spec.fault, reason=self._cut_short)
            self._stopping[index].set()
            self._stopped[index].set()
            return
        try:
            recorded(self.history, spec, "start", fault.start)
            self._abandoned.wait(spec.duration_s)
        finally:
            self._stopping[index].set()
            recorded(self.history, spec, "stop", fault.stop)
            self._stopped[index].set()
