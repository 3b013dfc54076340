"""The run registry: orphaned runs (owner killed) are found and reaped with their folder; live runs never."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from streamcert.harness.stack.environment import Environment, EnvironmentConfig
from streamcert.harness.stack.process import (OWNER_VAR, RUN_TOKEN_VAR, ManagedProcess, Owner, processes_with_token,
                                              run_owner, token_env)
from streamcert.harness.stack.runs import (RUNS_VAR, RunRecord, reap_orphans, register_run, registered_runs,
                                           registry_dir, survey, unregister_run)

# A run's owner in miniature: registers the run with a folder of its own, starts two servers carrying its token
# (each in its own session, as the stack's servers are), says so, and waits to be killed.
_OWNER = """
import subprocess, sys, time
from pathlib import Path
from streamcert.harness.stack.process import token_env
from streamcert.harness.stack.runs import RunRecord, register_run
token, workdir = sys.argv[1], Path(sys.argv[2])
workdir.mkdir()
(workdir / "log").write_text("a server's log")
register_run(RunRecord.for_this_process(token, workdir, True))
for _ in range(2):
    subprocess.Popen(["sleep", "120"], env=token_env(token), start_new_session=True)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def registry(tmp_path, monkeypatch):
    folder = tmp_path / "registry"
    monkeypatch.setenv(RUNS_VAR, str(folder))
    return folder


def _start_owner(tmp_path: Path, name: str) -> tuple[subprocess.Popen, str, Path]:
    token, workdir = f"{name}-{time.time_ns()}", tmp_path / name
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, token, str(workdir)], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
    return owner, token, workdir


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _state(token: str):
    return next(state for state in survey() if state.token == token)


def test_an_owner_names_one_process_not_a_pid_reused_later():
    me = Owner.of()
    assert Owner.parse(me.spec()) == me and me.alive()
    assert Owner(me.pid, me.started - 100).alive() is False  # same pid, another start: a later process
    child = subprocess.Popen(["true"])
    child.wait()
    assert Owner(child.pid, me.started).alive() is False
    assert Owner.parse(None) is None and Owner.parse("garbled") is None and Owner.parse("12@x") is None


def test_token_env_gives_the_run_its_owner_and_a_process_of_the_run_passes_it_on():
    env = token_env("run-a", {"PATH": "/bin"})
    assert Owner.parse(env[OWNER_VAR]) == Owner.of()
    inherited = {RUN_TOKEN_VAR: "run-a", OWNER_VAR: "1234@56.00"}
    assert token_env("run-a", inherited)[OWNER_VAR] == "1234@56.00"  # a driver's servers belong to the run's owner
    assert run_owner("run-b", inherited) == Owner.of()  # another run started there is that process's own
    assert OWNER_VAR not in token_env("", {"PATH": "/bin"})


def test_register_and_unregister_and_a_torn_entry_is_skipped(registry):
    record = RunRecord.for_this_process("tok-1", Path("/tmp/x"), True)
    register_run(record)
    (registry_dir() / "junk.json").write_text("{not json")
    assert registered_runs() == {"tok-1": record}
    assert oct(registry.stat().st_mode & 0o777) == "0o700"
    assert oct((registry / "tok-1.json").stat().st_mode & 0o777) == "0o600"
    unregister_run("tok-1")
    unregister_run("tok-1")  # idempotent
    assert registered_runs() == {}


def test_a_run_whose_owner_was_killed_is_reaped_with_its_folder_and_a_live_run_is_left_alone(tmp_path, registry):
    dead_owner, dead, dead_folder = _start_owner(tmp_path, "dead")
    live_owner, live, live_folder = _start_owner(tmp_path, "live")
    mine = ManagedProcess("mine", ["sleep", "120"], tmp_path / "mine.log", env=token_env(f"mine-{time.time_ns()}"))
    mine.start()
    try:
        dead_pids = processes_with_token(dead)
        assert len(dead_pids) == 2 and _state(dead).orphan is False
        _kill(dead_owner)
        orphan = _state(dead)
        assert orphan.orphan and orphan.pids == dead_pids and orphan.owner_pid == dead_owner.pid
        assert orphan.record is not None and orphan.record.workdir == str(dead_folder)
        assert _state(live).orphan is False and len(_state(live).pids) == 2

        report = reap_orphans()

        assert dead in report.runs and report.processes >= 2 and str(dead_folder) in report.folders
        assert processes_with_token(dead) == [] and not dead_folder.exists() and dead not in registered_runs()
        assert all(not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
                   for pid in dead_pids)
        assert live not in report.runs and len(processes_with_token(live)) == 2 and live_folder.exists()
        assert mine.pid is not None and psutil.pid_exists(mine.pid) and mine.pid not in report.still_alive
    finally:
        mine.stop()
        _kill(live_owner)
        reap_orphans()
    assert processes_with_token(live) == []


