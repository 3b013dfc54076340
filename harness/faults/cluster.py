"""Kafka cluster faults (``--brokers 3``): one node killed, restarted, paused or cut off, chosen at fault time.

``node`` is ``"leader"`` (the leader of ``topic``/``partition`` from metadata when the fault strikes; the topic
defaults to the run's input topic), ``"controller"`` (the active KRaft controller) or a node id. Each fault
records what metadata said around it, read during the run, so the history shows it happened: the node it hit,
the partition's leader and ISR before, the new leader after a kill (waited for, bounded), the ISR once healed.
A node kill is healed by starting the node again; a pause by resuming it; an isolation by bringing its links up.
``rolling_restart`` restarts every node cleanly in turn, the next once the previous answers again.
``node_isolate_kill`` is seed 003's failover: the node cut off from its peers, left answering its clients for a while
after the others elected a new leader, then killed; healed by bringing its links up and starting it again.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Union

from pydantic import Field

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import Fault, FaultNotApplicable, within
from streamcert.harness.faults.registry import FaultParams, NoParams, fault_kind

__all__ = ["NodeParams", "IsolateParams", "IsolateKillParams", "NodeFault", "IsolateFault", "IsolateKillFault",
           "RollingRestartFault"]

#: How long a fault waits to see its effect in metadata (a new leader, a node back in the ISR).
_SEEN_WITHIN_S = 45.0


class NodeParams(FaultParams):
    node: Union[Literal["leader", "controller"], int] = Field(
        "leader", description='"leader" of topic/partition, "controller" (the active one) or a node id')
    topic: str | None = Field(None, description="the partition's topic (default: the run's input topic)")
    partition: int = Field(0, ge=0, description="the partition whose leader is meant")


class IsolateParams(NodeParams):
    from_clients: bool = Field(False, description="also cut the node off from clients (else only from its peers)")


class _ClusterFault(Fault):
    needs = ("environment",)

    @property
    def cluster(self) -> Any:
        from streamcert.harness.stack.kafka_cluster import LocalKafkaCluster

        kafka = self.environment.kafka
        if kafka is None:  # the external provider: the user's brokers, no process of ours to act on
            raise FaultNotApplicable(f"Fault {self.spec.fault!r} acts on one node of a Kafka cluster that streamcert "
                                     "runs, and this stack's brokers are not its own.",
                                     hint="Certify with --provider local for the failover faults.")
        if not isinstance(kafka, LocalKafkaCluster):
            raise ConfigurationError(f"Fault {self.spec.fault!r} acts on one node of a Kafka cluster, and this stack "
                                     "has a single broker.",
                                     hint="Start the stack with brokers=3 (--brokers 3; local provider).")
        return kafka

    def _topic(self) -> str:
        topic = self.params.topic or self.context.input_topic
        if topic is None:
            raise ConfigurationError(f"Fault {self.spec.fault!r} needs a topic to find a leader by, and the run names "
                                     "no input topic.", hint='Give params {"topic": ...}.')
        return topic

    def _state(self) -> dict[str, Any] | None:
        try:
            return self.cluster.partition_state(self._topic(), self.params.partition)
        except Exception:  # leadership moving: metadata may answer nothing for a moment
            return None

    def _node(self) -> int:
        node = self.params.node
        if node == "leader":
            return self.cluster.leader_of(self._topic(), self.params.partition)
        if node == "controller":
            return self.cluster.active_controller()
        if node not in self.cluster.nodes:
            raise ConfigurationError(f"Fault {self.spec.fault!r}: the cluster has no node {node}.",
                                     hint=f"Nodes: {', '.join(map(str, self.cluster.nodes))}.")
        return node

    def _new_leader(self, old: int) -> dict[str, Any] | None:
        """The partition's state once a node other than ``old`` leads it (None if not within the bound)."""
        return within(lambda: (state := self._state()) and state["leader"] not in (old, -1, None) and state,
                      what="a new leader", timeout=_SEEN_WITHIN_S, interval=0.3)

    def _whole_isr(self) -> dict[str, Any] | None:
        return within(lambda: (state := self._state()) and sorted(state["isr"]) == sorted(state["replicas"])
                      and state, what="a whole ISR", timeout=_SEEN_WITHIN_S, interval=0.5)


