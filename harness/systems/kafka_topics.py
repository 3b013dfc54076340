"""The stack's Kafka as a system: a run's input and output are topics of it.

The writer produces through the run's bootstrap (through the proxy, as the query reads), so a network fault on the
Kafka link reaches the load as it reaches the query. Besides the SPI's one-transaction ``write``, it loads a whole
workload the fast way (:meth:`KafkaTopicWriter.load`: batched, with the plan's aborted transactions) and, alone among
the stack's writers, at an open-loop rate through locust (:meth:`KafkaTopicWriter.load_open_loop`).
Runs in the harness's process.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streamcert.harness.run.observers.base import Observer, OutputTarget
from streamcert.harness.run.observers.kafka import KafkaObserver
from streamcert.harness.run.workload import produce_record
from streamcert.harness.stack.kafka_clients import TopicSettings, client_conf, create_topic, end_offsets
from streamcert.harness.systems.stack_system import StackSystem
from streamcert.spi.external import Endpoint, InputRecord, InputWriter, Leftovers

__all__ = ["KafkaTopics", "KafkaTopicWriter"]


class KafkaTopics(StackSystem):
    """Topics of the stack's Kafka cluster; endpoint ``kafka`` (the bootstrap list)."""

    name = "kafka"
    endpoint_names = ("kafka",)
    restart_fault = ("broker_restart", "kafka", {}, 1.0)

    def endpoints(self) -> Mapping[str, Endpoint]:
        host, _, port = self._needs(self.at.kafka_direct or self.at.bootstrap_servers,
                                    "Kafka").split(",")[0].rpartition(":")
        return {"kafka": Endpoint(host, int(port))}

    def proxied(self) -> dict[str, str]:
        return {"kafka": self._needs(self.at.bootstrap_servers, "Kafka")}

    def direct(self) -> dict[str, str]:
        return {"kafka": self._needs(self.at.kafka_direct or self.at.bootstrap_servers, "Kafka")}

    def input_name(self, stem: str, run_id: str, workdir: str) -> str:
        return f"{stem}-in-{run_id}"

    def output_name(self, stem: str, run_id: str, workdir: str) -> str:
        return f"{stem}-out-{run_id}"

    def writer(self, name: str, endpoints: Mapping[str, str]) -> "KafkaTopicWriter":
        return KafkaTopicWriter(self._needs(self.at.bootstrap_servers, "Kafka"), name, self.at.topics)

    def observer(self, name: str, unpack: Any = None) -> Observer:
        bootstrap = self._needs(self.at.bootstrap_servers, "Kafka")
        return KafkaObserver(OutputTarget("kafka", name, bootstrap, mark_address=self.at.kafka_direct,
                                          topic_settings=self.at.topics), unpack=unpack)

    def leftovers_of(self, name: str) -> Leftovers:
        """Partitions whose last stable offset trails the high watermark: an open transaction blocks every
        read_committed reader behind it."""
        bootstrap = self._needs(self.at.bootstrap_servers, "Kafka")
        stable, high = end_offsets(bootstrap, name, "read_committed"), end_offsets(bootstrap, name, "read_uncommitted")
        held = [{"partition": p, "last_stable_offset": stable.get(p), "high_watermark": h}
                for p, h in sorted(high.items()) if stable.get(p) != h]
        return Leftovers(held, {"partitions": len(high), "open_transactions": len(held)})


class KafkaTopicWriter(InputWriter):
    """Writes into topic ``topic``, each record into its ``partition``; a committed write is acknowledged by every
    in-sync replica (idempotent producer), an uncommitted one is produced in a transaction and aborted, as a failed
    transactional writer leaves it."""

    writes_uncommitted = True

    def __init__(self, bootstrap: str, topic: str, settings: TopicSettings | None = None) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.settings = settings
        self._idempotent = None
        self._transactional = None

    def prepare(self, partitions: int) -> None:
        create_topic(self.bootstrap, self.topic, partitions, settings=self.settings)

    def write(self, records: Sequence[InputRecord], commit: bool = True) -> None:
        if commit:
            self._write_committed(records)
            return
        producer = self._aborting_producer()
        producer.begin_transaction()
        for record in records:
            producer.produce(self.topic, value=record.value, key=record.key, partition=record.partition)
        producer.flush(60)  # aborting purges unsent records: an aborted record must reach the log to test anything
        producer.abort_transaction(60)

    def load(self, spec: Any, gate: Any = None, grown: Any = None) -> Any:
        """The workload ``spec`` (batched, paced at its rate, its aborted transactions aborted; ``gate``: fed as the
        query reads, see :mod:`~streamcert.harness.run.feed`; ``grown``: waits for the partitions the topic gains
        while the query runs): the :class:`~streamcert.harness.run.workload.Ledger`."""
        from streamcert.harness.run.workload import load_topic

        return load_topic(self.bootstrap, self.topic, spec, gate=gate, grown=grown)

    def load_open_loop(self, spec: Any, duration_s: float, users: int, workdir: Path) -> Any:
        """The workload produced by locust users at ``spec.rate`` for ``duration_s`` (open loop): a
        :class:`~streamcert.harness.run.load.LoadResult`."""
        from streamcert.harness.run.load import run_open_loop

        return run_open_loop(self.bootstrap, self.topic, spec, duration_s, users, workdir)

    def close(self) -> None:
        for producer in (self._idempotent, self._transactional):
            if producer is not None:
                producer.flush(10)
        self._idempotent = self._transactional = None

    def _write_committed(self, records: Sequence[InputRecord]) -> None:
        """Each record into its partition, then wait for every acknowledgement (one producer for every write)."""
        from confluent_kafka import KafkaError, KafkaException, Producer

        if self._idempotent is None:
            self._idempotent = Producer(client_conf(self.bootstrap, **{"linger.ms": 5, "acks": "all",
                                                                       "enable.idempotence": True}))
        failures: list = []

        def delivered(error, _message) -> None:
            if error is not None:
                failures.append(error)

        for record in records:
            produce_record(self._idempotent, self.topic, record.value, record.key, record.partition, delivered,
                           full_queue_timeout=60.0, drain_s=0.05)
        if self._idempotent.flush(60) or failures:
            raise KafkaException(failures[0] if failures else KafkaError(KafkaError._MSG_TIMED_OUT))

    def _aborting_producer(self):
        from confluent_kafka import Producer

        if self._transactional is None:
            self._transactional = Producer(client_conf(self.bootstrap, **{
                "transactional.id": f"streamcert-writer-{self.topic}-{uuid.uuid4().hex[:8]}", "acks": "all",
                "enable.idempotence": True}))
            self._transactional.init_transactions(60)
        return self._transactional
