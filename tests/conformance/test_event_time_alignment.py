"""SRC-11 on the real stack: the reference source keeps a skewed backlog's partitions within the drift it is asked
for, across a driver kill, and Spark's own Kafka source (no event-time alignment) fails with the drift measured."""

from __future__ import annotations

import pytest

from streamcert.conformance.certify import certify, prepare
from streamcert.conformance.plans import SKEW_DRIFT_MS, SKEW_LEAD_MS

pytestmark = pytest.mark.integration


def _drift(connector: str, stack, tmp_path):
    result = certify(prepare([connector], ["SRC-11"], seed=1), tmp_path, environment=stack)
    [verdict] = result.verdicts
    [run] = verdict.evidence["runs"]
    checks = {check["name"]: check for check in run["checks"]}
    return verdict, checks


def test_the_reference_source_keeps_the_skewed_partitions_within_its_drift_across_a_restart(stack, tmp_path):
    verdict, checks = _drift("streamcert-kafka", stack, tmp_path)
    assert verdict.verdict == "pass", verdict.reason
    drift = checks["event_time_drift"]["counts"]
    assert drift["checked_batches"] > 0 and drift["max_spread_ms"] <= SKEW_DRIFT_MS == drift["bound_ms"]


def test_spark_s_kafka_source_lets_the_leading_partition_through_and_fails_with_the_drift_measured(stack, tmp_path):
    verdict, checks = _drift("spark-kafka", stack, tmp_path)
    assert verdict.verdict == "fail", verdict.reason
    assert checks["event_time_drift"]["valid"] is False
    assert checks["event_time_drift"]["counts"]["max_spread_ms"] > SKEW_LEAD_MS / 2
    assert checks["lost"]["valid"] is True and checks["duplicate"]["valid"] is True  # only the drift is wrong
