"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink that cleans up a batch's decision once the batch is committed.

The bug: after ``commit(messages, batchId)`` committed every prepared transaction, the driver deletes the batch's
row of the decision log ("its transactions are committed: the coordinator needs it no more", the housekeeping a
growing log invites). Spark writes ``commits/N`` only after the sink's commit returned; a driver that dies in
between replays batch N, its tasks find no decision, prepare the rows again, and the replayed commit commits a
second copy. A kill inside the commit (before the cleanup) finds the decision and passes: only a kill after the
commit returned and before ``commits/N`` exists shows it, which the held commit log makes a planned cell. SNK-4 must
catch it, and SNK-1 and SNK-5, judged on the same kills.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_participant import DECISIONS_TABLE
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink

__all__ = ["CONNECTOR"]


class _Writer(PostgresStreamWriter):
    def commit(self, messages, batchId: int) -> None:
        super().commit(messages, batchId)
        with psycopg.connect(self.dsn, autocommit=True) as conn:  # BUG: recovery of a replay needs this row
            conn.execute(sql.SQL("delete from {} where sink_id = %s and batch_id = %s")
                         .format(sql.Identifier(DECISIONS_TABLE)), (self.sink_id, batchId))


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-forgets-decision"


class ForgetsDecision(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-forgets-decision"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = ForgetsDecision()
