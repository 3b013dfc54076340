"""Spark's own Kafka source and Kafka sink as connectors under test, through the scenario runner: the adapters
build working queries from a QueryContext, their jars come from their declared Maven coordinates, and the
checkers see what their documentation says (the source reads committed records once; the at-least-once sink
loses nothing across a driver kill)."""

from __future__ import annotations

import pytest

from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.run.workload import WorkloadSpec
from tests.connectors.scenarios import run

pytestmark = pytest.mark.integration


def test_sparks_kafka_source_reads_every_committed_record_once_and_no_aborted_one(stack, tmp_path):
    done = run(stack, tmp_path, source="spark-kafka", sink="spark-files", master="local[2,2]",
               options={"max_records_per_batch": 400},
               workload=WorkloadSpec(total=1500, keys=20, partitions=3, aborted_fraction=0.2,
                                     transaction_records=50, seed=21))
    assert done.result.connectors["source"].name == "spark-kafka"
    assert done.failed_checks() == [], done.failed_checks()
    assert done.ids == done.acked and done.check("aborted_read")["counts"]["aborted"] > 0


@pytest.mark.slow  # in tox -e long: the default run certifies this sink's SNK-1 (duplicates, nothing lost)
def test_sparks_kafka_sink_loses_nothing_across_a_driver_kill_in_the_commit_window(stack, tmp_path):
    """At-least-once: whatever the kill's moment in the offsets/commits window, nothing acknowledged is lost;
    whether the replay duplicates depends on that moment, so duplicates are allowed, not required."""
    done = run(stack, tmp_path, sink="spark-kafka-sink", master="local[2,2]", options={"max_records_per_batch": 300},
               schedule=[FaultSpec("driver_kill", "driver", 0.0, 0.0, {"min_batch": 1, "delay_ms": 50})],
               workload=WorkloadSpec(total=1500, keys=20, partitions=3, seed=22))
    [start] = done.events("fault-start")
    assert start["pending_batch"] >= 1
    assert done.check("lost")["valid"] is True and done.check("unexpected")["valid"] is True
    assert done.result.driver_attempts == 2 and set(done.acked) <= set(done.ids)
