"""driver_kill_moment: kills decided from the query's observed moment (Spark's status API and the checkpoint), frozen
before they are made, in first, steady and replayed batches, on a real query that knows nothing of them."""

from __future__ import annotations

import pytest

import threading
import time
from pathlib import Path

from streamcert.harness.faults import moments
from streamcert.harness.faults.base import FaultCancelled, FaultContext
from streamcert.harness.faults.moments import (_IDLE_LOOK_INTERVAL_S, _LENGTHS, _LOOK_INTERVAL_S, DriverKillAtMoment,
                                              _agrees, _learnt, _MomentClock, _Reach, _WatchLog)
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.checkpoint import CheckpointState
from streamcert.harness.run.driver import DriverProcess, QuerySpec
from streamcert.harness.run.history import History
from streamcert.harness.run.query_status import STATUS_SPARK_CONF, Observation
from streamcert.harness.errors import ConfigurationError


def test_a_kill_is_made_only_when_the_frozen_checkpoint_still_shows_what_the_look_saw():
    reading = Observation(2, 5, frozenset({"reading"}), "steady", 0)
    assert _agrees(reading, CheckpointState(5, 4))
    assert not _agrees(reading, CheckpointState(5, 5))  # committed between the look and the freeze
    committed = Observation(2, 5, frozenset({"just_committed"}), "steady", 0)
    assert _agrees(committed, CheckpointState(5, 5))
    assert not _agrees(committed, CheckpointState(6, 5))  # the next batch was planned meanwhile


def test_an_aim_later_than_the_looks_reach_is_brought_back_to_where_they_reached():
    """A write shorter than a few looks, aimed at 92 % of it (0.92 s): batch after batch the looks saw it at 0.4 s
    and 0.6 s at most; the next batch aims a little before the earlier of those (90 % of it: the next write may be a
    little shorter), not at an age no look gets to. A batch whose looks got past its aim (struck, or let go) teaches
    nothing."""
    reach = _Reach()
    assert reach.capped(0.92) == 0.92 and reach.capped(None) is None  # nothing learnt: the aim as it was
    for batch, ages in ((7, (0.0, 0.4)), (8, (0.0, 0.3, 0.6)), (9, (0.0, 0.5, 1.0))):
        for age in ages:
            reach.saw(batch, age, aim=0.92)
    reach.passed(7)
    assert reach.capped(0.92) == pytest.approx(0.36)
    reach.passed(8)
    reach.passed(8)  # told twice: counted once
    reach.passed(9)  # its looks got to 1.0 s, past the aim: the moment was reachable there
    reach.passed(10)  # never seen in the wanted moment: nothing learnt
    assert reach.reached == [0.4, 0.6] and reach.capped(0.92) == pytest.approx(0.36) and reach.capped(0.2) == 0.2
    # batches shrinking as a backlog drains: each reaches a little less than the last, and the next one's looks
    # still get past an aim capped by the shortest reach so far
    shrinking = _Reach()
    for batch, latest in ((14, 0.537), (15, 0.496)):
        shrinking.saw(batch, latest, aim=1.766)
        shrinking.passed(batch)
    assert shrinking.capped(1.766) < 0.489 < 0.496


def test_a_late_commit_kill_aims_round_trips_before_the_end_of_the_shortest_commit_not_at_a_fraction_of_the_median():
    """Session 26's escape: a commit on a 69-ms link learnt as 2.55-3.1 s long (its first step, an idempotent
    producer's connection, varies), its bug in the round trips before the last step. A late fraction (0.884) of the
    median strikes past the end of a 2.55-s commit; an aim 1.5 round trips before the shortest length learnt strikes
    before the last step of every batch seen. Without a slowed link the round trip is unknown and the fraction
    aims; with nothing learnt a steady kill watches a batch first, and a first batch strikes at once."""
    clock = _MomentClock(_Driver())
    slowed = ("kafka", 69, "both")
    clock.lengths[("commit_in_flight", False, slowed)] = [2.81, 2.55, 3.1]
    assert clock.aim("commit_in_flight", "steady", 0.884, slowed) == pytest.approx(0.884 * 2.81)  # > 2.55 - 0.138
    from_end = clock.aim("commit_in_flight", "steady", 0.884, slowed, round_trips_before_end=1.5)
    assert from_end == pytest.approx(2.55 - 1.5 * 0.138)
    answers_only = ("kafka", 69, "downstream")
    clock.lengths[("commit_in_flight", False, answers_only)] = [2.0]
    assert clock.aim("commit_in_flight", "steady", 0.5, answers_only, 2.0) == pytest.approx(2.0 - 2 * 0.069)
    clock.lengths[("commit_in_flight", False, None)] = [0.4]
    assert clock.aim("commit_in_flight", "steady", 0.5, None, 1.5) == pytest.approx(0.2)
    assert clock.aim("writing", "steady", 0.5, slowed, 1.5) is None
    assert clock.aim("writing", "first", 0.5, slowed, 1.5) == 0.0
    clock.lengths[("writing", False, slowed)] = [0.1]
    assert clock.aim("writing", "steady", 0.5, slowed, 1.5) == 0.0  # shorter than the round trips: at once
    # the first batch takes the steady batches' length, as a fraction does
    assert clock.aim("commit_in_flight", "first", 0.0, slowed, 1.5) == pytest.approx(from_end)


