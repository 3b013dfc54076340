"""The Kafka 2PC sink through the scenario runner: exactly-once across driver kills, task retries, broker restarts
and rescale, read back with read_committed and judged by the exactly-once checkers (incl. per-key order)."""

from __future__ import annotations

import uuid

import pytest

from streamcert.connectors.row_blocks import decode_block
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec
from streamcert.harness.stack.kafka_clients import read_topic
from tests.connectors.scenarios import run

pytestmark = pytest.mark.integration

SINK = "streamcert-kafka-2pc"


def _run(stack, tmp_path, schedule: list[FaultSpec] = (), total: int = 2400, parallelism: int = 2):
    sink_id = f"s{uuid.uuid4().hex[:8]}"
    done = run(stack, tmp_path, sink=SINK, schedule=list(schedule), parallelism=parallelism, master="local[2,2]",
               # several staging records a task: blocks of 2 KiB
               options={"sink_id": sink_id, "staging_partitions": 2, "staging_block_bytes": 2048},
               workload=WorkloadSpec(total=total, keys=30, partitions=3, aborted_fraction=0.1,
                                     transaction_records=40, seed=5))
    assert done.failed_checks() == [], done.failed_checks()
    return done, sink_id


def test_happy_path_is_exactly_once_in_key_order(stack, tmp_path):
    done, _sink_id = _run(stack, tmp_path)
    assert done.check("per_key_order")["counts"]["checked"] > 2000
    assert done.ids == done.acked


@pytest.mark.slow  # the certification's full plan covers it too (tox -e certify); tox -e long runs it
def test_driver_killed_at_each_protocol_step_in_turn_recovers_exactly_once(stack, tmp_path):
    """One query, three crashes: after a task staged, with rows and decision record written but not committed,
    and after the commit (before Spark's commits/N: the replayed commit must write nothing)."""
    points = ["kafka-2pc.after-stage", "kafka-2pc.before-commit", "kafka-2pc.after-commit"]
    schedule = [FaultSpec("driver_kill_at", "driver", 0, 0, {"point": point}, after=index - 1 if index else None)
                for index, point in enumerate(points)]
    done, _sink_id = _run(stack, tmp_path, schedule)
    assert [(e["point"], e["reached"]) for e in done.events("fault-start")] == [(p, True) for p in points]
    assert done.result.driver_attempts == 4
    assert done.ids == done.acked


def test_a_failed_task_attempt_after_staging_leaves_an_orphan_that_is_never_copied(stack, tmp_path):
    done, sink_id = _run(stack, tmp_path, [FaultSpec("task_fail_at", "executor", 0, 0,
                                                     {"point": "kafka-2pc.after-stage"})])
    assert done.events("fault-start")[0]["reached"] is True
    staged = read_topic(stack.endpoints.bootstrap_servers, f"{done.result.output['name']}.{sink_id}.staging")
    staged_rows = sum(len(decode_block(value)[1]) for *_where, value in staged)
    assert staged_rows > len(done.output)  # the failed attempt's staged rows are there, committed, and not copied
    assert done.ids == done.acked


@pytest.mark.slow  # the certification's full plan covers it too (tox -e certify); tox -e long runs it
def test_rescale_while_a_batch_is_pending_and_a_broker_restart_stay_exactly_once(stack, tmp_path):
    """The driver dies with rows and decision record written but not committed; it stays down until the rescale
    restarts it with one reader task, which replays the pending batch; then the broker is killed."""
    schedule = [FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "kafka-2pc.before-commit", "restart": False}),
                FaultSpec("rescale", "driver", 0, 0, {"parallelism": 1}, after=0),
                FaultSpec("broker_kill", "kafka", 3, 0, after=1)]
    done, _sink_id = _run(stack, tmp_path, schedule, total=3000, parallelism=3)
    starts = done.events("fault-start")
    assert [e["fault"] for e in starts] == ["driver_kill_at", "rescale", "broker_kill"]
    assert starts[0]["reached"] is True and starts[1]["pending_batch"] is not None  # replayed by the rescaled driver
    assert done.events("fault-stop")[1]["parallelism"] == 1
    assert done.ids == done.acked
