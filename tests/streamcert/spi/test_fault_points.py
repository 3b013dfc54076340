"""Named fault points: a no-op unless armed; claimed exactly once; the armed process group is killed."""

import os
import subprocess
import sys

import pytest

from streamcert.spi.fault_points import (
    DRIVER_PID_VAR,
    POINTS_DIR_VAR,
    InjectedPointFailure,
    arm,
    claimed,
    disarm,
    reached,
)


def test_unarmed_or_outside_a_driver_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.delenv(POINTS_DIR_VAR, raising=False)
    reached("anything")
    monkeypatch.setenv(POINTS_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(DRIVER_PID_VAR, "999999")
    reached("not-armed")  # nothing armed: returns


def test_arm_disarm_and_bad_names(tmp_path):
    arm(tmp_path, "p1")
    assert disarm(tmp_path, "p1") is True and disarm(tmp_path, "p1") is False
    with pytest.raises(ValueError):
        arm(tmp_path, "../escape")


def test_an_armed_point_kills_the_driver_group_once(tmp_path):
    code = (
        "import os, sys, time\n"
        "os.setsid()\n"
        f"os.environ['{DRIVER_PID_VAR}'] = str(os.getpid())\n"
        "from streamcert.spi.fault_points import reached\n"
        "reached('after-write')\n"
        "print('survived', flush=True)\n"
    )
    env = dict(os.environ, **{POINTS_DIR_VAR: str(tmp_path)})
    arm(tmp_path, "after-write")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == -9 and "survived" not in first.stdout
    assert claimed(tmp_path, "after-write")
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and "survived" in second.stdout  # claimed once only


def test_a_point_armed_to_fail_raises_once_in_the_caller(tmp_path, monkeypatch):
    monkeypatch.setenv(POINTS_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))  # must not be killed: the action is "fail"
    arm(tmp_path, "after-prepare", action="fail")
    with pytest.raises(InjectedPointFailure, match="after-prepare"):
        reached("after-prepare")
    reached("after-prepare")  # claimed: the retry goes through
    assert claimed(tmp_path, "after-prepare")
    with pytest.raises(ValueError):
        arm(tmp_path, "p2", action="explode")
