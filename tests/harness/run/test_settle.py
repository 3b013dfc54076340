"""When a run stops waiting (streamcert.harness.run.settle): each way to settle, and what keeps it waiting."""

from __future__ import annotations

import pandas as pd

from streamcert.harness.run.settle import DRAIN_BATCHES, Settling, wait_until_seen


def _watched(settling: Settling, steps: list[tuple[float, int, tuple]]) -> Settling:
    for now, count, checkpoint in steps:
        settling.observe(count, checkpoint, now)
    return settling


def test_a_query_with_nothing_pending_and_nothing_new_for_settle_s_is_idle():
    settling = _watched(Settling(10.0, output_count=-1, output_changed_at=0.0, checkpoint_changed_at=0.0),
                        [(0.0, 50, (4, None)), (3.0, 60, (5, None))])
    assert settling.settled(12.9, driver_running=True, reported_idle=True) is None  # output changed at 3 s
    assert settling.settled(13.0, driver_running=True, reported_idle=True) == "idle"


def test_a_pending_batch_a_moving_checkpoint_or_a_query_not_reported_idle_keep_it_waiting():
    pending = _watched(Settling(10.0, output_changed_at=0.0), [(0.0, 60, (5, 6))])
    assert pending.settled(100.0, True, True) is None
    moving = _watched(Settling(10.0, output_changed_at=0.0), [(0.0, 60, (5, None)), (8.0, 60, (6, None))])
    assert moving.settled(17.9, True, True) is None and moving.settled(18.0, True, True) == "idle"
    starting = _watched(Settling(10.0, output_changed_at=0.0), [(0.0, 60, (5, None))])
    assert starting.settled(100.0, driver_running=True, reported_idle=False) is None  # e.g. planning its first batch


def test_an_aggregator_is_drained_only_after_its_wait_and_several_batches_without_output():
    settling = _watched(Settling(10.0, aggregator_wait_s=30.0, output_changed_at=0.0), [(0.0, 60, (5, None))])
    for batch in range(1, DRAIN_BATCHES):
        settling.observe(60, (5 + batch, None), float(batch))
    assert settling.settled(100.0, True, True) is None  # too few batches ran: timers may not have fired
    settling.observe(60, (5 + DRAIN_BATCHES, None), 5.0)
    assert settling.settled(39.9, True, True) is None  # its longest wait has not passed
    assert settling.settled(40.0, True, True) == "drained"


def test_a_driver_that_is_gone_settles_once_the_output_stopped_changing_and_zero_never_settles():
    gone = _watched(Settling(10.0, output_changed_at=0.0), [(0.0, 60, (5, 6))])
    assert gone.settled(9.0, driver_running=False, reported_idle=False) is None
    assert gone.settled(10.0, driver_running=False, reported_idle=False) == "driver_exited"
    never = _watched(Settling(0.0, output_changed_at=0.0), [(0.0, 60, (5, None))])
    assert never.settled(1e9, False, False) is None


class _Observer:
    def __init__(self, ids):
        self.ids = list(ids)

    def frame(self):
        return pd.DataFrame({"id": self.ids})


class _Checkpoint:
    latest_commit, pending = 7, None


class _Driver:
    attempt = 2

    def __init__(self, running=True, events=("started", "progress", "idle")):
        self.running = running
        self._events = [{"event": event, "attempt": 2} for event in events]

    def checkpoint(self):
        return _Checkpoint()

    def is_running(self):
        return self.running

    def events(self, attempt=None):
        return [e for e in self._events if attempt in (None, e["attempt"])]


def test_the_wait_ends_when_all_is_seen_when_settled_and_at_the_quiet_bound():
    assert wait_until_seen(_Observer([1, 2]), _Driver(), {1, 2}, 60.0, Settling(0.3))["reason"] == "all_seen"
    assert wait_until_seen(_Observer([1]), _Driver(), {1, 2}, 60.0, Settling(0.3))["reason"] == "idle"
    assert wait_until_seen(_Observer([1]), _Driver(False), {1, 2}, 60.0, Settling(0.3))["reason"] == "driver_exited"
    busy = _Driver(events=("started", "progress", "idle", "progress"))  # a batch ran after Spark was idle
    assert wait_until_seen(_Observer([1]), busy, {1, 2}, 1.0, Settling(0.3))["reason"] == "quiet_timeout"
    quiet = wait_until_seen(_Observer([1]), _Driver(), {1, 2}, 0.5, Settling(0.0))
    assert quiet["reason"] == "quiet_timeout" and quiet["waited_s"] >= 0.5


class _MovingCheckpoint:
    """Commits a batch every call until ``batches`` ran, then stands still."""

    def __init__(self, batches: int) -> None:
        self.batches, self.calls = batches, 0

    def __call__(self):
        self.calls += 1
        done = min(self.calls // 3, self.batches)
        return type("State", (), {"latest_commit": done, "pending": None if done == self.batches else done + 1})()


def test_a_query_still_planning_and_committing_batches_is_not_quiet_however_long_its_output_waits():
    driver = _Driver(events=("started", "progress"))
    driver.checkpoint = _MovingCheckpoint(batches=5)  # a checkpoint that moves for ~5 x 3 polls of 0.2 s
    waited = wait_until_seen(_Observer([1]), driver, {1, 2}, 2.0, Settling(0.0))
    assert waited["reason"] == "quiet_timeout" and waited["waited_s"] >= 3.5  # 2 s only after it stood still


def test_batches_that_never_stop_moving_the_checkpoint_still_meet_a_bound_on_the_output():
    driver = _Driver(events=("started", "progress"))
    driver.checkpoint = _MovingCheckpoint(batches=10**6)  # ticks forever, never an output row
    waited = wait_until_seen(_Observer([1]), driver, {1, 2}, 0.5, Settling(0.0))
    assert waited["reason"] == "quiet_timeout" and 1.5 <= waited["waited_s"] < 5.0
