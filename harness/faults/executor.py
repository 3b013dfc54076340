"""Executor faults on a running :class:`~streamcert.harness.run.driver.DriverProcess`: a Python worker killed, a task
that throws, an executor JVM killed. Spark must retry the task (``local[N,F]``, ``F`` > 1 tries) or replace the
executor (``local-cluster[W,C,MB]``) and the sink must still see every record exactly once.

The kills find their victims among the processes of the driver's current attempt (they carry its
:data:`~streamcert.harness.run.driver.DRIVER_TOKEN_VAR`; a standalone worker's executors, which do not, are known
by the driver address they connect to), read with psutil. The task exception is opt-in: a query
builder puts :func:`failure_point` in its plan, which reaches the SPI fault point :data:`TASK_EXCEPTION_POINT` in
every task, and :class:`TaskException` arms that point to fail; exactly one task claims it. Each fault records
``fault-start`` / ``fault-stop`` in the run's history, with what it hit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil

from streamcert.harness.errors import ConfigurationError, StartupFailed
from streamcert.harness.faults.base import Fault, FaultNotApplicable, within
from streamcert.harness.faults.registry import fault_kind
from streamcert.harness.run.driver import DRIVER_TOKEN_VAR
from streamcert.harness.stack.process import processes_with_token
from streamcert.harness.waiting import wait_for
from streamcert.spi.fault_points import arm, armed_file, claims, disarm, reached

__all__ = [
    "TASK_EXCEPTION_POINT",
    "failure_point",
    "python_task_workers",
    "executor_jvms",
    "PythonWorkerKill",
    "TaskException",
    "ExecutorKill",
    "busy_workers",
    "busy_workers_by_executor",
    "blocked_elsewhere",
    "in_task_worker",
    "unread_from_jvm",
    "ancestors",
    "is_idle",
    "has_ended",
    "sigkill",
    "strike_wait",
    "executor_order",
]

#: The fault point :func:`failure_point` reaches in every task, and :class:`TaskException` arms.
TASK_EXCEPTION_POINT = "streamcert.task-exception"
_EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
#: read(2) and recvfrom(2) on x86-64 and arm64: how an idle reused worker waits for its next task.
_READ_SYSCALLS = {"0", "45", "63", "207"}


# -- the failure point (runs in Python workers) ----------------------------------------

def failure_point(frame: Any, point: str = TASK_EXCEPTION_POINT) -> Any:
    """``frame`` unchanged, except that a task fails once each time :class:`TaskException` arms ``point``.

    Called by a query builder in the driver; the check runs in each task (one ``stat`` per partition, the rows
    pass through as Arrow batches untouched). The failure is the SPI's
    :class:`~streamcert.spi.fault_points.InjectedPointFailure`, naming the task that claimed the point.
    """

    def passthrough(batches):
        reached(point)
        yield from batches

    return frame.mapInArrow(passthrough, frame.schema)


# -- finding the processes of a driver ---------------------------------------------------

def _argv(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:  # the process ended while we looked
        return []


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid() or None
    except psutil.Error:
        return None


def ancestors(pid: int, generations: int) -> list[int]:
    """Parent, grandparent, ...: a worker's daemon, then its executor JVM."""
    try:
        return [parent.pid for parent in psutil.Process(pid).parents()[:generations]]
    except psutil.Error:
        return []


def _driver_token(driver: Any) -> str:
    """The token of the driver's current attempt, read from the driver child's environment."""
    pid = driver.pid
    if pid is not None:
        try:
            token = psutil.Process(pid).environ().get(DRIVER_TOKEN_VAR)
        except psutil.Error:  # it ended while we looked
            token = None
        if token:
            return token
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
    carriers = _carriers(driver)
    return _task_workers(carriers, _executors_among(carriers, driver))


def _task_workers(carriers: list[int], executors: dict[str, int]) -> list[int]:
    pids = set(carriers)
    for jvm in executors.values():
        pids.update(_descendants(jvm))
    return sorted(pid for pid in pids if _is_task_worker(pid, _argv(pid)))


def executor_jvms(driver: Any) -> dict[str, int]:
    """Executor id -> pid of the executor JVMs of the driver's current attempt (none in local mode).

    Executors the driver's own JVM forks (``local-cluster``) carry its token; those a standalone worker launches
    do not (they get the worker's environment), and are known by the driver address they connect to. That search
    reads every process's sockets (a few hundred milliseconds on a busy machine), so it is made only on a
    ``spark://`` master and when no executor carries the token: a fault watching for a moment asks many times a
    second."""
    return _executors_among(_carriers(driver), driver)


def _carriers(driver: Any) -> list[int]:
    """The processes carrying the token of the driver's current attempt."""
    return list(processes_with_token(_driver_token(driver), DRIVER_TOKEN_VAR))


