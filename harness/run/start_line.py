"""A start line shared by several processes through files: the open-loop schedule's common time zero.

Each locust process of an open-loop load (:mod:`streamcert.harness.run.load`) warms its producers up at its own pace
(interpreter start, imports, the broker's producer ids). A record's due time is counted from one moment that every
process agrees on without talking to the others: each writes, once warm, the time it got there into
``<directory>/warm-<index>``; when all ``count`` files exist, every process reads the same times and takes the
latest as time zero. No port is bound and no process leads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from streamcert.harness.errors import StartupFailed

__all__ = ["arrive", "start_time", "clear"]

_PREFIX = "warm-"


def arrive(directory: Path, index: int, at: float | None = None) -> None:
    """Called by process ``index`` once it is warm: record when (written whole, so a reader never sees half)."""
    path = Path(directory) / f"{_PREFIX}{index}"
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(repr(time.time() if at is None else at))
    partial.replace(path)


def start_time(directory: Path, count: int, timeout: float, interval: float = 0.01) -> float:
    """The common time zero once all ``count`` processes arrived: the latest of their arrival times.

    Sleeps ``interval`` between looks (under gevent, a cooperative sleep). Raises :class:`StartupFailed`
    naming the processes still missing after ``timeout`` seconds.
    """
    paths = [Path(directory) / f"{_PREFIX}{index}" for index in range(count)]
    deadline = time.monotonic() + timeout
    while True:
        missing = [index for index, path in enumerate(paths) if not path.exists()]
        if not missing:
            return max(float(path.read_text()) for path in paths)
        if time.monotonic() >= deadline:
            raise StartupFailed(
                f"Load generator process(es) {missing} of {count} were not warm after {timeout:g}s, so the "
                "schedule cannot start together.",
                hint="See their locust logs beside this one: a producer that cannot reach the broker, or a "
                     "machine too busy to start them.")
        time.sleep(interval)


def clear(directory: Path) -> None:
    """Remove the arrivals of an earlier run in ``directory`` (a rerun must not start on stale times)."""
    for path in Path(directory).glob(f"{_PREFIX}*"):
        path.unlink(missing_ok=True)
