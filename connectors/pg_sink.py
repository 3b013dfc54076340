"""The reference two-phase-commit sink for PostgreSQL: ``writeStream.format("streamcert-pg-2pc")``.

Options: ``dsn`` (libpq connection string), ``table`` (created from the stream's schema
if missing), ``sinkId`` (stable across restarts: it names the transactions and the
decisions). Where each part runs:

- ``streamWriter`` (driver; Spark builds it in a Python process for each batch's write and again for its commit):
  create the tables if missing, once per process;
- ``write`` (executors, one per task, Arrow batches): skip a batch whose decision is already recorded (a
  replay), else COPY the rows into one transaction and ``PREPARE TRANSACTION`` it under an id
  encoding (sink, batch, partition, attempt), on the lookup's connection; fault point ``pg-2pc.after-prepare``;
- ``commit`` (driver): first *recover* earlier batches (commit prepared transactions their
  recorded decision names, roll back the rest: after a restart this is where recovery happens),
  then record this batch's decision and ``COMMIT PREPARED`` each transaction it names (fault
  points ``pg-2pc.before-decision`` and ``pg-2pc.after-decision``); idempotent;
- ``abort`` (driver): roll back the attempt's prepared transactions.

Round trips to the database a batch (what a network fault's latency multiplies; measured on one batch of two tasks
through a Toxiproxy link with 100 ms on the answers, tasks one after the other, the sink's methods called without
Spark): the tables' check in both writers Spark builds a batch (a connection and three statements each),
two connections a task and a commit on a new connection took 3.7 s for the planning and tasks and 1.8 s for the
commit; the tables checked once per process, a task's lookup and prepare on one connection, and connections kept
by the process for its next task or commit: 1.0 s and 0.6-0.7 s. A task now asks five (lookup, begin, COPY, the
marker and the prepare in one query), a commit six (the prepared transactions twice, the decision written and
read, a COMMIT PREPARED per task).

A lost or refused connection (the database restarting, a network fault) is retried for up to ``retryTimeoutMs``
(60 s by default) in the driver's commit and abort, both idempotent, and in a task's prepare, which starts again
under a new transaction id (the rows are kept in the task until their transaction is prepared; an earlier try
that did prepare is an orphan the next commit rolls back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg

from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from streamcert.spi.errors import ConfigurationError
from streamcert.spi.fault_points import reached
from streamcert.spi.options import SPARK_WRITER_OPTIONS, OptionRules

from .pg_participant import (SPARK_TO_PG, PostgresDecisionLog, PostgresParticipant, PostgresSession, arrow_rows,
                             ensure_table, prepare_rows)
from .twophase import Coordinator, TxnId, validate_sink_id
from .worker_gc import freeze_imports

__all__ = ["SINK_NAME", "PostgresTwoPhaseSink", "PostgresStreamWriter", "PreparedMessage"]

SINK_NAME = "streamcert-pg-2pc"
_FAULT_POINTS = "pg-2pc"
_RULES = OptionRules({"dsn": "a libpq connection string (required)", "table": "the output table (required)",
                      "sinkId": "a stable id of 1-64 letters, digits, '_' or '-' (required)",
                      "retryTimeoutMs": "an integer >= 0: how long lost connections are retried (default 60000)"},
                     f"{SINK_NAME} sink", required=("dsn", "table", "sinkId"), spark_own=SPARK_WRITER_OPTIONS)
T = TypeVar("T")


def _retrying(what: str, timeout_ms: int, action: Callable[[], T], session: PostgresSession | None = None) -> T:
    """``action()``, again after a lost or refused connection (psycopg's OperationalError) until ``timeout_ms``;
    the ``session``'s connection, lost with it, is dropped before each new try."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            return action()
        except psycopg.OperationalError as exc:
            if session is not None:
                session.close()
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{SINK_NAME}: {what} failed: PostgreSQL did not answer within "
                                   f"retryTimeoutMs={timeout_ms} ({exc})") from exc
            time.sleep(0.5)


#: The tables this process made sure of, by (dsn, table, columns). Spark builds the writer in a Python process
#: every batch, twice (the write's planning and the commit): asked each time, the three statements and their
#: connection were about ten of a batch's ~50 round trips to the database.
_ENSURED: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()


def _ensure_table_once(dsn: str, table: str, kinds: list[tuple[str, str]], retry_timeout_ms: int) -> None:
    key = (dsn, table, tuple(kinds))
    if key in _ENSURED:
        return
    _retrying(f"creating table {table}", retry_timeout_ms, lambda: ensure_table(dsn, table, kinds))
    _ENSURED.add(key)


@dataclass
class PreparedMessage(WriterCommitMessage):
    """What a task tells the driver: the transactions it prepared (none for a skipped replay)."""

    txn_ids: list[str] = field(default_factory=list)
    rows: int = 0
    skipped_replay: bool = False


