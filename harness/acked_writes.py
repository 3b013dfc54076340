"""Seed 003 on a real cluster: is every record a broker acknowledged still there after its leader was cut off
and killed?

A run's procedure that runs no query (:class:`AckedWrites`, a :class:`~streamcert.harness.scenario.Scenario`'s
``procedure``): a producer writes numbered records at a steady pace with the given ``acks`` to a topic of the
scenario's ``topics`` settings; each record's fate is kept as the broker reported it (acknowledged, or failed:
indeterminate, since a failed send may still have been written). Meanwhile the scenario's schedule is carried out
by the fault timeline, like any run's (seed 003's is one ``node_isolate_kill``: the partition's leader cut off from
its peers while clients still reach it, the others elect a new leader, the old one goes on answering for a while,
then is SIGKILLed; its links come back, it starts again and rejoins as a follower). The topic is read back and
:class:`~streamcert.harness.verify.checkers.LostChecker` judges the ledger: with ``acks=all``, replication factor 3
and ``min.insync.replicas`` 2 nothing acknowledged may be lost; with ``acks=1`` the old leader acknowledged records
no other replica had, which its truncation on rejoining throws away (Jepsen's Kafka result: the harness must be able
to see that). Runs in the harness's process.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.base import FaultContext
from streamcert.harness.faults.registry import build_fault
from streamcert.harness.faults.timeline import FaultTimeline
from streamcert.harness.verify.checkers import LostChecker, combined_valid
from streamcert.harness.verify.evidence import fault_reached
from streamcert.harness.waiting import wait_for

if TYPE_CHECKING:
    from streamcert.harness.results import RunResult
    from streamcert.harness.run.history import History

__all__ = ["AckedWrites", "run_acked_writes"]


class AckedWrites(BaseModel):
    """The procedure of a run that writes to the stack's own Kafka cluster instead of running a query (the BRK
    requirements): the scenario's ``topics`` settle the topic's durability, its ``schedule`` the faults, its
    ``brokers`` the cluster it needs (3); its source, sink and workload are not used."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["acked_writes"] = "acked_writes"
    acks: Literal["all", "1"] = Field("all", description="the producer's acks: all (with idempotence) or 1")
    rate: float = Field(200.0, gt=0, le=5000, allow_inf_nan=False, description="records the producer sends per s")
    tail_s: float = Field(3.0, ge=0, le=120, allow_inf_nan=False,
                          description="seconds the producer goes on once the last fault healed")


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


def _cluster(env: Any) -> Any:
    from streamcert.harness.stack.kafka_cluster import LocalKafkaCluster

    kafka = getattr(env, "kafka", None)
    if not isinstance(kafka, LocalKafkaCluster):
        raise ConfigurationError("An acknowledged-writes run cuts off and kills a node of a Kafka cluster that "
                                 "streamcert runs, and this stack has no such cluster.",
                                 hint="Start the stack with brokers=3 (--brokers 3; local provider).")
    return kafka


def run_acked_writes(env: Any, scenario: Any, workdir: Path, history: History, result: RunResult) -> None:
    """Carry out ``scenario`` (procedure :class:`AckedWrites`) on ``env``'s cluster; fill ``result``'s checks,
    metrics and validity. The caller records the history and saves the result."""
    procedure: AckedWrites = scenario.procedure
    cluster = _cluster(env)
    topic = f"brk-{scenario.name}-{uuid.uuid4().hex[:8]}"
    config = scenario.topics.config()
    leader = _create_led_by_a_follower_of_the_quorum(cluster, topic, config)
    history.record("topic-created", topic=topic, leader=leader, config=config)
    context = FaultContext(environment=env, history=history, input_topic=topic, workdir=Path(workdir) / "faults")
    faults = [build_fault(spec, context) for spec in scenario.schedule]
    writer = _Writer(cluster.bootstrap, topic, procedure.acks, procedure.rate)
    writer.start()
    try:
        FaultTimeline(scenario.schedule, faults, history).start().join()
        time.sleep(procedure.tail_s)
    finally:
        writer.finish()
        for fault in faults:  # idempotent: heals what an interrupted timeline left
            fault.stop()
    wait_for(lambda: sorted((state := cluster.partition_state(topic))["isr"]) == sorted(state["replicas"]),
             what=f"a whole ISR of {topic} again", timeout=90, interval=0.5)
    history.record("isr-whole", state=cluster.partition_state(topic))
    lost = _lost(cluster, topic, writer)
    reached = fault_reached(history.events())
    acknowledged = sum(1 for fate in writer.fates.values() if fate == "acked")
    result.checks = [lost.to_dict(), reached.to_dict()]
    result.valid = combined_valid([lost, reached])
    result.metrics["acked_writes"] = {
        "acks": procedure.acks, "topic": topic, "topic_config": config, "sent": writer.sent,
        "acknowledged": acknowledged, "failed": writer.sent - acknowledged, "read_back": lost.counts.get("output"),
        "lost": lost.counts.get("lost"), "valid": lost.valid}


def _lost(cluster: Any, topic: str, writer: "_Writer"):
    from streamcert.harness.stack.kafka_clients import read_topic

    read = read_topic(cluster.bootstrap, topic, isolation="read_uncommitted")
    ledger = pd.DataFrame({"id": list(range(writer.sent)), "key": ["k"] * writer.sent,
                           "aborted": [False] * writer.sent,
                           "status": [writer.fates[i] for i in range(writer.sent)]})
    output = pd.DataFrame({"id": [int(value) for _, _, _, value in read]})
    result = LostChecker().check(ledger, output)
    result.counts["output"] = len(read)
    return result
