"""Driver faults: the query's driver process killed inside Spark's exactly-once window, at a seeded random moment of
a batch, just after the output of a batch became visible, or rescaled.

They act on the run's :class:`~streamcert.harness.run.driver.DriverProcess` (``FaultContext.driver``) from the
harness process: they read its checkpoint, kill it and start it again from that checkpoint. None needs the
connector's cooperation: the moments are read from Spark's checkpoint, its progress events and the output.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from streamcert.harness.faults.base import Fault, wait_for_input_read, within
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.state import repartition_state, stop_cleanly

__all__ = ["DriverKillParams", "DriverKillFault", "RandomKillParams", "DriverKillRandomFault", "OutputKillParams",
           "DriverKillOnOutputFault", "RescaleParams", "RescaleFault", "typical_batch_ms"]

#: A batch's length assumed before the query reported any (milliseconds).
_DEFAULT_BATCH_MS = 500.0
#: Windows a window kill lets go when their batch commits within its delay, before it strikes wherever it is.
_WINDOWS_LET_GO = 5


class _DriverKill(Fault):
    """A SIGKILL of the driver once a batch of the current attempt is pending; ``stop`` restarts it."""

    needs = ("driver",)
    window_timeout_s = 120.0

    def _strike(self, min_batch: int, delay_ms: Callable[[], float],
                windows_let_go: int = 0) -> tuple[CheckpointState, CheckpointState, float, int]:
        """Wait for the window, wait ``delay_ms()``, kill; the checkpoint when the window opened and after the kill
        (when nothing can commit any more), the delay, and the windows let go: up to ``windows_let_go`` windows
        whose batch committed within the delay are passed over for the next one."""
        let_go = 0
        while True:
            _wait_for_window(self, min_batch)
            first = self.driver.checkpoint()
            delay = delay_ms()
            time.sleep(delay / 1000)
            if (let_go >= windows_let_go or not self.driver.is_running()
                    or self.driver.checkpoint().pending == first.pending):
                break
            let_go += 1
        self.driver.kill()
        return first, self.driver.checkpoint(), delay, let_go

    def _heal(self) -> dict[str, Any]:
        self.driver.restart()
        return {"attempt": self.driver.attempt}


class DriverKillParams(FaultParams):
    min_batch: int = Field(0, ge=0, description="wait for a pending batch at least this high")
    delay_ms: int = Field(0, ge=0, description="milliseconds into the window before the kill")


@fault_kind("driver_kill", targets=("driver",), params=DriverKillParams)
class DriverKillFault(_DriverKill):
    """SIGKILL the driver when the checkpoint shows ``offsets/N`` written and ``commits/N`` not (any connector).

    ``stop`` restarts it from the same checkpoint. Params: ``min_batch`` (wait for a pending batch at least this
    high) and ``delay_ms`` (strike this long into the window, e.g. after the sink wrote but before Spark committed).
    A window whose batch committed within the delay is let go for the next one (up to :data:`_WINDOWS_LET_GO`).
    The event records the pending batch, whether the kill really landed in its window and the windows let go;
    after ``window_timeout_s`` (or once the driver stopped by itself) it kills anyway.
    """

    def _inject(self) -> dict[str, Any]:
        # a batch that committed within the delay closed its window: take the next one, not a kill between
        # batches (the wait began as a batch was committing, or an idle query's batch is shorter than the delay)
        first, state, _delay, let_go = self._strike(self.params.min_batch, lambda: self.params.delay_ms,
                                                    windows_let_go=_WINDOWS_LET_GO)
        return {"pending_batch": state.pending, "latest_commit": state.latest_commit,
                "in_window": state.pending is not None and state.pending == first.pending, "windows_let_go": let_go}


def typical_batch_ms(driver: Any) -> float:
    """The median ``triggerExecution`` of the batches the driver reported that read rows, in ms, leaving out each
    attempt's first batch (a new driver's first batch pays for starting up and is many times longer)."""
    durations, seen_attempts = [], set()
    for event in driver.events():
        if event.get("event") != "progress" or not event.get("numInputRows", 0) > 0:
            continue
        if event.get("attempt") not in seen_attempts:
            seen_attempts.add(event.get("attempt"))
            continue
        took = (event.get("durationMs") or {}).get("triggerExecution")
        if took:
            durations.append(float(took))
    return statistics.median(durations) if durations else _DEFAULT_BATCH_MS


def _phase(first: int | None, now: int | None) -> str:
    if now is None:
        return "between_batches"
    return "in_batch" if now == first else "later_batch"


def _wait_for_window(fault: Fault, min_batch: int) -> None:
    """Wait until the driver's *current* attempt started its query and a batch >= ``min_batch`` is pending.

    A batch a killed attempt left pending shows in the checkpoint at once; striking before the new attempt even
    started its query would be a kill during start-up, not in a batch.
    """
    driver, attempt = fault.driver, fault.driver.attempt

    def window_open() -> bool:
        if not any(event.get("event") == "started" for event in driver.events(attempt)):
            return False
        pending = driver.checkpoint().pending
        return pending is not None and pending >= min_batch

    within(window_open, what=f"a pending batch >= {min_batch}", timeout=fault.window_timeout_s, interval=0.005,
           abort=lambda: None if driver.is_running() else "the driver is not running")


class RandomKillParams(FaultParams):
    fraction: float = Field(ge=0, le=4, allow_inf_nan=False,
                            description="when to strike after a batch began, as a fraction of a typical batch's "
                                        "length (0.5: half way through it)")
    min_batch: int = Field(1, ge=0, description="wait for a pending batch at least this high")


def _random_kill_params(rng: Any) -> dict[str, Any]:
    return {"fraction": round(rng.uniform(0.0, 1.5), 3)}


@fault_kind("driver_kill_random", targets=("driver",), params=RandomKillParams, random_params=_random_kill_params)
class DriverKillRandomFault(_DriverKill):
    """SIGKILL the driver at a moment of the batch lifecycle drawn from the schedule's seed, for any connector.

    Once a batch at least ``min_batch`` is pending, the fault waits ``fraction`` times the median length of the
    batches the query has run so far (its progress events), then kills: with fractions spread over 0-1.5 the kills
    land while tasks read, while they write, inside the sink's commit, and between batches. The event records the
    ``phase`` it struck (``in_batch``, ``later_batch``, ``between_batches``) and ``in_window`` (a batch was pending);
    the kill is not aimed (``aimed`` false), so no moment counts as a miss. ``stop`` restarts the driver.
    """

    def _inject(self) -> dict[str, Any]:
        first, state, delay_ms, _ = self._strike(self.params.min_batch,
                                              lambda: self.params.fraction * typical_batch_ms(self.driver))
        return {"aimed": False, "phase": _phase(first.pending, state.pending), "in_window": state.pending is not None,
                "delay_ms": round(delay_ms, 1), "pending_batch": state.pending, "latest_commit": state.latest_commit}


class OutputKillParams(FaultParams):
    min_batch: int = Field(1, ge=0, description="wait for a pending batch at least this high")
    batches: int = Field(20, ge=1, description="batches to watch for output before giving up")


@fault_kind("driver_kill_on_output", targets=("driver",), params=OutputKillParams)
class DriverKillOnOutputFault(_DriverKill):
    """SIGKILL the driver the moment the output shows new records while Spark has not committed the batch.

    This is the moment after a sink made (part of) batch N visible and before Spark wrote ``commits/N``: the replay
    must not write N again (SNK-3, SNK-4), and a sink that makes rows visible from its tasks is caught writing
    them twice. The fault watches the run's output (``FaultContext.observer``: its :meth:`visible_mark`) for
    up to ``batches`` batches; the event records ``in_window`` (the checkpoint read after the kill still shows the
    batch pending) and ``output_grew``. A kill that landed after Spark committed the batch (``late_kills``) restarts
    the driver and watches a later batch. A sink that commits faster than the output can be watched may never be
    struck this way: ``reached`` is false then, and what needed the moment is unknown.
    """

    needs = ("driver", "observer")

    def _inject(self) -> dict[str, Any]:
        driver, observer = self.driver, self.observer
        late = 0
        for tried in range(1, self.params.batches + 1):
            _wait_for_window(self, self.params.min_batch)
            batch, mark = driver.checkpoint().pending, observer.visible_mark()
            if batch is None:
                break
            within(lambda mark=mark, batch=batch: observer.visible_mark() != mark
                   or driver.checkpoint().pending != batch,
                   what=f"output of batch {batch}", timeout=self.window_timeout_s, interval=0.002)
            if driver.checkpoint().pending == batch and observer.visible_mark() != mark:
                driver.kill()
                state = driver.checkpoint()  # after the kill: was the batch still uncommitted when it landed?
                if state.pending == batch:
                    return {"aim": "committing", "reached": True, "in_window": True, "output_grew": True,
                            "pending_batch": batch, "latest_commit": state.latest_commit, "batches_watched": tried,
                            "late_kills": late}
                late += 1  # Spark committed the batch before the kill landed: start again, watch a later batch
                driver.restart()
                continue
            if not driver.is_running():
                break
        driver.kill()
        state = driver.checkpoint()
        return {"aim": "committing", "reached": False, "in_window": False, "output_grew": False,
                "pending_batch": state.pending, "latest_commit": state.latest_commit, "batches_watched": tried,
                "late_kills": late}


class RescaleParams(FaultParams):
    parallelism: int = Field(ge=1, description="the builder's parallelism after the restart")
    master: str = Field(None, min_length=1, description="the Spark master after the restart (default: unchanged)")
    state_partitions: int = Field(None, ge=1, description="repartition the query's state offline into this many "
                                                          "partitions (default: a crash, no state change)")
    after_input_read_s: float = Field(0.0, ge=0, le=300, allow_inf_nan=False,
                                      description="before the restart, wait at most this long for the attempt running "
                                                  "to commit a batch that read input (0: do not wait): the task count "
                                                  "an earlier rescale gave is seen reading")


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
        read_first = wait_for_input_read(self, self.params.after_input_read_s) if self.params.after_input_read_s \
            else {}
        state = driver.checkpoint()
        if self.params.state_partitions is None:
            driver.kill()
            return {"pending_batch": state.pending, "latest_commit": state.latest_commit, **read_first}
        committed = stop_cleanly(driver)
        self.context.workdir.mkdir(parents=True, exist_ok=True)
        moved = repartition_state(driver.spec.checkpoint, self.params.state_partitions,
                                  spark_conf=dict(driver.spec.spark_conf or {}),
                                  log=self.context.workdir / "repartition.log")
        return {"pending_batch": None, "latest_commit": committed, "state_partitions_before": moved["before"],
                "state_partitions_after": moved["after"], **read_first}

    def _heal(self) -> dict[str, Any]:
        driver = self.driver
        changes: dict[str, Any] = {"params": {**driver.spec.params, "parallelism": self.params.parallelism}}
        if self.params.master is not None:
            changes["master"] = self.params.master
        driver.restart(**changes)
        return {"attempt": driver.attempt, "parallelism": self.params.parallelism}
