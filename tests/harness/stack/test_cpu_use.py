"""The machine's CPU window: what counts as busy, and that real work shows in it."""

import time
from collections import namedtuple

import psutil

from streamcert.harness.stack import cpu_use
from streamcert.harness.stack.cpu_use import CpuWindow

_Times = namedtuple("_Times", "user nice system idle iowait irq softirq steal guest guest_nice")


def test_a_window_not_started_has_no_figures():
    assert CpuWindow().figures() is None


def test_busy_counts_every_working_field_once_and_waiting_for_io_as_idle(monkeypatch):
    readings = iter([_Times(10, 5, 3, 100, 7, 1, 1, 0, 2, 1),
                     # user +6 (of it guest +2: inside user already), nice +4, system +2, irq +1, iowait +5, idle +3
                     _Times(16, 9, 5, 103, 12, 2, 1, 0, 4, 1)])
    monkeypatch.setattr(cpu_use.psutil, "cpu_times", lambda: next(readings))
    monkeypatch.setattr(cpu_use.psutil, "cpu_count", lambda logical=True: 2)
    figures = CpuWindow().start().figures()
    assert figures["busy_s"] == 13.0 and figures["nice_s"] == 4.0 and figures["idle_s"] == 8.0
    assert figures["cores"] == 2 and figures["floor_s"] == 6.5


def test_work_done_in_the_window_shows_as_busy_seconds():
    window = CpuWindow().start()
    spent = time.process_time()
    while time.process_time() - spent < 0.4:  # a core busy for 0.4 s of this process's own CPU
        pass
    figures = window.figures()
    # machine-wide: whatever else ran only adds to it
    assert figures["busy_s"] >= 0.3 and figures["cores"] == psutil.cpu_count(logical=True)
    assert 0 < figures["busy_share"] <= 1.0 and abs(figures["floor_s"] - figures["busy_s"] / figures["cores"]) <= 0.1
