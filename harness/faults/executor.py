"""Executor faults on a running :class:`~streamcert.harness.run.driver.DriverProcess`: a Python worker killed, a task that throws,
an executor JVM killed. Spark must retry the task (``local[N,F]``, ``F`` > 1 tries) or replace the executor
(``local-cluster[W,C,MB]``) and the sink must still see every record exactly once.

The kills find their victims by scanning ``/proc`` for the processes of the driver's current attempt (they carry
its :data:`~streamcert.harness.run.driver.DRIVER_TOKEN_VAR`). The task exception is opt-in: a query builder puts
:func:`failure_point` in its plan, and :class:`TaskException` arms it with a trigger file that exactly one task
claims. Each fault records ``fault-start`` / ``fault-stop`` in the run's history, with what it hit.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from streamcert.harness.run.driver import DRIVER_TOKEN_VAR
from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.faults.nemeses import Fault
from streamcert.harness.run.history import History
from streamcert.harness.stack.process import processes_with_token
from streamcert.harness.faults.schedule import FaultSpec

__all__ = [
    "TRIGGER_NAME",
    "InjectedTaskFailure",
    "failure_point",
    "python_task_workers",
    "executor_jvms",
    "PythonWorkerKill",
    "TaskException",
    "ExecutorKill",
    "executor_fault_for",
]

#: The file :class:`TaskException` creates and one task of a :func:`failure_point` renames to claim.
TRIGGER_NAME = "fail-next-task"
_CLAIMED = ".claimed-"
_EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
#: read(2) and recvfrom(2) on x86-64 and arm64: how an idle reused worker waits for its next task.
_READ_SYSCALLS = {"0", "45", "63", "207"}


class InjectedTaskFailure(RuntimeError):
    """Raised inside a Spark task by :func:`failure_point` when it claimed the trigger."""


# -- the failure point (runs in Python workers) ----------------------------------------

def _claim(trigger: str) -> str | None:
    """Rename the trigger to a name of this task's own; None when there is none or another task was first."""
    if not os.path.exists(trigger):  # the common case: one stat per task
        return None
    from pyspark import TaskContext

    context = TaskContext.get()
    who = (f"stage{context.stageId()}-partition{context.partitionId()}-attempt{context.attemptNumber()}"
           if context else "no-task-context")
    claimed = f"{trigger}{_CLAIMED}{who}-pid{os.getpid()}"
    try:
        os.rename(trigger, claimed)  # atomic: of all tasks that saw the trigger, exactly one wins
    except FileNotFoundError:
        return None
    return claimed


def _fail_if_triggered(trigger: str) -> None:
    claimed = _claim(trigger)
    if claimed is not None:
        raise InjectedTaskFailure(f"streamcert injected a task failure ({Path(claimed).name})")


def failure_point(frame: Any, trigger_dir: str | Path) -> Any:
    """``frame`` unchanged, except that a task fails once each time :class:`TaskException` arms ``trigger_dir``.

    Called by a query builder in the driver; the check runs in each task (one ``stat`` per partition, the rows
    pass through as Arrow batches untouched).
    """
    trigger = str(Path(trigger_dir).resolve() / TRIGGER_NAME)

    def passthrough(batches):
        _fail_if_triggered(trigger)
        yield from batches

    return frame.mapInArrow(passthrough, frame.schema)


# -- finding the processes of a driver ---------------------------------------------------

def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:  # the process ended while we looked
        return ""


def _argv(pid: int) -> list[str]:
    return [arg for arg in _read(f"/proc/{pid}/cmdline").split("\0") if arg]


def _parent(pid: int) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    return int(stat.rsplit(")", 1)[1].split()[1]) if stat else None


def _ancestors(pid: int, generations: int) -> list[int]:
    """Parent, grandparent, ...: a worker's daemon, then its executor JVM."""
    found = []
    for _ in range(generations):
        parent = _parent(pid)
        if not parent:
            break
        found.append(parent)
        pid = parent
    return found


def _driver_token(driver: Any) -> str:
    """The token of the driver's current attempt, read from the driver child's environment."""
    pid = driver.pid
    if pid is not None:
        for entry in _read(f"/proc/{pid}/environ").split("\0"):
            name, _, value = entry.partition("=")
            if name == DRIVER_TOKEN_VAR:
                return value
    raise ConfigurationError("An executor fault needs a running driver, and this one is not running.",
                             hint="Start the DriverProcess (and wait for its first batch) before the fault.")


def _worker_module(argv: list[str]) -> str | None:
    """The pyspark worker module a Python process runs (through the daemon or directly), else None."""
    if "-m" not in argv[:-1]:
        return None
    rest = argv[argv.index("-m") + 1:]
    if rest[0] == "pyspark.daemon":
        return rest[1] if len(rest) > 1 else "pyspark.worker"
    return rest[0] if rest[0] == "pyspark.worker" else None


