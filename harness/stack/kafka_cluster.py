"""A Kafka cluster of N KRaft nodes on loopback (each broker and controller), every path between them proxied.

Seed 003's faults (leader failover, ISR shrink, a broker cut off from its peers) need more than one broker, and a
broker can only be cut off from its peers while clients still reach it if replication traffic has links of its
own. So every connection a node makes goes through a Toxiproxy link of its own *pair*:

- clients: link ``kafka-<n>`` in front of node n's ``EXTERNAL`` listener, advertised as the link's address;
- replication (fetches, transaction markers): node i uses the inter-broker listener ``REPL<i>``, which every node j
  exposes on a port of its own and advertises as link ``repl-<i>-<j>``; so i -> j traffic has its own link;
- the KRaft quorum: node i names node j's controller in its own ``controller.quorum.voters`` by link
  ``ctl-<i>-<j>`` (each node's voter addresses are its own configuration);
- ``INTERNAL`` is advertised as itself: admin work and raw-broker measurements, never faulted.

Isolating node n from its peers is then: links ``repl-*-n``, ``repl-n-*``, ``ctl-*-n``, ``ctl-n-*`` down; from
everyone: also ``kafka-n``. Topics get replication factor 3 and ``min.insync.replicas`` 2 by default.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.kafka import BROKER_TUNING, KafkaPorts, LocalKafka, new_cluster_id
from streamcert.harness.stack.ports import LOOPBACK, free_port
from streamcert.harness.stack.toxiproxy import Link

if TYPE_CHECKING:
    from streamcert.harness.stack.toxiproxy import ToxiproxyApi

__all__ = ["NodePorts", "ClusterSettings", "ClusterLayout", "client_link", "replication_link", "controller_link",
           "render_node_properties", "LocalKafkaCluster"]


#: A KRaft quorum state change in a node's log: ``Completed transition to Leader(localId=2, epoch=5, ...``.
_QUORUM_TRANSITION = re.compile(r"Completed transition to (\w+)\(.*?\bepoch=(\d+)")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def client_link(node: int) -> str:
    return f"kafka-{node}"


def replication_link(source: int, target: int) -> str:
    """The link node ``source`` fetches from (and sends markers to) node ``target`` through."""
    return f"repl-{source}-{target}"


def controller_link(source: int, target: int) -> str:
    """The link node ``source`` reaches node ``target``'s controller through."""
    return f"ctl-{source}-{target}"


@dataclass(frozen=True)
class NodePorts:
    """One node's listeners: the single-node three, plus one ``REPL<i>`` listener per node i of the cluster."""

    base: KafkaPorts
    replication: Mapping[int, int]

    @classmethod
    def allocate(cls, nodes: int) -> "NodePorts":
        return cls(KafkaPorts.allocate(), {source: free_port() for source in range(1, nodes + 1)})


@dataclass(frozen=True)
class ClusterSettings:
    """The cluster's replication settings (each settable per scenario)."""

    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False

    def check(self, nodes: int) -> None:
        if nodes < 1:
            raise ConfigurationError(f"A Kafka cluster needs at least one broker, not {nodes}.",
                                     hint="Use --brokers 1 or 3.")
        if not 1 <= self.replication_factor <= nodes:
            raise ConfigurationError(f"Replication factor {self.replication_factor} does not fit {nodes} broker(s).",
                                     hint=f"Use --brokers {self.replication_factor} or more (or 1), or "
                                          f"ClusterSettings(replication_factor=...) of at most {nodes}.")
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ConfigurationError(
                f"min.insync.replicas={self.min_insync_replicas} must be between 1 and the replication factor "
                f"({self.replication_factor}).", hint="The safe setting is replication factor 3, min ISR 2.")


