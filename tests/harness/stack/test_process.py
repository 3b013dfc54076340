"""Unit tests: child processes start, fail fast with evidence, stop idempotently and leave nothing."""

import os
import signal
import time

import psutil
import pytest

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.process import (OWNER_VAR, RUN_TOKEN_VAR, ManagedProcess, Owner, ProcessBacked,
                                              descendants_outside_group, processes_with_token, reap, run_logged,
                                              runs_unstopped, signal_processes, token_carriers, token_env)
from streamcert.harness.stack.readiness import Readiness


def test_stop_before_start_and_twice_is_safe(tmp_path):
    proc = ManagedProcess("sleeper", ["sleep", "30"], tmp_path / "log")
    proc.stop()
    proc.start()
    assert proc.is_running()
    proc.stop()
    proc.stop()
    assert not proc.is_running()


def test_a_server_that_dies_while_starting_fails_fast_with_its_last_lines(tmp_path):
    proc = ManagedProcess("broken", ["sh", "-c", "echo 'FATAL: address already in use'; exit 3"],
                          tmp_path / "log")
    proc.start()
    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        proc.wait_ready(Readiness("the broken server", lambda: False, hint="look at the log"), timeout=30)
    assert time.monotonic() - began < 5
    text = str(info.value)
    assert "exited with code 3" in text and "FATAL: address already in use" in text
    assert "Cause: port taken" in text  # the diagnosis's own hint replaces the generic "look at the log"


def test_a_server_that_never_answers_times_out_with_the_last_probe_error(tmp_path):
    def probe():
        raise ConnectionRefusedError("nobody home")

    proc = ManagedProcess("silent", ["sleep", "30"], tmp_path / "log")
    proc.start()
    began = time.monotonic()
    try:
        with pytest.raises(StartupFailed) as info:
            proc.wait_ready(Readiness("the silent server", probe, hint="start it"), timeout=0.5)
    finally:
        proc.stop()
    assert time.monotonic() - began < 3
    assert "No answer from the silent server after" in str(info.value) and "nobody home" in str(info.value)


def test_the_whole_process_group_is_stopped(tmp_path):
    token = f"test-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, **{RUN_TOKEN_VAR: token})
    proc = ManagedProcess("parent", ["sh", "-c", "sleep 30 & sleep 30 & wait"], tmp_path / "log", env=env)
    proc.start()
    deadline = time.monotonic() + 5
    while len(processes_with_token(token)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_with_token(token)) == 3
    proc.stop()
    assert processes_with_token(token) == []


def test_reap_kills_escaped_processes_carrying_the_token(tmp_path):
    token = f"reap-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, **{RUN_TOKEN_VAR: token})
    # setsid: the child leaves our process group, as a daemonising server would.
    proc = ManagedProcess("escaper", ["setsid", "sh", "-c", "sleep 30"], tmp_path / "log", env=env)
    proc.start()
    deadline = time.monotonic() + 5
    while not processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reap(token) >= 1
    assert processes_with_token(token) == []
    proc.stop()


def test_pause_and_resume(tmp_path):
    proc = ManagedProcess("sleeper", ["sleep", "30"], tmp_path / "log")
    proc.start()
    proc.pause()
    time.sleep(0.1)
    assert psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED
    proc.resume()
    proc.stop()


def test_a_descendant_in_a_group_of_its_own_is_found_and_signalled(tmp_path):
    """A fork server's children (and pyspark's task daemon) take process groups of their own: a signal to the
    driver's group misses them, so a freeze or a kill finds them under the leader and signals them too."""
    proc = ManagedProcess("forker", ["sh", "-c", "setsid sleep 30 & exec sleep 30"], tmp_path / "log")
    proc.start()
    try:
        deadline = time.monotonic() + 5
        while not descendants_outside_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        [escaped] = descendants_outside_group(proc.pid)
        assert os.getpgid(escaped.pid) != proc.pid and runs_unstopped(escaped)
        assert signal_processes([escaped], signal.SIGSTOP) == [escaped.pid]
        time.sleep(0.1)
        assert escaped.status() == psutil.STATUS_STOPPED and not runs_unstopped(escaped)
        assert signal_processes([escaped], signal.SIGKILL) == [escaped.pid]
        deadline = time.monotonic() + 5
        while escaped.is_running() and escaped.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not escaped.is_running() or escaped.status() == psutil.STATUS_ZOMBIE  # its parent never reaps it
        assert not runs_unstopped(escaped)
    finally:
        proc.stop()
    assert descendants_outside_group(proc.pid or 1 << 22) == []