def test_a_kill_that_never_struck_says_what_its_looks_saw_of_each_watched_batch():
    """The evidence of a miss: per watched batch, how many looks, the moments they saw, how late into the wanted
    moment they got and where the strike aimed; the moment lengths learnt, by kind of batch and slowing."""
    log = _WatchLog(limit=2)
    writing = Observation(3, 7, frozenset({"reading", "writing"}), "steady", 0)
    log.saw(writing, wanted=True, age=0.0, aim=None)
    log.saw(writing, wanted=True, age=0.21, aim=0.35)
    log.saw(Observation(3, 7, frozenset({"read_done", "commit_in_flight"}), "steady", 0), False, None, 0.35)
    for batch in (8, 9):
        log.saw(Observation(3, batch, frozenset({"planning"}), "steady", 0), False, None, None)
    watched = log.as_list()
    assert [entry["batch"] for entry in watched] == [8, 9]  # the oldest dropped past the limit
    log = _WatchLog()
    log.saw(writing, wanted=True, age=0.0, aim=None)
    log.saw(writing, wanted=True, age=0.21, aim=0.35)
    log.saw(Observation(3, 7, frozenset({"read_done", "commit_in_flight"}), "steady", 0), False, None, 0.35)
    [entry] = log.as_list()
    assert entry == {"attempt": 3, "batch": 7, "looks": 3, "wanted_looks": 2, "latest_age_s": 0.21, "aim_s": 0.35,
                     "moments": ["commit_in_flight", "read_done", "reading", "writing"]}
    learnt = _learnt({("writing", False, ("kafka", 190, "downstream")): [0.3, 0.5, 0.4], ("planning", True, None): []})
    assert learnt == [{"moment": "writing", "first": False, "slowed": True, "n": 3, "median_s": 0.4,
                       "shortest_s": 0.3}]


class _Driver:
    """Stands for the driver only as the key its moment lengths are learnt under."""


class _FrozenDriver(_Driver):
    """A driver a strike freezes: what it was told, and the checkpoint it shows meanwhile."""

    def __init__(self, state: CheckpointState) -> None:
        self.state, self.told = state, []

    def checkpoint(self) -> CheckpointState:
        return self.state

    def pause(self) -> None:
        self.told.append("pause")

    def resume(self) -> None:
        self.told.append("resume")

    def kill(self) -> None:
        self.told.append("kill")


class _Output:
    """The run's output as a moment kill reads it: a visible mark the test moves."""

    def __init__(self, mark: int) -> None:
        self.mark, self.asked = mark, 0

    def visible_mark(self) -> int:
        self.asked += 1
        return self.mark


