"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink that takes the orphans of a batch from the commit's messages.

The bug: before it commits, the driver rolls back every prepared transaction of the batch that the messages of this
``commit`` call do not name ("whatever this attempt did not produce is an orphan"), instead of every one the
*recorded decision* does not name. When Spark replays a batch whose decision was recorded and whose transactions
were not all committed (the driver died in between), the replay's tasks prepare nothing (the batch is decided),
its messages are empty, and the mutant rolls back the decided transactions: their rows are lost, and its
participant says nothing of it. SNK-1 and SNK-3 must catch it as lost records; the kill that reaches it lands in
the commit after the decision (``commit_in_flight``, ``output_visible``), over the slowed database link.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_participant import PostgresParticipant
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink
from streamcert.connectors.twophase import Coordinator, TxnId, in_commit_order

__all__ = ["CONNECTOR"]


class _Coordinator(Coordinator):
    def commit(self, batch_id: int, txn_ids: Iterable[str]) -> list[str]:
        self.recover(before_batch=batch_id)
        produced = set(txn_ids)
        for text in self.participant.prepared(self.sink_id):
            txn = TxnId.parse(text)
            if txn is not None and txn.batch_id == batch_id and text not in produced:
                self.participant.rollback_prepared(text)  # BUG: the messages, not the decision, say what is kept
        decision = self.log.record(self.sink_id, batch_id, in_commit_order(produced))
        for txn in in_commit_order(decision):
            self.participant.commit_prepared(txn)
        return decision


class _Participant(PostgresParticipant):
    def commit_prepared(self, txn_id: str) -> None:
        self._finish("commit prepared", txn_id)  # a transaction no longer prepared is taken as done


class _Writer(PostgresStreamWriter):
    coordinator_class = _Coordinator
    participant_class = _Participant


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-orphans-from-messages"


class OrphansFromMessages(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-orphans-from-messages"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = OrphansFromMessages()
