"""Named fault points a connector may expose: ``reached("between-prepare-and-commit")``.

A connector calls :func:`reached` at a moment that matters to it (after a
prepare and before the commit, say). Nothing happens unless the harness armed
that point for this driver: then the first process to reach it claims the
trigger (an atomic rename, so exactly once) and carries out the armed action:

- ``kill``: SIGKILL the whole driver (its Python process group, which holds the
  driver JVM), wherever the call runs: in the driver, in a Python worker on the
  driver, or on an executor of a local master.
  :class:`~streamcert.harness.faults.nemeses.DriverPointFault` arms it and restarts the driver afterwards;
- ``fail``: raise :class:`InjectedPointFailure` in the caller. Called in a task, this
  fails that task attempt at exactly that moment (say, after it prepared), and Spark
  retries it: the way to leave an orphan or a zombie attempt behind on purpose.
  :class:`~streamcert.harness.faults.nemeses.TaskPointFault` arms it.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

__all__ = ["POINTS_DIR_VAR", "DRIVER_PID_VAR", "ACTIONS", "InjectedPointFailure", "reached", "arm", "disarm",
           "claimed"]

#: The folder of armed points, set by DriverProcess for the driver and everything it starts.
POINTS_DIR_VAR = "STREAMCERT_FAULT_POINTS"
#: The driver process's pid (also its process group id), set by the driver child at start.
DRIVER_PID_VAR = "STREAMCERT_DRIVER_PID"
ACTIONS = ("kill", "fail")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _check(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"fault point name {name!r} must be 1-100 of letters, digits, '.', '_', '-'")
    return name


class InjectedPointFailure(RuntimeError):
    """Raised at a fault point armed with ``fail``: the harness failed this task attempt on purpose."""


def reached(name: str) -> None:
    """Called by connector code at point ``name``: carries out the armed action, else returns at once."""
    folder = os.environ.get(POINTS_DIR_VAR)
    driver = os.environ.get(DRIVER_PID_VAR)
    if not folder or not driver:
        return
    armed = Path(folder) / f"{_check(name)}.armed"
    claim = Path(folder) / f"{name}.claimed-{os.getpid()}"
    try:
        os.rename(armed, claim)
    except FileNotFoundError:
        return
    if claim.read_text().strip() == "fail":
        raise InjectedPointFailure(f"streamcert failed this task at fault point {name!r} (armed by the harness)")
    os.killpg(int(driver), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)  # a worker outside the driver's group must not go on either


def arm(folder: Path, name: str, action: str = "kill") -> None:
    """Arm point ``name`` once with ``action`` (``kill`` the driver or ``fail`` the caller)."""
    if action not in ACTIONS:
        raise ValueError(f"fault point action {action!r} is not one of {ACTIONS}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{_check(name)}.tmp"
    tmp.write_text(action)
    os.replace(tmp, folder / f"{name}.armed")


def disarm(folder: Path, name: str) -> bool:
    """Remove an unclaimed trigger; True if there was one."""
    try:
        (Path(folder) / f"{_check(name)}.armed").unlink()
        return True
    except FileNotFoundError:
        return False


def claimed(folder: Path, name: str) -> bool:
    return any(Path(folder).glob(f"{_check(name)}.claimed-*"))
