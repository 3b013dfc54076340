"""Executor faults really happen: Spark's own event log shows the failed attempt or the lost and replaced executor,
the query goes on, and the file sink holds every record exactly once.

The integration tests run a real query in a driver child process; the output is read with pyarrow (only the files
the sink committed), so this process needs no Spark of its own. The unit tests check how victims are found (psutil
and ``/proc/<pid>/syscall``) on processes of their own.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults import executor
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.executor import (
    TASK_EXCEPTION_POINT,
    ExecutorKill,
    PythonWorkerKill,
    TaskException,
    python_task_workers,
)
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.driver import DRIVER_TOKEN_VAR, DriverProcess, QuerySpec
from streamcert.harness.run.history import History
from streamcert.harness.run.observers.files import read_committed_table
from streamcert.harness.verify.spark_events import event_log_conf, executor_changes, failed_tasks, read_events
from streamcert.harness.waiting import wait_for
from streamcert.spi.fault_points import DRIVER_PID_VAR, POINTS_DIR_VAR, InjectedPointFailure, reached

ROWS, PER_BATCH = 40, 10
LAST_BATCH = ROWS // PER_BATCH - 1


def _committed_values(out: Path) -> list[int]:
    """Values in the Parquet files the sink committed (a failed attempt's files are not)."""
    table = read_committed_table(out)
    return sorted(table.column("value").to_pylist()) if table is not None else []


def _driver(tmp_path: Path, builder: str, master: str, **params) -> DriverProcess:
    spec = QuerySpec(builder, str(tmp_path / "checkpoint"),
                     {"rows": ROWS, "rows_per_batch": PER_BATCH, "read_delay_ms": 2500, "path": str(tmp_path / "out"),
                      **params},
                     master=master, spark_conf=event_log_conf(tmp_path / "events"))
    return DriverProcess(spec, tmp_path / "driver")


def _context(driver: DriverProcess, history: History, tmp_path: Path) -> FaultContext:
    return FaultContext(driver=driver, history=history, workdir=tmp_path / "faults")


def _committed(batch: int):
    return lambda driver: (driver.checkpoint().latest_commit or -1) >= batch


def _spec(fault: str) -> FaultSpec:
    return FaultSpec(fault, "executor", 0, 0)


@pytest.mark.integration
def test_python_worker_kill_fails_one_attempt_that_spark_retries(tmp_path):
    began, history = time.monotonic(), History()
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local[2,3]")
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = build_fault(_spec("python_worker_kill"), _context(driver, history, tmp_path))
        assert isinstance(fault, PythonWorkerKill)
        fault.start()
        struck = driver.checkpoint().latest_offsets  # the batch whose task was running; it cannot commit yet
        fault.stop()
        killed = history.events("fault-start")[0]
        assert killed["killed"] and killed["pid"] not in python_task_workers(driver)
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        failures = failed_tasks(read_events(tmp_path / "events"))
    assert [f.batch_id for f in failures] == [struck], killed  # the victim's state and system call say why not
    assert failures[0].reason == "ExceptionFailure" and "Python worker exited unexpectedly" in failures[0].message
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\nworker kill: pid {killed['pid']} in batch {struck}; failed: {failures}; "
          f"{time.monotonic() - began:.1f}s")


@pytest.mark.integration
def test_task_exception_is_claimed_once_and_retried(tmp_path):
    began, history = time.monotonic(), History()
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_through_failure_point", "local[2,3]")
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = build_fault(_spec("task_exception"), _context(driver, history, tmp_path))
        assert isinstance(fault, TaskException)
        fault.start()
        driver.wait_for(lambda _d: fault.claims(), "a task to claim the trigger", timeout=60)
        fault.stop()
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        failures = failed_tasks(read_events(tmp_path / "events"))
    stopped = history.events("fault-stop")[0]
    assert stopped["claimed"] is True and len(stopped["claimed_by"]) == 1 and len(fault.claims()) == 1
    assert stopped["claimed_by"][0].startswith("stage")  # claimed inside a task: stage, partition, attempt, pid
    assert not fault.trigger.exists()
    assert len(failures) == 1 and failures[0].reason == "ExceptionFailure"
    # the task failed through the SPI's fault point (the one arm/claim mechanism), and names who claimed it
    assert "InjectedPointFailure" in failures[0].message and TASK_EXCEPTION_POINT in failures[0].message
    assert stopped["claimed_by"][0] in failures[0].message
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\ntask exception: claimed by {stopped['claimed_by']}; failed: {failures}; "
          f"{time.monotonic() - began:.1f}s")


