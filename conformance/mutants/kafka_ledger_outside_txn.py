"""MUTANT, BROKEN ON PURPOSE: a Kafka 2PC sink that writes its decision record outside the copy's transaction.

The bug: the driver writes the batch's decision record with a producer of its own (committed at once) before the
copy's transaction, instead of in it. A driver that dies after the record and before the copy commits leaves the
batch marked done with its rows never copied; the replay sees the record and skips the batch. SNK-1 and SNK-3 must
catch it, as lost records: a kill inside the commit (``commit_in_flight``, over the slowed broker link) lands
between the two.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Producer

from streamcert.connectors.declarations import KafkaTwoPhaseSinkUnderTest
from streamcert.connectors.kafka_client import client_conf
from streamcert.connectors.kafka_sink import KafkaStreamWriter, KafkaTwoPhaseSink
from streamcert.connectors.kafka_write_ahead import (_ALREADY_DONE, _staging_reader, _copy_range,
                                                     _transaction, committer_transactional_id, last_committed_batch)

__all__ = ["CONNECTOR"]


def _commit_batch(options, batch_id: int, staged: list) -> None:
    deadline = time.monotonic() + options.copy_timeout_ms / 1000
    decided = last_committed_batch(options, timeout=max(1.0, deadline - time.monotonic()))
    if decided is not None and decided >= batch_id:
        return
    # BUG: the decision is committed on its own, before the rows it stands for
    ledger = Producer(client_conf(options.bootstrap_servers, **{"enable.idempotence": True}))
    record = {"sink": options.sink_id, "batch": batch_id, "ranges": len(staged), "committed_at": time.time()}
    ledger.produce(options.decision_log_topic, json.dumps(record).encode(), options.sink_id.encode(), partition=0)
    ledger.flush(30)

    def body(producer: Producer) -> Any:
        consumer = _staging_reader(options)
        try:
            for rng in sorted(staged, key=lambda r: (r.partition, r.first_offset)):
                _copy_range(consumer, producer, options, rng, deadline)
        finally:
            consumer.close()
        producer.flush(max(1.0, deadline - time.monotonic()))
        return None

    result = _transaction(options, committer_transactional_id(options.sink_id), {"partitioner": "murmur2_random"},
                          f"commit of batch {batch_id}", body, deadline)
    assert result is not _ALREADY_DONE


class _Writer(KafkaStreamWriter):
    commit_batch = staticmethod(_commit_batch)


class _Sink(KafkaTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-kafka-ledger-outside-txn"


class LedgerOutsideTransaction(KafkaTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-kafka-ledger-outside-txn"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = LedgerOutsideTransaction()