def test_a_late_commit_kill_whose_commit_already_showed_its_rows_lets_it_go_on_and_aims_before_the_rows_next():
    """Session 28's quick-plan escape: a late commit kill aimed 1.65 round trips before the shortest commit learnt
    (2.60 s) struck at 2.37 s, 6 ms after the batch's rows showed: past the window it is for, in a commit shorter
    than any learnt. With the driver frozen it asks the output whether it grew since the commit's first look: it
    did, so the driver goes on, unkilled, and the commit is learnt as long as it ran until its rows showed plus the
    answer's way back (no commit watched to its end yet), so the next batch's aim comes before its rows. Output
    unchanged: the kill lands. A kill of another band (a fraction of the median), or one with no observer, strikes
    whatever the output did."""
    slowed = ("kafka", 69, "both")
    output = _Output(1_000)
    driver = _FrozenDriver(CheckpointState(24, 23))
    context = FaultContext(history=History(), workdir=Path("/nonexistent"), driver=driver, observer=output,
                           environment=object())
    late = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, {
        "moment": "commit_in_flight", "fraction": 0.768, "round_trips_before_end": 1.65, "slow_link": "kafka",
        "latency_ms": 69}), context)
    late._toxics = (None, [])  # the link is slowed (as the watch does it)
    commit = Observation(11, 24, frozenset({"commit_in_flight", "read_done"}), "steady", 0)
    assert late._aim_by_rows(commit, 0.0, 2.372) == 2.372 and late._before_rows  # nothing learnt: before the rows
    output.mark = 1_057  # the copy committed: its 57 rows show
    strike = late._freeze_and_decide(commit)
    assert strike["landed"] is False and strike["rows_shown"] is True and driver.told == ["pause", "resume"]
    clock = _MomentClock(driver)
    clock.lengths[("commit_in_flight", False, slowed)] = [2.60, 3.05]
    clock.saw(commit, 100.0, slowed)
    late._learn_overshoot(clock, commit, 102.37, aim=2.372)
    aim = clock.aim("commit_in_flight", "steady", 0.768, slowed, 1.65)
    assert aim == pytest.approx(2.37 + 0.069 - 1.65 * 0.138) and aim < 2.37
    assert late._overshot == [{"attempt": 11, "batch": 24, "rows_shown_by_s": 2.37, "aim_s": 2.372}]
    assert late._rows_were_shown(commit) and not late._rows_were_shown(Observation(12, 24, commit.moments, "steady", 0))
    # session 29: the commit's last request had left before the freeze, and its rows showed while it crossed the
    # 69-ms link: the frozen driver is held that long (83 ms and the server's step) before the output is read again
    in_flight = Observation(11, 26, frozenset({"commit_in_flight", "read_done"}), "steady", 0)
    driver.state, driver.told = CheckpointState(26, 25), []
    late._aim_by_rows(in_flight, 0.0, aim)
    output.mark += 57
    late._rows._marks[(11, 26)] = output.mark - 57  # the first look's mark: before the request arrived
    strike = late._freeze_and_decide(in_flight)
    assert strike["landed"] is False and driver.told == ["pause", "resume"]
    arriving = _Arriving(output.mark)
    late._rows._observer = arriving
    late._rows._marks[(11, 26)] = arriving.mark
    driver.told = []
    began = time.monotonic()
    strike = late._freeze_and_decide(in_flight)
    assert strike["landed"] is False and driver.told == ["pause", "resume"] and arriving.asked == 2
    assert time.monotonic() - began >= 0.069 * 1.2 + 0.03
    later = Observation(11, 25, frozenset({"commit_in_flight", "read_done"}), "steady", 0)
    late._rows._observer = output
    driver.state, driver.told = CheckpointState(25, 24), []
    late._aim_by_rows(later, 0.0, aim)
    assert late._freeze_and_decide(later)["landed"] is True and driver.told == ["pause", "kill"]
    middle = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, {
        "moment": "commit_in_flight", "fraction": 0.5, "slow_link": "kafka", "latency_ms": 69}), context)
    assert middle._aim_by_rows(later, 0.0, 0.4) == 0.4 and not middle._before_rows
    output.mark, driver.told = 2_000, []
    assert middle._freeze_and_decide(later)["landed"] is True and driver.told == ["pause", "kill"]
    unobserved = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, {
        "moment": "commit_in_flight", "round_trips_before_end": 1.5, "slow_link": "kafka", "latency_ms": 69}),
        FaultContext(history=History(), workdir=Path("/nonexistent"), driver=driver, environment=object()))
    assert unobserved._rows is None and unobserved._aim_by_rows(later, 0.0, 0.4) == 0.4


def _kill(tmp_path, driver, **params) -> DriverKillAtMoment:
    context = FaultContext(history=History(), workdir=tmp_path, driver=driver)
    return build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, params), context)


