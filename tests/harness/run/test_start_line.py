"""The start line several load processes meet at: one time zero for all, a clear error when one never comes."""

from __future__ import annotations

import threading
import time

import pytest

from streamcert.harness.errors import StartupFailed
from streamcert.harness.run import start_line


def test_every_process_gets_the_latest_arrival_as_time_zero(tmp_path):
    start_line.arrive(tmp_path, 0, at=100.0)
    later = threading.Timer(0.1, start_line.arrive, args=(tmp_path, 1), kwargs={"at": 105.5})
    later.start()
    try:
        assert start_line.start_time(tmp_path, 2, timeout=5.0) == 105.5
    finally:
        later.join()
    assert start_line.start_time(tmp_path, 2, timeout=0.0) == 105.5  # a second reader reads the same


def test_a_process_that_never_arrives_is_named_after_the_timeout(tmp_path):
    start_line.arrive(tmp_path, 0)
    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        start_line.start_time(tmp_path, 3, timeout=0.2)
    assert "[1, 2] of 3" in str(info.value) and "Hint:" in str(info.value)
    assert time.monotonic() - began < 2.0


def test_clear_removes_an_earlier_runs_arrivals(tmp_path):
    start_line.arrive(tmp_path, 0, at=1.0)
    start_line.clear(tmp_path)
    with pytest.raises(StartupFailed):
        start_line.start_time(tmp_path, 1, timeout=0.0)
