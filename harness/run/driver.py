"""The driver process: a Spark streaming query in a child process that the harness can SIGKILL and restart.

The parent describes the query as data (:class:`QuerySpec`): a builder named
``module:function`` that takes ``(spark, params)`` and returns a started
``StreamingQuery`` (or a ``DataStreamWriter`` to start), the checkpoint, and
the Spark settings. The child (``python -m streamcert.harness.run.driver``) runs it and
appends one JSON line per event to ``events.jsonl``: ``started``,
``progress`` (batchId, numInputRows, ...), ``terminated`` (with the error,
if any). ``kill()`` sends SIGKILL to the child's whole process group (the
Python driver, its JVM and Python workers): a crash, with no chance to clean
up. ``restart()`` runs the same spec (optionally changed, e.g. other
parallelism) from the same checkpoint.

With ``standby=True`` the next attempts wait warm while one runs: a child per attempt for the next
:data:`STANDBY_DEPTH` attempts (its own process group and driver token) starts at a lowered CPU priority (nice +10
and ``SCHED_IDLE``, inherited by its JVM and Python workers: it runs on what the running attempt leaves), starts its
SparkSession, warms the status API and the path a query takes (:mod:`~streamcert.harness.run.warm_up`: a source of
its own registered, loaded and read as a batch on every core; then, in a thread ended when the standby is told to
go, queries of its own through a Python source into a Python sink and into Spark's file sink, and a stateful one on
a RocksDB session, so the JVM's classes are loaded, the streaming runners have run once and Python workers are
forked for the first batch to reuse; then, until it is told to go, a one-task job every
:data:`~streamcert.harness.run.warm_up.KEEP_WORKERS_S`, or Spark stops those workers after a minute idle), and
waits. A restart whose Spark settings are the standby's hands it the spec
(a file named in its go-file); the standby gives itself and everything it started the normal priority back where
the OS lets it (root or CAP_SYS_NICE; otherwise it runs on at the lowered one and says so) and builds the query at
once: the restart costs the query's build and start, not a JVM's and a session's. Standbys whose settings no longer
fit (another master) are discarded and the attempt starts cold. A standby writes a ``standby`` event when it is
ready, and its ``session`` event when it takes over, with ``standby_ready_s`` (how long it had been ready, ~0 when
it was told to go before it was), ``warm_up`` (the warm-up steps it finished, in seconds, whether the go cut one
short, and how many jobs kept its workers) and ``priority_restored``. An attempt no fault will restart
(:attr:`DriverProcess.restarts_may_follow`, which the scenario runner asks its fault timeline) gets no standby, and
the ones waiting are discarded: each costs ~15 s of CPU, taken from the attempt.

Each driver child gives Spark a scratch folder of its own under :attr:`DriverProcess.scratch_dir` (``spark.local.dir``
and the JVM's ``java.io.tmpdir``: block manager files, the RocksDB state stores' working copies, the native libraries
the JVM unpacks) and its ``TMPDIR`` (a standby's warm-up queries, the Python workers' temporary files). A SIGKILLed
JVM never removes its own, and a kill run kills a dozen or more: left in ``/tmp`` they came to ~30 MB a killed
stateful attempt, gigabytes a day of certifications. The harness removes a child's scratch once the child is gone,
and all of it when the driver stops.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from streamcert.harness.run.checkpoint import CheckpointState, checkpoint_state
from streamcert.harness.run.graceful_stop import stop_between_batches
from streamcert.harness.stack.spark import runs_in_driver
from streamcert.harness.run.query_status import warm_status_api
from streamcert.harness.run.warm_up import WARM_UP_QUERY_PREFIX, BackgroundWarmUp, warm_python_data_source_path
from streamcert.harness.run.references import resolve
from streamcert.harness.errors import StartupFailed
from streamcert.spi.fault_points import DRIVER_PID_VAR, POINTS_DIR_VAR
from streamcert.harness.stack.process import (ManagedProcess, ProcessBacked, descendants_outside_group,
                                              processes_with_token, reap, runs_unstopped, signal_processes,
                                              token_env)
from streamcert.harness.stack.jvm_start import ensure_class_archive
from streamcert.harness.waiting import wait_for

__all__ = ["DRIVER_TOKEN_VAR", "SCRATCH_VAR", "SPARK_START_FAILURE", "SPARK_START_RETRIES", "POOLED_ATTEMPT",
           "QuerySpec", "DriverProcess", "Standby", "load_builder", "is_spark_start_failure", "session_key",
           "spawn_driver_child"]

#: Marks every process of one driver attempt. PySpark's Python worker daemon puts itself in a
#: process group of its own, so killing the driver's group alone would leave workers behind.
DRIVER_TOKEN_VAR = "STREAMCERT_DRIVER_TOKEN"

#: The folder a driver child gives Spark for its scratch (see the module's docstring); set by the parent per child.
SCRATCH_VAR = "STREAMCERT_DRIVER_SCRATCH"

#: How a query dies when a Python process Spark starts for it (a data source's planner runner) does not connect back
#: within Spark's fixed 10 s (``PythonWorkerFactory``, not a setting): the machine was too busy, not the connector
SPARK_START_FAILURE = "Python worker failed to connect back"
#: Times a driver child starts its query again from the checkpoint after :data:`SPARK_START_FAILURE` (a
#: ``query_restarted`` event each; the ``query_failures`` check does not count those terminations)
SPARK_START_RETRIES = 2


def is_spark_start_failure(error: str) -> bool:
    """Whether a query's error is Spark failing to start one of its Python processes (:data:`SPARK_START_FAILURE`)."""
    return SPARK_START_FAILURE in error