class _Arriving(_Output):
    """A commit's last request on its way: the rows show from the second read on."""

    def visible_mark(self) -> int:
        super().visible_mark()
        return self.mark + (57 if self.asked > 1 else 0)


class _Link:
    def add_toxic(self, toxic_type: str, **_params) -> str:
        return toxic_type

    def remove_toxic(self, name: str) -> None:
        pass


class _Stack:
    def link(self, name: str) -> _Link:
        return _Link()


class _Status:
    def close(self) -> None:
        pass


class _Showing(_Output):
    """Batch 25's commit shows more of its rows at every look (one prepared transaction committed after another)."""

    def __init__(self, driver: _FrozenDriver) -> None:
        super().__init__(0)
        self.driver = driver

    def visible_mark(self) -> int:
        self.mark += 19 if self.driver.state.pending == 25 else 0
        return super().visible_mark()


def test_a_commit_that_shows_its_rows_in_several_steps_is_let_go_once_and_the_next_batch_is_struck():
    """A PostgreSQL commit shows its rows one prepared transaction at a time: every later look at the same batch
    finds the output grown again. The batch is let go on once (one freeze, one length learnt), never frozen again;
    the next batch, whose rows have not shown when its strike comes due, is killed."""
    driver = _FrozenDriver(CheckpointState(25, 24))
    driver.attempt, driver.start_states = 10, {}
    driver.is_running = lambda: "kill" not in driver.told
    output = _Showing(driver)
    kill = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, {
        "moment": "commit_in_flight", "round_trips_before_end": 1.45, "slow_link": "postgres", "latency_ms": 67,
        "timeout_s": 10}), FaultContext(history=History(), workdir=Path("/nonexistent"), driver=driver,
                                        observer=output, environment=_Stack()))
    _LENGTHS[driver] = {("commit_in_flight", False, ("postgres", 67, "both")): [0.01]}  # due at once
    looks = iter([25] * 6 + [26] * 3)

    def look(_status, attempt, _start):
        batch = next(looks)
        driver.state = CheckpointState(batch, batch - 1)
        return Observation(attempt, batch, frozenset({"commit_in_flight", "read_done"}), "steady", 0, driver.state)

    kill._status = lambda attempt, deadline: _Status()
    kill._look = look
    event = kill._inject()
    assert event["reached"] and [strike["batch"] for strike in event["strikes"]] == [26]
    assert driver.told == ["pause", "resume", "pause", "kill"]
    assert [entry["batch"] for entry in event["overshot"]] == [25] and event["let_go"] == 1
    assert event["learnt"][0]["n"] == 2
    assert len(_LENGTHS[driver][("commit_in_flight", False, ("postgres", 67, "both"))]) == 2


