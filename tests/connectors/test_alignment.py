"""Event-time alignment's cap (seed 001's maxAllowedDrift) on a broker stood in for by lists of timestamps: the
cap's arithmetic, idleness, restarts and bounded runs; the real broker's answers are the integration tests'."""

from __future__ import annotations

from streamcert.connectors.alignment import EventTimeAligner, TimeProbe
from streamcert.connectors.kafka_time_probe import KafkaTimeProbe


class Log:
    """Partitions as lists of record timestamps (offset = index); every record readable."""

    def __init__(self, **partitions: list[int]) -> None:
        self.times = {("t", int(name[1:])): stamps for name, stamps in partitions.items()}

    def end(self) -> dict:
        return {"t": {p: len(stamps) for (_t, p), stamps in self.times.items()}}

    def head_times(self, ranges):
        return {tp: self.times[tp][begin] for tp, (begin, until) in ranges.items() if until > begin}

    def last_times(self, before):
        return {tp: self.times[tp][offset - 1] for tp, offset in before.items() if offset > 0}

    def first_offsets_after(self, times, ranges, scan_limit=None):
        out = {}
        for tp, ms in times.items():
            begin, end = ranges[tp]
            later = [offset for offset, stamp in enumerate(self.times[tp]) if stamp > ms and begin <= offset < end]
            if later:
                out[tp] = later[0]
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_kafka_probe_and_the_test_log_are_time_probes():
    assert isinstance(KafkaTimeProbe("127.0.0.1:1", "read_committed", {}, 1.0), TimeProbe)
    assert isinstance(Log(), TimeProbe) and not isinstance(object(), TimeProbe)


def test_a_partition_ahead_is_read_only_up_to_the_other_partitions_heads_plus_the_drift():
    log = Log(p0=[0, 10, 20, 30, 40, 50], p1=[25, 35, 45, 55, 65, 75])
    aligner = EventTimeAligner(drift_ms=20)
    # p1 is held at p0's head (0) + 20: nothing of it; p0 at p1's head (25) + 20: up to 40
    assert aligner.cap({"t": {0: 0, 1: 0}}, log.end(), log) == {"t": {0: 5, 1: 0}}
    assert aligner.last_cap_ms == 20
    # the next batch: p0's head is 50, p1's 25: p1 reads up to 70, p0 waits (its 50 is past 25 + 20)
    assert aligner.cap({"t": {0: 5, 1: 0}}, log.end(), log) == {"t": {0: 5, 1: 5}}


def test_no_end_goes_below_its_start_and_the_slowest_partition_always_progresses():
    log = Log(p0=[0, 10, 20, 30], p1=[500, 600])
    aligner = EventTimeAligner(drift_ms=0)
    assert aligner.cap({"t": {0: 2, 1: 0}}, log.end(), log) == {"t": {0: 4, 1: 0}}


def test_a_partition_without_input_holds_the_others_until_it_has_been_idle_for_the_timeout():
    clock = Clock()
    log = Log(p0=[0, 10], p1=[100, 200, 300])
    aligner = EventTimeAligner(drift_ms=50, idle_timeout_ms=2000, clock=clock)
    assert aligner.cap({"t": {0: 1, 1: 0}}, log.end(), log) == {"t": {0: 2, 1: 0}}  # p0's head 10 holds p1
    clock.now += 1.0
    assert aligner.cap({"t": {0: 2, 1: 0}}, log.end(), log) == {"t": {0: 2, 1: 0}}  # p0 drained, still holding
    clock.now += 1.5
    assert aligner.cap({"t": {0: 2, 1: 0}}, log.end(), log) == {"t": {0: 2, 1: 3}}  # idle: p1 alone, uncapped


def test_a_restarted_reader_learns_where_a_drained_partition_was_and_keeps_the_bound():
    log = Log(p0=[0, 10, 20], p1=[15, 25, 100, 200])
    fresh = EventTimeAligner(drift_ms=10, idle_timeout_ms=60_000)
    # p0 was read to its end before the restart: its last record (20) holds p1 at 30
    assert fresh.cap({"t": {0: 3, 1: 1}}, log.end(), log) == {"t": {0: 3, 1: 2}}


def test_a_bounded_run_treats_a_partition_read_to_its_end_as_idle_at_once():
    log = Log(p0=[0, 10], p1=[100, 200])
    aligner = EventTimeAligner(drift_ms=5, idle_timeout_ms=60_000)
    assert aligner.cap({"t": {0: 0, 1: 0}}, log.end(), log, final=True) == {"t": {0: 2, 1: 0}}
    assert aligner.cap({"t": {0: 2, 1: 0}}, log.end(), log, final=True) == {"t": {0: 2, 1: 2}}


def test_nothing_holds_when_no_partition_has_input_or_position():
    log = Log(p0=[], p1=[])
    aligner = EventTimeAligner(drift_ms=5)
    assert aligner.cap({"t": {0: 0, 1: 0}}, log.end(), log) == log.end()
    assert aligner.last_cap_ms is None