@dataclass(frozen=True)
class QuerySpec:
    """A streaming query, as data a child process can rebuild.

    The builder is called as ``builder(spark, params)`` with ``params["checkpoint"]``
    set to ``checkpoint``.
    """

    builder: str
    checkpoint: str
    params: dict[str, Any] = field(default_factory=dict)
    master: str = "local[2,3]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    packages: tuple[str, ...] = ()

    def replace(self, **changes: Any) -> "QuerySpec":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "QuerySpec":
        data = json.loads(text)
        data["packages"] = tuple(data.get("packages", ()))
        return cls(**data)


def load_builder(reference: str) -> Callable[..., Any]:
    """Resolve ``module:function``; a clear error when it does not exist."""
    return resolve(reference, "query builder", "tests.harness.queries:counting_to_memory", form="module:function")


class DriverProcess(ProcessBacked):
    """One run of a :class:`QuerySpec` in a child process; a context manager."""

    def __init__(self, spec: QuerySpec, workdir: Path, run_token: str = "", name: str = "driver",
                 standby: bool = False, pool: Any = None) -> None:
        load_builder(spec.builder)  # fail in the parent, fast, on a bad reference
        self.spec = spec
        self.workdir = Path(workdir)
        self.run_token = run_token
        self.name = name
        self.attempt = 0
        self._process: ManagedProcess | None = None
        self._driver_token = ""
        #: the processes outside the driver's group a pause stopped (see :meth:`pause`)
        self._frozen_outside: list = []
        #: whether the next attempt waits warm while this one runs (see the module's docstring); local masters
        #: only: a standby on another would start executors of its own beside the attempt's
        self.standby = standby and runs_in_driver(spec.master)
        #: the standbys of the next attempts, oldest first (at most :data:`STANDBY_DEPTH`)
        self._standbys: list[Standby] = []
        #: asked at each start: whether another restart may follow this attempt (the run's fault timeline says,
        #: :meth:`~streamcert.harness.faults.timeline.FaultTimeline.may_still_act_on`); no standby waits for none
        self.restarts_may_follow: Callable[[], bool] = lambda: True
        #: warm children that outlive a run (:class:`~streamcert.harness.run.driver_pool.DriverPool`): one serves an
        #: attempt that has no standby of its own, the first one above all; local masters only, as standbys
        self.pool = pool if runs_in_driver(spec.master) else None
        #: every child's scratch folder (driver token -> folder), removed once the child is gone
        self._scratch: dict[str, Path] = {}
        #: the logs of attempts a pooled child served (attempt -> its log in the pool), copied here at the end
        self._pooled_logs: dict[int, Path] = {}
        #: the checkpoint as each attempt found it when it started (attempt -> state): which batch it replays
        self.start_states: dict[int, CheckpointState] = {}

    @property
    def fault_points_dir(self) -> Path:
        """Where :mod:`streamcert.spi.fault_points` triggers for this driver are armed."""
        return self.workdir / "fault-points"

    @property
    def events_file(self) -> Path:
        return self.workdir / f"{self.name}-events.jsonl"

    @property
    def scratch_dir(self) -> Path:
        """Where the driver children keep Spark's scratch, a folder each named by the child's driver token."""
        return self.workdir / "scratch"

    def _remove_scratch(self, keep_live: bool = True) -> None:
        """Remove the scratch of every child that is gone (of all of them when ``keep_live`` is false)."""
        live = {self._driver_token} if keep_live and self.is_running() else set()
        live |= {s.token for s in self._standbys} if keep_live else set()
        for token in [token for token in self._scratch if token not in live]:
            shutil.rmtree(self._scratch.pop(token), ignore_errors=True)
        if not keep_live:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def start(self) -> None:
        if self._process is not None and self._process.is_running():
            return
        ensure_class_archive()  # here, once, rather than inside a driver whose start a fault is timing
        self.attempt += 1
        self.start_states[self.attempt] = self.checkpoint()
        self.workdir.mkdir(parents=True, exist_ok=True)
        spec_file = self.workdir / f"{self.name}-spec-{self.attempt}.json"
        spec_file.write_text(self.spec.to_json())
        standby = next((s for s in self._standbys if s.serves(self.spec, self.attempt)), None)
        if standby is not None:
            self._standbys.remove(standby)
        # what can no longer serve goes: this attempt's (dead, or with other Spark settings), earlier ones, and
        # every one whose settings are not the spec's (a restart with another master or conf)
        key = session_key(self.spec)
        self._discard_standbys(lambda s: s.attempt <= self.attempt or s.session_key != key)
        if standby is None and self.pool is not None:
            standby = self.pool.take(self.spec)
            if standby is not None:
                self._adopt(standby)
        if standby is not None:
            standby.go(spec_file, self.events_file, self.attempt)
            self._process, self._driver_token = standby.process, standby.token
            self._scratch[standby.token] = standby.scratch
        else:
            self._process, self._driver_token = self._spawn(spec_file, self.attempt)
        if self.standby and self.restarts_may_follow():
            waiting = {s.attempt for s in self._standbys}
            self._standbys += [self._spawn_standby(attempt) for attempt in
                               range(self.attempt + 1, self.attempt + 1 + STANDBY_DEPTH) if attempt not in waiting]
        else:  # the run's last restart: a standby would only take the cores from this attempt
            self._discard_standbys()
        self._remove_scratch()  # of the children gone: an attempt that ended by itself, discarded standbys

    def _adopt(self, standby: "Standby") -> None:
        """Make a pooled child this driver's: its fault points are this driver's, its log is this attempt's."""
        standby.serve_points(self.fault_points_dir)
        log = self.workdir / f"{self.name}-{self.attempt}.log"
        log.unlink(missing_ok=True)
        log.symlink_to(standby.process.log_path)
        self._pooled_logs[self.attempt] = standby.process.log_path

    def _keep_pooled_logs(self) -> None:
        """The logs of the attempts pooled children served, copied in place of their links (the pool's folder goes
        when the pool stops)."""
        for attempt, source in self._pooled_logs.items():
            log = self.workdir / f"{self.name}-{attempt}.log"
            if log.is_symlink() and source.exists():
                log.unlink()
                shutil.copyfile(source, log)

    def _spawn(self, spec_file: Path, attempt: int, go_file: Path | None = None) -> tuple[ManagedProcess, str]:
        """Start a driver child for ``attempt`` (a standby when ``go_file`` is given); its process and token."""
        token = uuid.uuid4().hex
        self._scratch[token] = self.scratch_dir / token
        process = spawn_driver_child(
            f"driver {self.name} (attempt {attempt}{', standby' if go_file else ''})",
            self.workdir / f"{self.name}-{attempt}.log", spec_file, self.events_file, attempt, go_file,
            run_token=self.run_token, driver_token=token, points_dir=self.fault_points_dir,
            scratch=self._scratch[token])
        return process, token

    def _spawn_standby(self, attempt: int) -> "Standby":
        session_file = self.workdir / f"{self.name}-standby-{attempt}.json"
        session_file.write_text(self.spec.to_json())
        go_file = self.workdir / f"{self.name}-go-{attempt}"
        go_file.unlink(missing_ok=True)
        process, token = self._spawn(session_file, attempt, go_file)
        return Standby(process, token, attempt, session_key(self.spec), go_file, self._scratch[token])

    def stop(self) -> None:
        """Ask the query to stop (SIGTERM), then force it; a standby is discarded; idempotent."""
        super().stop()
        self._reap()
        self._discard_standbys()
        self._remove_scratch(keep_live=False)
        self._keep_pooled_logs()

    def _discard_standbys(self, which: Callable[["Standby"], bool] = lambda _standby: True) -> None:
        """Kill and forget the standbys ``which`` selects (all of them by default)."""
        for standby in [s for s in self._standbys if which(s)]:
            self._standbys.remove(standby)
            standby.discard()

    def stop_gracefully(self, timeout: float = 60.0, linger_s: float = 10.0) -> dict[str, Any]:
        """Ask the running query to stop (SIGTERM: the child stops between batches) and report how it went; then
        remove whatever is left, as :meth:`stop` does.

        The report (GEN-3's evidence): ``exited`` within ``timeout`` s, ``seconds`` it took, ``exit_code``,
        ``leftover_processes`` of this attempt still alive ``linger_s`` s after the driver exited (a connector's
        thread or process that outlives its query), the checkpoint's ``pending_batch`` / ``latest_commit``, and
        ``how`` the query stopped (see :func:`~streamcert.harness.run.graceful_stop.stop_between_batches`).
        """
        if not self.is_running():  # it ended by itself: say why, if the query failed
            return {"running": False, "exit_code": self.exit_code(), "query_error": self.query_error()}
        assert self._process is not None
        began = time.monotonic()
        # the Python driver alone: it stops the query between batches; a SIGTERM to its JVM would kill the query
        exited = self._process.terminate(timeout, group=False)
        seconds = time.monotonic() - began
        token, leftovers = self._driver_token, []
        if exited and token:
            try:
                wait_for(lambda: not processes_with_token(token, var=DRIVER_TOKEN_VAR),
                         what="the driver's processes to exit", timeout=linger_s, interval=0.1)
            except StartupFailed:  # the report counts what is left
                leftovers = processes_with_token(token, var=DRIVER_TOKEN_VAR)
        state = self.checkpoint()
        stopped = [e.get("how") for e in self.events(self.attempt) if e["event"] == "stopped"]
        report = {"running": True, "exited": exited, "seconds": round(seconds, 3), "exit_code": self.exit_code(),
                  "leftover_processes": len(leftovers), "pending_batch": state.pending,
                  "latest_commit": state.latest_commit, "how": stopped[-1] if stopped else None}
        self.stop()
        return report

    def pause(self) -> None:
        """SIGSTOP the driver's process group and the processes under it in groups of their own (the Python
        processes Spark forks from the fork server: a sink's commit, the planning calls), so that a frozen driver's
        commit does not go on while a fault decides."""
        super().pause()
        # one another fault holds stopped (a zombie's workers) stays stopped when this one resumes
        self._frozen_outside = [process for process in self._outside_group() if runs_unstopped(process)]
        signal_processes(self._frozen_outside, signal.SIGSTOP)

    def resume(self) -> None:
        signal_processes(self._frozen_outside, signal.SIGCONT)
        self._frozen_outside = []
        super().resume()

    def kill(self) -> None:
        """SIGKILL the driver and everything it started (JVM, Python workers, the fork server's children, which a
        signal to its group misses: at once, not after the group is gone): a crash."""
        signal_processes(self._outside_group(), signal.SIGKILL)
        self._frozen_outside = []
        super().kill()
        self._reap()
        self._remove_scratch()

    def process_ids(self) -> set[int]:
        """The driver's process, every process under it (its JVM, the Python workers) and every process carrying
        its token (the Python processes a fork server outside its tree started for it: the data source planner,
        a sink's commit): the query's own. Empty once it is gone."""
        import psutil

        pid = self._process.pid if self._process is not None else None
        if pid is None or not self.is_running():
            return set()
        carriers = set(processes_with_token(self._driver_token, var=DRIVER_TOKEN_VAR)) if self._driver_token else set()
        try:
            return {pid, *carriers, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
        except psutil.Error:
            return carriers

    def _outside_group(self) -> list:
        """The processes under the driver in process groups of their own (none once it is gone)."""
        pid = self._process.pid if self._process is not None else None
        return descendants_outside_group(pid) if pid is not None and self.is_running() else []

    def _reap(self) -> None:
        if self._driver_token:
            reap(self._driver_token, var=DRIVER_TOKEN_VAR)

    def restart(self, **changes: Any) -> None:
        """Kill what runs (if anything) and start again from the same checkpoint, with ``changes`` to the spec."""
        self.kill()
        if changes:
            self.spec = self.spec.replace(**changes)
        self.start()

    def is_running(self) -> bool:
        return self._process is not None and self._process.is_running()

    def exit_code(self) -> int | None:
        return self._process.exit_code() if self._process else None

    @property
    def log_file(self) -> Path:
        """The current attempt's log (the driver's stderr: Spark's log at error level, lost tasks at warn)."""
        return self.workdir / f"{self.name}-{self.attempt}.log"

    def tail(self, lines: int = 30) -> str:
        return self._process.tail(lines) if self._process else ""

    def events(self, attempt: int | None = None) -> list[dict[str, Any]]:
        """Events reported so far (by ``attempt``, or all attempts)."""
        if not self.events_file.exists():
            return []
        out = []
        for line in self.events_file.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a line cut by SIGKILL
                continue
            if attempt is None or event.get("attempt") == attempt:
                out.append(event)
        return out

    def session(self, attempt: int | None = None) -> dict[str, Any] | None:
        """The ``session`` event of ``attempt`` (default: the latest): its Spark UI's address (``ui``, None when the
        UI is off) and application id; None until its SparkSession started."""
        attempt = self.attempt if attempt is None else attempt
        return next((e for e in self.events(attempt) if e.get("event") == "session"), None)

    def query_error(self, attempt: int | None = None) -> str | None:
        """The first line of the error the query of ``attempt`` (default: the latest) terminated with, if any."""
        attempt = self.attempt if attempt is None else attempt
        events = self.events(attempt)
        # a query the driver started again (Spark's own start-up failed) ended with an error that is not its last
        restarted = max((i for i, e in enumerate(events) if e.get("event") == "query_restarted"), default=-1)
        errors = [e.get("error") for e in events[restarted + 1:] if e.get("event") in ("terminated", "failed")]
        errors = [e for e in errors if e]
        return errors[0].strip().splitlines()[0][:500] if errors else None

    def checkpoint(self) -> CheckpointState:
        return checkpoint_state(Path(self.spec.checkpoint))

    def wait_for(self, predicate: Callable[["DriverProcess"], bool], what: str, timeout: float = 120.0,
                 interval: float = 0.02) -> None:
        """Wait until ``predicate(self)``; fail with the driver's log if it dies or time runs out."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if not self.is_running():
                if predicate(self):
                    return
                raise StartupFailed(f"The driver exited (code {self.exit_code()}) before {what}.",
                                    hint=f"Look at {self.workdir}.", details=self.tail())
            if time.monotonic() > deadline:
                raise StartupFailed(f"Timed out after {timeout:.0f}s waiting for {what}.",
                                    hint="The query may be stuck or slow; look at the driver log.",
                                    details=self.tail())
            time.sleep(interval)

    def wait_for_batches(self, count: int, timeout: float = 120.0) -> None:
        """Wait until this attempt has completed ``count`` batches that read rows."""
        attempt = self.attempt

        def enough(driver: "DriverProcess") -> bool:
            return sum(1 for e in driver.events(attempt) if e["event"] == "progress"
                       and e.get("numInputRows", 0) > 0) >= count

        self.wait_for(enough, f"{count} batch(es) with input", timeout)

    def wait_until_terminated(self, timeout: float = 120.0) -> dict[str, Any]:
        """Wait for the query to end by itself (e.g. ``availableNow``); return its ``terminated`` event."""
        attempt = self.attempt

        def ended(driver: "DriverProcess") -> bool:
            return any(e["event"] == "terminated" for e in driver.events(attempt))

        self.wait_for(ended, "the query to terminate", timeout)
        return next(e for e in self.events(attempt) if e["event"] == "terminated")


# -- the child ---------------------------------------------------------------------

def session_key(spec: QuerySpec) -> tuple:
    """What a driver's SparkSession is made of: a standby serves only an attempt whose spec has the same."""
    return spec.master, tuple(sorted(spec.spark_conf.items())), tuple(spec.packages)


def spawn_driver_child(label: str, log_path: Path, spec_file: Path, events_file: Path, attempt: int,
                       go_file: Path | None = None, *, run_token: str, driver_token: str, points_dir: Path,
                       scratch: Path) -> ManagedProcess:
    """Start ``python -m streamcert.harness.run.driver`` for ``attempt`` (a standby waiting for ``go_file`` when
    given), its output in ``log_path``; ``points_dir`` and ``scratch`` reach it, its JVM and its Python workers
    through the environment, with the run's and the child's own token."""
    # TMPDIR too: the child's own temporary folders (a standby's warm-up queries' output) and its Python workers'
    # go to the scratch the harness removes, not to /tmp, where a SIGKILLed standby left one per warm-up
    scratch.mkdir(parents=True, exist_ok=True)
    env = token_env(run_token, dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(scratch), **{
        DRIVER_TOKEN_VAR: driver_token, POINTS_DIR_VAR: str(points_dir), SCRATCH_VAR: str(scratch)}))
    argv = [sys.executable, "-m", "streamcert.harness.run.driver", str(spec_file), str(events_file),
            str(attempt)] + ([str(go_file)] if go_file is not None else [])
    process = ManagedProcess(label, argv, log_path, env=env, stop_timeout=60)
    process.start()
    return process