class _Clock:
    """``time`` as the moment kill sees it: looks 50 ms apart, whatever the machine does."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def time(self) -> float:
        return self.now


def test_a_commit_that_runs_on_after_its_rows_is_struck_at_the_rows_of_its_own_batch_not_from_its_start(monkeypatch):
    """Session 29: a PostgreSQL sink that commits its prepared transactions before it records the decision shows its
    rows ~0.4 s into a ~1-s commit, the bug's window after them; aimed from the commit's start, a late kill struck
    after the whole commit (a commit shorter than any learnt), and held to strike before the rows it walked back
    batch after batch to the commit's start. Once one commit was watched to its end (its rows at 0.1 s, its end at
    0.6 s: 0.5 s after its rows, more than the 1.45 round trips of a 67-ms link the kill aims before the end), the
    next batch is struck 0.5 - 0.194 s after its own rows showed, wherever they showed (0.3 s in), after them."""
    clock = _Clock()
    monkeypatch.setattr(moments, "time", clock)
    slowed = ("postgres", 67, "both")
    driver = _FrozenDriver(CheckpointState(24, 23))
    driver.attempt, driver.start_states = 10, {}
    driver.is_running = lambda: "kill" not in driver.told
    output = _Output(0)
    kill = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, {
        "moment": "commit_in_flight", "round_trips_before_end": 1.45, "slow_link": "postgres", "latency_ms": 67,
        "timeout_s": 30}), FaultContext(history=History(), workdir=Path("/nonexistent"), driver=driver,
                                        observer=output, environment=_Stack()))
    _LENGTHS[driver] = {("commit_in_flight", False, slowed): [0.6]}
    commits = {24: (1_000.2, 0.1, 0.6), 25: (1_001.0, 0.3, 1.0)}  # batch -> (commit's start, rows at, length)

    def look(_status, attempt, _start):
        clock.now += 0.045
        batch = next((b for b, (began, _rows, length) in commits.items() if clock.now < began + length), 26)
        driver.state = CheckpointState(batch, batch - 1)
        output.mark = sum(57 for began, rows, _length in commits.values() if clock.now >= began + rows)
        moments_now = {"commit_in_flight", "read_done"} if clock.now >= commits.get(batch, (0,))[0] else {"writing"}
        return Observation(attempt, batch, frozenset(moments_now), "steady", 0, driver.state)

    kill._status = lambda attempt, deadline: _Status()
    kill._look = look
    event = kill._inject()
    [strike] = event["strikes"]
    assert strike["batch"] == 25 and strike["landed"] and not strike["before_rows"]
    assert strike["tail_after_rows_s"] == pytest.approx(0.5, abs=0.06)
    assert strike["rows_shown_s"] == pytest.approx(0.3, abs=0.06)
    expected = strike["rows_shown_s"] + strike["tail_after_rows_s"] - 1.45 * 0.134
    assert strike["aim_s"] == pytest.approx(expected, abs=0.002)
    assert [entry["batch"] for entry in event["overshot"]] == [24]  # the batch it learnt the tail on, let go once
    assert driver.told == ["pause", "resume", "pause", "kill"]


def test_looks_are_spaced_out_only_in_a_first_batch_that_cannot_show_the_wanted_moment_before_the_next(tmp_path):
    """Looks cost the driver CPU while it starts its workers: in an attempt's first batch that is not the wanted one
    they wait 50 ms; while it plans and a later moment is wanted, a third of that moment's shortest learnt length
    (5 to 50 ms), and 5 ms as long as no length of it was learnt. Everywhere else every 5 ms."""
    driver = _Driver()
    clock = _MomentClock(driver)
    planning_first = Observation(2, 4, frozenset({"planning"}), "first", 1)
    reading_first = Observation(2, 4, frozenset({"reading"}), "first", 1)
    steady = Observation(2, 9, frozenset({"planning"}), "steady", 0)
    wants_steady = _kill(tmp_path, driver, moment="writing", batch_class="steady")
    assert wants_steady._pause_after(planning_first, clock) == _IDLE_LOOK_INTERVAL_S
    assert wants_steady._pause_after(reading_first, clock) == _IDLE_LOOK_INTERVAL_S
    assert wants_steady._pause_after(steady, clock) == _LOOK_INTERVAL_S
    assert wants_steady._pause_after(None, clock) == _LOOK_INTERVAL_S
    wants_commit = _kill(tmp_path, driver, moment="commit_in_flight", batch_class="first")
    assert wants_commit._pause_after(planning_first, clock) == _LOOK_INTERVAL_S  # its length not learnt yet
    clock.lengths.update({("commit_in_flight", True, None): [0.6], ("commit_in_flight", False, None): [0.09, 0.3]})
    assert wants_commit._pause_after(planning_first, clock) == pytest.approx(0.03)
    assert wants_commit._pause_after(reading_first, clock) == _LOOK_INTERVAL_S
    clock.lengths[("commit_in_flight", False, ("kafka", 200, "both"))] = [0.006]
    assert wants_commit._pause_after(planning_first, clock) == _LOOK_INTERVAL_S
    clock.lengths.clear()
    clock.lengths[("commit_in_flight", True, None)] = [2.0]
    assert wants_commit._pause_after(planning_first, clock) == _IDLE_LOOK_INTERVAL_S
    wants_planning = _kill(tmp_path, driver, moment="planning", batch_class="first")
    assert wants_planning._pause_after(planning_first, clock) == _LOOK_INTERVAL_S


def test_a_spaced_out_wait_does_not_count_as_the_time_between_two_looks():
    """``due`` strikes early by the time between looks near the wanted moment: the 50-ms waits of a first batch's
    planning must not make it strike early in the moments after."""
    planning = Observation(2, 4, frozenset({"planning"}), "first", 1)
    spaced, unspaced = _MomentClock(_Driver()), _MomentClock(_Driver())
    for now in (10.0, 10.065, 10.13):  # a look takes 15 ms; 50 ms waits, of which 45 ms more than near a moment
        spaced.saw(planning, now, idled=0.045 if now > 10 else 0.0)
        unspaced.saw(planning, now)
    assert spaced.look_s == pytest.approx(0.8 * (0.8 * 0.005 + 0.2 * 0.02) + 0.2 * 0.02)  # 20-ms looks, as near one
    assert unspaced.look_s > 2.5 * spaced.look_s


class _QueryNotStarted:
    """A running driver whose query has not started yet: a moment kill waits for it."""

    attempt = 1
    start_states: dict = {}

    def __init__(self) -> None:
        self.killed = self.restarted = 0

    def is_running(self) -> bool:
        return True

    def events(self, attempt: int) -> list:
        return []

    def checkpoint(self) -> CheckpointState:
        return CheckpointState(None, None)

    def kill(self) -> None:
        self.killed += 1

    def restart(self) -> None:
        self.restarted += 1


def test_a_kill_cancelled_while_it_waits_for_its_moment_gives_up_without_killing(tmp_path):
    """A run's first finding cuts its schedule short: a kill still watching must not strike (nor kill "anyway" when
    its watch ends), so the query's last attempt runs on and the run settles at once."""
    driver = _QueryNotStarted()
    kill = _kill(tmp_path, driver, moment="writing", batch_class="steady", timeout_s=60)
    threading.Timer(0.3, kill.cancel).start()
    began = time.monotonic()
    with pytest.raises(FaultCancelled):
        kill.start()
    assert time.monotonic() - began < 5 and kill.cancelled and not kill.active
    kill.stop()  # nothing was injected: nothing to heal
    assert driver.killed == driver.restarted == 0
    assert kill.history.events() == []
    uncancelled = _kill(tmp_path, _QueryNotStarted(), moment="writing", batch_class="steady", timeout_s=0.3)
    uncancelled.start()  # its watch timed out: it kills where the query was, as before
    assert uncancelled.driver.killed == 1 and uncancelled.history.events("fault-start")[0]["reached"] is False


