"""A worker of a real standalone cluster killed while the query runs: its executor's tasks are retried on the other
worker, and the 2PC sink's output is still exactly once; a Python worker of a standalone executor is found and
killed like a local one."""

from __future__ import annotations

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.history import History


def test_a_worker_kill_without_a_standalone_cluster_is_refused_before_the_run(tmp_path):
    with pytest.raises(ConfigurationError, match="standalone Spark cluster") as info:
        build_fault(FaultSpec("worker_kill", "executor", 1, 5), FaultContext(history=History(), workdir=tmp_path))
    assert 'master "standalone"' in info.value.hint


@pytest.mark.integration
@pytest.mark.parametrize("sink", ["streamcert-pg-2pc",
                                  # the same claim on the Kafka 2PC sink; tox -e long runs it (a minute more)
                                  pytest.param("streamcert-kafka-2pc", marks=pytest.mark.slow)])
def test_a_killed_worker_s_tasks_are_retried_and_the_2pc_sink_stays_exactly_once(stack, tmp_path, sink):
    from streamcert.harness.run.workload import WorkloadSpec
    from streamcert.harness.scenario import Scenario, run_scenario

    scenario = Scenario("worker-kill", source="streamcert-kafka", sink=sink, master="standalone",
                        spark_workers=2, trigger="200 milliseconds", parallelism=2,
                        workload=WorkloadSpec(total=4000, keys=20, partitions=2, seed=11),
                        options={"max_records_per_batch": 150}, load_after_first_batch=True,
                        schedule=[FaultSpec("python_worker_kill", "executor", 1.0, 0.0),
                                  FaultSpec("worker_kill", "executor", 1.0, 15.0, after=0)])
    result = run_scenario(stack, scenario, tmp_path)
    assert result.complete, result.error
    # a standalone worker's executors do not carry the driver's token: found by the driver address they serve
    [python_kill, start] = [e for e in result.history if e["kind"] == "fault-start"]
    assert python_kill["fault"] == "python_worker_kill" and python_kill["killed"], python_kill
    [_, stop] = [e for e in result.history if e["kind"] == "fault-stop"]
    assert start["executor_busy"] and start["master_saw_loss"] and start["alive_after"] == 1, start
    assert stop["alive"] == 2
    assert result.valid is True, [c for c in result.checks if c["valid"] is not True]
    assert result.context["spark_master"].startswith("spark://127.0.0.1:")
