"""The query's downtime from a run's history and the driver's progress: kill (or rescale) to the restarted query's
first finished batch."""

from __future__ import annotations

import math

import numpy as np

from streamcert.harness.verify.downtime import driver_downtime, overlap_s


def _fault(kind: str, time: float, target: str = "driver", **fields) -> dict:
    return {"kind": kind, "time": time, "fault": "driver_kill", "target": target, **fields}


def _progress(attempt: int, time: float) -> dict:
    return {"event": "progress", "attempt": attempt, "time": time, "batchId": 0}


def test_each_driver_fault_is_down_until_the_next_attempts_first_progress():
    history = [{"kind": "driver-start", "time": 0.0, "attempt": 1},
               _fault("fault-start", 10.0), _fault("fault-stop", 10.2, attempt=2),
               _fault("fault-start", 20.0, target="proxy"), _fault("fault-stop", 25.0, target="proxy"),
               _fault("fault-start", 40.0), _fault("fault-stop", 40.1, attempt=3)]
    events = [_progress(1, 5.0), _progress(1, 9.0), _progress(2, 31.0), _progress(2, 35.0), _progress(3, 52.5)]
    assert driver_downtime(history, events) == [(10.0, 31.0), (40.0, 52.5)]


def test_downtime_without_a_later_progress_lasts_to_the_runs_end_and_overlaps_merge():
    history = [_fault("fault-start", 10.0), _fault("fault-stop", 10.2, attempt=2),
               _fault("fault-start", 12.0), _fault("fault-stop", 12.1, attempt=3)]
    # attempt 2 never finished a batch: killed again at 12; attempt 3 neither
    assert driver_downtime(history, [_progress(1, 9.0)], run_end=60.0) == [(10.0, 60.0)]
    assert math.isinf(driver_downtime(history, [])[0][1])


def test_a_fault_stop_without_a_new_attempt_is_no_downtime():
    history = [_fault("fault-start", 10.0), _fault("fault-stop", 10.2)]  # the kill never restarted anything
    assert driver_downtime(history, [_progress(1, 30.0)]) == []


def test_overlap_counts_only_the_part_of_each_interval_inside_the_periods():
    starts, ends = np.array([0.0, 12.0, 50.0]), np.array([20.0, 45.0, 60.0])
    got = overlap_s(starts, ends, [(10.0, 15.0), (40.0, 55.0)])
    assert got.tolist() == [5.0, 3.0 + 5.0, 5.0]
