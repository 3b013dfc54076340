"""The doctor's prerequisite checks (diagnose) and its count of processes left by killed runs."""

from __future__ import annotations

import os
import time

from streamcert.harness.stack import doctor
from streamcert.harness.stack.doctor import CHECKS, Check, diagnose, required_failures, stray_processes
from streamcert.harness.stack.process import ManagedProcess, token_env


def test_diagnose_runs_every_check_once_in_order():
    checks = diagnose()
    assert len(checks) == len(CHECKS) and all(isinstance(check, Check) for check in checks)
    names = [check.name for check in checks]
    assert names[:2] == ["python", "python packages"] and names[-1] == "leftover processes"
    assert all(check.hint for check in required_failures(checks))


def test_the_prerequisite_checks_are_not_named_like_the_output_checkers():
    assert not hasattr(doctor, "run_checks")


def test_a_process_carrying_a_run_token_is_a_stray(tmp_path):
    token = f"stray-{os.getpid()}-{time.time_ns()}"
    proc = ManagedProcess("stray", ["sleep", "30"], tmp_path / "log", env=token_env(token))
    proc.start()
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in stray_processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in stray_processes()
        strays = next(check for check in diagnose() if check.name == "leftover processes")
        assert strays.ok is False and strays.hint
        others = [pid for pid in stray_processes() if pid != proc.pid]
        # the detail names ten; another run on this machine (a certification, say) may own the first ten
        assert str(proc.pid) in strays.detail if len(others) < 10 else "from earlier runs" in strays.detail
    finally:
        proc.stop()
    assert proc.pid not in stray_processes()


def test_required_failures_are_the_failed_required_checks():
    checks = [Check("a", True, True, ""), Check("b", False, True, "", "fix b"), Check("c", False, False, "")]
    assert [check.name for check in required_failures(checks)] == ["b"]
