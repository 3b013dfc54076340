"""Named fault points: a no-op unless armed; claimed exactly once; the armed process group is killed."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from streamcert.spi.fault_points import (
    DRIVER_PID_VAR,
    POINTS_DIR_VAR,
    InjectedPointFailure,
    arm,
    armed_file,
    claimed,
    claims,
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
        "print(os.getpid(), flush=True)\n"
        "reached('after-write')\n"
        "print('survived', flush=True)\n"
    )
    env = dict(os.environ, **{POINTS_DIR_VAR: str(tmp_path)})
    arm(tmp_path, "after-write")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == -9 and "survived" not in first.stdout
    assert claimed(tmp_path, "after-write")
    assert claims(tmp_path, "after-write") == [f"no-task-context-pid{first.stdout.split()[0]}"]
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


def test_a_failure_names_who_claimed_it_and_the_armed_file_is_gone(tmp_path, monkeypatch):
    monkeypatch.setenv(POINTS_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))
    arm(tmp_path, "p3", action="fail")
    assert armed_file(tmp_path, "p3").read_text() == "fail"
    with pytest.raises(InjectedPointFailure, match=f"claimed by no-task-context-pid{os.getpid()}"):
        reached("p3")
    assert not armed_file(tmp_path, "p3").exists()
    assert claims(tmp_path, "p3") == [f"no-task-context-pid{os.getpid()}"] and claims(tmp_path, "p4") == []
    assert claims(tmp_path / "missing", "p3") == [] and claimed(tmp_path / "missing", "p3") is False


def test_a_claim_in_a_spark_task_names_its_stage_partition_and_attempt(tmp_path, monkeypatch):
    import pyspark

    task = SimpleNamespace(stageId=lambda: 7, partitionId=lambda: 2, attemptNumber=lambda: 1)
    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: task))
    monkeypatch.setenv(POINTS_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(DRIVER_PID_VAR, str(os.getpid()))
    arm(tmp_path, "in-task", action="fail")
    with pytest.raises(InjectedPointFailure, match="stage7-partition2-attempt1-pid"):
        reached("in-task")
    assert claims(tmp_path, "in-task") == [f"stage7-partition2-attempt1-pid{os.getpid()}"]
