"""The zombie task attempt (streamcert.harness.faults.zombie): what it reads from Spark's log and its parameters.
Its run end to end is the SNK-6 certification (tests/conformance/test_mutants.py: a sink committing in write() is
caught duplicating what its zombie wrote)."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.faults.zombie import lost_tasks


def test_the_zombie_reads_the_task_attempts_spark_lost_with_the_frozen_executor_from_its_log():
    log = ("11:02:03 ERROR TaskSchedulerImpl: Lost executor 1 on 192.0.2.2: Executor heartbeat timed out after "
           "6374 ms\n"
           "11:02:03 WARN TaskSetManager: Lost task 0.0 in stage 8.0 (TID 17) (192.0.2.2 executor 1): "
           "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: Executor heartbeat "
           "timed out after 6374 ms\n"
           "11:02:04 WARN TaskSetManager: Lost task 1.0 in stage 8.0 (TID 18) (192.0.2.2 executor 11): boom\n")
    assert lost_tasks(log, "1") == ["0.0 in stage 8.0 (TID 17)"]
    assert lost_tasks(log, "11") == ["1.0 in stage 8.0 (TID 18)"]
    assert lost_tasks(log, "2") == []


def test_zombie_parameters_are_checked():
    with pytest.raises(ConfigurationError, match=r"tries=0 must be a int >= 1 and <= 10"):
        FaultSpec("task_zombie", "executor", 0.0, 0.0, {"tries": 0})
    assert FaultSpec("task_zombie", "executor", 0.0, 0.0, {}).typed_params().hold_s == 90.0