def _is_task_worker(pid: int, argv: list[str]) -> bool:
    """A worker that runs tasks (``pyspark.worker``), not a daemon, not a driver-side planning worker.

    The daemon forks its workers, so a worker has the same command line as its parent; the daemon's parent is
    the JVM. Without the daemon (``spark.python.use.daemon=false``) workers run ``-m pyspark.worker`` directly.
    """
    if _worker_module(argv) != "pyspark.worker":
        return False
    if "pyspark.daemon" not in argv:
        return True
    parent = _parent(pid)
    return parent is not None and _argv(parent) == argv


def python_task_workers(driver: Any) -> list[int]:
    """Pids of the Python workers that run tasks for the driver's current attempt (in executors or local mode)."""
    pids = processes_with_token(_driver_token(driver), DRIVER_TOKEN_VAR)
    return [pid for pid in pids if _is_task_worker(pid, _argv(pid))]


def executor_jvms(driver: Any) -> dict[str, int]:
    """Executor id -> pid of the executor JVMs of the driver's current attempt (none in local mode)."""
    found = {}
    for pid in processes_with_token(_driver_token(driver), DRIVER_TOKEN_VAR):
        argv = _argv(pid)
        if _EXECUTOR_CLASS in argv and "--executor-id" in argv[:-1]:
            found[argv[argv.index("--executor-id") + 1]] = pid
    return found


def _jvm_socket_fd(pid: int) -> str | None:
    """The worker's connection to the JVM: its lowest-numbered socket, open before the worker ran any code."""
    try:
        fds = sorted(os.listdir(f"/proc/{pid}/fd"), key=int)
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return fd
        except OSError:
            continue
    return None


def _is_idle(pid: int) -> bool:
    """True when the worker waits for its next task: blocked reading its JVM socket.

    Spark reuses workers; killing an idle one costs Spark nothing (it drops it and forks another), so it would be
    a fault that did not happen. Where ``/proc/<pid>/syscall`` cannot be read, a worker counts as busy.
    """
    fields = _read(f"/proc/{pid}/syscall").split()
    if len(fields) < 2 or fields[0] not in _READ_SYSCALLS:
        return False
    fd = _jvm_socket_fd(pid)
    return fd is not None and int(fields[1], 16) == int(fd)


def _busy_workers(driver: Any) -> list[int]:
    return [pid for pid in python_task_workers(driver) if not _is_idle(pid)]


def _sigkill(pid: int, timeout: float = 10.0) -> bool:
    """SIGKILL ``pid`` and wait until it is gone (or a zombie); True when it was alive to be killed."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _read(f"/proc/{pid}/stat")
        if not state or state.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            break
        time.sleep(0.02)
    return True


def _wait_for(find, what: str, hint: str, timeout: float, interval: float = 0.05):
    """Poll ``find()`` until it returns something; StartupFailed after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = find()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise StartupFailed(f"No {what} within {timeout:.0f}s; the fault was not injected.", hint=hint)
        time.sleep(interval)


# -- the faults ---------------------------------------------------------------------------

class PythonWorkerKill(Fault):
    """SIGKILL one Python worker while it runs a task; Spark fails that attempt and retries it.

    ``start`` runs in the harness and waits up to ``wait_s`` for a worker that is running a task. ``env`` is the
    :class:`~streamcert.harness.run.driver.DriverProcess`.
    """

    def __init__(self, spec: FaultSpec, env: Any, history: History, wait_s: float = 60.0) -> None:
        super().__init__(spec, env, history)
        self.wait_s = wait_s

    def _inject(self) -> dict[str, Any]:
        busy = _wait_for(lambda: _busy_workers(self.env), "Python worker running a task",
                         "The query may run no Python code in its tasks, or be idle between batches; strike while "
                         "a batch runs (a slower source, e.g. CountingSource's readDelayMs, widens the window).",
                         self.wait_s)
        victim = busy[0]
        daemon = _parent(victim)
        killed = _sigkill(victim)
        return {"pid": victim, "daemon_pid": daemon, "killed": killed, "busy_workers": busy}

    def _heal(self) -> dict[str, Any]:
        return {}  # Spark heals by itself: the daemon forks a new worker for the retried task


