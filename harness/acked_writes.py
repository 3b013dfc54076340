"""Seed 003 on a real cluster: is every record a broker acknowledged still there after its leader was cut off
and killed?

A producer writes numbered records at a steady pace with the given ``acks``; each record's fate is kept as the
broker reported it (acknowledged, or failed: indeterminate, since a failed send may still have been written).
Meanwhile the partition's leader is cut off from its peers (clients still reach it), the cluster elects another
leader, the old one goes on answering for a while, then is SIGKILLed; its links come back, it starts again and
rejoins as a follower. The topic is read back and :class:`~streamcert.harness.verify.checkers.LostChecker` judges
the ledger: with ``acks=all``, replication factor 3 and ``min.insync.replicas`` 2 nothing acknowledged may be lost;
with ``acks=1`` the old leader acknowledged records no other replica had, which its truncation on rejoining
throws away (Jepsen's Kafka result: the harness must be able to see that).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from streamcert.harness.verify.checkers import CheckResult, LostChecker
from streamcert.harness.waiting import wait_for

__all__ = ["AckedWritesResult", "acknowledged_writes"]


@dataclass
class AckedWritesResult:
    """What was sent, what the brokers acknowledged, what came back, and the checker's verdict."""

    acks: str
    topic_config: dict[str, str]
    sent: int
    acknowledged: int
    failed: int
    read_back: int
    lost: CheckResult
    events: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"acks": self.acks, "topic_config": self.topic_config, "sent": self.sent,
                "acknowledged": self.acknowledged, "failed": self.failed, "read_back": self.read_back,
                "lost": self.lost.counts.get("lost"), "valid": self.lost.valid, "events": self.events}


class _Writer(threading.Thread):
    """Produces record i (value b"i") every 1/rate seconds until stopped; keeps each record's fate."""

    def __init__(self, bootstrap: str, topic: str, acks: str, rate: float) -> None:
        super().__init__(name="acked-writes", daemon=True)
        from confluent_kafka import Producer

        from streamcert.harness.stack.kafka_clients import client_conf

        self.topic = topic
        self.interval = 1.0 / rate
        self.fates: dict[int, str] = {}
        self.sent = 0
        self._halt = threading.Event()
        self._producer = Producer(client_conf(bootstrap, **{
            "acks": acks, "enable.idempotence": acks == "all", "linger.ms": 0,
            "message.timeout.ms": 8000, "request.timeout.ms": 4000, "retries": 3 if acks == "all" else 0}))

    def _delivered(self, err, msg) -> None:
        self.fates[int(msg.value())] = "indeterminate" if err is not None else "acked"

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._halt.is_set():
            try:
                self._producer.produce(self.topic, key=b"k", value=b"%d" % self.sent, on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0)
            next_at += self.interval
            self._halt.wait(max(0.0, next_at - time.monotonic()))
        self._producer.flush(20)

    def finish(self) -> None:
        self._halt.set()
        self.join(30)
        for record in range(self.sent):  # never reported back: the client gave up without a verdict
            self.fates.setdefault(record, "indeterminate")


def _leader_seen_from_peers(cluster: Any, topic: str, old: int) -> int | None:
    """The partition's leader as a node other than ``old`` reports it (the old leader's own view is stale)."""
    from confluent_kafka.admin import AdminClient

    from streamcert.harness.stack.kafka_clients import client_conf

    for node, ports in cluster.layout.ports.items():
        if node == old:
            continue
        admin = AdminClient(client_conf(f"127.0.0.1:{ports.base.internal}"))
        found = admin.list_topics(topic, timeout=3).topics.get(topic)
        if found is not None and found.error is None and 0 in found.partitions:
            return found.partitions[0].leader
    return None


def _whole_isr(cluster: Any, topic: str) -> bool:
    state = cluster.partition_state(topic)
    return sorted(state["isr"]) == sorted(state["replicas"]) and state["leader"] == state["replicas"][0]


