"""Kafka cluster faults: a node chosen at fault time (leader, active controller, id), each fault's effect read
from metadata during the run and recorded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.cluster import IsolateFault, NodeFault, RollingRestartFault
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.schedule import FaultSpec, parse
from streamcert.harness.run.history import History


@pytest.mark.parametrize("node", ["leader", "controller", 2])
def test_a_node_is_named_by_role_or_id(node):
    [spec] = parse([{"fault": "node_kill", "target": "kafka", "at_s": 1, "duration_s": 2, "params": {"node": node}}])
    assert spec.typed_params().node == node and spec.typed_params().partition == 0


@pytest.mark.parametrize("params, said", [
    ({"node": "follower"}, "node"),
    ({"node": "2"}, "node"),  # no coercion: "2" is not node 2
    ({"partition": -1}, "partition"),
    ({"from_clients": True}, "from_clients"),  # only an isolation takes it
])
def test_bad_parameters_are_refused_naming_them(params, said):
    with pytest.raises(ConfigurationError, match=said):
        parse([{"fault": "node_kill", "target": "kafka", "at_s": 1, "duration_s": 2, "params": params}])


def test_the_kinds_build_their_classes(tmp_path):
    context = FaultContext(environment=SimpleNamespace(), history=History(), workdir=tmp_path, input_topic="in")
    for name, cls in (("node_kill", NodeFault), ("node_restart", NodeFault), ("node_pause", NodeFault),
                      ("node_isolate", IsolateFault), ("rolling_restart", RollingRestartFault)):
        assert type(build_fault(FaultSpec(name, "kafka", 0, 1), context)) is cls


def test_a_single_broker_stack_is_told_it_needs_a_cluster(tmp_path):
    context = FaultContext(environment=SimpleNamespace(kafka=object()), history=History(), workdir=tmp_path,
                           input_topic="in")
    fault = build_fault(FaultSpec("node_kill", "kafka", 0, 1), context)
    with pytest.raises(ConfigurationError, match="single broker") as info:
        fault.start()
    assert "--brokers 3" in info.value.hint


@pytest.mark.integration
def test_cluster_faults_are_seen_in_metadata_and_recorded(kafka_cluster, tmp_path):
    from streamcert.harness.stack.kafka_clients import create_topic

    cluster = kafka_cluster
    create_topic(cluster.bootstrap, "faults-in")
    history = History()
    context = FaultContext(environment=SimpleNamespace(kafka=cluster), history=history, workdir=tmp_path,
                           input_topic="faults-in")

    kill = build_fault(FaultSpec("node_kill", "kafka", 0, 1, {"node": "leader"}), context)
    kill.start()
    kill.stop()
    started, stopped = history.events()[-2:]
    assert started["node"] == started["before"]["leader"] and started["leader_moved"]
    assert started["after"]["leader"] != started["node"] and started["node"] not in started["after"]["isr"]
    assert sorted(stopped["healed"]["isr"]) == [1, 2, 3]

    controller = cluster.active_controller()
    assert controller in (1, 2, 3)
    kill_controller = build_fault(FaultSpec("node_kill", "kafka", 0, 1, {"node": "controller"}), context)
    kill_controller.start()
    assert history.events()[-1]["node"] == controller
    kill_controller.stop()
    assert cluster.active_controller() in (1, 2, 3)

    isolate = build_fault(FaultSpec("node_isolate", "kafka", 0, 1, {"node": "leader"}), context)
    isolate.start()
    started = history.events()[-1]
    assert started["isr_shrank_or_leader_moved"] and len(started["links_down"]) == 8
    isolate.stop()
    assert sorted(history.events()[-1]["healed"]["isr"]) == [1, 2, 3]


@pytest.mark.integration
@pytest.mark.slow
def test_a_rolling_restart_restarts_every_node_in_turn(kafka_cluster, tmp_path):
    history = History()
    context = FaultContext(environment=SimpleNamespace(kafka=kafka_cluster), history=history, workdir=tmp_path)
    rolling = build_fault(FaultSpec("rolling_restart", "kafka", 0, 1), context)
    before = {node: kafka.pid for node, kafka in kafka_cluster.nodes.items()}
    rolling.start()
    assert [entry["node"] for entry in history.events()[-1]["restarted"]] == [1, 2, 3]
    assert all(kafka_cluster.nodes[node].pid not in (None, pid) for node, pid in before.items())
