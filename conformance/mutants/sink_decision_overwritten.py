"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink that does not recognise a replayed batch.

The bug: tasks prepare a replayed batch again (no look at the decision log), and the driver records the batch's
decision with an upsert, so the replay's transactions replace the decision that was already committed and are
committed too: a batch replayed after its commit (a driver killed after the decision, before Spark's
``commits/N``) is written twice. SNK-3 and SNK-4 must catch it, and SNK-1 and SNK-5, judged on the same kills.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_participant import DECISIONS_TABLE, PostgresDecisionLog, arrow_rows, prepare_rows
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink, PreparedMessage
from streamcert.connectors.twophase import TxnId

__all__ = ["CONNECTOR"]


class _Log(PostgresDecisionLog):
    def record(self, sink_id: str, batch_id: int, txn_ids: list[str]) -> list[str]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:  # BUG: upsert, the last attempt wins
            conn.execute(sql.SQL("insert into {} (sink_id, batch_id, txn_ids) values (%s, %s, %s) on conflict "
                                 "(sink_id, batch_id) do update set txn_ids = excluded.txn_ids")
                         .format(sql.Identifier(DECISIONS_TABLE)), (sink_id, batch_id, list(txn_ids)))
        return list(txn_ids)


class _Writer(PostgresStreamWriter):
    decision_log_class = _Log

    def write(self, iterator: Iterator) -> PreparedMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        # BUG: no look at the decision log: a replayed batch is prepared again
        txn = TxnId.new(self.sink_id, batch_id, context.partitionId(), context.attemptNumber())
        rows = prepare_rows(self.dsn, self.table, self.columns, arrow_rows(iterator), txn)
        return PreparedMessage([str(txn)], rows)


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-decision-overwritten"


class DecisionOverwritten(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-decision-overwritten"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = DecisionOverwritten()
