"""Driver faults: the query's driver process killed inside Spark's exactly-once window, or rescaled.

Both act on the run's :class:`~streamcert.harness.run.driver.DriverProcess` (``FaultContext.driver``) from the
harness process: they read its checkpoint, kill it and start it again from that checkpoint.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from streamcert.harness.faults.base import Fault, within
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.harness.run.state import repartition_state, stop_cleanly

__all__ = ["DriverKillParams", "DriverKillFault", "RescaleParams", "RescaleFault"]


class DriverKillParams(FaultParams):
    min_batch: int = Field(0, ge=0, description="wait for a pending batch at least this high")
    delay_ms: int = Field(0, ge=0, description="milliseconds into the window before the kill")


@fault_kind("driver_kill", targets=("driver",), params=DriverKillParams)
class DriverKillFault(Fault):
    """SIGKILL the driver when the checkpoint shows ``offsets/N`` written and ``commits/N`` not (any connector).

    ``stop`` restarts it from the same checkpoint. Params: ``min_batch`` (wait for a pending batch at least this
    high) and ``delay_ms`` (strike this long into the window, e.g. after the sink wrote but before Spark committed).
    The event records the pending batch and whether the kill really landed in its window; after
    ``window_timeout_s`` (or once the driver stopped by itself) it kills anyway.
    """

    needs = ("driver",)
    window_timeout_s = 120.0

    def _inject(self) -> dict[str, Any]:
        driver, min_batch = self.driver, self.params.min_batch

        def window_open() -> bool:
            pending = driver.checkpoint().pending
            return pending is not None and pending >= min_batch

        within(window_open, what=f"a pending batch >= {min_batch}", timeout=self.window_timeout_s, interval=0.005,
               abort=lambda: None if driver.is_running() else "the driver is not running")
        first = driver.checkpoint()
        time.sleep(self.params.delay_ms / 1000)
        state = driver.checkpoint()
        driver.kill()
        return {"pending_batch": state.pending, "latest_commit": state.latest_commit,
                "in_window": state.pending is not None and state.pending == first.pending}

    def _heal(self) -> dict[str, Any]:
        self.driver.restart()
        return {"attempt": self.driver.attempt}


class RescaleParams(FaultParams):
    parallelism: int = Field(ge=1, description="the builder's parallelism after the restart")
    master: str = Field(None, min_length=1, description="the Spark master after the restart (default: unchanged)")
    state_partitions: int = Field(None, ge=1, description="repartition the query's state offline into this many "
                                                          "partitions (default: a crash, no state change)")


@fault_kind("rescale", targets=("driver",), params=RescaleParams)
class RescaleFault(Fault):
    """Stop the driver and restart it with other parallelism: ``params["parallelism"]`` reaches the builder.

    Builders that support rescaling read ``params["parallelism"]`` (e.g. as the source's reader parallelism);
    ``params["master"]``, when given, replaces the Spark master (e.g. more local cores). Without
    ``params["state_partitions"]`` the driver is killed (a crash, then a restart with other parallelism). With it,
    the driver is stopped between batches and the query's state is repartitioned offline into that many partitions
    before the restart (:mod:`streamcert.harness.run.state`; its log goes to ``FaultContext.workdir``): the
    rescale of a stateful query.
    """

    needs = ("driver",)

    def _inject(self) -> dict[str, Any]:
        driver = self.driver
        state = driver.checkpoint()
        if self.params.state_partitions is None:
            driver.kill()
            return {"pending_batch": state.pending, "latest_commit": state.latest_commit}
        committed = stop_cleanly(driver)
        self.context.workdir.mkdir(parents=True, exist_ok=True)
        moved = repartition_state(driver.spec.checkpoint, self.params.state_partitions,
                                  spark_conf=dict(driver.spec.spark_conf or {}),
                                  log=self.context.workdir / "repartition.log")
        return {"pending_batch": None, "latest_commit": committed, "state_partitions_before": moved["before"],
                "state_partitions_after": moved["after"]}

    def _heal(self) -> dict[str, Any]:
        driver = self.driver
        changes: dict[str, Any] = {"params": {**driver.spec.params, "parallelism": self.params.parallelism}}
        if self.params.master is not None:
            changes["master"] = self.params.master
        driver.restart(**changes)
        return {"attempt": driver.attempt, "parallelism": self.params.parallelism}
