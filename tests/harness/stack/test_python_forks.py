"""The fork server and its launcher, on real processes: a routed module runs forked from the preloaded server as
``python -m`` would have run it (arguments, environment, working folder, standard streams, exit code); signals to the
launcher reach the child, a killed launcher takes its child with it, and anything the server does not serve (or a
server that is gone) runs the real interpreter in the launcher's own process.

The launcher routes only Spark's planning and streaming modules; these tests add one module of their own to its
list in the process that runs it (``_LAUNCH``), so the real launcher code speaks to the real server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack import fork_launcher
from streamcert.harness.stack.fork_launcher import routed_module
from streamcert.harness.stack.python_forks import SWITCH_VAR, ForkServer, fork_server_default, launcher_path
from streamcert.harness.waiting import wait_for

#: The launcher, run as Spark would run it, with the test's module routed as well as Spark's.
_LAUNCH = ("import sys; from streamcert.harness.stack import fork_launcher as launcher; "
           "launcher.ROUTED_MODULES += ('probe_module',); launcher.main(sys.argv[1:])")

_PROBE = textwrap.dedent('''\
    import json, os, signal, sys, time
    if sys.argv[1] == "sleep":  # before the first line: the test signals once it has read it
        signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), sys.exit(43)))
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[1:], "cwd": os.getcwd(),
                      "var": os.environ.get("PROBE_VAR"), "main": __name__, "path": sys.path[1]}), flush=True)
    print("read", sys.stdin.readline().strip(), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if sys.argv[1] == "sleep":
        time.sleep(60)
    sys.exit(int(sys.argv[1]))
''')


@pytest.fixture()
def probe_path(tmp_path) -> Path:
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "probe_module.py").write_text(_PROBE)
    return folder


@pytest.fixture()
def server():
    with ForkServer() as running:
        yield running


def _launch(server: ForkServer | dict, probe_path: Path, *args: str, cwd: Path, **popen) -> subprocess.Popen:
    """The launcher as Spark starts it, for the server (or the variables of one) given."""
    env = {**os.environ, "PROBE_VAR": "from-the-request", "PYTHONPATH": str(probe_path)}
    env.update(server if isinstance(server, dict) else server.environment())
    return subprocess.Popen([sys.executable, "-c", _LAUNCH, "-m", "probe_module", *args], env=env, cwd=cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _fields(line: bytes) -> dict:
    return json.loads(line)


@pytest.mark.parametrize("argv, routed", [
    (["-m", "pyspark.daemon", "pyspark.sql.worker.lookup_data_sources"], True),
    (["-m", "pyspark.daemon", "pyspark.sql.worker.plan_data_source_read"], True),
    (["-m", "pyspark.sql.streaming.python_streaming_source_runner"], True),
    (["-m", "pyspark.sql.streaming.transform_with_state_driver_worker"], True),
    (["-m", "pyspark.daemon"], False),  # the task workers' daemon: faults find its workers by command line
    (["-m", "pyspark.daemon", "pyspark.worker"], False),
    (["-m", "pyspark.worker"], False),
    (["-c", "print(1)"], False),
    (["script.py"], False),
    ([], False),
])
def test_only_the_driver_side_planning_and_streaming_processes_are_routed(argv, routed):
    assert (routed_module(argv) is not None) is routed


def test_a_routed_module_runs_forked_from_the_server_as_python_dash_m_would(server, probe_path, tmp_path):
    process = _launch(server, probe_path, "7", "--flag", cwd=tmp_path)
    out, err = process.communicate(b"a line from the JVM\n", timeout=60)
    first, second = out.splitlines()
    seen = _fields(first)
    assert process.returncode == 7
    assert seen["ppid"] == server.pid and seen["pid"] != process.pid  # forked by the server
    assert seen["argv"] == ["7", "--flag"]
    assert seen["cwd"] == str(tmp_path) and seen["var"] == "from-the-request" and seen["main"] == "__main__"
    assert seen["path"] == str(probe_path)  # PYTHONPATH comes first after the working folder, as for python -m
    assert second == b"read a line from the JVM"
    assert b"to stderr" in err


def test_what_the_server_does_not_serve_becomes_the_real_interpreter_in_the_launchers_process(server, tmp_path):
    env = {**os.environ, **server.environment()}
    out = subprocess.run([sys.executable, "-c", _LAUNCH, "-c", "import os; print(os.getpid(), os.getppid())"],
                         env=env, capture_output=True, timeout=60, check=True).stdout.split()
    assert int(out[1]) == os.getpid()  # exec'd in place: its parent is whoever started the launcher


def test_without_a_server_a_routed_module_runs_in_the_launchers_process(probe_path, tmp_path):
    gone = ForkServer().start()
    environment = gone.environment()
    gone.stop()
    process = _launch(environment, probe_path, "3", cwd=tmp_path)
    out, _ = process.communicate(b"x\n", timeout=60)
    assert process.returncode == 3
    assert _fields(out.splitlines()[0])["pid"] == process.pid


def test_a_server_with_a_second_thread_refuses_and_the_launcher_runs_python_itself(probe_path, tmp_path):
    address = f"@streamcert-test-{os.getpid()}-{time.monotonic_ns()}"
    threaded = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading, time; from streamcert.harness.stack import fork_server; "
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start(); fork_server.serve(sys.argv[1])"),
        address], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert threaded.stdout.readline() == b"bound\n"
        process = _launch({fork_launcher.SOCKET_VAR: address, fork_launcher.INTERPRETER_VAR: sys.executable},
                          probe_path, "5", cwd=tmp_path)
        out, _ = process.communicate(b"x\n", timeout=60)
        assert process.returncode == 5
        assert _fields(out.splitlines()[0])["pid"] == process.pid  # refused: not forked, exec'd in place
    finally:
        threaded.kill()
        said = threaded.communicate(timeout=30)[1]
    assert b"threads 2" in said  # the server says why it would not fork


def test_sigterm_to_the_launcher_reaches_the_child_and_its_exit_code_comes_back(server, probe_path, tmp_path):
    process = _launch(server, probe_path, "sleep", cwd=tmp_path)
    process.stdin.write(b"x\n")
    process.stdin.flush()
    child = int(_fields(process.stdout.readline())["pid"])
    process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 43  # the child's own SIGTERM handler ran, and its exit code is the launcher's
    assert process.stdout.read() == b"got SIGTERM\n"
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_a_killed_launcher_takes_its_child_and_the_childs_children_with_it(server, probe_path, tmp_path):
    process = _launch(server, probe_path, "sleep", cwd=tmp_path)
    process.stdin.write(b"x\n")
    process.stdin.flush()
    child = psutil.Process(int(_fields(process.stdout.readline())["pid"]))
    grandchild = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.setpgid(0, child.pid))  # in its group
    try:
        process.kill()
        assert process.wait(10) == -signal.SIGKILL
        wait_for(lambda: _ended(child) and _ended(psutil.Process(grandchild.pid)), what="the child group's end",
                 timeout=10)
    finally:
        grandchild.kill()
        grandchild.wait()


def _ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_stopped_server_leaves_its_children_running_and_their_launchers_wait_for_them(probe_path, tmp_path):
    server = ForkServer().start()
    process = _launch(server, probe_path, "sleep", cwd=tmp_path)
    process.stdin.write(b"x\n")
    process.stdin.flush()
    child = psutil.Process(int(_fields(process.stdout.readline())["pid"]))
    server.stop()
    time.sleep(0.5)
    assert child.is_running() and process.poll() is None  # a leftover stays visible, as without the server
    child.kill()
    assert process.wait(10) == 1  # the exit code went with the server: the launcher says it failed


def test_a_server_carries_the_environment_it_was_started_with_into_its_childrens_proc_environ(
        monkeypatch, probe_path, tmp_path):
    monkeypatch.setenv("STREAMCERT_TEST_TOKEN", "carried")
    with ForkServer() as server:
        process = _launch(server, probe_path, "sleep", cwd=tmp_path)
        process.stdin.write(b"x\n")
        process.stdin.flush()
        child = psutil.Process(int(_fields(process.stdout.readline())["pid"]))
        try:
            assert child.environ().get("STREAMCERT_TEST_TOKEN") == "carried"  # run tokens find forked processes
        finally:
            process.kill()
            process.wait()


def test_the_launcher_file_runs_this_interpreter_isolated_and_is_written_once(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path / "cache"))
    path = launcher_path()
    assert path.read_text().splitlines()[0] == f"#!{sys.executable} -IS"
    assert os.access(path, os.X_OK) and launcher_path() == path
    out = subprocess.run([str(path), "-c", "import sys; print(sys.flags.isolated)"], capture_output=True,
                         env={k: v for k, v in os.environ.items() if k != fork_launcher.SOCKET_VAR},
                         timeout=60, check=True).stdout
    assert out.strip() == b"0"  # exec'd: the real interpreter, not the launcher's isolated one


def test_an_interpreter_path_a_first_line_cannot_hold_gets_a_shell_launcher(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCERT_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "a folder with blanks"
    folder.mkdir()
    interpreter = folder / "python"
    interpreter.symlink_to(sys.executable)
    path = launcher_path(str(interpreter))
    assert path.read_text().splitlines()[0] == "#!/bin/sh"
    out = subprocess.run([str(path), "-c", "print(6 * 7)"], capture_output=True, timeout=60, check=True,
                         env={k: v for k, v in os.environ.items() if k not in ForkServer.VARIABLES}).stdout
    assert out.strip() == b"42"  # the shell ran the launcher, which exec'd the interpreter with the arguments


def test_stop_is_idempotent_and_safe_without_start():
    server = ForkServer()
    server.stop()
    server.start()
    server.stop()
    server.stop()


@pytest.mark.parametrize("value, expected", [(None, False), ("off", False), ("on", True), (" ON ", True)])
def test_the_switch(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(SWITCH_VAR, raising=False)
    else:
        monkeypatch.setenv(SWITCH_VAR, value)
    assert fork_server_default() is expected


def test_a_bad_switch_value_is_refused_with_a_hint(monkeypatch):
    monkeypatch.setenv(SWITCH_VAR, "sometimes")
    with pytest.raises(ConfigurationError, match="neither on nor off") as refused:
        fork_server_default()
    assert SWITCH_VAR in refused.value.hint


def _forked_by(server_pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(server_pid).children()
    except psutil.NoSuchProcess:
        return []


@pytest.mark.integration
def test_a_driver_with_the_fork_server_forks_its_planning_and_streaming_processes_and_faults_still_reach_tasks(
        tmp_path, monkeypatch):
    """With ``STREAMCERT_FORK_SERVER=on`` a driver child's Python streaming source runs forked from the server (its
    runner is the server's child while the query runs), the task workers do not (a python-worker kill still finds
    one, and Spark retries the task), every row is committed once, and the driver's kill leaves no process of its
    attempt behind, the server and its children included."""
    from streamcert.harness.faults.base import FaultContext
    from streamcert.harness.faults.executor import PythonWorkerKill, python_task_workers
    from streamcert.harness.faults.registry import build_fault
    from streamcert.harness.faults.schedule import FaultSpec
    from streamcert.harness.run.driver import DRIVER_TOKEN_VAR, DriverProcess, QuerySpec
    from streamcert.harness.run.history import History
    from streamcert.harness.run.observers.files import read_committed_table
    from streamcert.harness.stack.process import processes_with_token

    monkeypatch.setenv(SWITCH_VAR, "on")
    rows, per_batch = 40, 10
    spec = QuerySpec("tests.harness.executor_queries:counting_to_files", str(tmp_path / "checkpoint"),
                     {"rows": rows, "rows_per_batch": per_batch, "read_delay_ms": 2500, "path": str(tmp_path / "out")},
                     master="local[2,3]")
    history = History()
    driver = DriverProcess(spec, tmp_path / "driver")
    with driver:
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= 0, "the first batch", timeout=180)
        token = psutil.Process(driver.pid).environ()[DRIVER_TOKEN_VAR]
        carriers = [psutil.Process(pid) for pid in processes_with_token(token, DRIVER_TOKEN_VAR)]
        # the server's forked children share its command line; the server is the one the driver started
        servers = [p for p in carriers if "streamcert.harness.stack.fork_server" in p.cmdline()
                   and p.ppid() == driver.pid]
        assert len(servers) == 1, [p.cmdline() for p in carriers]
        forked = _forked_by(servers[0].pid)
        assert forked, "the streaming source's runner should be the fork server's child while the query runs"
        assert all(pid not in {p.pid for p in forked} for pid in python_task_workers(driver))
        fault = build_fault(FaultSpec("python_worker_kill", "executor", 0, 0),
                            FaultContext(driver=driver, history=history, workdir=tmp_path / "faults"))
        assert isinstance(fault, PythonWorkerKill)
        fault.start()
        fault.stop()
        assert history.events("fault-start")[0]["killed"]
        driver.wait_for(lambda d: (d.checkpoint().latest_commit or -1) >= rows // per_batch - 1, "every batch",
                        timeout=180)
        driver.kill()
        assert processes_with_token(token, DRIVER_TOKEN_VAR) == []
    table = read_committed_table(tmp_path / "out")
    assert sorted(table.column("value").to_pylist()) == list(range(rows))


def test_a_certification_turns_the_fork_server_on_unless_the_variable_says(monkeypatch):
    from streamcert.harness.stack.python_forks import CERTIFICATION_FORK_SERVER, default_fork_server
    from streamcert.harness.stack.spark import SparkConfig

    monkeypatch.delenv(SWITCH_VAR, raising=False)
    with default_fork_server(CERTIFICATION_FORK_SERVER) as mode:
        assert mode == "on" and os.environ[SWITCH_VAR] == "on" and SparkConfig().fork_server is True
    assert SWITCH_VAR not in os.environ and SparkConfig().fork_server is False
    monkeypatch.setenv(SWITCH_VAR, "off")
    with default_fork_server(CERTIFICATION_FORK_SERVER) as mode:
        assert mode == "off" and SparkConfig().fork_server is False
    assert os.environ[SWITCH_VAR] == "off"
