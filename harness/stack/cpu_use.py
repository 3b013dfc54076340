"""How busy the machine's cores were while a run or a certification ran.

Wall time alone does not say whether a run waited or worked. On a machine whose cores were busy throughout, the same
work cannot finish sooner than its CPU-seconds spread over every core (the *floor*), whatever runs beside what: a
certification's time is then bound by what it computes (driver JVMs and Python workers started at each restart,
standbys warming), not by its waits. The figures are machine-wide (``/proc/stat`` through psutil): they count
whatever the machine ran meanwhile, the other runs of a ``--jobs N`` certification included, which is why a run's own
figures are a window on the machine and the certification's are the ones to read.

:class:`CpuWindow` is started where a run or a certification starts (in the harness's process) and read when it ends.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

__all__ = ["CpuWindow"]

#: Fields of psutil's CPU times that are not work (a core waiting for I/O is idle to this account).
_NOT_BUSY = ("idle", "iowait")


class CpuWindow:
    """The machine's CPU times from :meth:`start` to each :meth:`figures`."""

    def __init__(self) -> None:
        self._began: tuple[float, Any] | None = None

    def start(self) -> "CpuWindow":
        """Open the window now; returns itself."""
        self._began = (time.monotonic(), psutil.cpu_times())
        return self

    def figures(self) -> dict[str, Any] | None:
        """Seconds since :meth:`start`: ``wall_s``; the cores' ``busy_s`` (of it ``nice_s``: work at a lowered
        priority, the driver's standbys), ``idle_s``; ``cores``; ``busy_share`` (busy over wall times cores); and
        ``floor_s``: busy over cores, the least wall time the same work could take on this machine. None before
        :meth:`start`."""
        if self._began is None:
            return None
        began_at, before = self._began
        after, wall = psutil.cpu_times(), time.monotonic() - began_at
        spent = {name: max(0.0, getattr(after, name) - getattr(before, name)) for name in after._fields}
        idle = sum(spent.get(name, 0.0) for name in _NOT_BUSY)
        # guest time is already inside user time on Linux: leave it out of the sum
        busy = sum(seconds for name, seconds in spent.items() if name not in (*_NOT_BUSY, "guest", "guest_nice"))
        cores = psutil.cpu_count(logical=True) or 1
        return {"wall_s": round(wall, 1), "busy_s": round(busy, 1), "nice_s": round(spent.get("nice", 0.0), 1),
                "idle_s": round(idle, 1), "cores": cores,
                # /proc/stat counts in clock ticks: a short, fully busy window may read a tick over its wall time
                "busy_share": round(min(1.0, busy / (wall * cores)), 3) if wall > 0 else None,
                "floor_s": round(busy / cores, 1)}
