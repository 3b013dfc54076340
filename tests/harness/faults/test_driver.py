"""driver_kill strikes inside the exactly-once window (or says it missed it); rescale restarts with new settings.

The driver here is a stand-in with a scripted checkpoint; the connector tests run both faults on real queries.
"""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.driver import DriverKillFault, RescaleFault
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.driver import QuerySpec
from streamcert.harness.run.history import History


class _Driver:
    """What driver faults call on a DriverProcess; the checkpoint shows ``pending`` after ``opens_after`` looks."""

    def __init__(self, pending: int | None, opens_after: int = 0, running: bool = True) -> None:
        self.pending, self.opens_after, self.running = pending, opens_after, running
        self.looks, self.attempt, self.calls = 0, 1, []
        self.spec = QuerySpec("tests.harness.queries:unused", "/nonexistent", {"parallelism": 2, "rows": 10})

    def checkpoint(self) -> CheckpointState:
        self.looks += 1
        if self.pending is None or self.looks <= self.opens_after:
            return CheckpointState(latest_offsets=0, latest_commit=0)
        return CheckpointState(latest_offsets=self.pending, latest_commit=self.pending - 1)

    def is_running(self) -> bool:
        return self.running

    def events(self, attempt: int | None = None) -> list[dict]:
        return [{"event": "started", "attempt": self.attempt}]

    def kill(self) -> None:
        self.calls.append("kill")
        self.running = False

    def restart(self, **changes) -> None:
        self.calls.append(("restart", changes))
        self.attempt += 1
        self.running = True


def _context(driver, tmp_path, history=None) -> FaultContext:
    return FaultContext(driver=driver, history=History() if history is None else history, workdir=tmp_path)


def test_driver_kill_waits_for_a_pending_batch_then_kills_and_restarts(tmp_path):
    driver, history = _Driver(pending=3, opens_after=5), History()
    fault = build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 2}), _context(driver, tmp_path, history))
    assert isinstance(fault, DriverKillFault)
    fault.start()
    assert driver.looks > 5 and driver.calls == ["kill"]
    started = history.events("fault-start")[0]
    assert (started["pending_batch"], started["latest_commit"], started["in_window"]) == (3, 2, True)
    fault.stop()
    assert driver.calls == ["kill", ("restart", {})] and history.events("fault-stop")[0]["attempt"] == 2


def test_driver_kill_of_a_driver_that_stopped_kills_anyway_and_says_it_missed_the_window(tmp_path):
    driver, history = _Driver(pending=None, running=False), History()
    fault = build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 1}), _context(driver, tmp_path, history))
    fault.window_timeout_s = 5.0
    fault.start()
    assert driver.calls == ["kill"] and history.events("fault-start")[0]["in_window"] is False


class _ShortBatches(_Driver):
    """Each batch commits within the kill's delay, until batch ``lasts_from`` (its window outlasts the delay)."""

    def __init__(self, lasts_from: int) -> None:
        super().__init__(pending=1)
        self.lasts_from, self.batch, self.seen = lasts_from, 1, 0

    def checkpoint(self) -> CheckpointState:
        self.seen += 1  # the fault looks three times a window: it opens, its first state, after the delay
        if self.seen % 3 == 0 and self.batch < self.lasts_from:
            self.batch += 1  # after the delay: committed (the next batch shows at the next look)
            return CheckpointState(latest_offsets=self.batch - 1, latest_commit=self.batch - 1)
        return CheckpointState(latest_offsets=self.batch, latest_commit=self.batch - 1)


def test_a_window_kill_lets_go_a_window_its_batch_closed_within_the_delay_and_strikes_in_the_next(tmp_path):
    """A batch committed during the delay (seen in a full certification: the fault began waiting as the
    aggregator's batch 3 was committing and struck 45 ms later, between batches; the run's fault_reached said
    unknown and its window kill tested nothing): the kill waits for the next window instead."""
    driver, history = _ShortBatches(lasts_from=3), History()
    fault = build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 1, "delay_ms": 5}),
                        _context(driver, tmp_path, history))
    fault.start()
    started = history.events("fault-start")[0]
    assert driver.calls == ["kill"] and started["in_window"] is True
    assert (started["pending_batch"], started["windows_let_go"]) == (3, 2)
    always_short = _ShortBatches(lasts_from=10**6)
    build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 1, "delay_ms": 1}),
                _context(always_short, tmp_path, history := History())).start()
    started = history.events("fault-start")[0]  # the limit reached: it strikes, and says it missed
    assert always_short.calls == ["kill"] and started["windows_let_go"] == 5 and started["in_window"] is False


