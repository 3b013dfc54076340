"""The feed of a fault run: the load writes on while the input is less than ``ahead`` batches ahead of what the
query read, stops ``after`` batches past the end of the faults, and stops when the query reads nothing for long."""

from __future__ import annotations

import threading
import time

import pytest

from streamcert.harness.run.feed import FeedGate, consumed


class _Driver:
    """What the gate reads of a driver: its events (progress reports, every attempt's)."""

    def __init__(self) -> None:
        self.reports: list[int] = []
        self.idle_at: list[float] = []

    def events(self):
        return [{"event": "started"}, *({"event": "progress", "numInputRows": rows} for rows in self.reports),
                {"event": "idle", "time": 0.0}, *({"event": "idle", "time": at} for at in self.idle_at)]


def test_what_the_query_read_counts_every_report_replays_included_and_at_least_a_batch_a_report_that_read():
    events = [{"event": "progress", "numInputRows": 60, "attempt": 1}, {"event": "idle"},
              {"event": "progress", "numInputRows": 60, "attempt": 2}, {"event": "progress", "numInputRows": 0}]
    assert consumed(events, batch=50) == 120
    # a source that loses records (or reads less than a batch each time) reads on: each report counts a batch
    assert consumed([{"event": "progress", "numInputRows": 7}] * 3, batch=50) == 150


def test_the_feed_waits_for_the_query_to_read_then_stops_past_the_end_of_the_faults():
    driver, done = _Driver(), threading.Event()
    gate = FeedGate(driver, batch=10, ahead=10, after=5, faults_done=done.is_set, poll_s=0.01)
    assert gate(0) and gate(99)  # less than ten batches ahead of nothing read
    released = []
    waiter = threading.Thread(target=lambda: released.append(gate(100)))
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()  # ten batches ahead: it waits for the query
    driver.reports.append(3)  # a batch that read 3 records counts as one whole batch read
    waiter.join(2)
    assert released == [True]
    done.set()
    assert gate(150) and gate(199) and not gate(200)  # five batches more once the faults are over, then none
    assert gate.stopped_at == {"records": 200, "why": "faults done", "read": None}
    assert not gate(120)  # over is over


def test_a_query_idle_while_the_feed_holds_input_back_gets_the_next_transaction():
    """A source past what its reports count (it skipped ahead on a restart) finds nothing to read: the gate must not
    wait for reports that will never come."""
    driver = _Driver()
    gate = FeedGate(driver, batch=10, ahead=2, after=1, faults_done=lambda: False, stalled_s=5, poll_s=0.01)
    released = []
    waiter = threading.Thread(target=lambda: released.append(gate(20)), daemon=True)
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()  # two batches ahead of nothing read, and the idle event it sees is an old one
    driver.idle_at.append(time.time())  # the query found nothing new to read
    waiter.join(2)
    assert released == [True]
    waiter = threading.Thread(target=lambda: released.append(gate(30)), daemon=True)
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()  # one idle event, one transaction: the next waits for the next
    driver.idle_at.append(time.time())
    waiter.join(2)
    assert released == [True, True]


def test_a_query_that_reads_nothing_for_long_ends_the_feed():
    gate = FeedGate(_Driver(), batch=5, ahead=2, after=0, faults_done=lambda: False, stalled_s=0.2, poll_s=0.01)
    began = time.monotonic()
    assert not gate(10) and time.monotonic() - began < 2
    assert gate.stopped_at == {"records": 10, "why": "query read nothing", "read": 0}


def test_a_feed_needs_a_batch_and_a_positive_lead():
    with pytest.raises(ValueError):
        FeedGate(_Driver(), batch=10, ahead=0, after=1, faults_done=lambda: True)
    with pytest.raises(ValueError):
        FeedGate(_Driver(), batch=0, ahead=2, after=1, faults_done=lambda: True)