def test_a_moment_or_class_that_does_not_exist_is_refused_when_the_schedule_is_read(tmp_path):
    context = FaultContext(history=History(), workdir=tmp_path)
    for params in ({"moment": "flushing"}, {"moment": "writing", "batch_class": "last"},
                   {"moment": "writing", "fraction": 1.5}):
        with pytest.raises(ConfigurationError):
            build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0, params), context)


def test_the_fault_asks_the_driver_for_spark_s_status_api():
    assert DriverKillAtMoment.spark_conf == STATUS_SPARK_CONF
    assert STATUS_SPARK_CONF["spark.ui.enabled"] == "true"


@pytest.mark.integration
def test_kills_land_at_the_observed_moment_in_steady_first_and_replayed_batches(tmp_path):
    """A counting source into the file sink (one stage reads and writes); each kill must land where it looked."""
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "checkpoint"),
                     {"rows": 100_000, "rows_per_batch": 5, "read_delay_ms": 400, "path": str(tmp_path / "out")},
                     master="local[1,2]", spark_conf=dict(STATUS_SPARK_CONF))
    history = History()
    cells = [("reading", "steady"), ("planning", "first"), ("just_committed", "replay_of_replay")]
    with DriverProcess(spec, tmp_path / "driver") as driver:
        driver.start()
        context = FaultContext(driver=driver, history=history, workdir=tmp_path / "faults")
        for moment, batch_class in cells:
            fault = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0,
                                          {"moment": moment, "batch_class": batch_class, "timeout_s": 150.0}),
                                context)
            fault.start()
            assert not driver.is_running()
            fault.stop()
    starts = history.events("fault-start")
    assert [event["reached"] for event in starts] == [True] * len(cells), starts
    for (moment, batch_class), event in zip(cells, starts, strict=True):
        wanted = [strike for strike in event["strikes"] if strike["wanted"]]
        assert wanted and moment in wanted[-1]["moments"] and wanted[-1]["batch_class"] == batch_class, event
        # what the frozen checkpoint said is what the run's checkpoint says now of the killed batch
        pending = event["pending_batch"]
        assert (pending == wanted[-1]["batch"]) == (moment != "just_committed"), event
    # the replay of a replay is a batch two attempts in a row started with pending
    last = [s for s in starts[-1]["strikes"] if s["wanted"]][-1]
    assert last["replay_depth"] >= 2


