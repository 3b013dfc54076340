"""Named fault points a connector may expose: ``reached("between-prepare-and-commit")``.

A connector calls :func:`reached` at a moment that matters to it (after a
prepare and before the commit, say). Nothing happens unless the harness armed
that point for this driver: then the first process to reach it claims the
trigger (an atomic rename, so exactly once; the claim's name says who: the
task's stage, partition and attempt, and the pid) and carries out the armed action:

- ``kill``: SIGKILL the whole driver (its Python process group, which holds the
  driver JVM), wherever the call runs: in the driver, in a Python worker on the
  driver, or on an executor of a local master.
  :class:`~streamcert.harness.faults.driver.DriverPointFault` arms it and restarts the driver afterwards;
- ``fail``: raise :class:`InjectedPointFailure` in the caller. Called in a task, this
  fails that task attempt at exactly that moment (say, after it prepared), and Spark
  retries it: the way to leave an orphan or a zombie attempt behind on purpose.
  :class:`~streamcert.harness.faults.points.TaskPointFault` arms it, and so does the harness's
  ``task_exception`` fault for the point its ``failure_point`` passthrough reaches in every task.

:func:`arm`, :func:`disarm`, :func:`claimed` and :func:`claims` run in the harness, on the folder
the driver process hands to everything it starts (:data:`POINTS_DIR_VAR`).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

__all__ = ["POINTS_DIR_VAR", "DRIVER_PID_VAR", "ACTIONS", "InjectedPointFailure", "reached", "arm", "disarm",
           "claimed", "claims", "armed_file"]

#: The folder of armed points, set by DriverProcess for the driver and everything it starts.
POINTS_DIR_VAR = "STREAMCERT_FAULT_POINTS"
#: The driver process's pid (also its process group id), set by the driver child at start.
DRIVER_PID_VAR = "STREAMCERT_DRIVER_PID"
ACTIONS = ("kill", "fail")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_CLAIMED = ".claimed-"


def _check(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"fault point name {name!r} must be 1-100 of letters, digits, '.', '_', '-'")
    return name


class InjectedPointFailure(RuntimeError):
    """Raised at a fault point armed with ``fail``: the harness failed this task attempt on purpose."""


def armed_file(folder: Path, name: str) -> Path:
    """The file :func:`arm` creates for point ``name`` and the first process to reach it renames."""
    return Path(folder) / f"{_check(name)}.armed"


def _claimer() -> str:
    """Who is claiming: ``stage3-partition0-attempt1-pid42`` in a Spark task, ``no-task-context-pid42`` elsewhere."""
    try:
        from pyspark import TaskContext
    except ImportError:  # reached outside Spark (a tool, a unit test)
        context = None
    else:
        context = TaskContext.get()
    task = (f"stage{context.stageId()}-partition{context.partitionId()}-attempt{context.attemptNumber()}"
            if context is not None else "no-task-context")
    return f"{task}-pid{os.getpid()}"


def reached(name: str) -> None:
    """Called by connector code at point ``name``: carries out the armed action, else returns at once."""
    folder = os.environ.get(POINTS_DIR_VAR)
    driver = os.environ.get(DRIVER_PID_VAR)
    if not folder or not driver:
        return
    armed = armed_file(Path(folder), name)
    if not armed.exists():  # the common case: one stat, and no claimer to work out
        return
    who = _claimer()
    claim = armed.with_name(f"{name}{_CLAIMED}{who}")
    try:
        os.rename(armed, claim)  # atomic: of all processes that saw the trigger, exactly one wins
    except FileNotFoundError:
        return
    if claim.read_text().strip() == "fail":
        raise InjectedPointFailure(f"streamcert failed this task at fault point {name!r} "
                                   f"(armed by the harness, claimed by {who})")
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
    os.replace(tmp, armed_file(folder, name))  # a reader never sees a half-written trigger


def disarm(folder: Path, name: str) -> bool:
    """Remove an unclaimed trigger; True if there was one."""
    try:
        armed_file(folder, name).unlink()
        return True
    except FileNotFoundError:
        return False


def claims(folder: Path, name: str) -> list[str]:
    """Who claimed point ``name`` so far, sorted (each like ``stage3-partition0-attempt0-pid42``)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    prefix = f"{_check(name)}{_CLAIMED}"
    return sorted(entry.name[len(prefix):] for entry in folder.iterdir() if entry.name.startswith(prefix))


def claimed(folder: Path, name: str) -> bool:
    """True once some process claimed point ``name``."""
    return bool(claims(folder, name))