def _executors_among(carriers: list[int], driver: Any) -> dict[str, int]:
    found = {}
    for pid in carriers:
        argv = _argv(pid)
        if _EXECUTOR_CLASS in argv and "--executor-id" in argv[:-1]:
            found[argv[argv.index("--executor-id") + 1]] = pid
    if found or not _may_have_standalone_executors(driver):
        return found
    return _executors_by_driver_url(driver)


def _may_have_standalone_executors(driver: Any) -> bool:
    """Whether a standalone worker may run the driver's executors (a ``spark://`` master, or one not known)."""
    master = getattr(getattr(driver, "spec", None), "master", None)
    return master is None or str(master).startswith("spark://")


def _descendants(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports ``pid`` and its descendants listen on (the driver's JVM is a child of its Python process)."""
    ports: set[int] = set()
    for each in (pid, *_descendants(pid)):
        try:
            connections = psutil.Process(each).net_connections(kind="tcp")
        except psutil.Error:
            continue
        ports.update(c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN and c.laddr)
    return ports


def _executors_by_driver_url(driver: Any) -> dict[str, int]:
    """Executor id -> pid of the executor JVMs on this machine whose ``--driver-url`` is a port the driver's current
    attempt listens on: a standalone worker's executors of this query."""
    candidates = {}
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if _EXECUTOR_CLASS in argv and "--driver-url" in argv[:-1] and "--executor-id" in argv[:-1]:
            port = argv[argv.index("--driver-url") + 1].rpartition(":")[2]
            if port.isdigit():
                candidates[argv[argv.index("--executor-id") + 1]] = (process.pid, int(port))
    if not candidates or driver.pid is None:
        return {}
    ports = _listening_ports(driver.pid)
    return {executor: pid for executor, (pid, port) in candidates.items() if port in ports}


#: pid -> (its start time, its JVM socket's fd): a worker keeps that socket for life, and finding it reads every
#: socket of the machine (tens of milliseconds), which :func:`is_idle` would do for each worker at every look.
_JVM_SOCKETS: dict[int, tuple[float, int]] = {}


def _jvm_socket_fd(pid: int) -> int | None:
    """The worker's connection to the JVM: its lowest-numbered socket, open before the worker ran any code."""
    try:
        process = psutil.Process(pid)
        started = process.create_time()
        known = _JVM_SOCKETS.get(pid)
        if known is not None and known[0] == started:
            return known[1]
        sockets = process.net_connections(kind="all")
    except psutil.Error:
        return None
    fds = [connection.fd for connection in sockets if connection.fd >= 0]
    if not fds:
        return None
    if len(_JVM_SOCKETS) > 4096:  # workers come and go over a long run; the ended ones' entries are dead weight
        _JVM_SOCKETS.clear()
    _JVM_SOCKETS[pid] = (started, min(fds))
    return min(fds)


def _syscall(pid: int) -> list[str]:
    """``/proc/<pid>/syscall``: the system call a blocked process waits in, and its arguments (psutil has no such
    reading). Empty when it cannot be read."""
    try:
        with open(f"/proc/{pid}/syscall", "rb") as handle:
            return handle.read().decode(errors="replace").split()
    except OSError:  # the process ended while we looked, or the kernel hides it
        return []


def _worker_state(pid: int) -> str:
    """``idle`` (blocked reading its JVM socket: waiting for its next task), ``waiting`` (blocked in another system
    call: sleeping, waiting on a server, sending rows) or ``running`` (on or waiting for a CPU, or not known)."""
    fields = _syscall(pid)
    if len(fields) < 2 or fields[0] == "-1":  # "running", or stopped outside a system call
        return "running"
    if fields[0] not in _READ_SYSCALLS:
        return "waiting"
    fd = _jvm_socket_fd(pid)
    if fd is None:
        return "running"
    return "idle" if int(fields[1], 16) == fd else "waiting"


def is_idle(pid: int) -> bool:
    """True when the worker waits for its next task: blocked reading its JVM socket.

    Spark reuses workers; killing an idle one costs Spark nothing (it drops it and forks another), so it would be
    a fault that did not happen. Where ``/proc/<pid>/syscall`` cannot be read, a worker counts as busy.
    """
    return _worker_state(pid) == "idle"


def busy_workers(driver: Any) -> list[int]:
    return [pid for pid in python_task_workers(driver) if not is_idle(pid)]


#: How long a worker must stay off its JVM socket, seen at every look, to count as running a task when no look
#: finds it blocked elsewhere. After each task pyspark's daemon runs ``gc.collect()`` in the worker before it reads
#: the next one: 25-30 ms on an idle machine with pyarrow loaded, twice that on a loaded one, and a kill then fails
#: no attempt.
IN_TASK_WINDOW_S = 0.15
_IN_TASK_LOOK_S = 0.01


def blocked_elsewhere(pid: int) -> bool:
    """True when the worker is blocked in a system call other than reading its JVM socket: sleeping, waiting on a
    connector's server, sending rows. Only a task does that; the post-task ``gc.collect()`` makes no system call."""
    return _worker_state(pid) == "waiting"


def in_task_worker(pids: list[int], window_s: float = IN_TASK_WINDOW_S, look_s: float = _IN_TASK_LOOK_S) -> int | None:
    """A worker of ``pids`` that is inside a task: the first one seen blocked elsewhere than on its JVM socket, else
    one that is never idle and alive at every look for ``window_s``; None when every one went idle (it had finished
    its task) or ended."""
    steady = list(pids)
    deadline = time.monotonic() + window_s
    while steady:
        sure = next((pid for pid in steady if blocked_elsewhere(pid)), None)
        if sure is not None:
            return sure
        if time.monotonic() >= deadline:
            return steady[0]
        time.sleep(look_s)
        steady = [pid for pid in steady if psutil.pid_exists(pid) and not is_idle(pid)]
    return None


def unread_from_jvm(pid: int) -> int | None:
    """Bytes the JVM sent the worker that its process has not read yet (its JVM socket's receive queue, from
    ``/proc/net/tcp``): a task's input still waiting for it. None when it cannot be read (the worker ended, or
    talks to its JVM over a Unix socket, whose queue the kernel does not show)."""
    fd = _jvm_socket_fd(pid)
    try:
        link = os.readlink(f"/proc/{pid}/fd/{fd}") if fd is not None else ""
    except OSError:
        return None
    if not (link.startswith("socket:[") and link.endswith("]")):
        return None
    inode = link[len("socket:["):-1]
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[9] == inode:
                return int(fields[4].partition(":")[2], 16)
    return None


def busy_workers_by_executor(driver: Any) -> dict[str, list[int]]:
    """Executor id -> its Python workers running a task (``local-cluster``; empty in local mode)."""
    carriers = _carriers(driver)
    executors = _executors_among(carriers, driver)
    found: dict[str, list[int]] = {}
    for pid in _task_workers(carriers, executors):
        if is_idle(pid):
            continue
        host = next((eid for eid, jvm in executors.items() if jvm in ancestors(pid, 2)), None)
        if host is not None:
            found.setdefault(host, []).append(pid)
    return found


def has_ended(process: psutil.Process) -> bool:
    try:
        return process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


def sigkill(pid: int, timeout: float = 10.0) -> bool:
    """SIGKILL ``pid`` and wait until it is gone (or a zombie); True when it was alive to be killed."""
    try:
        process = psutil.Process(pid)
        process.kill()
    except psutil.NoSuchProcess:
        return False
    within(lambda: has_ended(process), what=f"process {pid} to exit", timeout=timeout, interval=0.02)
    return True


#: Seconds a fault waits for an executor of a remote master to show on this machine before it is skipped.
_REMOTE_EXECUTORS_S = 30.0


def strike_wait(driver: Any, probe: Any, what: str, hint: str, timeout: float) -> Any:
    """Wait for a victim; StartupFailed (the fault was not injected) if the driver exits or time runs out.

    On a ``spark://`` master the executors may run on other machines: when none of this query's shows here
    within :data:`_REMOTE_EXECUTORS_S`, the fault cannot be carried out (:class:`FaultNotApplicable`)."""
    master = str(getattr(getattr(driver, "spec", None), "master", ""))
    if master.startswith("spark://") and not within(lambda: executor_jvms(driver), what="an executor on this machine",
                                                     timeout=_REMOTE_EXECUTORS_S):
        raise FaultNotApplicable(f"No executor of the query runs on this machine (master {master}): streamcert "
                                 "kills and freezes only processes it can see.",
                                 hint="Run the executor faults on a local master (the plan's default), or start "
                                      "the standalone cluster's workers on this machine.")
    return wait_for(probe, what=what, timeout=timeout, hint=f"The fault was not injected. {hint}".strip(),
                    abort=lambda: None if driver.is_running() else f"the driver exited (code {driver.exit_code()})",
                    evidence=driver.tail, error=StartupFailed)


# -- the faults ---------------------------------------------------------------------------

@fault_kind("python_worker_kill", targets=("executor",))
class PythonWorkerKill(Fault):
    """SIGKILL one Python worker while it runs a task; Spark fails that attempt and retries it.

    ``start`` runs in the harness and waits up to ``wait_s`` for a worker of the driver that is running a task.
    """

    needs = ("driver",)
    wait_s = 60.0

    def _inject(self) -> dict[str, Any]:
        driver = self.driver
        seen: list[int] = []

        def in_task() -> int | None:
            seen[:] = busy_workers(driver)
            return in_task_worker(seen)

        victim = strike_wait(driver, in_task, "Python worker running a task",
                            "The query may run no Python code in its tasks, or be idle between batches; strike "
                            "while a batch runs (a slower source, e.g. CountingSource's readDelayMs, widens the "
                            "window).", self.wait_s)
        daemon = _parent(victim)
        # what the victim was doing when it was struck (its system call and the fd it reads tasks on): the evidence
        # when a kill fails no attempt; one /proc read, as the kill should follow the look at once
        syscall = _syscall(victim)[:2]
        killed = sigkill(victim)
        return {"pid": victim, "daemon_pid": daemon, "killed": killed, "busy_workers": seen,
                "victim_syscall": syscall, "victim_jvm_fd": _JVM_SOCKETS.get(victim, (0, None))[1]}

    def _heal(self) -> dict[str, Any]:
        return {}  # Spark heals by itself: the daemon forks a new worker for the retried task


@fault_kind("executor_kill", targets=("executor",))
class ExecutorKill(Fault):
    """SIGKILL one executor JVM (``local-cluster``), preferably one running a Python task.

    ``start`` waits up to ``wait_s`` for executors, then up to ``prefer_busy_s`` for one whose Python worker runs a
    task (so a task attempt is lost with it), else takes the lowest executor id. Spark's standalone master launches
    a replacement; the lost tasks are retried elsewhere.
    """

    needs = ("driver",)
    wait_s = 60.0
    prefer_busy_s = 10.0

    def _running_python_task(self) -> list[str]:
        """Executors with a Python worker inside a task, as :func:`in_task_worker` decides: a worker merely off its
        JVM socket may be in the collection pyspark's daemon runs after each task, and killing its executor then
        loses no task attempt (seen in a CI run: the kill landed, no task of that executor failed)."""
        busy = busy_workers_by_executor(self.driver)
        self._in_task = {eid: pid for eid, pids in busy.items() if (pid := in_task_worker(pids)) is not None}
        return sorted(self._in_task, key=executor_order)

    def _inject(self) -> dict[str, Any]:
        driver = self.driver
        strike_wait(driver, lambda: executor_jvms(driver), "executor JVM",
                     "Executor JVMs exist with master local-cluster[W,C,MB] (e.g. local-cluster[2,1,1024]) "
                     "or a real cluster; local[N] runs tasks inside the driver.", self.wait_s)
        # JVM-only tasks, or between batches: then any executor will do
        running = within(self._running_python_task, what="an executor running a Python task",
                         timeout=self.prefer_busy_s) or []
        executors = executor_jvms(driver)
        victim = next((eid for eid in running if eid in executors), min(executors, key=executor_order))
        pid = executors[victim]
        worker = getattr(self, "_in_task", {}).get(victim)
        return {"executor_id": victim, "pid": pid, "killed": sigkill(pid), "running_python_task": bool(running),
                "in_task_worker": worker, "executors_before": sorted(executors, key=executor_order)}

    def _heal(self) -> dict[str, Any]:
        try:
            executors = executor_jvms(self.driver)
        except ConfigurationError:  # the driver ended meanwhile; nothing left to look at
            executors = {}
        return {"executors_now": sorted(executors, key=executor_order)}


def executor_order(executor_id: str) -> tuple[int, str]:
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 30, executor_id)


@fault_kind("task_exception", targets=("executor",))
class TaskException(Fault):
    """Arm the :func:`failure_point` of the driver's query: the next task through it raises.

    ``start`` arms :data:`TASK_EXCEPTION_POINT` with ``fail`` in the driver's fault-points folder; ``stop``
    disarms it if no task claimed it, and records whether one did and which (stage, partition, attempt, pid).
    """

    needs = ("driver",)
    point = TASK_EXCEPTION_POINT

    @property
    def folder(self) -> Path:
        return self.driver.fault_points_dir

    @property
    def trigger(self) -> Path:
        """The armed point's file; gone once a task claimed it or the fault stopped."""
        return armed_file(self.folder, self.point)

    def claims(self) -> list[str]:
        """Every task that claimed the point in this driver's folder so far (each one failed on purpose)."""
        return claims(self.folder, self.point)

    def _inject(self) -> dict[str, Any]:
        self._claims_before = set(self.claims())
        arm(self.folder, self.point, action="fail")
        return {"trigger": str(self.trigger), "point": self.point}

    def _heal(self) -> dict[str, Any]:
        unclaimed = disarm(self.folder, self.point)
        return {"claimed": not unclaimed,
                "claimed_by": [who for who in self.claims() if who not in self._claims_before]}
