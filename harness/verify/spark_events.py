"""Spark's event log, read from outside the application: the evidence that a task was retried or an executor lost.

:func:`event_log_conf` gives the settings that make a driver write its event
log (put them in ``QuerySpec.spark_conf``); :func:`read_events` reads every
application's log under that folder, also while it runs (``<appId>.inprogress``)
or after a crash cut its last line; :func:`failed_tasks` and
:func:`executor_changes` pick out the events a fault should cause. Everything
here runs in the harness process and needs no Spark.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

__all__ = ["event_log_conf", "read_events", "FailedTask", "failed_tasks", "ExecutorChange", "executor_changes"]

#: Spark 4's rolling layout: one folder per application with numbered event files.
_ROLLING_DIR = "eventlog_v2_"
_ROLLING_FILE = re.compile(r"events_(\d+)_")


def event_log_conf(directory: Path) -> dict[str, str]:
    """Spark settings that log every event of the driver's application under ``directory`` (created here).

    Called in the harness before the driver starts. Spark 4 compresses and rolls
    the log by default; plain single files are what a test can read mid-run.
    """
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)  # Spark refuses to start when the folder is missing
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


def _app_files(directory: Path) -> list[list[Path]]:
    """Each application's event files, in order; applications in name order (their ids begin with the start time)."""
    apps = []
    for entry in sorted(Path(directory).iterdir()):
        if entry.name.startswith(".") or entry.name.endswith(".crc"):
            continue
        if entry.is_dir() and entry.name.startswith(_ROLLING_DIR):
            numbered = [(int(m.group(1)), f) for f in entry.iterdir() if (m := _ROLLING_FILE.match(f.name))]
            apps.append([f for _n, f in sorted(numbered)])
        elif entry.is_file():
            apps.append([entry])
    return apps


def _lines(path: Path) -> Iterable[dict[str, Any]]:
    for line in path.read_text(errors="replace").splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:  # the last line of a log whose writer is running or was killed
            continue


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every event logged under ``directory``: one application after another, each in the order Spark wrote it."""
    if not Path(directory).is_dir():
        return []
    return [event for files in _app_files(directory) for path in files for event in _lines(path)]


@dataclass(frozen=True)
class FailedTask:
    """A task attempt that did not succeed. ``reason`` is Spark's kind (``ExceptionFailure``, ``ExecutorLostFailure``,
    ``TaskKilled``, ...), ``message`` what it said; ``batch_id`` the micro-batch whose job ran it, when known."""

    stage_id: int
    stage_attempt: int
    task_id: int
    partition: int
    attempt: int
    executor_id: str
    reason: str
    class_name: str
    message: str
    finish_time_ms: int
    batch_id: int | None


def _stage_batches(events: list[dict[str, Any]]) -> dict[int, int]:
    """stage id -> micro-batch id, from the job properties streaming sets on each batch's jobs."""
    batches = {}
    for event in events:
        if event.get("Event") != "SparkListenerJobStart":
            continue
        batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
        if batch is not None:
            for stage in event.get("Stage IDs", []):
                batches[stage] = int(batch)
    return batches


def _reason_message(reason: dict[str, Any]) -> str:
    for key in ("Description", "Loss Reason", "Kill Reason", "Message"):
        if reason.get(key):
            return str(reason[key])
    return ""


def failed_tasks(events: list[dict[str, Any]]) -> list[FailedTask]:
    """The task attempts that ended with anything but ``Success``, in the order they ended."""
    batches = _stage_batches(events)
    failed = []
    for event in events:
        if event.get("Event") != "SparkListenerTaskEnd":
            continue
        reason = event.get("Task End Reason") or {}
        if reason.get("Reason", "Success") == "Success":
            continue
        info = event.get("Task Info") or {}
        stage = int(event.get("Stage ID", -1))
        failed.append(FailedTask(
            stage_id=stage, stage_attempt=int(event.get("Stage Attempt ID", 0)), task_id=int(info.get("Task ID", -1)),
            partition=int(info.get("Partition ID", info.get("Index", -1))), attempt=int(info.get("Attempt", 0)),
            executor_id=str(info.get("Executor ID", "")), reason=str(reason.get("Reason")),
            class_name=str(reason.get("Class Name", "")), message=_reason_message(reason),
            finish_time_ms=int(info.get("Finish Time", 0)), batch_id=batches.get(stage),
        ))
    return failed


@dataclass(frozen=True)
class ExecutorChange:
    """An executor joined (``added``) or left (``removed``, with Spark's reason) the application."""

    kind: str
    executor_id: str
    time_ms: int
    reason: str = ""


def executor_changes(events: list[dict[str, Any]]) -> list[ExecutorChange]:
    """Executors added and removed, in the order Spark logged them."""
    kinds = {"SparkListenerExecutorAdded": "added", "SparkListenerExecutorRemoved": "removed"}
    return [ExecutorChange(kinds[e["Event"]], str(e.get("Executor ID", "")), int(e.get("Timestamp", 0)),
                           str(e.get("Removed Reason", "")))
            for e in events if e.get("Event") in kinds]
