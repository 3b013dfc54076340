"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink that commits the prepared transactions before it records the
decision.

The bug: the driver's ``commit(batchId)`` runs ``COMMIT PREPARED`` for each transaction the tasks prepared, and only
then writes the batch's decision ("commit first, note it later": the order looks harmless when nothing crashes).
A driver that dies between the two leaves the rows committed and no decision: Spark replays the batch, its tasks
find no decision, prepare the rows again, and the replay commits a second copy. SNK-1 must catch it as duplicates;
the kill that reaches it lands inside the commit (``commit_in_flight``, ``output_visible``), a window the slowed
database link makes a round trip wide per transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink
from streamcert.connectors.twophase import Coordinator, in_commit_order

__all__ = ["CONNECTOR"]


class _Coordinator(Coordinator):
    def commit(self, batch_id: int, txn_ids: Iterable[str]) -> list[str]:
        self.recover(before_batch=batch_id)
        decided = self.log.decision(self.sink_id, batch_id)
        ordered = decided if decided is not None else in_commit_order(set(txn_ids))
        for txn in ordered:  # BUG: the rows become visible before the decision that would stop a replay
            self.participant.commit_prepared(txn)
        decision = self.log.record(self.sink_id, batch_id, ordered)
        self._roll_back_orphans(up_to_batch=batch_id)
        return decision


class _Writer(PostgresStreamWriter):
    coordinator_class = _Coordinator


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-commit-before-decision"


class CommitBeforeDecision(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-commit-before-decision"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = CommitBeforeDecision()
