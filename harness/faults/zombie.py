"""The zombie task attempt: an executor frozen while it runs a task, replaced by Spark, then let go on.

A long GC pause or a network partition does this to real clusters: the executor stops heartbeating, the driver
declares it lost, reruns its tasks elsewhere and commits the batch; then the old executor's task attempts go on and
try to write. A sink must fence them (SNK-6): the zombie's writes are refused or never visible.

Runs in the harness process against a :class:`~streamcert.harness.run.driver.DriverProcess` on
``local-cluster[W,C,MB]`` (executor JVMs to freeze; one more executor than the tasks of a stage, so a replacement
can run while the others are frozen) with a heartbeat timeout of a few seconds. It needs no cooperation from the
connector: the moment is read from the output's growth and the Python workers' state, the loss from Spark's log.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pydantic import Field

from streamcert.harness.faults.base import Fault, within
from streamcert.harness.faults.executor import (blocked_elsewhere, busy_workers_by_executor, executor_jvms,
                                                executor_order, has_ended, in_task_worker, is_idle, sigkill,
                                                strike_wait, unread_from_jvm)
from streamcert.harness.faults.registry import FaultParams, fault_kind
from streamcert.harness.stack.process import signal_processes

__all__ = ["ZOMBIE_SPARK_CONF", "ZombieParams", "TaskZombie", "lost_tasks"]

#: What a query needs for :class:`TaskZombie`: a frozen executor is declared lost after 6 s without heartbeats
#: (Spark's default is 120 s).
ZOMBIE_SPARK_CONF = {"spark.executor.heartbeatInterval": "1s",
                     "spark.storage.blockManagerHeartbeatTimeoutMs": "6000ms",
                     "spark.network.timeoutInterval": "1s"}
#: Whole batches the output is watched for a row appearing mid-task (the first one seen may have begun before),
#: and the longest the watch lasts whatever the batches do.
_OUTPUT_WATCH_BATCHES = 3
_OUTPUT_WATCH_CAP_S = 60.0
#: Latest thaw after Spark declared the executors lost. A standalone worker SIGKILLs a lost executor's JVM 10 s
#: after asking it to stop; its frozen Python workers then form an orphaned process group with stopped members,
#: which the kernel sends SIGHUP (and SIGCONT): they die, and a later thaw finds no zombie left to run.
_THAW_WITHIN_S = 7.0
#: Seconds Spark's log is read again for the task attempts it lost with executors it declared lost.
_LOST_TASKS_GRACE_S = 1.5


class ZombieParams(FaultParams):
    hold_s: float = Field(90.0, gt=0, le=600, description="longest an executor stays frozen, waiting for Spark to "
                                                          "give up on it and commit the batch without it")
    run_s: float = Field(5.0, ge=0, le=60, description="how long the thawed zombie may run before it is killed")
    busy_s: float = Field(30.0, gt=0, le=300, description="how long to wait for an executor running a Python task")
    tries: int = Field(3, ge=1, le=10, description="moments tried until Spark loses a task attempt with a frozen "
                                                   "executor")
    sink_latency_ms: int = Field(300, ge=0, le=5000, description="latency added (downstream) to the link of the "
                                 "run's output while a moment is sought, until the freeze: a task's write then lasts "
                                 "long enough to be caught in it, and a commit's answer is still on its way when its "
                                 "rows show (a sink that commits in its tasks reports done milliseconds later); 0: "
                                 "none")


@dataclass
class _Frozen:
    """One frozen executor: its processes (busy Python workers first, the JVM last) and where its log starts."""

    executor_id: str
    processes: list[psutil.Process]
    busy: list[int]
    log_offset: int
    python: list[psutil.Process] = field(init=False)

    def __post_init__(self) -> None:
        self.python = self.processes[:-1]


def _tree(pid: int) -> list[psutil.Process]:
    """A process and its descendants, deepest first (the Python workers, their daemon, then the JVM)."""
    try:
        root = psutil.Process(pid)
        return [*reversed(root.children(recursive=True)), root]
    except psutil.Error:
        return []


def _log_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _listen_ports(link: Any) -> set[int]:
    """The ports a link (or each link of a group) listens on; empty for None."""
    if link is None:
        return set()
    return {each.listen_port for each in getattr(link, "links", [link])}


def _connected_to(pid: int, ports: set[int]) -> bool:
    """Whether the process holds an open TCP connection to one of ``ports`` (a link's listen ports, on loopback)."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:  # it ended while we looked
        return False
    return any(c.raddr and c.raddr.port in ports and c.status == psutil.CONN_ESTABLISHED for c in connections)


def _writing(pid: int, ports: set[int]) -> bool:
    """A worker past taking its task's rows, waiting on the output's link: blocked elsewhere than on its JVM socket,
    connected to one of ``ports``, and nothing the JVM sent it left unread (a writer that waits on its server
    before it takes its rows, to look up a decision say, has them queued on its socket)."""
    return blocked_elsewhere(pid) and _connected_to(pid, ports) and not unread_from_jvm(pid)


def lost_tasks(log: str, executor_id: str) -> list[str]:
    """The task attempts Spark's log says it lost with the executor (``Lost task 0.0 in stage 3.0 (TID 7)``)."""
    pattern = re.compile(rf"Lost task (\S+ in stage \S+ \(TID \d+\)) \([^)]*executor {re.escape(executor_id)}\)")
    return pattern.findall(log)


@fault_kind("task_zombie", targets=("executor",), params=ZombieParams)
class TaskZombie(Fault):
    """Freeze executors while they run tasks, let Spark replace them, then thaw them: zombie task attempts.

    ``start`` slows the output's link (``sink_latency_ms``) and waits for the output to grow while Python workers
    run tasks of a pending batch (a task making rows visible; three whole batches, with the run's observer, unless
    an earlier watch of the run saw none) and freezes every executor whose workers were busy during that batch,
    else (three whole batches, when the output has a link) for an executor whose only busy worker waits on the
    output's link (a writer at its server, its task's reader done: thawed, it can still write), else (up to
    ``busy_s``) for one worker that stays busy in a task of a pending batch and freezes its executor:
    SIGSTOP to the executor JVM and every process under it (workers first). Then it waits (up to ``hold_s``) until
    Spark's log says the executors were lost; when Spark lost no task attempt with them (the workers ran nothing
    Spark waited for), it kills them and tries another moment, ``tries`` times. ``stop`` waits until the batch
    pending then committed (at most :data:`_THAW_WITHIN_S` after the loss: the zombie then runs beside the
    replacement attempt), SIGCONTs the frozen Python processes (the JVMs stay frozen, as if their pause went on),
    lets them run until their Python code is done or ``run_s`` passed, and SIGKILLs the lot. Needs
    ``local-cluster[W,C,MB]`` and :data:`ZOMBIE_SPARK_CONF`. The events record the moment, the busy workers, the
    task attempts Spark lost (``lost_tasks``), whether a batch then committed without them (``replaced``) and how
    long the zombies ran.
    """

    needs = ("driver",)

    def _inject(self) -> dict[str, Any]:
        strike_wait(self.driver, lambda: executor_jvms(self.driver), "executor JVM",
                    "A zombie needs executor JVMs: master local-cluster[W,C,MB] (e.g. local-cluster[3,1,1024]).",
                    self.params.busy_s)
        self._frozen: list[_Frozen] = []
        self._lost_at: float | None = None
        tries: list[dict[str, Any]] = []
        for _ in range(self.params.tries):
            tries.append(self._freeze(output_moment=self._worth_watching_output(tries)))
            if not self._frozen:
                continue
            tries[-1].update(self._wait_lost())
            if tries[-1]["lost_tasks"] or not tries[-1]["declared_lost"]:
                break
            self._release()  # the workers ran nothing Spark waited for: free the executors, try another moment
        return {**tries[-1], "tries": len(tries), "missed": tries[:-1]}

    # -- freezing -------------------------------------------------------------------------

    def _worth_watching_output(self, tries: list[dict[str, Any]]) -> bool:
        """Watch the output for a moment unless a try of this zombie froze at one already (it missed: try a
        running task instead) or an earlier watch in this run saw no row appear mid-task (a sink that shows rows
        only in its commit never will: each watch would cost three batches for nothing)."""
        earlier = [attempt for event in self.history.events("fault-start") if event.get("fault") == "task_zombie"
                   for attempt in (*event.get("missed", ()), event)]
        if any(attempt.get("moment") == "output_grew" for attempt in tries):
            return False
        return not any(attempt.get("watched_output") and attempt.get("moment") != "output_grew"
                       for attempt in (*earlier, *tries))

    def _freeze(self, output_moment: bool) -> dict[str, Any]:
        driver = self.driver
        with self._sink_slowed() as slowed:
            moment, victims = self._moment(output_moment)
            executors = executor_jvms(driver)
            offset = _log_size(driver.log_file)
            self._frozen = [_Frozen(eid, self._busy_first(_tree(executors[eid]), busy), busy, offset)
                            for eid, busy in sorted(victims.items()) if eid in executors]
            frozen = [pid for victim in self._frozen for pid in signal_processes(victim.processes, signal.SIGSTOP)]
            self._frozen_at = time.monotonic()
        state = driver.checkpoint()
        return {"moment": moment if self._frozen else "none", "watched_output": output_moment, "slowed_link": slowed,
                "executor_ids": [v.executor_id for v in self._frozen],
                "frozen_pids": frozen, "busy_workers": [pid for v in self._frozen for pid in v.busy],
                "pending_batch": state.pending, "latest_commit": state.latest_commit}

    def _output_link(self) -> Any:
        """The output's Toxiproxy link (a :class:`Link` or a :class:`LinkGroup`), None when it has none (files)."""
        kind = getattr(getattr(self.context.observer, "target", None), "kind", None)
        environment = self.context.environment
        return getattr(environment, f"{kind}_link", None) if kind in ("kafka", "postgres") else None

    @contextlib.contextmanager
    def _sink_slowed(self) -> Iterator[str | None]:
        """The output's Toxiproxy link slowed by ``sink_latency_ms`` for the block; yields its name (None: no
        link to slow, as for files)."""
        link = self._output_link()
        if link is None or not self.params.sink_latency_ms:
            yield None
            return
        toxic = link.add_toxic("latency", stream="downstream", latency=self.params.sink_latency_ms)
        try:
            yield link.name
        finally:
            link.remove_toxic(toxic)

    @staticmethod
    def _busy_first(processes: list[psutil.Process], busy: list[int]) -> list[psutil.Process]:
        jvm = processes[-1:]
        rest = processes[:-1]
        return [p for p in rest if p.pid in busy] + [p for p in rest if p.pid not in busy] + jvm

    def _moment(self, output_moment: bool) -> tuple[str, dict[str, list[int]]]:
        """When and what to freeze: executor id -> its busy workers."""
        observer = self.context.observer
        if observer is not None and output_moment:
            look: dict[str, Any] = {"mark": observer.visible_mark(), "batch": None, "busy": {}, "batches": set()}
            grew = within(lambda: self._grew_mid_task(observer, look), what="the output to grow mid-task",
                          timeout=_OUTPUT_WATCH_CAP_S, interval=0.003, abort=lambda: self._watched_enough(look))
            if grew:
                return "output_grew", grew
        ports = _listen_ports(self._output_link())
        if ports:
            look = {"batches": set()}
            writing = within(lambda: self._writing_task(ports, look), what="a task writing to the output's link",
                             timeout=self.params.busy_s, interval=0.005, abort=lambda: self._watched_enough(look))
            if writing:
                return "task_writing", writing
        running = within(self._running_task, what="an executor running a Python task", timeout=self.params.busy_s,
                         interval=0.005)
        return "task_running", running or {}

    def _watched_enough(self, look: dict[str, Any]) -> str | None:
        """Why the output watch ends without a moment: the rows of a batch it saw whole showed while none of its
        tasks waited (an exactly-once sink shows them in the driver's commit, after its tasks: no batch of it ever
        has a moment), :data:`_OUTPUT_WATCH_BATCHES` whole batches ran under it (rows that never show at all), or
        the driver stopped. Counted in batches, not seconds: the slowed link makes a batch several times longer
        than before the watch (a PostgreSQL 2PC batch took 12 s, and three of them were most of a zombie run)."""
        # the first batch seen may have begun before the watch (its tasks unslowed), the last one has just begun
        shown_at_commit = look.get("shown_outside_tasks", set()) - {look.get("first")}
        if shown_at_commit:
            return f"the rows of batch {min(shown_at_commit)} showed while none of its tasks ran"
        if len(look["batches"]) >= _OUTPUT_WATCH_BATCHES + 2:
            return f"{_OUTPUT_WATCH_BATCHES} batches ran without the moment"
        return None if self.driver.is_running() else "the driver is not running"

    def _grew_mid_task(self, observer: Any, look: dict[str, Any]) -> dict[str, list[int]] | None:
        """The output grew while a batch is pending and a task still runs: every executor whose workers were busy
        at some look during that batch (the task that made rows visible may have been busy for a few milliseconds
        only, between two looks; its executor also ran its reader)."""
        pending = self.driver.checkpoint().pending
        if pending != look.get("batch"):
            look["batch"], look["busy"] = pending, {}
            if pending is not None:
                look.setdefault("first", pending)
                look["batches"].add(pending)
        busy_now = busy_workers_by_executor(self.driver)
        for eid, pids in busy_now.items():
            look["busy"].setdefault(eid, set()).update(pids)
        mark = observer.visible_mark()
        if mark == look["mark"]:
            return None
        look["mark"] = mark
        # rows that show while no task runs are the driver's commit (a two-phase sink), not a task's write; a worker
        # that has just finished its task is off its JVM socket for a while (pyspark's gc.collect()), and counts only
        # when it waits on something (a task writing waits for its server's answer)
        waiting = any(blocked_elsewhere(pid) for pids in busy_now.values() for pid in pids)
        if pending is None or self.driver.checkpoint().pending != pending:
            return None
        if not waiting:
            look.setdefault("shown_outside_tasks", set()).add(pending)
            return None
        return {eid: sorted(pids) for eid, pids in look["busy"].items()}

    def _writing_task(self, ports: set[int], look: dict[str, Any]) -> dict[str, list[int]] | None:
        """One executor whose only busy Python worker waits on a connection to the output's link after another of
        its workers ran in the same batch and finished: a task's writer at its server, its reader done and its rows
        taken (nothing left unread on its JVM socket).

        That is the moment a zombie can still write. The executor's JVM stays frozen after the thaw, so a worker
        frozen while its task still read, or while its writer waited on its server before it took its rows (the
        PostgreSQL sink looks up the batch's decision first: its reader had not even run), waits for the JVM for
        ever once thawed and never writes: a sink that leaves a zombie's prepared transaction behind then passes
        (seen: the never-rolls-back mutant escaped SNK-2 in 2 of 3 runs, its zombies frozen in that lookup).
        """
        pending = self.driver.checkpoint().pending
        if pending is None:
            return None
        if pending != look.get("batch"):
            look["batch"], look["seen"] = pending, {}
            look["batches"].add(pending)
        busy = busy_workers_by_executor(self.driver)
        for eid, pids in busy.items():
            look["seen"].setdefault(eid, set()).update(pids)
        for eid in sorted(busy, key=executor_order):
            others = look["seen"][eid] - set(busy[eid])
            if len(busy[eid]) == 1 and others and _writing(busy[eid][0], ports):
                return {eid: list(busy[eid])}
        return None

    def _running_task(self) -> dict[str, list[int]] | None:
        """One executor whose Python worker is inside a task of a pending batch (:func:`in_task_worker`)."""
        if self.driver.checkpoint().pending is None:
            return None
        busy = busy_workers_by_executor(self.driver)
        for eid in sorted(busy, key=executor_order):
            worker = in_task_worker(busy[eid])
            if worker is not None:
                return {eid: [worker]}
        return None

    # -- losing, thawing ------------------------------------------------------------------

    def _lost(self) -> list[str]:
        log = self.driver.log_file
        return [task for v in self._frozen for task in lost_tasks(_log_since(log, v.log_offset), v.executor_id)]

    def _all_declared_lost(self) -> bool:
        log = self.driver.log_file
        return all(f"Lost executor {v.executor_id} " in _log_since(log, v.log_offset) for v in self._frozen)

    def _wait_lost(self) -> dict[str, Any]:
        driver = self.driver
        lost = bool(within(self._all_declared_lost, what="the frozen executors declared lost",
                           timeout=self.params.hold_s, interval=0.05,
                           abort=lambda: None if driver.is_running() else "the driver is not running"))
        self._lost_at = time.monotonic() if lost else None
        # Spark logs "Lost executor" first and the task attempts it lost with it a few milliseconds later: read at
        # once, the log showed none, and the zombie let a good freeze go (~10 s of hold lost, in 2 of 2 full runs)
        tasks = within(self._lost, what="the lost executors' task attempts in Spark's log",
                       timeout=_LOST_TASKS_GRACE_S, interval=0.05) if lost else None
        return {"declared_lost": lost, "lost_tasks": tasks or self._lost()}

    def _release(self) -> None:
        for victim in self._frozen:
            for process in victim.processes:
                sigkill(process.pid, timeout=5.0)
        self._frozen = []

    def _heal(self) -> dict[str, Any]:
        if not self._frozen:
            return {"replaced": False, "lost_tasks": [], "alive_at_thaw": []}
        driver = self.driver
        state = driver.checkpoint()
        target = state.pending if state.pending is not None else (state.latest_commit or -1) + 1
        remaining = max(0.0, self.params.hold_s - (time.monotonic() - self._frozen_at))
        if self._lost_at is not None:
            remaining = min(remaining, max(0.0, self._lost_at + _THAW_WITHIN_S - time.monotonic()))

        def target_committed() -> bool:
            return (driver.checkpoint().latest_commit or -1) >= target

        committed = bool(within(target_committed, what=f"batch {target} committed", timeout=remaining,
                                interval=0.05, abort=lambda: None if driver.is_running() else
                                "the driver is not running"))
        frozen_s = time.monotonic() - self._frozen_at
        committed_at_thaw = committed
        lost = self._lost()
        python = [p for v in self._frozen for p in v.python]
        busy = [p for p in python if p.pid in {pid for v in self._frozen for pid in v.busy}]
        alive_at_thaw = [p.pid for p in python if not has_ended(p)]
        # The JVMs stay frozen: thawed, each would act on the kill its worker already sent and take the Python
        # workers down with it before the zombie attempt could write anything.
        signal_processes(python, signal.SIGCONT)
        thawed_at = time.monotonic()
        # finished: back on their JVM sockets, their task done or waiting for rows the frozen JVM never sends (the
        # two look alike from outside; a zombie frozen before its rows reached it is the second)
        finished = bool(within(lambda: all(has_ended(p) or is_idle(p.pid) for p in busy),
                               what="the zombies' Python code to finish", timeout=self.params.run_s, interval=0.02))
        ran_s = time.monotonic() - thawed_at
        killed = [p.pid for v in self._frozen for p in v.processes if sigkill(p.pid, timeout=5.0)]
        self._frozen = []
        if not committed:  # thawed while the replacement ran: a zombie too, if Spark then committed without it
            committed = bool(within(target_committed, what=f"batch {target} committed",
                                    timeout=max(0.0, self.params.hold_s - (time.monotonic() - self._frozen_at)),
                                    interval=0.05, abort=lambda: None if driver.is_running() else
                                    "the driver is not running"))
        return {"replaced": committed and bool(lost), "lost_tasks": lost, "thawed_before_commit": not committed_at_thaw,
                "committed_batch": driver.checkpoint().latest_commit, "frozen_s": round(frozen_s, 2),
                "alive_at_thaw": alive_at_thaw, "zombie_ran_s": round(ran_s, 2), "zombie_finished": finished,
                "killed_after": killed}
