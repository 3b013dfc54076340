"""MUTANT, BROKEN ON PURPOSE: a Kafka 2PC sink that writes its decision record in a transaction of its own, after
the copy's transaction committed.

The bug: the driver copies the batch's staged rows to the output in one transaction, commits it, and then records
the batch in the decision log in a second one ("the ledger is bookkeeping: write it once the data is safe"). A
driver that dies between the two commits leaves the rows visible and the batch unrecorded; the replay finds no
record and copies the rows a second time. SNK-1 and SNK-4 must catch it as duplicates; the kill that reaches it
lands once the output grew and Spark has not committed the batch (``output_visible``), a window the slowed broker
link keeps open for a round trip or more.
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Producer

from streamcert.connectors.declarations import KafkaTwoPhaseSinkUnderTest
from streamcert.connectors.kafka_sink import KafkaStreamWriter, KafkaTwoPhaseSink
from streamcert.connectors.kafka_write_ahead import (_ALREADY_DONE, _staging_reader, _copy_range, _produce_all,
                                                     _transaction, committer_transactional_id, last_committed_batch)

__all__ = ["CONNECTOR"]


def _commit_batch(options, batch_id: int, staged: list) -> None:
    deadline = time.monotonic() + options.copy_timeout_ms / 1000
    decided = last_committed_batch(options, timeout=max(1.0, deadline - time.monotonic()))
    if decided is not None and decided >= batch_id:
        return

    def copy(producer: Producer) -> Any:
        consumer = _staging_reader(options)
        try:
            return sum(_copy_range(consumer, producer, options, rng, deadline)
                       for rng in sorted(staged, key=lambda r: (r.partition, r.first_offset)))
        finally:
            consumer.close()
            producer.flush(max(1.0, deadline - time.monotonic()))

    def record(producer: Producer) -> Any:
        entry = {"sink": options.sink_id, "batch": batch_id, "ranges": len(staged), "committed_at": time.time()}
        _produce_all(producer, options.decision_log_topic, 0, [(options.sink_id.encode(), json.dumps(entry).encode())],
                     None, None)
        producer.flush(max(1.0, deadline - time.monotonic()))
        return True

    transactional_id = committer_transactional_id(options.sink_id)
    rows = _transaction(options, transactional_id, {"partitioner": "murmur2_random"}, f"copy of batch {batch_id}",
                        copy, deadline)
    assert rows is not _ALREADY_DONE
    # BUG: the record that makes a replay a no-op commits on its own, after the rows it stands for
    _transaction(options, transactional_id, {"partitioner": "murmur2_random"}, f"record of batch {batch_id}", record,
                 deadline)


class _Writer(KafkaStreamWriter):
    commit_batch = staticmethod(_commit_batch)


class _Sink(KafkaTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-kafka-ledger-after-copy"


class LedgerAfterCopy(KafkaTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-kafka-ledger-after-copy"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = LedgerAfterCopy()
