"""The doctor's prerequisite checks (diagnose) and the processes of orphaned runs it points at."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from streamcert.harness.stack import doctor
from streamcert.harness.stack.doctor import CHECKS, Check, diagnose, required_failures, stray_processes
from streamcert.harness.stack.process import OWNER_VAR, RUN_TOKEN_VAR, ManagedProcess, processes_with_token, token_env
from streamcert.harness.stack.runs import RUNS_VAR, reap_orphans


def test_diagnose_runs_every_check_once_in_order():
    checks = diagnose()
    assert len(checks) == len(CHECKS) and all(isinstance(check, Check) for check in checks)
    names = [check.name for check in checks]
    assert names[:2] == ["python", "python packages"] and names[-1] == "leftover processes"
    assert all(check.hint for check in required_failures(checks))


def test_the_prerequisite_checks_are_not_named_like_the_output_checkers():
    assert not hasattr(doctor, "run_checks")


def test_a_live_run_is_left_alone_and_an_orphaned_one_is_a_stray(tmp_path, monkeypatch):
    monkeypatch.setenv(RUNS_VAR, str(tmp_path / "registry"))
    token = f"stray-{os.getpid()}-{time.time_ns()}"
    mine = ManagedProcess("mine", ["sleep", "30"], tmp_path / "log", env=token_env(token))
    mine.start()
    orphan_token = f"orphan-{time.time_ns()}"
    spawner = ("import os, subprocess; subprocess.Popen(['sleep', '30'], env=dict(os.environ, "
               f"{RUN_TOKEN_VAR}='{orphan_token}', {OWNER_VAR}='1@0.00'), start_new_session=True)")
    subprocess.run([sys.executable, "-c", spawner], check=True)
    try:
        deadline = time.monotonic() + 5
        while not processes_with_token(orphan_token) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphan_pids = processes_with_token(orphan_token)
        assert orphan_pids and set(orphan_pids) <= set(stray_processes())
        assert mine.pid not in stray_processes()  # this process's own run lives
        strays = next(check for check in diagnose() if check.name == "leftover processes")
        assert strays.ok is False and "streamcert env clean" in strays.hint and "never touched" in strays.hint
        assert orphan_token[:8] in strays.detail
    finally:
        mine.stop()
        reap_orphans()
    assert not set(orphan_pids) & set(stray_processes())


def test_required_failures_are_the_failed_required_checks():
    checks = [Check("a", True, True, ""), Check("b", False, True, "", "fix b"), Check("c", False, False, "")]
    assert [check.name for check in required_failures(checks)] == ["b"]


def test_a_bad_port_range_fails_the_loopback_check_with_its_hint(monkeypatch):
    from streamcert.harness.stack.ports import PORT_RANGE_VARIABLE

    monkeypatch.setenv(PORT_RANGE_VARIABLE, "30000-20000")
    (loopback,) = [check for check in diagnose() if check.name == "loopback"]
    assert not loopback.ok and loopback.required
    assert PORT_RANGE_VARIABLE in loopback.detail and "LOW-HIGH" in loopback.hint
    monkeypatch.delenv(PORT_RANGE_VARIABLE)
    (loopback,) = [check for check in diagnose() if check.name == "loopback"]
    assert loopback.ok and "servers listen on ports" in loopback.detail
