"""Unit tests: child processes start, fail fast with evidence, stop idempotently and leave nothing."""

import os
import time

import pytest

from streamcert.harness.errors import StartupFailed
from streamcert.harness.stack.process import RUN_TOKEN_VAR, ManagedProcess, processes_with_token, reap, run_logged, wait_until


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
        proc.wait_ready(lambda: False, what="the broken server", timeout=30, hint="look at the log")
    assert time.monotonic() - began < 5
    text = str(info.value)
    assert "exited with code 3" in text and "FATAL: address already in use" in text and "Hint: look" in text


def test_a_server_that_never_answers_times_out_with_the_last_probe_error():
    def probe():
        raise ConnectionRefusedError("nobody home")

    began = time.monotonic()
    with pytest.raises(StartupFailed) as info:
        wait_until(probe, what="the silent server", timeout=0.5, hint="start it")
    assert time.monotonic() - began < 3
    assert "not ready after" in str(info.value) and "nobody home" in str(info.value)


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
    with open(f"/proc/{proc.pid}/stat") as stat:
        assert stat.read().rsplit(")", 1)[1].split()[0] == "T"
    proc.resume()
    proc.stop()


def test_run_logged_returns_exit_code_and_last_lines():
    code, output = run_logged(["sh", "-c", "echo one; echo two; exit 4"], description="a test tool", timeout=10)
    assert code == 4 and output.splitlines() == ["one", "two"]


def test_run_logged_kills_at_timeout():
    began = time.monotonic()
    code, _ = run_logged(["sleep", "30"], description="a hanging tool", timeout=0.5)
    assert code != 0 and time.monotonic() - began < 5