def test_an_unclaimed_trigger_is_removed_and_recorded_as_unclaimed(tmp_path):
    history = History()
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local[1]")  # never started
    fault = build_fault(_spec("task_exception"), _context(driver, history, tmp_path))
    fault.start()
    assert fault.trigger.exists() and fault.trigger.parent == driver.fault_points_dir
    fault.stop()
    assert not fault.trigger.exists()
    assert history.events("fault-stop")[0]["claimed"] is False
    assert history.events("fault-stop")[0]["claimed_by"] == []


def test_a_task_exception_claimed_in_this_process_is_reported_with_its_claimer(tmp_path, monkeypatch):
    """The failure point's check is the SPI's reached(): armed by the fault, claimed once, then a no-op."""
    history = History()
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local[1]")
    monkeypatch.setenv(POINTS_DIR_VAR, str(driver.fault_points_dir))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))  # never signalled: the action is "fail"
    fault = build_fault(_spec("task_exception"), _context(driver, history, tmp_path))
    fault.start()
    with pytest.raises(InjectedPointFailure, match=f"no-task-context-pid{os.getpid()}"):
        reached(TASK_EXCEPTION_POINT)
    reached(TASK_EXCEPTION_POINT)  # claimed: the retried task goes through
    fault.stop()
    stopped = history.events("fault-stop")[0]
    assert stopped["claimed"] is True and stopped["claimed_by"] == [f"no-task-context-pid{os.getpid()}"]
    assert history.events("fault-start")[0]["point"] == TASK_EXCEPTION_POINT


@pytest.mark.parametrize("kind", ["python_worker_kill", "task_exception", "executor_kill"])
def test_executor_faults_need_the_driver(kind, tmp_path):
    with pytest.raises(ConfigurationError, match="driver process") as info:
        build_fault(_spec(kind), FaultContext(history=History(), workdir=tmp_path))
    assert "FaultContext(driver=" in str(info.value)


@pytest.mark.integration
def test_executor_kill_under_local_cluster_is_replaced_and_exactly_once(tmp_path):
    began, history = time.monotonic(), History()
    events = tmp_path / "events"
    driver = _driver(tmp_path, "tests.harness.executor_queries:counting_to_files", "local-cluster[2,1,1024]")
    with driver:
        driver.wait_for(_committed(0), "the first batch", timeout=180)
        fault = build_fault(_spec("executor_kill"), _context(driver, history, tmp_path))
        assert isinstance(fault, ExecutorKill)
        fault.start()
        killed = history.events("fault-start")[0]
        victim, before = killed["executor_id"], set(killed["executors_before"])

        def replaced(_driver) -> bool:
            changes = executor_changes(read_events(events))
            removed = [c.time_ms for c in changes if c.kind == "removed" and c.executor_id == victim]
            return bool(removed) and any(c.kind == "added" and c.executor_id not in before
                                         and c.time_ms >= removed[0] for c in changes)

        driver.wait_for(replaced, f"executor {victim} removed and a new one added", timeout=120)
        driver.wait_for(_committed(LAST_BATCH), "every batch committed", timeout=180)
        fault.stop()
        logged = read_events(events)
    changes = executor_changes(logged)
    removal = next(c for c in changes if c.kind == "removed" and c.executor_id == victim)
    assert "137" in removal.reason or "exited" in removal.reason.lower()
    assert killed["killed"] and killed["running_python_task"]
    lost = [f for f in failed_tasks(logged) if f.executor_id == victim]
    assert lost and lost[0].reason == "ExecutorLostFailure"
    assert _committed_values(tmp_path / "out") == list(range(ROWS))
    print(f"\nexecutor kill: executor {victim} (pid {killed['pid']}) of {sorted(before)}; changes: "
          f"{[(c.kind, c.executor_id, c.reason) for c in changes]}; failed: {lost}; "
          f"after: {history.events('fault-stop')[0]['executors_now']}; {time.monotonic() - began:.1f}s")


# -- finding victims (unit: processes of the test's own) ----------------------------------------

def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], **kwargs)


@pytest.mark.parametrize("argv, module", [
    (["python3", "-m", "pyspark.daemon"], "pyspark.worker"),
    (["python3", "-m", "pyspark.daemon", "pyspark.worker"], "pyspark.worker"),
    (["python3", "-m", "pyspark.worker"], "pyspark.worker"),
    (["python3", "-m", "streamcert.harness.run.driver", "spec.json"], None),
    (["java", "-cp", "x", "org.apache.spark.executor.CoarseGrainedExecutorBackend"], None),
    (["python3", "-m"], None),
])
def test_worker_module_reads_pysparks_command_lines(argv, module):
    assert executor._worker_module(argv) == module