@dataclass
class Standby:
    """A driver child with its session up, waiting for its go-file: an attempt's own (for the next attempts of one
    :class:`DriverProcess`) or a pool's (for any run whose Spark settings match, its fault points a link the
    adopting driver points at its own folder)."""

    process: ManagedProcess
    token: str
    attempt: int
    session_key: tuple
    go_file: Path
    #: its Spark scratch folder (see the module's docstring)
    scratch: Path
    #: a pooled child's fault-points folder as its processes know it: a link to the adopting driver's
    points_link: Path | None = None

    def serves(self, spec: QuerySpec, attempt: int) -> bool:
        return attempt == self.attempt and self.process.is_running() and session_key(spec) == self.session_key

    def serve_points(self, points_dir: Path) -> None:
        """Point a pooled child's fault-points link at ``points_dir`` (atomically: a reader sees one or the other)."""
        if self.points_link is None:
            return
        partial = self.points_link.with_name(self.points_link.name + ".partial")
        partial.unlink(missing_ok=True)
        partial.symlink_to(points_dir, target_is_directory=True)
        os.replace(partial, self.points_link)

    def go(self, spec_file: Path, events_file: Path, attempt: int) -> None:
        """Hand the standby the spec to build, the events file to write and the attempt it is (written first: the
        go-file appears whole or not at all)."""
        partial = self.go_file.with_suffix(".partial")
        partial.write_text(json.dumps({"spec": str(spec_file), "events": str(events_file), "attempt": attempt}))
        os.replace(partial, self.go_file)

    def discard(self) -> None:
        self.process.kill()
        reap(self.token, var=DRIVER_TOKEN_VAR)
        shutil.rmtree(self.scratch, ignore_errors=True)


