"""Point faults arm the connector's named points through the SPI: the driver dies there, or the task fails there.

The "driver" is a real child process in a session of its own that reaches the point in a loop, so the SPI's kill
action really SIGKILLs it; the failing "task" is a thread of this process (the action ``fail`` only raises).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.points import DriverPointFault, TaskPointFault
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.history import History
from streamcert.spi.fault_points import DRIVER_PID_VAR, POINTS_DIR_VAR, InjectedPointFailure, claims, reached

_REACHES = (
    "import os, sys, time\n"
    "os.setsid()\n"
    f"os.environ['{DRIVER_PID_VAR}'] = str(os.getpid())\n"
    "from streamcert.spi.fault_points import reached\n"
    "while True:\n"
    "    reached(sys.argv[1])\n"
    "    time.sleep(0.01)\n"
)


class _ChildDriver:
    """A DriverProcess stand-in: a child that reaches ``point`` every 10 ms until something kills it."""

    def __init__(self, folder, point: str) -> None:
        self.fault_points_dir, self.point, self.attempt, self.restarts = folder, point, 0, 0
        self.start()

    def start(self) -> None:
        self.attempt += 1
        self.child = subprocess.Popen([sys.executable, "-c", _REACHES, self.point],
                                      env={**os.environ, POINTS_DIR_VAR: str(self.fault_points_dir)})

    def is_running(self) -> bool:
        return self.child.poll() is None

    def checkpoint(self) -> CheckpointState:
        return CheckpointState(latest_offsets=5, latest_commit=4)

    def restart(self) -> None:
        self.restarts += 1
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.is_running():
            self.child.kill()
        self.child.wait()


@pytest.fixture
def child_driver(tmp_path):
    drivers = []

    def make(point: str) -> _ChildDriver:
        drivers.append(_ChildDriver(tmp_path / "points", point))
        return drivers[-1]

    yield make
    for driver in drivers:
        driver.stop()


def test_driver_kill_at_a_point_kills_the_driver_there_and_restarts_it(child_driver, tmp_path):
    driver, history = child_driver("unit.after-write"), History()
    fault = build_fault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "unit.after-write"}),
                        FaultContext(driver=driver, history=history, workdir=tmp_path))
    assert isinstance(fault, DriverPointFault)
    fault.start()
    assert driver.child.returncode == -9
    started = history.events("fault-start")[0]
    assert (started["point"], started["reached"], started["pending_batch"]) == ("unit.after-write", True, 5)
    fault.stop()
    assert driver.restarts == 1 and driver.is_running()
    assert history.events("fault-stop")[0]["disarmed_unreached"] is False


def test_driver_kill_at_without_restart_leaves_the_driver_down_for_a_later_fault(child_driver, tmp_path):
    driver, history = child_driver("unit.before-commit"), History()
    fault = build_fault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "unit.before-commit", "restart": False}),
                        FaultContext(driver=driver, history=history, workdir=tmp_path))
    fault.start()
    fault.stop()
    assert history.events("fault-start")[0]["reached"] is True
    assert driver.restarts == 0 and not driver.is_running()


def test_a_point_the_driver_never_reaches_is_recorded_unreached_and_disarmed(child_driver, tmp_path):
    driver, history = child_driver("unit.elsewhere"), History()
    fault = build_fault(FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "unit.never"}),
                        FaultContext(driver=driver, history=history, workdir=tmp_path))
    fault.window_timeout_s = 0.3
    fault.start()
    fault.stop()
    assert history.events("fault-start")[0]["reached"] is False
    assert history.events("fault-stop")[0]["disarmed_unreached"] is True
    assert driver.restarts == 0 and driver.is_running()


def _task_reaching(point: str, failures: list) -> threading.Thread:
    def run() -> None:
        for _ in range(2000):
            try:
                reached(point)
            except InjectedPointFailure as exc:
                failures.append(str(exc))
                return
            threading.Event().wait(0.005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_task_fail_at_fails_the_caller_once_and_waits_for_the_claim(tmp_path, monkeypatch):
    folder, history, failures = tmp_path / "points", History(), []
    monkeypatch.setenv(POINTS_DIR_VAR, str(folder))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))  # never signalled: the action is "fail"
    fault = build_fault(FaultSpec("task_fail_at", "executor", 0, 0, {"point": "unit.after-stage"}),
                        FaultContext(driver=SimpleNamespace(fault_points_dir=folder), history=history,
                                     workdir=tmp_path))
    assert isinstance(fault, TaskPointFault)
    task = _task_reaching("unit.after-stage", failures)
    fault.start()
    task.join(10)
    fault.stop()
    assert history.events("fault-start")[0]["reached"] is True
    assert history.events("fault-stop")[0]["disarmed_unreached"] is False
    assert len(failures) == 1 and "unit.after-stage" in failures[0]
    assert claims(folder, "unit.after-stage") == [f"no-task-context-pid{os.getpid()}"]


def test_a_point_claimed_before_is_not_reached_again_by_a_later_fault(tmp_path, monkeypatch):
    """``reached`` means a claim made since this fault armed the point, not any claim in the folder."""
    folder, failures = tmp_path / "points", []
    monkeypatch.setenv(POINTS_DIR_VAR, str(folder))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))
    context = FaultContext(driver=SimpleNamespace(fault_points_dir=folder), history=History(), workdir=tmp_path)
    spec = FaultSpec("task_fail_at", "executor", 0, 0, {"point": "unit.p"})
    first = build_fault(spec, context)
    _task_reaching("unit.p", failures)
    first.start()
    first.stop()
    second = build_fault(spec, context)
    second.window_timeout_s = 0.2
    second.start()  # nothing reaches the point any more
    second.stop()
    assert [e["reached"] for e in context.history.events("fault-start")] == [True, False]
    assert [e["disarmed_unreached"] for e in context.history.events("fault-stop")] == [False, True]