def test_run_logged_returns_exit_code_and_last_lines():
    code, output = run_logged(["sh", "-c", "echo one; echo two; exit 4"], description="a test tool", timeout=10)
    assert code == 4 and output.splitlines() == ["one", "two"]


def test_run_logged_kills_at_timeout():
    began = time.monotonic()
    code, _ = run_logged(["sleep", "30"], description="a hanging tool", timeout=0.5)
    assert code != 0 and time.monotonic() - began < 5


def _group_of_three(tmp_path, token: str) -> ManagedProcess:
    proc = ManagedProcess("parent", ["sh", "-c", "sleep 30 & sleep 30 & wait"], tmp_path / "log",
                          env=token_env(token))
    proc.start()
    deadline = time.monotonic() + 5
    while len(processes_with_token(token)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_with_token(token)) == 3
    return proc


@pytest.mark.parametrize("round_", range(5))
def test_kill_returns_only_once_every_member_of_the_group_is_gone(tmp_path, round_):
    """The race of stop()/kill() returning while SIGKILLed members still ran, tried a few times."""
    token = f"kill-{os.getpid()}-{time.time_ns()}"
    proc = _group_of_three(tmp_path, token)
    proc.kill()
    assert processes_with_token(token) == []
    assert not proc.is_running()
    proc.kill()  # idempotent
    proc.stop()


def test_a_restarted_process_is_a_new_group_that_can_be_killed_again(tmp_path):
    token = f"again-{os.getpid()}-{time.time_ns()}"
    proc = ManagedProcess("sleeper", ["sleep", "30"], tmp_path / "log", env=token_env(token))
    proc.start()
    first = proc.pid
    proc.kill()
    proc.start()
    assert proc.is_running() and proc.pid != first
    proc.stop()
    assert processes_with_token(token) == []


def test_exited_says_why_only_once_the_process_has_exited(tmp_path):
    go = tmp_path / "go"
    proc = ManagedProcess("quitter", ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.02; done; exit 1"],
                          tmp_path / "log")
    assert proc.exited() is None  # not started
    proc.start()
    assert proc.exited() is None  # running until told to quit (a busy machine cannot make it exit first)
    go.touch()
    proc._popen.wait(10)
    assert proc.exited() == "quitter exited with code 1 before it was ready"
    proc.stop()


def test_token_env_adds_the_token_to_a_copy_and_an_empty_token_adds_nothing():
    base = {"PATH": "/bin"}
    owner = Owner.of().spec()
    assert token_env("abc", base) == {"PATH": "/bin", RUN_TOKEN_VAR: "abc", OWNER_VAR: owner}
    assert token_env("", base) == {"PATH": "/bin"}
    assert base == {"PATH": "/bin"}
    assert token_env("abc", base, var="OTHER_TOKEN") == {"PATH": "/bin", "OTHER_TOKEN": "abc", OWNER_VAR: owner}
    assert token_env("xyz")[RUN_TOKEN_VAR] == "xyz" and token_env("xyz")["PATH"] == os.environ["PATH"]


def test_token_carriers_maps_each_carrier_to_its_run_token(tmp_path):
    first, second = f"a-{time.time_ns()}", f"b-{time.time_ns()}"
    procs = [ManagedProcess(f"sleeper {t}", ["sleep", "30"], tmp_path / f"{t}.log", env=token_env(t))
             for t in (first, second)]
    for proc in procs:
        proc.start()
    try:
        deadline = time.monotonic() + 5
        while len(set(token_carriers().values()) & {first, second}) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        carriers = token_carriers()
        assert carriers[procs[0].pid] == first and carriers[procs[1].pid] == second
        assert os.getpid() not in carriers
    finally:
        for proc in procs:
            proc.stop()
    assert not {first, second} & set(token_carriers().values())


class _Sleeper(ProcessBacked):
    def __init__(self, log) -> None:
        self._process = None
        self.log = log
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self._process = ManagedProcess("sleeper", ["sh", "-c", f"echo start {self.starts}; exec sleep 30"],
                                       self.log)
        self._process.start()


def _wait_for_line(server: ProcessBacked, line: str) -> None:
    deadline = time.monotonic() + 5
    while line not in server.tail() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_process_backed_restart_tail_and_stop_before_start(tmp_path):
    server = _Sleeper(tmp_path / "log")
    server.stop()
    server.kill()
    assert server.pid is None and server.tail() == ""
    with server:
        first = server.pid
        _wait_for_line(server, "start 1")
        server.restart(clean=False)
        assert server.pid not in (None, first)
        _wait_for_line(server, "start 2")
        assert server.tail().splitlines() == ["start 1", "start 2"]
    assert server.pid is None