def test_servers_without_owner_or_registry_entry_are_judged_by_their_parents(tmp_path, registry):
    # Servers started by a streamcert that did not record owners: a live parent outside the run means a live run.
    token = f"unowned-{time.time_ns()}"
    bare = {key: value for key, value in os.environ.items() if key != OWNER_VAR}
    child = subprocess.Popen(["sleep", "120"], env={**bare, RUN_TOKEN_VAR: token}, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not processes_with_token(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        state = _state(token)
        assert state.orphan is False and state.owner_pid == os.getpid() and state.record is None
    finally:
        child.kill()
        child.wait()
    # The same, started by a process that then died: the server now hangs from init.
    spawner = ("import os, subprocess, sys; subprocess.Popen(['sleep', '120'], env=dict(os.environ, "
               f"{RUN_TOKEN_VAR}='{token}'), start_new_session=True)")
    subprocess.run([sys.executable, "-c", spawner], env=bare, check=True)
    deadline = time.monotonic() + 5
    while not processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert _state(token).orphan is True
        assert token in reap_orphans().runs and processes_with_token(token) == []
    finally:
        for pid in processes_with_token(token):
            os.kill(pid, signal.SIGKILL)


def test_env_clean_reaps_orphans_and_says_what_it_left_alone(tmp_path, registry):
    dead_owner, dead, dead_folder = _start_owner(tmp_path, "dead")
    live_owner, live, _ = _start_owner(tmp_path, "live")
    try:
        _kill(dead_owner)
        began = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "streamcert", "env", "clean", "--json"], capture_output=True,
                                text=True, timeout=60, env=dict(os.environ, STREAMCERT_QUIET="1"))
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - began < 10
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert dead in report["runs"] and report["processes"] >= 2 and report["folders"] == [str(dead_folder)]
        assert any(live[:8] in line for line in report["live_runs"])
        assert processes_with_token(dead) == [] and len(processes_with_token(live)) == 2
    finally:
        _kill(live_owner)
        reap_orphans()


@pytest.mark.integration
def test_a_sigkilled_env_up_is_reaped_by_the_next_start_and_other_live_runs_are_untouched(tmp_path, registry, stack):
    live_owner, live, live_folder = _start_owner(tmp_path, "live")
    up = subprocess.Popen([sys.executable, "-m", "streamcert", "env", "up", "--provider", "local"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=dict(os.environ, STREAMCERT_QUIET="1"))
    try:
        assert up.stdout is not None
        line = ""
        deadline = time.monotonic() + 180
        while not line.startswith("{") and time.monotonic() < deadline:
            line = up.stdout.readline()
            assert line, f"env up exited early with {up.poll()}"
        token = json.loads(line)["run_token"]
        left = processes_with_token(token)
        workdir = Path(registered_runs()[token].workdir)
        assert len(left) >= 3 and workdir.is_dir()  # toxiproxy, kafka, postgres (+ its backends)
        _kill(up)
        assert processes_with_token(token) and _state(token).orphan  # SIGKILL gave it no chance to stop

        with Environment(EnvironmentConfig(provider="local", kafka=False, postgres=False)) as env:
            assert env.reaped is not None and token in env.reaped.runs and str(workdir) in env.reaped.folders

        assert processes_with_token(token) == [] and not workdir.exists() and token not in registered_runs()
        assert len(processes_with_token(live)) == 2 and live_folder.exists()
        assert stack.leftover_processes() >= 3  # this session's own stack is a live run too
    finally:
        if up.poll() is None:
            _kill(up)
        _kill(live_owner)
        reap_orphans()
