"""Waiting and retrying: the harness's one polling loop.

:func:`wait_for` polls a probe until it gives something truthy (a server answers, a process appears, a batch
commits) and otherwise fails with what the last probe said; :func:`retry` repeats an action while its error is
one a retry can heal. Both take a deadline in seconds and never sleep past it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

from streamcert.harness.errors import StartupFailed, StreamcertError
from streamcert.harness.progress import step

__all__ = ["wait_for", "retry"]

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T],
    *,
    what: str,
    timeout: float,
    hint: str = "",
    interval: float = 0.05,
    abort: Callable[[], str | None] | None = None,
    evidence: Callable[[], str] | None = None,
    error: type[StreamcertError] = StartupFailed,
    progress: bool = False,
) -> T:
    """Call ``probe()`` every ``interval`` seconds until it returns something truthy, and return that.

    A probe that raises counts as "not yet" (servers fail readiness probes in many ways while they boot); the last
    error is quoted if time runs out. ``abort`` may return a reason to give up at once (the server exited);
    ``evidence`` supplies what was seen (log lines) for the error, which is an ``error`` (default
    :class:`StartupFailed`). ``progress`` shows a progress line while waiting.
    """
    deadline = time.monotonic() + timeout
    last_error = ""
    with step(f"Waiting for {what}") if progress else contextlib.nullcontext(None) as display:
        while True:
            reason = abort() if abort else None
            if reason:
                raise error(f"{what} did not happen: {reason}.", hint=hint or None,
                            details=evidence() if evidence else None)
            try:
                found = probe()
                if found:
                    return found
                last_error = ""
            except Exception as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                if display is not None:
                    display.update(last_error)
            if time.monotonic() >= deadline:
                seen = f" The last probe said: {last_error}." if last_error else ""
                raise error(f"No {what} after {timeout:.0f}s.{seen}", hint=hint or None,
                            details=evidence() if evidence else None)
            time.sleep(max(0.0, min(interval, deadline - time.monotonic())))


def retry(
    action: Callable[[], T],
    *,
    healable: Callable[[BaseException], bool],
    timeout: float,
    interval: float = 0.2,
) -> T:
    """Run ``action()``; while it raises an error that ``healable(error)`` accepts and time is left, run it again.

    An error a retry cannot heal, or the last one after ``timeout`` seconds, propagates unchanged.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except Exception as exc:
            if not healable(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))