@fault_kind("node_kill", targets=("kafka",), params=NodeParams)
@fault_kind("node_restart", targets=("kafka",), params=NodeParams)
@fault_kind("node_pause", targets=("kafka",), params=NodeParams)
class NodeFault(_ClusterFault):
    """One node SIGKILLed (started again at stop), restarted cleanly, or paused (resumed at stop)."""

    def _inject(self) -> dict[str, Any]:
        node = self._node()
        self._hit = node
        before = self._state()
        kafka = self.cluster.nodes[node]
        action = self.spec.fault.removeprefix("node_")
        if action == "kill":
            kafka.kill()
        elif action == "pause":
            kafka.pause()
        else:
            kafka.restart(clean=True)
        led = bool(before and before["leader"] == node)
        after = self._new_leader(node) if action != "restart" and led else self._state()
        moved = bool(before and after and before["leader"] != after["leader"])
        event = {"node": node, "before": before, "after": after, "leader_moved": moved}
        if self.params.node == "controller" and action != "restart":
            successor = within(lambda: (now := self.cluster.active_controller()) != node and now,
                               what="a new active controller", timeout=_SEEN_WITHIN_S, interval=0.5)
            event["new_controller"] = successor or None
            event["reached"] = successor is not None
        elif led and action != "restart":
            event["reached"] = moved  # the failover it was aimed at happened (metadata), or the verdict is unknown
        return event

    def _heal(self) -> dict[str, Any]:
        kafka = self.cluster.nodes[self._hit]
        action = self.spec.fault.removeprefix("node_")
        if action == "kill":
            kafka.restart(clean=False)
        elif action == "pause":
            kafka.resume()
        return {"node": self._hit, "healed": self._whole_isr()}


@fault_kind("node_isolate", targets=("kafka",), params=IsolateParams)
class IsolateFault(_ClusterFault):
    """One node cut off from its peers (replication and quorum links down, both ways), or from everyone."""

    def _inject(self) -> dict[str, Any]:
        node = self._node()
        self._hit = node
        before = self._state()
        self._links = self.cluster.isolate(node, from_clients=self.params.from_clients)
        # Seen when the partition's ISR loses a member or its leader moves (bounded; recorded either way).
        shrunk = within(lambda: (state := self._state()) and before and (
            len(state["isr"]) < len(before["isr"]) or state["leader"] != before["leader"]) and state,
            what="the ISR shrinking", timeout=_SEEN_WITHIN_S, interval=0.5)
        return {"node": node, "links_down": self._links, "before": before, "after": shrunk,
                "isr_shrank_or_leader_moved": shrunk is not None, "reached": shrunk is not None}

    def _heal(self) -> dict[str, Any]:
        for name in self._links:
            self.cluster.links[name].enable()
        return {"node": self._hit, "healed": self._whole_isr()}


class IsolateKillParams(NodeParams):
    answering_s: float = Field(6.0, ge=0, le=120, allow_inf_nan=False,
                               description="seconds the cut-off node goes on answering its clients once the others "
                                           "elected a new leader, before it is killed")


@fault_kind("node_isolate_kill", targets=("kafka",), params=IsolateKillParams)
class IsolateKillFault(_ClusterFault):
    """Seed 003's failover: the node cut off from its peers (its clients still reach it); once another node
    reports a new leader of the partition, it goes on answering its clients for ``answering_s`` (acknowledging what
    only it has, with ``acks=1``), then is SIGKILLed. Healed: its links up, then the node started again; it rejoins
    as a follower and truncates what only it had. Reached when a new leader was seen from the other nodes (the old
    one's own metadata is stale while it is cut off)."""

    def _inject(self) -> dict[str, Any]:
        node = self._node()
        self._hit, topic = node, self._topic()
        before = self._state()
        self._links = self.cluster.isolate(node)
        began = time.monotonic()
        new = within(lambda: (leader := self.cluster.leader_seen_from_peers(topic, node, self.params.partition))
                     not in (None, -1, node) and leader, what=f"a new leader of {topic} while node {node} is cut off",
                     timeout=_SEEN_WITHIN_S, interval=0.3)
        elected_s = round(time.monotonic() - began, 3)
        time.sleep(self.params.answering_s)  # the old leader still answers its clients meanwhile
        self.cluster.nodes[node].kill()
        return {"node": node, "before": before, "after": {"leader": new or None}, "links_down": self._links,
                "new_leader_after_s": elected_s if new else None, "killed": True, "reached": bool(new)}

    def _heal(self) -> dict[str, Any]:
        for name in self._links:
            self.cluster.links[name].enable()
        self.cluster.nodes[self._hit].start()
        return {"node": self._hit, "healed": self._whole_isr()}


@fault_kind("rolling_restart", targets=("kafka",), params=NoParams)
class RollingRestartFault(_ClusterFault):
    """Every node restarted cleanly in turn, the next only once the previous answers again."""

    def _inject(self) -> dict[str, Any]:
        began = time.monotonic()
        restarted = []
        for node, kafka in self.cluster.nodes.items():
            kafka.restart(clean=True)
            restarted.append({"node": node, "at_s": round(time.monotonic() - began, 2)})
        return {"restarted": restarted}

    def _heal(self) -> None:
        return None