#: The attempt a pooled child is started as (it learns its attempt when told to go).
POOLED_ATTEMPT = 0

#: Seconds between a standby's looks at its go-file.
_STANDBY_LOOK_S = 0.01

#: How many attempts ahead standbys wait: kills may come faster than one standby starts behind a busy attempt (~10 s
#: on two cores), and the one two attempts ahead has had the idle time of both.
STANDBY_DEPTH = 2

#: How much lower a waiting standby's CPU priority is (a nice increment): it yields the cores to the running attempt.
STANDBY_NICE = 10


def _lower_priority() -> int:
    """Called in a standby before its JVM starts, so the JVM and the Python workers it forks inherit it; the nice
    value it had (the harness's), to give back. Where the OS allows, the standby also runs as ``SCHED_IDLE`` (only
    on CPU time nothing else wants): at nice +10 alone it still took ~10 % of the cores from the attempt it stands
    behind, and its warm-up queries slowed a cold first batch."""
    normal = os.getpriority(os.PRIO_PROCESS, 0)
    os.nice(STANDBY_NICE)
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not allowed: the nice value alone
        pass
    return normal


def _restore_priority(normal: int = 0) -> bool:
    """Give this process and everything it started the ``normal`` nice value and scheduling policy back, thread by
    thread (Linux keeps both per thread; the JVM's threads and the Python worker daemon, which leaves this process
    group, inherited the lowered ones); whether the OS allowed it (lowering a nice value needs root or
    CAP_SYS_NICE)."""
    import psutil

    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            threads = [thread.id for thread in process.threads()]
        except psutil.NoSuchProcess:
            continue
        for thread in threads:
            try:
                if _idle(thread):
                    os.sched_setscheduler(thread, os.SCHED_OTHER, os.sched_param(0))
                os.setpriority(os.PRIO_PROCESS, thread, normal)
            except ProcessLookupError:  # a thread that ended meanwhile
                continue
            except PermissionError:
                return False
    return True


