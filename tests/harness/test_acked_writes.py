"""Seed 003 on a real 3-node cluster: with acks=all, replication factor 3 and min ISR 2 nothing acknowledged is lost
when the leader is cut off and killed; with acks=1 the checker finds the acknowledged records the old leader's
truncation threw away (the harness can see the anomaly)."""

from __future__ import annotations

import pytest

from streamcert.harness.acked_writes import acknowledged_writes

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(kafka_cluster):
    return kafka_cluster


@pytest.mark.slow  # the default run has both through BRK-1/BRK-2 (tests/conformance/test_certify.py)
def test_safe_settings_lose_no_acknowledged_record_across_leader_isolation_and_kill(cluster):
    result = acknowledged_writes(cluster, "safe-writes", acks="all")
    assert result.acknowledged > 500, result.as_dict()  # writes went on before and after the fault
    assert result.lost.valid is True and result.lost.counts["lost"] == 0, result.as_dict()
    assert [event["event"] for event in result.events][:3] == [
        "leader isolated from its peers", "new leader elected by the others", "old leader killed"]


@pytest.mark.slow  # the default run has both through BRK-1/BRK-2 (tests/conformance/test_certify.py)
def test_unsafe_settings_lose_acknowledged_records_and_the_checker_finds_them(cluster):
    result = acknowledged_writes(cluster, "unsafe-writes", acks="1",
                                 topic_config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    assert result.lost.valid is False and result.lost.counts["lost"] > 0, result.as_dict()
    first = result.lost.violations[0]
    assert first["kind"] == "lost"