def _create_led_by_a_follower_of_the_quorum(cluster: Any, topic: str, config: dict[str, str]) -> int:
    """Create ``topic`` led by a node that does not lead the KRaft quorum, and wait for all its replicas in sync.

    Cutting off the partition leader must be only that: were it also the active controller, the quorum would
    first elect another one and fence the old leader's broker before any partition could move, and the run
    would measure the controller's failover (tens of seconds on a loaded machine), not the partition's."""
    from streamcert.harness.stack.kafka_clients import create_topic

    nodes = list(cluster.layout.node_ids)
    controller = cluster.active_controller()
    leader = next(node for node in nodes if node != controller)
    create_topic(cluster.bootstrap, topic, config=config, replicas=[leader] + [n for n in nodes if n != leader])
    wait_for(lambda: _whole_isr(cluster, topic), what=f"every replica of {topic} in sync under node {leader}",
             timeout=60, interval=0.3, hint="A node of the cluster has not caught up since an earlier fault.")
    return leader


def acknowledged_writes(cluster: Any, topic: str, acks: str, topic_config: dict[str, str] | None = None,
                        rate: float = 200.0, isolated_s: float = 6.0) -> AckedWritesResult:
    """Write to ``topic`` (created here) with ``acks`` through a leader isolation and kill; judge what survived.

    ``events`` narrate the run; ``history`` holds the same faults as a scenario's fault events (``reached``: the
    new leader was seen in metadata), so the conformance verdicts read both kinds of run alike."""
    from streamcert.harness.faults.base import within
    from streamcert.harness.stack.kafka_clients import read_topic

    config = dict(topic_config or {})
    events: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    began = time.monotonic()

    def note(what: str, **details: Any) -> None:
        events.append({"at_s": round(time.monotonic() - began, 2), "event": what, **details})

    def fault(kind: str, name: str, **details: Any) -> None:
        history.append({"kind": kind, "elapsed_s": round(time.monotonic() - began, 3), "fault": name,
                        "target": "kafka", **details})

    old = _create_led_by_a_follower_of_the_quorum(cluster, topic, config)
    writer = _Writer(cluster.bootstrap, topic, acks, rate)
    writer.start()
    try:
        time.sleep(3)
        before = cluster.partition_state(topic)
        links = cluster.isolate(old)
        note("leader isolated from its peers", node=old, state=before, links=len(links))
        new = within(lambda: (leader := _leader_seen_from_peers(cluster, topic, old)) not in (None, -1, old)
                     and leader, what=f"a new leader of {topic} while node {old} is cut off", timeout=45,
                     interval=0.3)
        fault("fault-start", "node_isolate", node=old, before=before, after={"leader": new},
              links_down=links, reached=new is not None)
        if new is not None:
            note("new leader elected by the others", node=new)
        time.sleep(isolated_s)  # the old leader still answers its clients meanwhile
        cluster.nodes[old].kill()
        note("old leader killed", node=old)
        fault("fault-start", "node_kill", node=old, leader_before=new)
        for name in links:
            cluster.links[name].enable()
        fault("fault-stop", "node_isolate", node=old)
        time.sleep(2)
        cluster.nodes[old].start()
        note("old leader started again", node=old)
        fault("fault-stop", "node_kill", node=old)
        time.sleep(3)
    finally:
        writer.finish()
    wait_for(lambda: sorted((state := cluster.partition_state(topic))["isr"]) == sorted(state["replicas"]),
             what=f"a whole ISR of {topic} again", timeout=90, interval=0.5)
    note("ISR whole again", state=cluster.partition_state(topic))
    read = read_topic(cluster.bootstrap, topic, isolation="read_uncommitted")
    ledger = pd.DataFrame({"id": list(range(writer.sent)), "key": ["k"] * writer.sent,
                           "aborted": [False] * writer.sent,
                           "status": [writer.fates[i] for i in range(writer.sent)]})
    output = pd.DataFrame({"id": [int(value) for _, _, _, value in read]})
    lost = LostChecker().check(ledger, output)
    acknowledged = sum(1 for fate in writer.fates.values() if fate == "acked")
    return AckedWritesResult(acks, config, writer.sent, acknowledged, writer.sent - acknowledged, len(read), lost,
                             events, history)
