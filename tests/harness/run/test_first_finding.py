"""The mutation benchmark's shortcut: a fault schedule cut short at the first record delivered twice, and not
before (a clean output, a duplicate only among the warm-up records the run does not judge)."""

from __future__ import annotations

import time

import pandas as pd

from streamcert.harness.run.first_finding import CutShort, FirstFindingWatch
from streamcert.harness.run.history import History
from streamcert.harness.waiting import wait_for


class _Observer:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"id": list(self.ids), "key": [f"k{i % 3}" for i in self.ids]})


class _Timeline:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def cut_short(self, reason: str) -> None:
        self.reasons.append(reason)

    def done(self) -> bool:
        return bool(self.reasons)


def test_the_fault_timeline_is_what_the_watch_cuts_short():
    from streamcert.harness.faults.timeline import FaultTimeline

    assert isinstance(FaultTimeline([], [], History()), CutShort)


def test_a_record_delivered_twice_cuts_the_schedule_short_and_is_recorded():
    observer, timeline, history = _Observer([1, 2, 3]), _Timeline(), History()
    with FirstFindingWatch(observer, timeline, history, poll_s=0.02) as watch:
        time.sleep(0.1)
        assert timeline.reasons == [] and watch.found is None  # a clean output: the schedule goes on
        observer.ids += [4, 2]
        wait_for(lambda: timeline.reasons, what="the schedule cut short", timeout=5)
    assert "first finding (duplicate)" in timeline.reasons[0]
    [event] = history.events("first-finding")
    assert event["counts"]["duplicated_ids"] == 1 and event["first"]["id"] == 2


def test_a_duplicate_among_records_the_run_does_not_judge_is_no_finding():
    observer, timeline = _Observer([1, 2, 900, 900]), _Timeline()
    watch = FirstFindingWatch(observer, timeline, History(), exclude=lambda frame: frame[frame["id"] < 900])
    assert watch.look() is None
    assert FirstFindingWatch(_Observer([]), timeline, History()).look() is None  # nothing seen yet
    filtered = FirstFindingWatch(_Observer([900, 1, 2, 2]), timeline, History(),
                                 exclude=lambda frame: frame[frame["id"] < 900])  # rows 1-3 of the frame kept
    assert filtered.look()["counts"]["duplicated_ids"] == 1
    watch.stop()  # idempotent and safe without start
    watch.stop()