class ExecutorKill(Fault):
    """SIGKILL one executor JVM (``local-cluster``), preferably one running a Python task.

    ``start`` waits up to ``wait_s`` for executors, then up to ``prefer_busy_s`` for one whose Python worker runs a
    task (so a task attempt is lost with it), else takes the lowest executor id. Spark's standalone master launches
    a replacement; the lost tasks are retried elsewhere.
    """

    def __init__(self, spec: FaultSpec, env: Any, history: History, wait_s: float = 60.0,
                 prefer_busy_s: float = 10.0) -> None:
        super().__init__(spec, env, history)
        self.wait_s = wait_s
        self.prefer_busy_s = prefer_busy_s

    def _running_python_task(self) -> list[str]:
        executors = executor_jvms(self.env)
        hosts = {ancestor for pid in _busy_workers(self.env) for ancestor in _ancestors(pid, 2)}
        return sorted((eid for eid, pid in executors.items() if pid in hosts), key=_executor_order)

    def _inject(self) -> dict[str, Any]:
        _wait_for(lambda: executor_jvms(self.env), "executor JVM",
                  "Executor JVMs exist with master local-cluster[W,C,MB] (e.g. local-cluster[2,1,1024]) "
                  "or a real cluster; local[N] runs tasks inside the driver.", self.wait_s)
        try:
            running = _wait_for(self._running_python_task, "executor running a Python task", "", self.prefer_busy_s)
        except StartupFailed:  # JVM-only tasks, or between batches: any executor will do
            running = []
        executors = executor_jvms(self.env)
        victim = next((eid for eid in running if eid in executors), min(executors, key=_executor_order))
        pid = executors[victim]
        return {"executor_id": victim, "pid": pid, "killed": _sigkill(pid), "running_python_task": bool(running),
                "executors_before": sorted(executors, key=_executor_order)}

    def _heal(self) -> dict[str, Any]:
        try:
            executors = executor_jvms(self.env)
        except ConfigurationError:  # the driver ended meanwhile; nothing left to look at
            executors = {}
        return {"executors_now": sorted(executors, key=_executor_order)}


def _executor_order(executor_id: str) -> tuple[int, str]:
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 30, executor_id)


class TaskException(Fault):
    """Arm the :func:`failure_point` in ``trigger_dir``: the next task through it raises :class:`InjectedTaskFailure`.

    ``start`` creates the trigger file; ``stop`` removes it if no task claimed it and records whether one did.
    ``env`` may be the driver or None: the fault only touches ``trigger_dir``.
    """

    def __init__(self, spec: FaultSpec, env: Any, history: History, trigger_dir: str | Path) -> None:
        super().__init__(spec, env, history)
        self.trigger_dir = Path(trigger_dir).resolve()
        self._claims_before: set[str] = set()

    @property
    def trigger(self) -> Path:
        return self.trigger_dir / TRIGGER_NAME

    def claims(self) -> list[str]:
        """Names of every claimed trigger in ``trigger_dir`` (each one a task that failed on purpose)."""
        if not self.trigger_dir.is_dir():
            return []
        return sorted(p.name for p in self.trigger_dir.iterdir() if p.name.startswith(TRIGGER_NAME + _CLAIMED))

    def _inject(self) -> dict[str, Any]:
        self.trigger_dir.mkdir(parents=True, exist_ok=True)
        self._claims_before = set(self.claims())
        staging = self.trigger_dir / f".{TRIGGER_NAME}.{os.getpid()}"
        staging.write_text(str(time.time()))
        os.replace(staging, self.trigger)  # a task never sees a half-written trigger
        return {"trigger": str(self.trigger)}

    def _heal(self) -> dict[str, Any]:
        try:
            self.trigger.unlink()
            unclaimed = True
        except FileNotFoundError:  # a task renamed it first
            unclaimed = False
        new_claims = [name for name in self.claims() if name not in self._claims_before]
        return {"claimed": not unclaimed, "claimed_by": [name.split(_CLAIMED, 1)[1] for name in new_claims]}


_FAULTS = {"python_worker_kill": PythonWorkerKill, "executor_kill": ExecutorKill}


def executor_fault_for(spec: FaultSpec, driver: Any, history: History,
                       trigger_dir: str | Path | None = None) -> Fault:
    """The fault object that carries out ``spec`` (``python_worker_kill``, ``task_exception``, ``executor_kill``)."""
    if spec.fault == "task_exception":
        if trigger_dir is None:
            raise ConfigurationError("task_exception needs the trigger folder of the query's failure_point.",
                                     hint="Pass trigger_dir= (the folder given to failure_point in the builder).")
        return TaskException(spec, driver, history, trigger_dir)
    if spec.fault not in _FAULTS:
        raise ConfigurationError(f"{spec.fault!r} is not an executor fault.",
                                 hint="Executor faults are python_worker_kill, task_exception and executor_kill.")
    return _FAULTS[spec.fault](spec, driver, history)