@pytest.mark.integration
def test_the_planning_of_a_jvm_sources_replayed_first_batch_is_struck(tmp_path):
    """A JVM source's replay is planned within ~0.6 s of the query's start, while the status API's first answer took
    1.7 s: the driver warms the API before its query starts, or every attempt's planning passes unseen."""
    spec = QuerySpec("tests.harness.queries:rate_to_files", str(tmp_path / "checkpoint"),
                     {"path": str(tmp_path / "out")}, master="local[1,2]", spark_conf=dict(STATUS_SPARK_CONF))
    history = History()
    with DriverProcess(spec, tmp_path / "driver") as driver:
        driver.start()
        driver.wait_for_batches(2, timeout=180)
        context = FaultContext(driver=driver, history=history, workdir=tmp_path / "faults")
        fault = build_fault(FaultSpec("driver_kill_moment", "driver", 0, 0,
                                      {"moment": "planning", "batch_class": "first", "timeout_s": 150.0}), context)
        fault.start()
        fault.stop()
        sessions = [event for event in driver.events() if event["event"] == "session"]
    [event] = history.events("fault-start")
    assert event["reached"] is True, event
    [wanted] = [strike for strike in event["strikes"] if strike["wanted"]]
    assert wanted["moments"] == ["planning"] and wanted["replay_depth"] >= 1, event
    assert all(session["status_api_warmed_s"] is not None for session in sessions), sessions


def _task_kill(tmp_path, fault: str, master: str, params: dict) -> dict:
    """Run a counting query on ``master``, let ``fault`` strike a task of a steady batch, check the query went on
    past it (a task died, not the query), and return the fault's landed strike."""
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "checkpoint"),
                     {"rows": 100_000, "rows_per_batch": 5, "read_delay_ms": 400, "path": str(tmp_path / "out")},
                     master=master, spark_conf=dict(STATUS_SPARK_CONF))
    history = History()
    with DriverProcess(spec, tmp_path / "driver") as driver:
        driver.start()
        context = FaultContext(driver=driver, history=history, workdir=tmp_path / "faults")
        fault = build_fault(FaultSpec(fault, "executor", 0, 0, {"timeout_s": 240.0, **params}), context)
        fault.start()
        driver.wait_for_batches(len([e for e in driver.events() if e["event"] == "progress"]) + 2, timeout=180)
        assert driver.is_running()
        fault.stop()
    [event] = history.events("fault-start")
    assert event["reached"] is True, event
    [strike] = [s for s in event["strikes"] if s["landed"]]
    assert params["moment"] in strike["moments"] and strike["batch_class"] == "steady"
    return strike


@pytest.mark.integration
def test_a_python_worker_is_killed_while_it_runs_a_task_of_a_steady_batch_and_spark_retries_it(tmp_path):
    strike = _task_kill(tmp_path, "python_worker_kill_moment", "local[1,3]", {"moment": "writing"})
    assert strike["pids"] and min(strike["pids"]) > 0


def test_an_executor_kill_at_a_moment_refuses_a_master_whose_tasks_run_in_the_driver(tmp_path):
    spec = QuerySpec("tests.harness.queries:counting_to_files", str(tmp_path / "checkpoint"), {}, master="local[2]")
    context = FaultContext(driver=DriverProcess(spec, tmp_path / "driver"), history=History(), workdir=tmp_path)
    with pytest.raises(ConfigurationError, match="local-cluster"):
        build_fault(FaultSpec("executor_kill_moment", "executor", 0, 0, {"moment": "writing"}), context)


@pytest.mark.integration
def test_an_executor_running_a_task_of_a_steady_batch_is_killed_and_spark_retries_the_task_elsewhere(tmp_path):
    strike = _task_kill(tmp_path, "executor_kill_moment", "local-cluster[2,1,1024]",
                        {"moment": "writing", "fraction": 0.5})
    assert strike["executor_id"] and strike["pid"] > 0
    # the victim ran a task by one of the two witnesses: its Python workers, or (the reader done, the file sink's
    # JVM write under way) the status API's active tasks
    assert (strike["running_seen_by"], strike["busy_workers"] >= 1) in {("python_workers", True),
                                                                         ("status_api", False)}, strike
