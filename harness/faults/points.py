"""Faults at a connector's named fault points (:mod:`streamcert.spi.fault_points`): the driver killed, or the task
attempt failed, at exactly the moment the connector calls ``reached(point)``.

The harness arms the point in the driver's fault-points folder (``DriverProcess.fault_points_dir``, which the
driver hands to every process it starts); the first process to reach it claims it and carries the action out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from streamcert.harness.faults.base import Fault, within
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.spi.fault_points import arm, claims, disarm

__all__ = ["PointParams", "DriverPointParams", "DriverPointFault", "TaskPointFault"]


class PointParams(FaultParams):
    point: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
                       description="a fault point the connector reaches, e.g. kafka-2pc.after-stage")


class DriverPointParams(PointParams):
    restart: bool = Field(True, description="restart the dead driver at stop; false leaves it down for a later "
                                            "fault of the schedule (a rescale) to start")


class _PointFault(Fault):
    """Arms ``params.point`` with ``action`` at start; ``reached`` in the event is a claim made since."""

    needs = ("driver",)
    action = "kill"
    window_timeout_s = 120.0

    @property
    def folder(self) -> Path:
        return self.driver.fault_points_dir

    def _arm(self) -> None:
        self._claims_before = set(claims(self.folder, self.params.point))
        arm(self.folder, self.params.point, action=self.action)

    def _reached(self) -> bool:
        return bool(set(claims(self.folder, self.params.point)) - self._claims_before)


@fault_kind("driver_kill_at", targets=("driver",), params=DriverPointParams)
class DriverPointFault(_PointFault):
    """Arm the connector's fault point ``params["point"]``; the driver dies when it gets there.

    ``start`` arms and waits (up to ``window_timeout_s``) for the driver to die at the point; ``stop`` disarms an
    unreached point and restarts a dead driver from its checkpoint (unless ``params["restart"]`` is false: then a
    later fault, such as a rescale, starts it, so the pending batch is replayed under other settings).
    """

    def _inject(self) -> dict[str, Any]:
        driver, point = self.driver, self.params.point
        self._arm()
        within(lambda: not driver.is_running(), what=f"the driver to die at fault point {point}",
               timeout=self.window_timeout_s, interval=0.01)
        state = driver.checkpoint()
        return {"point": point, "reached": self._reached(), "pending_batch": state.pending,
                "latest_commit": state.latest_commit}

    def _heal(self) -> dict[str, Any]:
        unreached = disarm(self.folder, self.params.point)
        if self.params.restart and not self.driver.is_running():
            self.driver.restart()
        return {"attempt": self.driver.attempt, "disarmed_unreached": unreached}


@fault_kind("task_fail_at", targets=("executor",), params=PointParams)
class TaskPointFault(_PointFault):
    """Arm the connector's fault point ``params["point"]`` to *fail* the task attempt that reaches it.

    The attempt raises there (after it prepared or staged, say) and Spark retries the task: the failed attempt's
    work is an orphan the connector must never commit. ``start`` arms and waits (up to ``window_timeout_s``) for
    the point to be claimed; ``stop`` disarms an unreached point.
    """

    action = "fail"

    def _inject(self) -> dict[str, Any]:
        point = self.params.point
        self._arm()
        within(self._reached, what=f"a task to reach fault point {point}", timeout=self.window_timeout_s,
               interval=0.01)
        return {"point": point, "reached": self._reached()}

    def _heal(self) -> dict[str, Any]:
        return {"disarmed_unreached": disarm(self.folder, self.params.point)}
