"""The fault_reached evidence check: a kill that missed its window makes the verdict unknown, never pass."""

from __future__ import annotations

from streamcert.harness.verify.evidence import fault_reached, query_failures


def _start(fault: str, **fields) -> dict:
    return {"kind": "fault-start", "fault": fault, "target": "driver", **fields}


def test_every_fault_that_struck_passes():
    events = [{"kind": "driver-start"}, _start("driver_kill", in_window=True), _start("down", target="kafka"),
              _start("driver_kill_at", point="p", reached=True), {"kind": "fault-stop", "fault": "down"}]
    result = fault_reached(events)
    assert result.valid is True and result.counts == {"faults": 3, "struck": 3, "missed": 0}


def test_a_kill_outside_its_window_or_an_unreached_point_is_unknown_and_named():
    events = [_start("driver_kill", in_window=False, pending_batch=None, latest_commit=4),
              _start("driver_kill_at", point="kafka-2pc.after-commit", reached=False),
              _start("rescale")]
    result = fault_reached(events)
    assert result.valid == "unknown" and result.counts == {"faults": 3, "struck": 1, "missed": 2}
    assert result.violations == [
        {"kind": "missed", "fault": "driver_kill", "target": "driver", "pending_batch": None, "latest_commit": 4},
        {"kind": "missed", "fault": "driver_kill_at", "target": "driver", "point": "kafka-2pc.after-commit"},
    ]
    assert "missed" in result.error


def test_a_fault_that_failed_to_start_is_a_miss():
    result = fault_reached([_start("rescale"), {"kind": "fault-error", "fault": "broker_kill", "phase": "start",
                                                "error": "ConfigurationError: no server"}])
    assert result.valid == "unknown" and result.violations[0]["kind"] == "fault_error"


def test_a_run_where_no_fault_struck_proves_nothing():
    result = fault_reached([{"kind": "driver-start"}, {"kind": "load-done"}])
    assert result.valid == "unknown" and result.counts["faults"] == 0 and "no fault struck" in result.error


def test_a_fault_that_found_its_moment_absent_neither_struck_nor_missed():
    absent = {"kind": "fault-start", "fault": "python_worker_kill_moment", "aimed": True, "reached": False,
              "absent": True}
    landed = {"kind": "fault-start", "fault": "python_worker_kill_moment", "aimed": True, "reached": True}
    assert fault_reached([absent, landed]).valid is True
    assert fault_reached([absent]).valid == "unknown"


def test_a_kill_cancelled_by_the_runs_first_finding_neither_struck_nor_missed():
    """Its watch was ended by the run's first finding (after a positioning kill): not a miss of the plan's reach."""
    cancelled = {"kind": "fault-start", "fault": "driver_kill_moment", "aimed": True, "reached": False,
                 "cancelled": True}
    landed = {"kind": "fault-start", "fault": "driver_kill_moment", "aimed": True, "reached": True}
    assert fault_reached([landed, cancelled]).counts == {"faults": 1, "struck": 1, "missed": 0}
    assert fault_reached([landed, {**cancelled, "cancelled": False}]).valid == "unknown"


def _attempt(number: int, batches: int, error: str | None = None, ended: bool = True) -> list[dict]:
    events = [{"event": "session", "attempt": number}, {"event": "started", "attempt": number}]
    events += [{"event": "progress", "attempt": number, "batchId": b} for b in range(batches)]
    if error is not None:
        events += [{"event": "terminated", "attempt": number, "error": error},
                   {"event": "failed", "attempt": number, "error": "StreamingQueryException: " + error}]
    elif ended:
        events.append({"event": "terminated", "attempt": number, "error": None})
    return events


def test_attempts_the_harness_killed_or_stopped_are_no_query_failure():
    result = query_failures(_attempt(1, 3, ended=False) + _attempt(2, 5))
    assert result.valid is True and result.counts == {"attempts": 2, "failed": 0}


def test_a_query_that_failed_by_itself_after_a_restart_is_named_with_its_error():
    npe = ('java.lang.NullPointerException: Cannot invoke "scala.collection.IterableOps.map(scala.Function1)"\n'
           "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(KafkaMicroBatchStream.scala:520)")
    result = query_failures(_attempt(1, 4, ended=False) + _attempt(2, 0, error=npe) + _attempt(3, 6))
    assert result.valid is False and result.counts == {"attempts": 3, "failed": 1}
    [failure] = result.violations
    assert failure["attempt"] == 2 and failure["batches_committed"] == 0
    assert "NullPointerException" in failure["error"] and "KafkaMicroBatchStream.scala:520" in failure["error"]
    assert "1 of 3 attempt(s)" in result.error


def test_an_error_of_the_driver_childs_own_bridge_is_not_the_querys():
    events = _attempt(1, 2, ended=False) + [{"event": "failed", "attempt": 1, "error": "Py4JError: py4j gone"}]
    assert query_failures(events).valid is True


def test_a_start_up_failure_the_driver_answered_by_starting_again_is_not_counted_but_a_second_one_is():
    connect_back = ("org.apache.spark.SparkException: Python worker failed to connect back.\n"
                    "\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker")
    restarted = {"event": "query_restarted", "attempt": 2, "why": "Python worker failed to connect back",
                 "error": "Python worker failed to connect back."}
    once = _attempt(1, 3, ended=False) + _attempt(2, 0, error=connect_back) + [restarted] + _attempt(2, 4)
    result = query_failures(once)
    assert result.valid is True and result.counts == {"attempts": 2, "failed": 0, "restarted_by_driver": 1}
    # the restart excuses one termination with its reason, not a second one, nor another error of the attempt
    twice = once + [{"event": "terminated", "attempt": 2, "error": connect_back}]
    assert query_failures(twice).valid is False
    other = _attempt(2, 0, error="java.lang.IllegalStateException: offsets went back") + [restarted]
    assert query_failures(other).valid is False