def test_the_driver_token_is_read_from_the_driver_processes_environment():
    environ = {name: value for name, value in os.environ.items() if name != DRIVER_TOKEN_VAR}
    with_token = _python("import time; time.sleep(60)", env={**environ, DRIVER_TOKEN_VAR: "token-123"})
    without = _python("import time; time.sleep(60)", env=environ)
    try:
        assert executor._driver_token(SimpleNamespace(pid=with_token.pid)) == "token-123"
        with pytest.raises(ConfigurationError, match="needs a running driver"):
            executor._driver_token(SimpleNamespace(pid=without.pid))
    finally:
        for child in (with_token, without):
            child.kill()
            child.wait()
    with pytest.raises(ConfigurationError, match="needs a running driver"):
        executor._driver_token(SimpleNamespace(pid=None))


def test_sigkill_kills_and_waits_then_reports_a_process_already_gone():
    child = _python("import time; time.sleep(60)")
    assert executor.sigkill(child.pid) is True
    assert executor.has_ended(psutil.Process(child.pid))  # a zombie until reaped: gone all the same
    assert child.wait(timeout=10) == -9
    assert executor.sigkill(child.pid) is False


@pytest.mark.skipif(not os.access("/proc/self/syscall", os.R_OK), reason="this kernel hides /proc/<pid>/syscall")
def test_a_worker_blocked_reading_its_first_socket_is_idle_and_a_sleeping_one_is_not():
    ours, theirs = socket.socketpair()
    reader = _python("import socket, sys; socket.socket(fileno=int(sys.argv[1])).recv(1)", str(theirs.fileno()),
                     pass_fds=[theirs.fileno()])
    sleeper = _python("import time; time.sleep(60)")
    try:
        assert executor._jvm_socket_fd(reader.pid) is not None
        assert wait_for(lambda: executor.is_idle(reader.pid), what="the reader to block", timeout=20)
        time.sleep(0.2)
        assert executor.is_idle(sleeper.pid) is False  # nanosleep, and no socket at all
        assert executor._jvm_socket_fd(sleeper.pid) is None
    finally:
        for child in (reader, sleeper):
            child.kill()
            child.wait()
        ours.close()
        theirs.close()



def test_an_executor_fault_on_a_remote_master_whose_executors_are_elsewhere_is_skipped_not_failed(monkeypatch):
    from streamcert.harness.faults import executor as module
    from streamcert.harness.faults.base import FaultNotApplicable

    monkeypatch.setattr(module, "_REMOTE_EXECUTORS_S", 0.3)
    monkeypatch.setattr(module, "executor_jvms", lambda driver: {})
    driver = SimpleNamespace(spec=SimpleNamespace(master="spark://10.0.0.5:7077"), is_running=lambda: True)
    with pytest.raises(FaultNotApplicable, match="No executor of the query runs on this machine"):
        module.strike_wait(driver, lambda: None, "Python worker", "", timeout=1)


@pytest.mark.parametrize("master, searched", [("local-cluster[3,1,1024]", False), ("spark://10.0.0.5:7077", True)])
def test_executors_carrying_the_token_are_found_without_reading_every_process_s_sockets(monkeypatch, master,
                                                                                         searched):
    """A zombie's watch asks for the executors many times a second: the socket search (hundreds of milliseconds
    on a busy machine) is made only on a spark:// master whose executors carry no token."""
    from streamcert.harness.faults import executor as module

    argv = {11: ["java", module._EXECUTOR_CLASS, "--executor-id", "0"], 12: ["python", "-m", "streamcert"]}
    searches = []
    monkeypatch.setattr(module, "_carriers", lambda driver: [11, 12])
    monkeypatch.setattr(module, "_argv", lambda pid: argv.get(pid, []))
    monkeypatch.setattr(module, "_executors_by_driver_url", lambda driver: searches.append(1) or {"7": 70})
    driver = SimpleNamespace(spec=SimpleNamespace(master=master))
    assert module.executor_jvms(driver) == {"0": 11} and not searches
    monkeypatch.setattr(module, "_carriers", lambda driver: [12])
    assert module.executor_jvms(driver) == ({"7": 70} if searched else {}) and bool(searches) == searched


