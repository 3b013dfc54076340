"""The one polling loop: returns the probe's first truthy value, quotes the last probe error, aborts early."""

from __future__ import annotations

import time

import pytest

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.waiting import retry, wait_for


def test_wait_for_returns_the_first_truthy_value_of_the_probe():
    answers = iter([None, [], "", [3]])
    assert wait_for(lambda: next(answers), what="a value", timeout=5, interval=0.001) == [3]


def test_wait_for_times_out_quoting_the_last_probe_error_and_the_hint():
    def probe():
        raise ConnectionRefusedError("nobody home")

    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        wait_for(probe, what="the silent server", timeout=0.3, hint="start it", interval=0.01)
    assert time.monotonic() - began < 2
    text = str(info.value)
    assert "No the silent server after 0s" in text
    assert "nobody home" in text and "Hint: start it" in text


def test_wait_for_gives_up_at_once_when_abort_says_why_with_evidence_and_the_chosen_error():
    with pytest.raises(ConfigurationError) as info:
        wait_for(lambda: False, what="the server", timeout=60, abort=lambda: "it exited with code 3",
                 evidence=lambda: "FATAL: port taken", error=ConfigurationError)
    assert "exited with code 3" in str(info.value) and "FATAL: port taken" in str(info.value)


def test_retry_repeats_a_healable_error_and_returns_the_result():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("not yet")
        return "done"

    assert retry(flaky, healable=lambda e: isinstance(e, TimeoutError), timeout=5, interval=0.001) == "done"
    assert len(calls) == 3


def test_retry_raises_an_unhealable_error_at_once_and_a_healable_one_after_the_deadline():
    calls = []

    def broken():
        calls.append(1)
        raise ValueError("bad dsn")

    with pytest.raises(ValueError):
        retry(broken, healable=lambda e: isinstance(e, TimeoutError), timeout=5)
    assert len(calls) == 1
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        retry(lambda: (_ for _ in ()).throw(TimeoutError("still down")), healable=lambda e: True, timeout=0.2,
              interval=0.01)
    assert time.monotonic() - began < 2