@dataclass
class ClusterLayout:
    """Node ids 1..N, their ports, and the proxied address (filled in once the links exist) of every path."""

    nodes: int
    settings: ClusterSettings = field(default_factory=ClusterSettings)
    ports: dict[int, NodePorts] = field(default_factory=dict)
    #: link name -> port clients of that link connect to
    link_ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.settings.check(self.nodes)
        for node in self.node_ids:
            self.ports.setdefault(node, NodePorts.allocate(self.nodes))

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.nodes + 1))

    def links(self) -> dict[str, str]:
        """Every link the cluster needs: name -> upstream (the real listener it forwards to)."""
        wanted = {client_link(node): f"{LOOPBACK}:{self.ports[node].base.external}" for node in self.node_ids}
        for source in self.node_ids:
            for target in self.node_ids:
                if source != target:
                    wanted[replication_link(source, target)] = \
                        f"{LOOPBACK}:{self.ports[target].replication[source]}"
                    wanted[controller_link(source, target)] = f"{LOOPBACK}:{self.ports[target].base.controller}"
        return wanted

    def peer_links(self, node: int) -> list[str]:
        """The links between ``node`` and its peers, both ways (replication and quorum)."""
        return [name for other in self.node_ids if other != node
                for name in (replication_link(node, other), replication_link(other, node),
                             controller_link(node, other), controller_link(other, node))]

    def bootstrap(self) -> str:
        """Clients' bootstrap list: every node's client link."""
        return ",".join(f"{LOOPBACK}:{self.link_ports[client_link(node)]}" for node in self.node_ids)

    def direct_bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.ports[node].base.internal}" for node in self.node_ids)


def render_node_properties(layout: ClusterLayout, node: int, log_dir: Path,
                           overrides: Mapping[str, str] | None = None) -> str:
    """Node ``node``'s ``server.properties`` once ``layout.link_ports`` holds every link's port."""
    missing = sorted(set(layout.links()) - set(layout.link_ports))
    if missing:
        raise ValueError(f"links not created yet: {missing[:3]}")
    ports = layout.ports[node]
    settings = layout.settings

    def via(link: str) -> str:
        return f"{LOOPBACK}:{layout.link_ports[link]}"

    replication_names = {source: f"REPL{source}" for source in layout.node_ids}
    listeners = [f"INTERNAL://{LOOPBACK}:{ports.base.internal}", f"CONTROLLER://{LOOPBACK}:{ports.base.controller}",
                 f"EXTERNAL://{LOOPBACK}:{ports.base.external}",
                 *(f"{replication_names[source]}://{LOOPBACK}:{ports.replication[source]}"
                   for source in layout.node_ids)]
    advertised = [f"INTERNAL://{LOOPBACK}:{ports.base.internal}", f"EXTERNAL://{via(client_link(node))}",
                  *(f"{replication_names[source]}://"
                    + (f"{LOOPBACK}:{ports.replication[source]}" if source == node
                       else via(replication_link(source, node)))
                    for source in layout.node_ids)]
    voters = ",".join(f"{other}@" + (f"{LOOPBACK}:{ports.base.controller}" if other == node
                                     else via(controller_link(node, other)))
                      for other in layout.node_ids)
    protocols = ",".join(f"{name}:PLAINTEXT" for name in ("INTERNAL", "CONTROLLER", "EXTERNAL",
                                                          *replication_names.values()))
    replicas = str(settings.replication_factor)
    min_isr = str(settings.min_insync_replicas)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node),
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": replication_names[node],
        "listener.security.protocol.map": protocols,
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "default.replication.factor": replicas,
        "min.insync.replicas": min_isr,
        "unclean.leader.election.enable": str(settings.unclean_leader_election).lower(),
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        **BROKER_TUNING,
        # Failover within seconds, not the defaults' tens of seconds: a lost follower leaves the ISR after
        # replica.lag.time.max.ms, a lost broker is fenced after broker.session.timeout.ms.
        "replica.lag.time.max.ms": "5000",
        "broker.session.timeout.ms": "6000",
        "broker.heartbeat.interval.ms": "1000",
        "controller.quorum.election.timeout.ms": "1000",
        # With unclean election allowed, the controller tries it every interval (default 5 minutes).
        "unclean.leader.election.interval.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
    }
    props.update(overrides or {})
    return "".join(f"{key}={value}\n" for key, value in props.items())