def test_a_worker_s_jvm_socket_is_looked_up_once_per_process_not_once_per_pid(monkeypatch):
    """The lookup is cached by pid and start time: a new process that reuses a pid is looked up again."""
    from streamcert.harness.faults import executor as module

    lookups = []

    class _Process:
        def __init__(self, pid):
            self.pid = pid

        def create_time(self):
            return started[0]

        def net_connections(self, kind):
            lookups.append(self.pid)
            return [SimpleNamespace(fd=fd) for fd in (9, 4, -1)]

    started = [100.0]
    monkeypatch.setattr(module.psutil, "Process", _Process)
    monkeypatch.setattr(module, "_JVM_SOCKETS", {})
    assert [module._jvm_socket_fd(5) for _ in range(3)] == [4, 4, 4] and lookups == [5]
    started[0] = 200.0
    assert module._jvm_socket_fd(5) == 4 and lookups == [5, 5]


@pytest.mark.skipif(not os.access("/proc/self/syscall", os.R_OK), reason="this kernel hides /proc/<pid>/syscall")
def test_a_worker_is_in_a_task_when_blocked_elsewhere_or_busy_throughout_and_not_when_it_goes_back_to_its_socket():
    """The kill's victim: a sleeping worker is taken at once; one spinning is taken after the window; one that
    spins for less than the window (pyspark's post-task ``gc.collect()``) and then waits on its socket is not."""
    ours, theirs = socket.socketpair()
    finishing = _python("import socket, sys, time\nend = time.monotonic() + 0.05\nwhile time.monotonic() < end: pass\n"
                        "socket.socket(fileno=int(sys.argv[1])).recv(1)", str(theirs.fileno()),
                        pass_fds=[theirs.fileno()])
    sleeper = _python("import time; time.sleep(60)")
    spinner = _python("while True: pass")
    try:
        time.sleep(0.3)  # the sleeper is in nanosleep, the spinner spins
        assert executor.blocked_elsewhere(sleeper.pid) and not executor.blocked_elsewhere(spinner.pid)
        began = time.monotonic()
        assert executor.in_task_worker([spinner.pid, sleeper.pid], window_s=0.15) == sleeper.pid
        assert time.monotonic() - began < 0.1
        began = time.monotonic()
        assert executor.in_task_worker([spinner.pid], window_s=0.15) == spinner.pid
        assert time.monotonic() - began >= 0.15
        assert wait_for(lambda: executor.is_idle(finishing.pid), what="the finishing worker to block", timeout=20)
        assert executor.in_task_worker([finishing.pid], window_s=0.15) is None
        assert not executor.blocked_elsewhere(finishing.pid)
        finishing.kill()
        finishing.wait()
        assert executor.in_task_worker([finishing.pid], window_s=0.05) is None  # gone
    finally:
        for child in (finishing, sleeper, spinner):
            child.kill()
            child.wait()
        ours.close()
        theirs.close()


def test_a_spinning_worker_that_goes_idle_within_the_window_is_not_taken(monkeypatch):
    """A worker running pyspark's post-task ``gc.collect()`` is off its socket for tens of milliseconds, then idle:
    seen busy at the first looks, it must not be the victim."""
    looks = {10: iter([False, False, True]), 20: itertools.repeat(False)}
    monkeypatch.setattr(executor, "blocked_elsewhere", lambda pid: False)
    monkeypatch.setattr(executor, "is_idle", lambda pid: next(looks[pid]))
    monkeypatch.setattr(executor.psutil, "pid_exists", lambda pid: True)
    assert executor.in_task_worker([10, 20], window_s=0.05, look_s=0.001) == 20


def test_the_bytes_a_worker_left_unread_on_its_first_socket_are_read_from_the_kernel():
    """unread_from_jvm: the receive queue of a process's first socket (a worker's connection to its JVM)."""
    from streamcert.harness.faults.executor import unread_from_jvm

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        child = subprocess.Popen(
            [sys.executable, "-c", "import socket, sys\n"
             "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
             "print('up', flush=True)\n"
             "sys.stdin.readline(); s.recv(65536); print('read', flush=True)\n"
             "sys.stdin.readline()\n", str(server.getsockname()[1])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "up"
            peer, _ = server.accept()
            with peer:
                assert unread_from_jvm(child.pid) == 0
                peer.sendall(b"x" * 3000)
                deadline = time.monotonic() + 5
                while unread_from_jvm(child.pid) != 3000 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert unread_from_jvm(child.pid) == 3000
                child.stdin.write("go\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == "read"
                assert unread_from_jvm(child.pid) == 0
        finally:
            child.kill()
            child.wait()
    assert unread_from_jvm(child.pid) is None
