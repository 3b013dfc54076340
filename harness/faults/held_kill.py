"""Driver kills with Spark's own checkpoint write held open: "sink committed, batch not logged" on purpose.

:class:`LogHeldKill` arms the run's checkpoint hold (:mod:`~streamcert.harness.stack.checkpoint_hold`) for a batch
of the wanted class, waits until the driver's write of ``commits/N`` (or ``offsets/N``) is held, and SIGKILLs the
driver while it waits: for ``commits`` the sink's commit of batch N had returned (Spark writes ``commits/N`` only
then) and Spark never logged the batch, so the next attempt replays a batch whose commit already happened; for
``offsets`` the batch was planned (the source answered ``latestOffset``) and never logged, so the next attempt plans
it again. Nothing is raced: the write cannot happen while the kill is decided. A ``steady`` batch is one after
:data:`~streamcert.harness.run.query_status.STEADY_AFTER` commits of the same attempt; a ``first`` batch is the
first an attempt logs after a restart (the fault restarts the driver itself first: a positioning kill, recorded).
``stop`` restarts the driver from its checkpoint. Runs in the harness's process, on the fault timeline's thread.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field

from streamcert.harness.faults.base import Fault, FaultCancelled, within
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.harness.run.query_status import STEADY_AFTER
from streamcert.harness.stack.checkpoint_hold import CheckpointHold, hold_spark_conf

__all__ = ["LogHeldKillParams", "LogHeldKill"]


class LogHeldKillParams(FaultParams):
    log: Literal["commits", "offsets"] = Field("commits", description="the checkpoint log whose write is held: "
                                               "commits (the sink committed, the batch not logged) or offsets (the "
                                               "batch planned, not logged)")
    batch_class: Literal["first", "steady"] = Field("steady", description="first: the first batch an attempt logs "
                                                    "after a restart; steady: one after three commits of the attempt")
    timeout_s: float = Field(240.0, gt=0, le=3600, allow_inf_nan=False,
                             description="seconds to wait for a held write before giving up (reached: false)")


@fault_kind("driver_kill_log_held", targets=("driver",), params=LogHeldKillParams)
class LogHeldKill(Fault):
    """SIGKILL the driver while its write of ``<log>/N`` is held (see the module docstring); ``stop`` restarts it."""

    needs = ("driver",)

    @classmethod
    def driver_conf(cls) -> dict[str, str]:
        """The driver needs the holding checkpoint file manager (built into the cache on first use)."""
        return hold_spark_conf()

    def _inject(self) -> dict[str, Any]:
        hold = CheckpointHold(self.driver.spec.checkpoint)
        log, began = self.params.log, time.monotonic()
        positioned = None
        hold.disarm(log)
        if self.params.batch_class == "first":
            if self._attempt_batches():  # this attempt logged a batch already: a new one, armed before it starts
                positioned = self.driver.checkpoint()
                hold.arm(log, 0)
                self.driver.restart()
            else:
                hold.arm(log, 0)
        else:
            self._wait_for_steady(began)
            hold.arm(log, (self.driver.checkpoint().latest_commit or -1) + 1)
        try:
            held = within(lambda: hold.held(log), what=f"a held write of {log}", interval=0.01,
                          timeout=max(0.0, self.params.timeout_s - (time.monotonic() - began)),
                          abort=lambda: "cancelled" if self.cancelled or not self.driver.is_running() else None)
            if self.cancelled and not held:
                raise FaultCancelled()
            before = self._attempt_batches()
            if held:
                self.driver.kill()
            state = self.driver.checkpoint()
        finally:
            hold.disarm(log)
        record: dict[str, Any] = {"log": log, "batch_class": self.params.batch_class, "reached": bool(held),
                                  "in_window": bool(held), "latest_commit": state.latest_commit,
                                  "pending_batch": state.pending, "waited_s": round(time.monotonic() - began, 3)}
        if held:
            # the class the held batch really was: the attempt's first logged batch, or one after STEADY_AFTER
            reached = "first" if before == 0 else "steady" if before >= STEADY_AFTER else "warming"
            record.update(held_batch=held[0], sink_committed=log == "commits", reached_class=reached,
                          reached=reached == self.params.batch_class)
        if positioned is not None:
            record["positioning"] = {"pending_batch": positioned.pending, "latest_commit": positioned.latest_commit}
        return record

    def _attempt_batches(self) -> int:
        """Batches the driver's current attempt reported (progress events)."""
        return sum(1 for e in self.driver.events(attempt=self.driver.attempt) if e.get("event") == "progress")

    def _wait_for_steady(self, began: float) -> None:
        """Until the current attempt reported :data:`STEADY_AFTER` batches (or the timeout)."""
        def steady() -> bool:
            return self._attempt_batches() >= STEADY_AFTER

        within(steady, what="a steady batch", interval=0.05,
               timeout=max(0.0, self.params.timeout_s - (time.monotonic() - began)),
               abort=lambda: "cancelled" if self.cancelled else None)
        if self.cancelled:
            raise FaultCancelled()

    def _heal(self) -> dict[str, Any]:
        if not self.driver.is_running():
            self.driver.restart()
        return {"attempt": self.driver.attempt}
