"""Event-log parsers on hand-written logs: failed attempts (with their batch), executors added and removed."""

from __future__ import annotations

import json

from streamcert.harness.verify.spark_events import (
    ExecutorChange,
    FailedTask,
    event_log_conf,
    executor_changes,
    failed_tasks,
    read_events,
)

_JOB = {"Event": "SparkListenerJobStart", "Job ID": 3, "Stage IDs": [4, 5],
        "Properties": {"streaming.sql.batchId": "7", "spark.job.description": "batch = 7"}}
_OK = {"Event": "SparkListenerTaskEnd", "Stage ID": 4, "Stage Attempt ID": 0, "Task End Reason": {"Reason": "Success"},
       "Task Info": {"Task ID": 10, "Index": 0, "Attempt": 1, "Executor ID": "driver", "Finish Time": 1500}}
_CRASH = {"Event": "SparkListenerTaskEnd", "Stage ID": 4, "Stage Attempt ID": 0,
          "Task End Reason": {"Reason": "ExceptionFailure", "Class Name": "org.apache.spark.SparkException",
                              "Description": "Python worker exited unexpectedly (crashed)", "Stack Trace": []},
          "Task Info": {"Task ID": 9, "Index": 0, "Partition ID": 0, "Attempt": 0, "Executor ID": "driver",
                        "Finish Time": 1000}}
_LOST = {"Event": "SparkListenerTaskEnd", "Stage ID": 8, "Stage Attempt ID": 1,
         "Task End Reason": {"Reason": "ExecutorLostFailure", "Executor ID": "0", "Exit Caused By App": True,
                             "Loss Reason": "Command exited with code 137"},
         "Task Info": {"Task ID": 20, "Index": 2, "Attempt": 0, "Executor ID": "0", "Finish Time": 3000}}
_ADDED = {"Event": "SparkListenerExecutorAdded", "Timestamp": 100, "Executor ID": "0", "Executor Info": {}}
_REMOVED = {"Event": "SparkListenerExecutorRemoved", "Timestamp": 2900, "Executor ID": "0",
            "Removed Reason": "Command exited with code 137"}
_REPLACEMENT = {"Event": "SparkListenerExecutorAdded", "Timestamp": 4000, "Executor ID": "2", "Executor Info": {}}


def _write(path, events, cut_tail: bool = False) -> None:
    text = "".join(json.dumps(e) + "\n" for e in events)
    path.write_text(text + ('{"Event": "SparkListenerTaskEnd", "Stage' if cut_tail else ""))


def test_failed_attempts_carry_reason_message_and_batch_and_a_cut_last_line_is_skipped(tmp_path):
    _write(tmp_path / "local-1700000000000.inprogress", [_ADDED, _JOB, _CRASH, _OK, _LOST], cut_tail=True)
    failures = failed_tasks(read_events(tmp_path))
    assert failures == [
        FailedTask(stage_id=4, stage_attempt=0, task_id=9, partition=0, attempt=0, executor_id="driver",
                   reason="ExceptionFailure", class_name="org.apache.spark.SparkException",
                   message="Python worker exited unexpectedly (crashed)", finish_time_ms=1000, batch_id=7),
        FailedTask(stage_id=8, stage_attempt=1, task_id=20, partition=2, attempt=0, executor_id="0",
                   reason="ExecutorLostFailure", class_name="", message="Command exited with code 137",
                   finish_time_ms=3000, batch_id=None),
    ]


def test_executor_changes_in_order_across_rolled_files_and_applications(tmp_path):
    rolled = tmp_path / "eventlog_v2_app-20260101000000-0001"
    rolled.mkdir()
    _write(rolled / "events_2_app-20260101000000-0001", [_REMOVED, _REPLACEMENT])
    _write(rolled / "events_1_app-20260101000000-0001", [_ADDED])
    (rolled / "appstatus_app-20260101000000-0001.inprogress").write_text("")
    _write(tmp_path / "app-20260101000000-0000", [{**_ADDED, "Executor ID": "9", "Timestamp": 1}])
    (tmp_path / ".app-20260101000000-0000.crc").write_bytes(b"\0")
    assert executor_changes(read_events(tmp_path)) == [
        ExecutorChange("added", "9", 1),
        ExecutorChange("added", "0", 100),
        ExecutorChange("removed", "0", 2900, "Command exited with code 137"),
        ExecutorChange("added", "2", 4000),
    ]


def test_no_log_yet_reads_as_no_events(tmp_path):
    assert read_events(tmp_path / "missing") == []
    assert failed_tasks([]) == [] and executor_changes([]) == []


def test_conf_creates_the_folder_and_asks_for_plain_files(tmp_path):
    conf = event_log_conf(tmp_path / "events")
    assert (tmp_path / "events").is_dir()
    assert conf["spark.eventLog.dir"] == (tmp_path / "events").as_uri()
    assert conf["spark.eventLog.enabled"] == "true" and conf["spark.eventLog.compress"] == "false"
    assert conf["spark.eventLog.rolling.enabled"] == "false"
