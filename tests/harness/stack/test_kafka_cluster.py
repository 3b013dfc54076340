"""The 3-node Kafka cluster: every path between nodes has a link of its own pair (unit tests of the layout and of
each node's server.properties)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.kafka_cluster import (ClusterLayout, ClusterSettings, client_link, controller_link,
                                                    render_node_properties, replication_link)


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def _layout(nodes: int = 3, **settings) -> ClusterLayout:
    layout = ClusterLayout(nodes, ClusterSettings(**settings))
    for number, name in enumerate(sorted(layout.links()), start=20000):
        layout.link_ports[name] = number
    return layout


def test_every_ordered_pair_has_its_own_replication_and_quorum_link():
    layout = _layout()
    names = set(layout.links())
    assert {client_link(n) for n in (1, 2, 3)} <= names
    pairs = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3) if a != b]
    assert {replication_link(a, b) for a, b in pairs} <= names and {controller_link(a, b) for a, b in pairs} <= names
    assert len(names) == 3 + 6 + 6
    # repl-1-2 forwards to node 2's REPL1 listener; ctl-1-2 to node 2's controller
    assert layout.links()[replication_link(1, 2)].endswith(f":{layout.ports[2].replication[1]}")
    assert layout.links()[controller_link(1, 2)].endswith(f":{layout.ports[2].base.controller}")


def test_a_node_reaches_each_peer_through_its_own_links_and_advertises_links_to_its_peers():
    layout = _layout()
    props = _props(render_node_properties(layout, 2, Path("/d")))
    assert props["node.id"] == "2" and props["inter.broker.listener.name"] == "REPL2"
    voters = dict(entry.split("@") for entry in props["controller.quorum.voters"].split(","))
    assert voters["1"] == f"127.0.0.1:{layout.link_ports[controller_link(2, 1)]}"
    assert voters["3"] == f"127.0.0.1:{layout.link_ports[controller_link(2, 3)]}"
    assert voters["2"] == f"127.0.0.1:{layout.ports[2].base.controller}"  # itself: its own listener
    advertised = dict(entry.split("://") for entry in props["advertised.listeners"].split(","))
    # node 1 fetches from node 2 over REPL1, which node 2 advertises as the link repl-1-2
    assert advertised["REPL1"] == f"127.0.0.1:{layout.link_ports[replication_link(1, 2)]}"
    assert advertised["REPL3"] == f"127.0.0.1:{layout.link_ports[replication_link(3, 2)]}"
    assert advertised["EXTERNAL"] == f"127.0.0.1:{layout.link_ports[client_link(2)]}"
    assert advertised["INTERNAL"] == f"127.0.0.1:{layout.ports[2].base.internal}"
    listeners = dict(entry.split("://") for entry in props["listeners"].split(","))
    assert set(listeners) == {"INTERNAL", "CONTROLLER", "EXTERNAL", "REPL1", "REPL2", "REPL3"}
    assert all(address.startswith("127.0.0.1:") for address in listeners.values())  # loopback only
    protocols = dict(entry.split(":") for entry in props["listener.security.protocol.map"].split(","))
    assert set(protocols) == set(listeners)


def test_isolating_a_node_names_every_link_to_and_from_its_peers_and_no_other():
    layout = _layout()
    links = set(layout.peer_links(3))
    assert links == {replication_link(3, 1), replication_link(1, 3), replication_link(3, 2), replication_link(2, 3),
                     controller_link(3, 1), controller_link(1, 3), controller_link(3, 2), controller_link(2, 3)}
    assert replication_link(1, 2) not in links and client_link(3) not in links


def test_safe_replication_settings_by_default_and_unsafe_ones_when_asked():
    safe = _props(render_node_properties(_layout(), 1, Path("/d")))
    assert safe["default.replication.factor"] == "3" and safe["min.insync.replicas"] == "2"
    assert safe["unclean.leader.election.enable"] == "false"
    assert safe["transaction.state.log.replication.factor"] == "3" and safe["transaction.state.log.min.isr"] == "2"
    unsafe = _props(render_node_properties(_layout(min_insync_replicas=1, unclean_leader_election=True), 1,
                                           Path("/d")))
    assert unsafe["min.insync.replicas"] == "1" and unsafe["unclean.leader.election.enable"] == "true"


@pytest.mark.parametrize("nodes, settings, said", [
    (0, {}, "at least one broker"),
    (1, {}, "does not fit 1 broker"),
    (3, {"replication_factor": 4}, "does not fit 3 broker"),
    (3, {"min_insync_replicas": 4}, "between 1 and the replication factor"),
])
def test_settings_that_cannot_work_are_refused(nodes, settings, said):
    with pytest.raises(ConfigurationError, match=said):
        ClusterLayout(nodes, ClusterSettings(**settings))


def test_properties_need_every_link_first():
    layout = ClusterLayout(3)
    with pytest.raises(ValueError, match="links not created yet"):
        render_node_properties(layout, 1, Path("/d"))


# -- integration: the real cluster ---------------------------------------------------------

def _wait(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # metadata while leadership moves
            value = exc
        assert time.monotonic() < deadline, f"{what}: last seen {value!r}"
        time.sleep(0.3)


@pytest.mark.integration
def test_a_scenarios_topic_settings_override_the_clusters_and_its_broker_count_is_checked(kafka_cluster):
    """Seed 003's settings per scenario: replication factor, min ISR and unclean election on the topic itself; a
    scenario asking for another cluster size, or more replicas than there are brokers, is refused with a hint."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from streamcert.harness.scenario import Scenario, _check_brokers
    from streamcert.harness.stack.kafka_clients import TopicSettings, broker_ids, client_conf, create_topic

    cluster = kafka_cluster
    _wait(lambda: broker_ids(cluster.bootstrap) == [1, 2, 3], "all three brokers registered")
    create_topic(cluster.bootstrap, "unsafe-two", 2, settings=TopicSettings(2, 1, True))
    assert len(cluster.partition_state("unsafe-two")["replicas"]) == 2
    admin = AdminClient(client_conf(cluster.direct_bootstrap))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "unsafe-two")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["min.insync.replicas"].value == "1"
    assert configs["unclean.leader.election.enable"].value == "true"
    create_topic(cluster.bootstrap, "defaults")  # unset: the cluster's safe defaults
    assert len(cluster.partition_state("defaults")["replicas"]) == 3

    assert _check_brokers(Scenario("three", brokers=3), cluster.bootstrap) == 3
    assert _check_brokers(Scenario("any"), cluster.bootstrap) is None
    with pytest.raises(ConfigurationError, match=r"needs 1 Kafka broker\(s\); .* lists 3") as caught:
        _check_brokers(Scenario("one", brokers=1), cluster.bootstrap)
    assert "--brokers 1" in caught.value.hint
    with pytest.raises(ConfigurationError, match="4 replicas cannot exist"):
        _check_brokers(Scenario("four", topics=TopicSettings(min_insync_replicas=4)), cluster.bootstrap)


