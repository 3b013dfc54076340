"""Seed 003 on a real 3-node cluster, as a run of the one scenario runner: with acks=all, replication factor 3 and
min ISR 2 nothing acknowledged is lost when the leader is cut off and killed; with acks=1 the checker finds the
acknowledged records the old leader's truncation threw away (the harness can see the anomaly)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamcert.harness.acked_writes import AckedWrites
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.schedule import FaultSpec
from streamcert.harness.scenario import Scenario, run_scenario
from streamcert.harness.stack.kafka_clients import TopicSettings

ISOLATE_KILL = FaultSpec("node_isolate_kill", "kafka", 3.0, 2.0, {"node": "leader", "answering_s": 6.0})


def _scenario(name: str, acks: str, topics: TopicSettings) -> Scenario:
    return Scenario(name=name, procedure=AckedWrites(acks=acks), brokers=3, topics=topics, schedule=[ISOLATE_KILL])


def _run(cluster, tmp_path, scenario: Scenario):
    stack = SimpleNamespace(kafka=cluster, endpoints=SimpleNamespace(bootstrap_servers=cluster.bootstrap))
    result = run_scenario(stack, scenario, tmp_path / scenario.name)
    assert result.complete, result.error
    return result, {check["name"]: check for check in result.checks}


def test_an_acked_writes_scenario_is_read_back_from_results_json_with_its_procedure():
    scenario = _scenario("safe", "all", TopicSettings(3, 2, False))
    again = Scenario.from_dict(scenario.as_dict())
    assert again == scenario and isinstance(again.procedure, AckedWrites) and again.procedure.acks == "all"
    with pytest.raises(ConfigurationError, match="procedure"):
        Scenario(name="x", procedure={"kind": "acked_writes", "acks": "2"})


def test_an_acked_writes_run_on_a_stack_without_a_cluster_of_its_own_says_so(tmp_path):
    stack = SimpleNamespace(kafka=None, endpoints=SimpleNamespace(bootstrap_servers="127.0.0.1:1"))
    result = run_scenario(stack, Scenario(name="nothing", procedure=AckedWrites()), tmp_path / "run")
    assert not result.complete and "brokers=3" in result.error


@pytest.mark.integration
@pytest.mark.slow  # the default run has both through BRK-1/BRK-2 (tests/conformance/test_certify.py)
def test_safe_settings_lose_no_acknowledged_record_across_leader_isolation_and_kill(kafka_cluster, tmp_path):
    result, checks = _run(kafka_cluster, tmp_path, _scenario("safe-writes", "all", TopicSettings(3, 2, False)))
    writes = result.metrics["acked_writes"]
    assert writes["acknowledged"] > 500, writes  # writes went on before and after the fault
    assert checks["lost"]["valid"] is True and writes["lost"] == 0, writes
    assert checks["fault_reached"]["valid"] is True and result.valid is True
    [start] = [e for e in result.history if e["kind"] == "fault-start"]
    assert start["fault"] == "node_isolate_kill" and start["after"]["leader"] not in (None, start["node"])


@pytest.mark.integration
@pytest.mark.slow  # the default run has both through BRK-1/BRK-2 (tests/conformance/test_certify.py)
def test_unsafe_settings_lose_acknowledged_records_and_the_checker_finds_them(kafka_cluster, tmp_path):
    result, checks = _run(kafka_cluster, tmp_path, _scenario("unsafe-writes", "1", TopicSettings(3, 1, True)))
    assert checks["lost"]["valid"] is False and result.metrics["acked_writes"]["lost"] > 0, result.metrics
    assert checks["lost"]["violations"][0]["kind"] == "lost"
