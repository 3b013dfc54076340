"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL 2PC sink whose retried prepare sends only what the lost try had not sent.

The bug: a task's prepare that loses its connection is retried (as the reference does), but the retry resumes the
rows where the lost try's COPY stopped reading them ("those rows reached the server already"), and prepares the
rest under the new transaction id. The lost try's transaction died with its connection, so the rows it had sent
are in no prepared transaction: lost. Only a connection cut while a task's COPY or prepare is in flight shows it;
a cut anywhere else (the driver's commit, a task's lookup, between batches) is retried as the reference would.
SNK-7 must catch it: its network run cuts the sink's link while the tasks write, with a statement in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_participant import PostgresDecisionLog, PostgresSession, arrow_rows, prepare_rows
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink, PreparedMessage, _retrying
from streamcert.connectors.twophase import TxnId

__all__ = ["CONNECTOR"]


class _Writer(PostgresStreamWriter):
    def write(self, iterator: Iterator) -> PreparedMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        with PostgresSession(self.dsn, keep=True) as session:
            decided = _retrying(f"the decision lookup of batch {batch_id}", self.retry_timeout_ms,
                                lambda: PostgresDecisionLog(self.dsn, session).decision(self.sink_id, batch_id),
                                session)
            if decided is not None:
                return PreparedMessage(skipped_replay=True)
            rows = list(arrow_rows(iterator))
            sent = 0
            txns: list[TxnId] = []

            def unsent() -> Iterator:
                nonlocal sent
                for row in rows[sent:]:  # BUG: a retry skips the rows the lost try handed to its COPY
                    yield row
                    sent += 1

            def prepare() -> int:
                txns.append(TxnId.new(self.sink_id, batch_id, context.partitionId(), context.attemptNumber()))
                return prepare_rows(self.dsn, self.table, self.columns, unsent(), txns[-1], session)

            count = _retrying(f"the prepare of batch {batch_id}", self.retry_timeout_ms, prepare, session)
        return PreparedMessage([str(txns[-1])], count)


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-retry-resends-tail"


class RetryResendsTail(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-retry-resends-tail"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = RetryResendsTail()