def _options(options) -> tuple[str, str, str]:
    """Driver: ``(dsn, table, sinkId)`` from Spark's option map; raise :class:`ConfigurationError` on a problem."""
    values = _RULES.read(dict(options))
    return values.text("dsn"), values.text("table"), validate_sink_id(values.text("sinkId"))


def _retry_timeout_ms(options) -> int:
    return int(_RULES.read(dict(options)).integer("retryTimeoutMs", 60000, 0))


class PostgresTwoPhaseSink(DataSource):
    #: the writer the driver builds (set below its class)
    writer_class: type["PostgresStreamWriter"]

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema, overwrite: bool) -> "PostgresStreamWriter":
        freeze_imports()
        dsn, table, sink_id = _options(self.options)
        return self.writer_class(dsn, table, sink_id, schema, _retry_timeout_ms(self.options))


class PostgresStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, dsn: str, table: str, sink_id: str, schema, retry_timeout_ms: int = 60000) -> None:
        self.dsn, self.table, self.sink_id = dsn, table, sink_id
        self.retry_timeout_ms = retry_timeout_ms
        self.columns = [f.name for f in schema.fields]
        kinds = [(f.name, f.dataType.simpleString()) for f in schema.fields]
        unsupported = [f"{name} {kind}" for name, kind in kinds if kind not in SPARK_TO_PG]
        if unsupported:
            raise ConfigurationError(f"The {SINK_NAME} sink cannot store column(s) {', '.join(unsupported)}.",
                                     hint=f"Supported Spark types: {', '.join(SPARK_TO_PG)}; cast the others.")
        _ensure_table_once(dsn, table, kinds, retry_timeout_ms)

    #: the protocol's parts (a subclass may change one, as the project's mutants do)
    coordinator_class = Coordinator
    participant_class = PostgresParticipant
    decision_log_class = PostgresDecisionLog

    def _coordinator(self, session: PostgresSession) -> Coordinator:
        return self.coordinator_class(self.sink_id, self.participant_class(self.dsn, session),
                                      self.decision_log_class(self.dsn, session), _FAULT_POINTS)

    def _in_session(self, action: Callable[[Coordinator], None]) -> Callable[[], None]:
        """``action`` on a coordinator whose every statement goes through one connection, kept for this process's
        next commit when ``action`` ends well, closed when it fails."""
        def run() -> None:
            with PostgresSession(self.dsn, keep=True) as session:
                action(self._coordinator(session))
        return run

    def write(self, iterator: Iterator) -> PreparedMessage:
        """Executor: prepare this task's rows under a transaction id naming the batch, partition and attempt."""
        from pyspark import TaskContext

        freeze_imports()
        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        with PostgresSession(self.dsn, keep=True) as session:  # the lookup and the prepare: one connection, kept
            decided = _retrying(f"the decision lookup of batch {batch_id}", self.retry_timeout_ms,
                                lambda: PostgresDecisionLog(self.dsn, session).decision(self.sink_id, batch_id),
                                session)
            if decided is not None:
                return PreparedMessage(skipped_replay=True)
            # Arrow batches, not Rows: Spark hands a Row-based writer each row pickled, which cost more than the COPY
            rows = list(arrow_rows(iterator))  # kept until prepared: a lost connection prepares them again
            txns: list[TxnId] = []

            def prepare() -> int:
                txns.append(TxnId.new(self.sink_id, batch_id, context.partitionId(), context.attemptNumber()))
                return prepare_rows(self.dsn, self.table, self.columns, rows, txns[-1], session)

            count = _retrying(f"the prepare of batch {batch_id}", self.retry_timeout_ms, prepare, session)
        reached(f"{_FAULT_POINTS}.after-prepare")
        return PreparedMessage([str(txns[-1])], count)

    def commit(self, messages, batchId: int) -> None:
        """Driver: record the decision for ``batchId``, then commit what it names (idempotent, so retried)."""
        freeze_imports()
        txns = [txn for message in messages if message is not None for txn in message.txn_ids]
        _retrying(f"the commit of batch {batchId}", self.retry_timeout_ms,
                  self._in_session(lambda coordinator: coordinator.commit(batchId, txns)))

    def abort(self, messages, batchId: int) -> None:
        freeze_imports()
        txns = [txn for message in messages if message is not None for txn in message.txn_ids]
        _retrying(f"the abort of batch {batchId}", self.retry_timeout_ms,
                  self._in_session(lambda coordinator: coordinator.abort(batchId, txns)))


# a subclass of the sink may build another writer (one step changed, as the project's mutants do)
PostgresTwoPhaseSink.writer_class = PostgresStreamWriter
