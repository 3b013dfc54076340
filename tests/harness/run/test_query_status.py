"""Where a query is in its batch, from the status API's jobs and the checkpoint: every moment, both pipeline shapes
(one stage reads and writes; a shuffle between the scan and the write), and the classes of batch."""

from __future__ import annotations

import pytest

from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.query_status import (JobActivity, StageActivity, _batch_of, _job, batch_class,
                                                 moments_of, replay_depth)

PENDING_5 = CheckpointState(latest_offsets=5, latest_commit=4)


def _fused(active: int, complete: int, status: str = "RUNNING") -> JobActivity:
    stage = StageActivity(10, 2, active, complete, status == "SUCCEEDED")
    return JobActivity(7, 5, status, active, complete, (stage,))


def _split(scan: tuple[int, int, bool], write: tuple[int, int, bool], status: str = "RUNNING") -> JobActivity:
    stages = (StageActivity(10, 2, *scan), StageActivity(11, 4, *write))
    return JobActivity(7, 5, status, scan[0] + write[0], scan[1] + write[1], stages)


@pytest.mark.parametrize("jobs, expected", [
    ((), {"planning"}),
    ((_fused(0, 0),), {"planning"}),  # the job is submitted, no task started yet
    ((_fused(2, 0),), {"reading", "writing"}),
    ((_fused(1, 1),), {"read_done", "writing"}),
    ((_fused(0, 2, "SUCCEEDED"),), {"read_done", "commit_in_flight"}),
])
def test_one_stage_that_reads_and_writes(jobs, expected):
    assert moments_of(PENDING_5, jobs, next_planned=False) == frozenset(expected)


@pytest.mark.parametrize("scan, write, expected", [
    ((2, 0, False), (0, 0, False), {"reading"}),
    ((1, 1, False), (0, 0, False), {"read_done"}),
    ((0, 0, True), (0, 0, False), {"read_done"}),  # the scan finished, the write stage not started
    ((0, 0, True), (4, 0, False), {"read_done", "writing"}),
    ((0, 0, True), (2, 2, False), {"writing"}),
])
def test_a_shuffle_between_the_scan_and_the_write(scan, write, expected):
    assert moments_of(PENDING_5, (_split(scan, write),), next_planned=False) == frozenset(expected)


def test_after_the_commit_the_moment_is_just_committed_until_the_next_batch_is_planned():
    committed = CheckpointState(latest_offsets=5, latest_commit=5)
    assert moments_of(committed, (), next_planned=False) == {"just_committed"}
    assert moments_of(committed, (), next_planned=True) == frozenset()
    assert moments_of(CheckpointState(None, None), (), next_planned=False) == frozenset()


def test_a_foreach_batch_sink_between_its_jobs_is_committing_and_the_running_job_decides_otherwise():
    done, running = _fused(0, 2, "SUCCEEDED"), _fused(2, 0)
    assert moments_of(PENDING_5, (done,), False) == {"read_done", "commit_in_flight"}
    assert moments_of(PENDING_5, (done, running), False) == {"reading", "writing"}


def test_the_status_apis_job_rows_become_stages_with_finished_ones_known_by_count():
    job = {"jobId": 3, "status": "RUNNING", "numActiveTasks": 4, "numCompletedTasks": 2, "stageIds": [9, 8],
           "numCompletedStages": 1, "numSkippedStages": 0, "description": "\nid = a\nrunId = b\nbatch = 5"}
    active = {9: {"stageId": 9, "numTasks": 4, "numActiveTasks": 4, "numCompleteTasks": 0}}
    parsed = _job(job, 5, active)
    assert [s.stage_id for s in parsed.stages] == [8, 9]
    assert parsed.scan.finished and not parsed.write.finished and parsed.write.active == 4


def test_a_job_belongs_to_the_batch_its_description_names_unless_a_standby_s_warm_up_query_ran_it():
    assert _batch_of({"description": "\nid = a\nrunId = b\nbatch = 0"}) == 0
    assert _batch_of({"description": "sinks-kills\nid = a\nrunId = b\nbatch = 12"}) == 12
    assert _batch_of({"description": "streamcert-warm-up-files\nid = c\nrunId = d\nbatch = 0"}) is None
    assert _batch_of({"description": None}) is None and _batch_of({}) is None


def test_batch_classes_first_steady_warming_and_replay_of_a_replay():
    fresh = CheckpointState(latest_offsets=4, latest_commit=4)
    assert batch_class(5, fresh, 0) == "first"
    assert [batch_class(b, fresh, 0) for b in (6, 7, 8, 9)] == ["warming", "warming", "steady", "steady"]
    replaying = CheckpointState(latest_offsets=5, latest_commit=4)
    assert batch_class(5, replaying, 1) == "first" and batch_class(5, replaying, 2) == "replay_of_replay"
    assert batch_class(0, CheckpointState(None, None), 0) == "first"


def test_the_replay_depth_counts_attempts_in_a_row_that_started_with_the_batch_pending():
    starts = {1: CheckpointState(None, None), 2: CheckpointState(5, 4), 3: CheckpointState(5, 4),
              4: CheckpointState(7, 6)}
    assert replay_depth(5, 3, starts) == 2 and replay_depth(5, 2, starts) == 1
    assert replay_depth(7, 4, starts) == 1 and replay_depth(6, 4, starts) == 0


def test_the_executors_running_tasks_are_those_the_status_api_shows_busy_the_driver_left_out():
    from streamcert.harness.run.query_status import _busy_executors

    rows = [{"id": "driver", "activeTasks": 2}, {"id": "0", "activeTasks": 1}, {"id": "1", "activeTasks": 0},
            {"id": "2", "activeTasks": 3, "isActive": False}, {"id": "3", "activeTasks": 2, "isActive": True}]
    assert _busy_executors(rows) == {"0": 1, "3": 2}