@pytest.mark.integration
def test_a_leader_kill_moves_leadership_the_isr_shrinks_and_grows_back(kafka_cluster):
    """(Isolation: tests/harness/faults/test_cluster.py.)"""
    from streamcert.harness.stack.kafka_clients import create_topic, produce, read_topic

    cluster = kafka_cluster
    create_topic(cluster.bootstrap, "failover")
    state = cluster.partition_state("failover")
    assert sorted(state["replicas"]) == [1, 2, 3] and sorted(state["isr"]) == [1, 2, 3]
    assert produce(cluster.bootstrap, "failover", [(b"k", b"%d" % i) for i in range(100)],
                   conf={"acks": "all"}) == 100
    old = cluster.leader_of("failover")
    cluster.nodes[old].kill()
    _wait(lambda: cluster.partition_state("failover")["leader"] not in (old, -1), "a new leader")
    _wait(lambda: old not in cluster.partition_state("failover")["isr"], "the killed node out of the ISR")
    assert produce(cluster.bootstrap, "failover", [(b"k", b"%d" % i) for i in range(100, 200)],
                   conf={"acks": "all"}) == 100  # min ISR 2 of 3: writes go on
    cluster.nodes[old].start()
    _wait(lambda: sorted(cluster.partition_state("failover")["isr"]) == [1, 2, 3], "the ISR back to 3")
    assert len(read_topic(cluster.bootstrap, "failover")) == 200