def _idle(thread: int) -> bool:
    try:
        return os.sched_getscheduler(thread) == os.SCHED_IDLE
    except (AttributeError, OSError):
        return False


def _restore_priority_when_told(go_file: Path, normal: int = 0) -> threading.Thread:
    """A thread that gives the standby its priority back as soon as its go-file appears: a restart that comes while
    the standby is still starting waits for the rest of that start, which must not then run at the lowered priority
    (the take-over restores it again, for whatever started since)."""
    def watch() -> None:
        while not go_file.exists():
            time.sleep(_STANDBY_LOOK_S)
        _restore_priority(normal)

    watcher = threading.Thread(target=watch, name="standby-priority", daemon=True)
    watcher.start()
    return watcher


def _wait_for_go(go_file: Path) -> dict[str, Any]:
    """What the go-file says (:meth:`Standby.go`), once it appears; exits when the harness that made this standby
    is gone."""
    parent = os.getppid()
    while not go_file.exists():
        if os.getppid() != parent:
            sys.exit(0)
        time.sleep(_STANDBY_LOOK_S)
    return json.loads(go_file.read_text())


class _EventLog:
    """The events file a driver child appends to, one JSON line an event; a standby's moves to the events file and
    attempt it is told to serve (a pooled one waited in the pool's)."""

    def __init__(self, path: str | Path, attempt: int) -> None:
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1)
        self.path, self.attempt = Path(path), attempt

    def emit(self, kind: str, **fields: Any) -> None:
        with self._lock:
            self._file.write(json.dumps({"event": kind, "attempt": self.attempt, "pid": os.getpid(),
                                         "time": time.time(), **fields}) + "\n")
            self._file.flush()

    def move(self, path: str | Path, attempt: int) -> None:
        with self._lock:
            if Path(path) != self.path:
                self._file.close()
                self._file = open(path, "a", buffering=1)
                self.path = Path(path)
            self.attempt = attempt

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _child(spec_file: str, events_file: str, attempt: int, go_file: str | None = None) -> int:
    from pyspark.sql.streaming import StreamingQueryListener

    from streamcert.harness.stack.spark import SparkConfig, spark_session

    spec = QuerySpec.from_json(Path(spec_file).read_text())
    if go_file is not None:
        normal = _lower_priority()
        _restore_priority_when_told(Path(go_file), normal)
    # Inherited by the JVM and every Python worker: a fault point reached anywhere can kill this driver.
    os.environ[DRIVER_PID_VAR] = str(os.getpid())
    events = _EventLog(events_file, attempt)
    emit = events.emit

    class _Reporter(StreamingQueryListener):
        """The events of the queries it saw start (a standby's warm-up queries ended before it was added, but
        their last events may still be on their way)."""

        def __init__(self) -> None:
            self.queries: set[str] = set()

        def onQueryStarted(self, event) -> None:
            if (event.name or "").startswith(WARM_UP_QUERY_PREFIX):
                return
            self.queries.add(str(event.id))
            emit("started", id=str(event.id), runId=str(event.runId))

        def onQueryProgress(self, event) -> None:
            progress = event.progress
            if str(progress.id) not in self.queries:
                return
            emit("progress", batchId=progress.batchId, numInputRows=progress.numInputRows,
                 durationMs=dict(progress.durationMs), sources=[json.loads(s.json) for s in progress.sources])

        def onQueryIdle(self, event) -> None:
            # a trigger found no new data in any source (Spark throttles these to one per
            # spark.sql.streaming.noDataProgressEventInterval)
            if str(event.id) in self.queries:
                emit("idle")

        def onQueryTerminated(self, event) -> None:
            if str(event.id) in self.queries:
                emit("terminated", error=event.exception)

    conf, java_options = _scratch_settings(spec.spark_conf, os.environ.get(SCRATCH_VAR))
    spark = spark_session(SparkConfig(master=spec.master, conf=conf, packages=spec.packages, java_options=java_options,
                                      app_name=f"streamcert-driver-{attempt}"))
    context = spark.sparkContext
    # a watcher's first look must find the status API ready: the query's first moments last well under its cold start
    warmed_s = warm_status_api(context.uiWebUrl, context.applicationId) if context.uiWebUrl else None
    standby = {}
    if go_file is not None:
        warm_up = None
        if not Path(go_file).exists():  # told to go before it warmed: the query's own first batch warms them
            try:
                warm_python_data_source_path(spark)
                # what it has not warmed when told to go, the query's first batch does
                warm_up = BackgroundWarmUp(spark).start()
            except Exception as exc:  # noqa: BLE001 - a warm-up is a help, never a reason to lose the attempt
                emit("warm_up_failed", error=f"{type(exc).__name__}: {str(exc)[:300]}")
        ready = time.monotonic()
        emit("standby", ui=context.uiWebUrl)
        go = _wait_for_go(Path(go_file))
        standby = {"standby_ready_s": round(time.monotonic() - ready, 3),
                   "warm_up": warm_up.stop() if warm_up is not None else None, "pooled": attempt == POOLED_ATTEMPT}
        events.move(go["events"], go["attempt"])
        spec = QuerySpec.from_json(Path(go["spec"]).read_text())
        standby["priority_restored"] = _restore_priority(normal)
    # after the warm-up: its queries' progress is not the query's
    spark.streams.addListener(_Reporter())
    emit("session", ui=context.uiWebUrl, app_id=context.applicationId, status_api_warmed_s=warmed_s, **standby)
    stopping = threading.Event()

    def on_term(_signum, _frame) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    restarts = 0
    while True:
        try:
            built = load_builder(spec.builder)(spark, {**spec.params, "checkpoint": spec.checkpoint})
            emit("built")  # where a restart's seconds go: the builder's (connectors loaded, schemas asked), start()'s
            query = built.start() if hasattr(built, "start") and not hasattr(built, "awaitTermination") else built
        except Exception as exc:  # the query could not be built or started: say why, as a failed query does
            emit("failed", error=f"{type(exc).__name__}: {exc}\n{_last_frames(exc)}")
            events.close()
            return 1
        try:
            while query.isActive and not stopping.is_set():
                query.awaitTermination(0.2)
        except Exception as exc:  # the query failed; its terminated event carries the error
            if restarts < SPARK_START_RETRIES and is_spark_start_failure(str(exc)):
                # Spark's own start-up, not the connector: the query starts again from its checkpoint, as after a kill
                restarts += 1
                _drain_listeners(spark)
                emit("query_restarted", why=SPARK_START_FAILURE, error=str(exc).strip().splitlines()[0][:300])
                continue
            emit("failed", error=f"{type(exc).__name__}: {exc}")
            _close(spark, query, emit, events)
            return 1
        _close(spark, query, emit, events)
        return 0


