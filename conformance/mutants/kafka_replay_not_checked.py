"""MUTANT, BROKEN ON PURPOSE: a Kafka 2PC sink whose commit never asks the decision log about the batch.

The bug: the driver's ``commit(batchId)`` copies the staged rows and writes the decision record in one transaction,
as it should, but never reads the log first ("Spark commits each batch once"). Spark calls ``commit`` again for a
batch whose commit made it visible when the driver died before writing ``commits/N``: the replay copies the rows a
second time. SNK-1 and SNK-4 must catch it as duplicates; the kill that reaches it lands once the output grew and
Spark has not committed the batch (``output_visible``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Producer

from streamcert.connectors.declarations import KafkaTwoPhaseSinkUnderTest
from streamcert.connectors.kafka_sink import KafkaStreamWriter, KafkaTwoPhaseSink
from streamcert.connectors.kafka_write_ahead import (_staging_reader, _copy_range, _produce_all, _transaction,
                                                     committer_transactional_id)

__all__ = ["CONNECTOR"]


def _commit_batch(options, batch_id: int, staged: list) -> None:
    deadline = time.monotonic() + options.copy_timeout_ms / 1000

    def body(producer: Producer) -> Any:
        # BUG: no look at the decision log: a replayed commit copies again
        consumer = _staging_reader(options)
        try:
            rows = sum(_copy_range(consumer, producer, options, rng, deadline)
                       for rng in sorted(staged, key=lambda r: (r.partition, r.first_offset)))
        finally:
            consumer.close()
        entry = {"sink": options.sink_id, "batch": batch_id, "rows": rows, "ranges": len(staged),
                 "committed_at": time.time()}
        _produce_all(producer, options.decision_log_topic, 0, [(options.sink_id.encode(), json.dumps(entry).encode())],
                     None, None)
        producer.flush(max(1.0, deadline - time.monotonic()))
        return rows

    _transaction(options, committer_transactional_id(options.sink_id), {"partitioner": "murmur2_random"},
                 f"commit of batch {batch_id}", body, deadline)


class _Writer(KafkaStreamWriter):
    commit_batch = staticmethod(_commit_batch)


class _Sink(KafkaTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-kafka-replay-not-checked"


class ReplayNotChecked(KafkaTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-kafka-replay-not-checked"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = ReplayNotChecked()