def test_driver_kill_gives_up_waiting_after_its_window_timeout(tmp_path):
    driver, history = _Driver(pending=1), History()
    fault = build_fault(FaultSpec("driver_kill", "driver", 0, 0, {"min_batch": 9}), _context(driver, tmp_path, history))
    fault.window_timeout_s = 0.2
    fault.start()
    assert driver.calls == ["kill"] and history.events("fault-start")[0]["pending_batch"] == 1


def test_rescale_without_state_partitions_is_a_crash_then_a_restart_with_the_new_settings(tmp_path):
    driver, history = _Driver(pending=4), History()
    fault = build_fault(FaultSpec("rescale", "driver", 0, 0, {"parallelism": 3, "master": "local[4]"}),
                        _context(driver, tmp_path, history))
    assert isinstance(fault, RescaleFault)
    fault.start()
    assert driver.calls == ["kill"] and history.events("fault-start")[0]["pending_batch"] == 4
    fault.stop()
    assert driver.calls[1] == ("restart", {"params": {"parallelism": 3, "rows": 10}, "master": "local[4]"})
    assert history.events("fault-stop")[0]["parallelism"] == 3


@pytest.mark.parametrize("spec", [FaultSpec("driver_kill", "driver", 0, 1),
                                  FaultSpec("rescale", "driver", 0, 1, {"parallelism": 1})])
def test_driver_faults_are_not_environment_faults(spec, tmp_path):
    """Built with the environment only (as the old fault_for did), a driver fault is refused before the run."""
    with pytest.raises(ConfigurationError, match="driver process") as info:
        build_fault(spec, FaultContext(environment=object(), history=History(), workdir=tmp_path))
    assert "FaultContext(driver=" in str(info.value)


class _Output:
    """An observer stand-in whose visible mark grows after ``grows_after`` looks."""

    def __init__(self, grows_after: int | None) -> None:
        self.grows_after, self.looks = grows_after, 0

    def visible_mark(self) -> int:
        self.looks += 1
        return 1 if self.grows_after is not None and self.looks > self.grows_after else 0


def test_a_random_kill_strikes_a_fraction_of_a_typical_batch_into_the_window_and_is_never_a_miss(tmp_path):
    """Typical: the median of the batches after each attempt's first (a new driver's first batch is slow)."""
    driver, history = _Driver(pending=2), History()
    first = {"event": "progress", "attempt": 1, "numInputRows": 5, "durationMs": {"triggerExecution": 9000}}
    driver.events = lambda attempt=None: [{"event": "started", "attempt": 1}, first] + [
        {"event": "progress", "attempt": 1, "numInputRows": 5, "durationMs": {"triggerExecution": 400}}] * 3
    fault = build_fault(FaultSpec("driver_kill_random", "driver", 0, 0, {"fraction": 0.25}),
                        _context(driver, tmp_path, history))
    fault.start()
    started = history.events("fault-start")[0]
    assert driver.calls == ["kill"] and started["delay_ms"] == 100.0 and started["aimed"] is False
    assert (started["phase"], started["in_window"]) == ("in_batch", True)
    from streamcert.harness.verify.evidence import fault_reached

    assert fault_reached(history.events()).valid is True


def test_a_random_kill_needs_a_fraction_within_bounds():
    with pytest.raises(ConfigurationError, match="fraction"):
        FaultSpec("driver_kill_random", "driver", 0, 0, {"fraction": 9.0})


def test_a_kill_on_output_strikes_when_the_output_grows_while_the_batch_is_pending(tmp_path):
    driver, history = _Driver(pending=3), History()
    fault = build_fault(FaultSpec("driver_kill_on_output", "driver", 0, 0, {}),
                        FaultContext(driver=driver, history=history, workdir=tmp_path, observer=_Output(5)))
    fault.start()
    started = history.events("fault-start")[0]
    assert driver.calls == ["kill"]
    assert (started["reached"], started["in_window"], started["pending_batch"]) == (True, True, 3)


def test_a_kill_on_output_that_never_sees_output_says_it_missed(tmp_path):
    driver, history = _Driver(pending=3), History()
    fault = build_fault(FaultSpec("driver_kill_on_output", "driver", 0, 0, {"batches": 1}),
                        FaultContext(driver=driver, history=history, workdir=tmp_path, observer=_Output(None)))
    fault.window_timeout_s = 0.3
    fault.start()
    assert history.events("fault-start")[0]["reached"] is False


def test_a_kill_on_output_needs_the_observer(tmp_path):
    with pytest.raises(ConfigurationError, match="observer"):
        build_fault(FaultSpec("driver_kill_on_output", "driver", 0, 0, {}),
                    FaultContext(driver=_Driver(pending=1), history=History(), workdir=tmp_path))