class LocalKafkaCluster:
    """N KRaft nodes as child processes, every path between them and to clients through ``api``'s links.

    A context manager; ``stop()`` is idempotent and safe before ``start()``. ``nodes[n]`` is node n's
    :class:`~streamcert.harness.stack.kafka.LocalKafka` (kill, restart, pause one broker); ``links`` every link
    by name.
    """

    def __init__(self, workdir: Path, api: "ToxiproxyApi", nodes: int = 3,
                 settings: ClusterSettings | None = None, heap_mb: int = 512, run_token: str = "",
                 start_timeout: float = 90.0) -> None:
        self.workdir = Path(workdir)
        self.api = api
        self.layout = ClusterLayout(nodes, settings or ClusterSettings())
        self.heap_mb = heap_mb
        self.run_token = run_token
        self.start_timeout = start_timeout
        self.links: dict[str, Link] = {}
        self.nodes: dict[int, LocalKafka] = {}

    def __enter__(self) -> "LocalKafkaCluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Create the links, then launch every node together (no node answers before a quorum runs), then wait
        until each answers."""
        if self.nodes:
            return
        try:
            for name, upstream in self.layout.links().items():
                self.links[name] = self.api.create_link(name, upstream)
                self.layout.link_ports[name] = self.links[name].listen_port
            cluster_id = new_cluster_id()
            for node in self.layout.node_ids:
                folder = self.workdir / f"node-{node}"
                self.nodes[node] = LocalKafka(
                    folder, ports=self.layout.ports[node].base, heap_mb=self.heap_mb, run_token=self.run_token,
                    start_timeout=self.start_timeout, cluster_id=cluster_id, name=f"Kafka node {node}",
                    extra_ports=tuple(self.layout.ports[node].replication.values()),
                    properties=render_node_properties(self.layout, node, folder / "data"))
            for kafka in self.nodes.values():
                kafka.launch()
            for kafka in self.nodes.values():
                kafka.await_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every node; the links go with their Toxiproxy server."""
        errors = []
        for kafka in self.nodes.values():
            try:
                kafka.stop()
            except Exception as exc:  # stop the others anyway
                errors.append(exc)
        if errors:
            raise errors[0]

    # -- what clients see ----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Clients' bootstrap: every node's client link."""
        return self.layout.bootstrap()

    @property
    def direct_bootstrap(self) -> str:
        return self.layout.direct_bootstrap()

    @property
    def client_links(self) -> list[Link]:
        return [self.links[client_link(node)] for node in self.layout.node_ids]

    # -- metadata, read during the run ---------------------------------------------------------

    def partition_state(self, topic: str, partition: int = 0, timeout: float = 10.0) -> dict[str, object]:
        """Leader and ISR of ``topic``/``partition`` as the cluster reports them now (through INTERNAL)."""
        from confluent_kafka.admin import AdminClient

        from streamcert.harness.stack.kafka_clients import client_conf

        admin = AdminClient(client_conf(self.direct_bootstrap))
        deadline = time.monotonic() + timeout
        while True:
            found = admin.list_topics(topic, timeout=timeout).topics.get(topic)
            if found is not None and found.error is None and partition in found.partitions:
                break
            if time.monotonic() >= deadline:
                break
            # A node answers from its own metadata cache: a topic created a moment ago may not be in it yet.
            time.sleep(0.2)
        if found is None or found.error is not None or partition not in found.partitions:
            raise ConfigurationError(f"The cluster has no partition {topic}/{partition}"
                                     + (f" ({found.error})" if found is not None and found.error else "") + ".",
                                     hint="Create the topic first (harness.stack.kafka_clients.create_topic).")
        state = found.partitions[partition]
        return {"leader": state.leader, "replicas": list(state.replicas), "isr": list(state.isrs)}

    def leader_seen_from_peers(self, topic: str, old: int, partition: int = 0) -> int | None:
        """The partition's leader as a node other than ``old`` reports it (a node cut off from its peers answers
        from its own, stale metadata); None when no other node answers."""
        from confluent_kafka.admin import AdminClient

        from streamcert.harness.stack.kafka_clients import client_conf

        for node, ports in self.layout.ports.items():
            if node == old:
                continue
            found = AdminClient(client_conf(f"127.0.0.1:{ports.base.internal}")).list_topics(topic, timeout=3)
            state = found.topics.get(topic)
            if state is not None and state.error is None and partition in state.partitions:
                return state.partitions[partition].leader
        return None

    def leader_of(self, topic: str, partition: int = 0) -> int:
        leader = self.partition_state(topic, partition)["leader"]
        if not isinstance(leader, int) or leader < 0:
            raise ConfigurationError(f"{topic}/{partition} has no leader now.",
                                     hint="Every replica is down or out of the ISR; wait for the cluster to heal.")
        return leader

    def active_controller(self) -> int:
        """The node that leads the KRaft quorum now, from the nodes' own logs: the running node whose latest
        transition was to leader, at the highest epoch any running node reached (the confluent-kafka admin client
        cannot ask the quorum, and Kafka's quorum tool is not among the broker's jars)."""
        best: tuple[int, int] | None = None
        for node, kafka in self.nodes.items():
            if kafka.pid is None:
                continue
            transitions = _QUORUM_TRANSITION.findall(_read(kafka.log_file))
            if transitions and transitions[-1][0] == "Leader":
                epoch = int(transitions[-1][1])
                if best is None or epoch > best[1]:
                    best = (node, epoch)
        if best is None:
            raise ConfigurationError("No running node of the Kafka cluster says it leads the KRaft quorum.",
                                     hint=f"Look at the nodes' server.log under {self.workdir}.")
        return best[0]

    # -- faults --------------------------------------------------------------------------

    def isolate(self, node: int, from_clients: bool = False) -> list[str]:
        """Cut node ``node`` off from its peers (replication and quorum links down both ways), and from clients
        too when asked; return the links taken down."""
        names = self.layout.peer_links(node) + ([client_link(node)] if from_clients else [])
        for name in names:
            self.links[name].disable()
        return names

    def heal(self) -> None:
        """Every link up, every toxic removed."""
        for link in self.links.values():
            link.clear()

    # -- the whole cluster as one server (the single-broker faults: an outage of every node) --------------

    @property
    def pid(self) -> int | None:
        """The first running node's pid (None when none runs): the cluster as one server."""
        return next((kafka.pid for kafka in self.nodes.values() if kafka.pid is not None), None)

    @property
    def upstream(self) -> str:
        """The real EXTERNAL listeners the client links forward to."""
        return ",".join(f"{LOOPBACK}:{self.layout.ports[node].base.external}" for node in self.layout.node_ids)

    def kill(self) -> None:
        for kafka in self.nodes.values():
            kafka.kill()

    def pause(self) -> None:
        for kafka in self.nodes.values():
            kafka.pause()

    def resume(self) -> None:
        for kafka in self.nodes.values():
            kafka.resume()

    def restart(self, clean: bool = True) -> None:
        """Every node down (cleanly, or by SIGKILL), then up together; return once each answers."""
        for kafka in self.nodes.values():
            (kafka.stop if clean else kafka.kill)()
            kafka._process = None
        for kafka in self.nodes.values():
            kafka.launch()
        for kafka in self.nodes.values():
            kafka.await_ready()

    def tail(self, lines: int = 20) -> str:
        return "\n".join(f"[node {node}]\n{kafka.tail(lines)}" for node, kafka in self.nodes.items())
