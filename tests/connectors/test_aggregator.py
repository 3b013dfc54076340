"""The batch aggregator through the scenario runner (source -> aggregator -> Kafka 2PC sink): size and time
flushes, per-key order, exactly-once across a kill at the batch boundary, and a rescale through the offline state
repartition with records still buffered. The runner judges the batch contract the aggregator declares
(``batch_bounds``) with the aggregator checker, beside the exactly-once checkers."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.checkpoint import state_partitions
from streamcert.harness.run.workload import WorkloadSpec
from tests.connectors.scenarios import Run, run

pytestmark = pytest.mark.integration

AGGREGATOR = "streamcert-batch-aggregator"
MAX_BATCH = 40


def _run(stack, tmp_path, max_wait_ms: int, schedule: list[FaultSpec] = (), trigger: str = "500 milliseconds",
         slack_s: float = 20.0, quiet_timeout_s: float = 180.0) -> Run:
    """Load once the first batch committed (the query runs before any input); faults once a batch was emitted."""
    done = run(stack, tmp_path, aggregator=AGGREGATOR, schedule=list(schedule), trigger=trigger, master="local[2,2]",
               options={"sink_id": f"a{uuid.uuid4().hex[:8]}", "max_batch_size": MAX_BATCH,
                        "max_wait_ms": max_wait_ms, "key_groups": 8, "max_records_per_batch": 5000},
               spark_conf={"spark.sql.shuffle.partitions": "4"}, flush_slack_s=slack_s, quiet_timeout_s=quiet_timeout_s,
               load_after_first_batch=True, faults_after_output=1 if schedule else 0,
               workload=WorkloadSpec(total=1200, keys=30, partitions=3, aborted_fraction=0.1,
                                     transaction_records=40, seed=11))
    _assert_contract(done, max_wait_ms, slack_s)
    return done


def _batches(done: Run) -> pd.DataFrame:
    """One row per emitted batch (first emission of each batch id): its reason, size and times in ms."""
    grouped = done.output.groupby("batch_id", sort=False)
    return pd.DataFrame({"reason": grouped["batch_reason"].first(), "size": grouped.size(),
                         "emitted_at_ms": grouped["emitted_at"].first() * 1000,
                         "oldest_arrived_ms": grouped["batch_oldest_arrived_at"].first() * 1000})


def _assert_contract(done: Run, max_wait_ms: int, slack_s: float) -> None:
    """Exactly once, per-key order, batch rules (all judged by the runner's checkers); both flush rules happened;
    flushes no later than ``max_wait_ms + slack`` (the slack covers trigger delay and batch time, plus any
    outage the test caused)."""
    assert done.failed_checks() == [], done.failed_checks()
    assert done.check("aggregator_batch")["counts"]["batches"] > 0
    assert done.ids == done.acked
    batches = _batches(done)
    size, timed = batches[batches["reason"] == "size"], batches[batches["reason"] == "time"]
    assert len(size) and len(timed)  # both flush rules happened
    assert (size["size"] == MAX_BATCH).all()
    assert ((timed["size"] > 0) & (timed["size"] < MAX_BATCH)).all()
    # a time flush waits for the deadline, and not much longer than a few batches past it
    waits = timed["emitted_at_ms"] - timed["oldest_arrived_ms"]
    assert waits.min() >= max_wait_ms and waits.max() <= max_wait_ms + slack_s * 1000, list(waits)


@pytest.mark.slow  # the certification's aggregator baseline and its mutants cover it too; tox -e long runs it
def test_size_and_time_flushes_keep_key_order_and_emit_everything_once(stack, tmp_path):
    # the last records of every group are flushed by timers in batches that read no input
    _run(stack, tmp_path, max_wait_ms=2000)


@pytest.mark.slow  # the mutants and the certification cover it too; tox -e long runs it
def test_a_driver_killed_after_the_sink_committed_and_before_spark_did_replays_the_same_batches(stack, tmp_path):
    done = _run(stack, tmp_path, max_wait_ms=2000,
                schedule=[FaultSpec("driver_kill_at", "driver", 0, 0, {"point": "kafka-2pc.after-commit"})])
    [start] = done.events("fault-start")
    assert start["reached"] is True
    assert start["pending_batch"] is not None  # output committed, Spark's commit not


@pytest.mark.slow  # the certification's full plan covers it too (tox -e certify); tox -e long runs it
def test_rescale_through_the_offline_state_repartition_keeps_buffered_records(stack, tmp_path):
    max_wait_ms = 15_000  # long enough that groups still buffer records while the query is stopped
    # the restart of a stateful query on a loaded machine may show nothing new for minutes: wait as long
    done = _run(stack, tmp_path, max_wait_ms=max_wait_ms, trigger="2 seconds", slack_s=240.0, quiet_timeout_s=240.0,
                schedule=[FaultSpec("rescale", "driver", 0, 0, {"parallelism": 1, "state_partitions": 2})])
    [start] = done.events("fault-start")
    assert (start["state_partitions_before"], start["state_partitions_after"]) == (4, 2)
    assert state_partitions(done.result.context["checkpoint"]) == 2
    # records buffered before the stop were flushed by their timers after the restart: state and timers moved.
    # The query did not run between the clean stop and fault-start, so what arrived before fault-start arrived
    # before the stop.
    stopped_ms, restarted_ms = start["time"] * 1000, done.events("fault-stop")[0]["time"] * 1000
    batches = _batches(done)
    assert ((batches["reason"] == "time") & (batches["oldest_arrived_ms"] < stopped_ms)
            & (batches["emitted_at_ms"] > restarted_ms)).any()
