"""Executor faults really happen: Spark's own event log shows the failed attempt or the lost and replaced executor,
the query goes on, and the file sink holds every record exactly once.

Each test runs a real query in a driver child process; the output is read with pyarrow (only the files the sink
committed), so this process needs no Spark of its own.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.run.observers.files import read_committed_table
from streamcert.harness.faults.executor import (
    ExecutorKill,
    PythonWorkerKill,
    TaskException,
    executor_fault_for,
    python_task_workers,
)
from streamcert.harness.run.history import History
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.verify.spark_events import event_log_conf, executor_changes, failed_tasks, read_events

pytestmark = pytest.mark.integration

ROWS, PER_BATCH = 40, 10
LAST_BATCH = ROWS // PER_BATCH - 1


def _committed_values(out: Path) -> list[int]:
    """Values in the Parquet files the sink committed (a failed attempt's files are not)."""
    table = read_committed_table(out)
    return sorted(table.column("value").to_pylist()) if table is not None else []


def _driver(tmp_path: Path, builder: str, master: str, **params) -> DriverProcess:
    spec = QuerySpec(builder, str(tmp_path / "checkpoint"),
                     {"rows": ROWS, "rows_per_batch": PER_BATCH, "read_delay_ms": 2500, "path": str(tmp_path / "out"),
                      **params},
                     master=master, spark_conf=event_log_conf(tmp_path / "events"))
    return DriverProcess(spec, tmp_path / "driver")


def _committed(batch: int):
    return lambda driver: (driver.checkpoint().latest_commit or -1) >= batch


def _spec(fault: str) -> FaultSpec:
    return FaultSpec(fault, "executor", 0, 0)


def test_python_worker_kill_fails_one_attempt_that_spark_retries(tmp_path):
    began, history = time.monotonic(), History()
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local[2,3]")
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = executor_fault_for(_spec("python_worker_kill"), driver, history)
        assert isinstance(fault, PythonWorkerKill)
        fault.start()
        struck = driver.checkpoint().latest_offsets  # the batch whose task was running; it cannot commit yet
        fault.stop()
        killed = history.events("fault-start")[0]
        assert killed["killed"] and killed["pid"] not in python_task_workers(driver)
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        failures = failed_tasks(read_events(tmp_path / "events"))
    assert [f.batch_id for f in failures] == [struck]
    assert failures[0].reason == "ExceptionFailure" and "Python worker exited unexpectedly" in failures[0].message
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\nworker kill: pid {killed['pid']} in batch {struck}; failed: {failures}; "
          f"{time.monotonic() - began:.1f}s")


def test_task_exception_is_claimed_once_and_retried(tmp_path):
    began, history = time.monotonic(), History()
    triggers = tmp_path / "triggers"
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_through_failure_point", "local[2,3]",
                     trigger_dir=str(triggers))
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = executor_fault_for(_spec("task_exception"), driver, history, trigger_dir=triggers)
        assert isinstance(fault, TaskException)
        fault.start()
        driver.wait_for(lambda _d: fault.claims(), "a task to claim the trigger", timeout=60)
        fault.stop()
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        failures = failed_tasks(read_events(tmp_path / "events"))
    stopped = history.events("fault-stop")[0]
    assert stopped["claimed"] is True and len(stopped["claimed_by"]) == 1 and len(fault.claims()) == 1
    assert not fault.trigger.exists()
    assert len(failures) == 1 and failures[0].reason == "ExceptionFailure"
    assert "InjectedTaskFailure" in failures[0].message and stopped["claimed_by"][0] in failures[0].message
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\ntask exception: claimed by {stopped['claimed_by']}; failed: {failures}; "
          f"{time.monotonic() - began:.1f}s")


def test_an_unclaimed_trigger_is_removed_and_recorded_as_unclaimed(tmp_path):
    history = History()
    fault = TaskException(_spec("task_exception"), None, history, tmp_path)
    fault.start()
    assert fault.trigger.exists()
    fault.stop()
    assert not fault.trigger.exists()
    assert history.events("fault-stop")[0]["claimed"] is False


def test_executor_kill_under_local_cluster_is_replaced_and_exactly_once(tmp_path):
    began, history = time.monotonic(), History()
    events = tmp_path / "events"
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local-cluster[2,1,1024]")
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = executor_fault_for(_spec("executor_kill"), driver, history)
        assert isinstance(fault, ExecutorKill)
        fault.start()
        killed = history.events("fault-start")[0]
        victim, before = killed["executor_id"], set(killed["executors_before"])

        def replaced(_driver) -> bool:
            changes = executor_changes(read_events(events))
            removed = [c.time_ms for c in changes if c.kind == "removed" and c.executor_id == victim]
            return bool(removed) and any(c.kind == "added" and c.executor_id not in before
                                         and c.time_ms >= removed[0] for c in changes)

        driver.wait_for(replaced, f"executor {victim} removed and a new one added", timeout=120)
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        fault.stop()
        logged = read_events(events)
    changes = executor_changes(logged)
    removal = next(c for c in changes if c.kind == "removed" and c.executor_id == victim)
    assert "137" in removal.reason or "exited" in removal.reason.lower()
    assert killed["killed"] and killed["running_python_task"]
    lost = [f for f in failed_tasks(logged) if f.executor_id == victim]
    assert lost and lost[0].reason == "ExecutorLostFailure"
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\nexecutor kill: executor {victim} (pid {killed['pid']}) of {sorted(before)}; changes: "
          f"{[(c.kind, c.executor_id, c.reason) for c in changes]}; failed: {lost}; "
          f"after: {history.events('fault-stop')[0]['executors_now']}; {time.monotonic() - began:.1f}s")
