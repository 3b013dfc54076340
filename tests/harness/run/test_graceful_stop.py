"""Where the query thread waits on the progress lock, read from its stack."""

from __future__ import annotations

import pytest

from streamcert.harness.run.graceful_stop import _site_of


class _Frame:
    def __init__(self, method: str) -> None:
        self._method = method

    def getMethodName(self) -> str:  # noqa: N802 - java.lang.StackTraceElement's name
        return self._method


def _stack(caller: str) -> list[_Frame]:
    return [_Frame(name) for name in ("park", "acquire", "lock", "withProgressLocked", caller, "runStream")]


@pytest.mark.parametrize("caller, site", [
    ("constructNextBatch", "planning"),
    ("runBatch", "committing"),
    ("executeOneBatch", "trigger done"),
    ("$anonfun$runActivatedStream$1", "trigger done"),  # Spark 3.5 signals from a lambda
])
def test_the_site_is_named_by_the_caller_of_the_lock(caller, site):
    assert _site_of(_stack(caller)) == site


def test_an_unknown_stack_is_never_taken_for_a_gap():
    assert _site_of([_Frame("park"), _Frame("somewhereElse")]) == "planning"
    assert _site_of([_Frame("withProgressLocked")]) == "planning"