def _scratch_settings(spark_conf: dict[str, str], scratch: str | None) -> tuple[dict[str, str], str]:
    """The Spark settings and JVM options that put a driver child's scratch in ``scratch`` (none without one); a
    ``spark.local.dir`` the spec sets is kept."""
    if not scratch:
        return dict(spark_conf), ""
    Path(scratch).mkdir(parents=True, exist_ok=True)
    conf = dict(spark_conf)
    if "," not in scratch:  # Spark reads spark.local.dir as a comma-separated list
        conf.setdefault("spark.local.dir", scratch)
    # Spark parses extraJavaOptions as a shell would: double quotes keep a path with spaces one option
    quoted = scratch.replace("\\", "\\\\").replace('"', '\\"')
    return conf, f'"-Djava.io.tmpdir={quoted}"'


def _close(spark: Any, query: Any, emit: Any, events: Any) -> None:
    """The end of a driver child's query: stopped between batches if still active, its listener events delivered."""
    try:
        if query.isActive:
            emit("stopped", how=stop_between_batches(query))
    finally:
        _drain_listeners(spark)
        events.close()


def _last_frames(exc: BaseException, frames: int = 4) -> str:
    """Where ``exc`` was raised: the last frames of its traceback (a connector's import or build error)."""
    import traceback

    return "".join(traceback.format_tb(exc.__traceback__)[-frames:])


def _drain_listeners(spark: Any, timeout_ms: int = 10_000) -> None:
    """Wait until Spark's listener bus delivered every event it holds (the last batches' progress, the terminated
    event) to the reporter: a fixed pause lost the progress of batches that ended just before a stop. Called in
    the driver child as the query ends."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    except Exception:  # noqa: BLE001 - a bus that does not drain in time, or a JVM already gone: keep what came
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5]))
