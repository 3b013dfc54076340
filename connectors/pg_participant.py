"""PostgreSQL as a two-phase-commit participant and as the decision log.

Prepared transactions (``PREPARE TRANSACTION`` / ``COMMIT PREPARED`` / ``ROLLBACK PREPARED``)
survive connection loss and server restarts, so a transaction prepared by an executor
can be committed later by the driver, from another connection, even after a crash.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql

from .twophase import DecisionLog, Participant, TxnId

__all__ = ["DECISIONS_TABLE", "MARKERS_TABLE", "PostgresSession", "PostgresParticipant", "PostgresDecisionLog",
           "prepare_rows", "arrow_rows", "ensure_table", "SPARK_TO_PG"]

DECISIONS_TABLE = "streamcert_2pc_decisions"
#: One row per prepared transaction, written inside it: after COMMIT PREPARED says "no such transaction",
#: this row tells "already committed" (present) from "rolled back, rows lost" (absent).
MARKERS_TABLE = "streamcert_2pc_txns"
SPARK_TO_PG = {"string": "text", "binary": "bytea", "bigint": "bigint", "int": "integer", "smallint": "smallint",
               "double": "double precision", "float": "real", "boolean": "boolean", "timestamp": "timestamptz",
               "date": "date"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _ident(name: str) -> sql.Identifier:
    if not _IDENT.fullmatch(name):
        raise ValueError(f"{name!r} is not a plain SQL identifier")
    return sql.Identifier(name)


def ensure_table(dsn: str, table: str, columns: Sequence[tuple[str, str]]) -> None:
    """Create ``table`` with ``(name, spark type)`` columns unless it exists; and the decision log."""
    column_sql = sql.SQL(", ").join(
        sql.SQL("{} {}").format(_ident(name), sql.SQL(SPARK_TO_PG[kind])) for name, kind in columns)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create table if not exists {} ({})").format(_ident(table), column_sql))
        conn.execute(sql.SQL(
            "create table if not exists {} (sink_id text not null, batch_id bigint not null, "
            "txn_ids text[] not null, decided_at timestamptz not null default now(), "
            "primary key (sink_id, batch_id))").format(_ident(DECISIONS_TABLE)))
        conn.execute(sql.SQL("create table if not exists {} (gid text primary key)").format(_ident(MARKERS_TABLE)))


def arrow_rows(batches: Iterable[Any]) -> Iterator[tuple]:
    """Executor: the rows of Arrow record batches as tuples of Python values, columns in the batch's order."""
    for batch in batches:
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def prepare_rows(dsn: str, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], txn: TxnId,
                 session: "PostgresSession | None" = None) -> int:
    """Executor side: write ``rows`` in one transaction and PREPARE it as ``txn``; return the row count. On the
    ``session``'s connection when given (a task's decision lookup went through it: one connection a task, not two),
    else on a connection of its own."""
    if session is None:
        with psycopg.connect(dsn) as conn:
            return _copy_and_prepare(conn, table, columns, rows, txn)
    conn = session.connection()
    conn.autocommit = False  # the rows and their marker are one transaction, prepared, never committed here
    count = _copy_and_prepare(conn, table, columns, rows, txn)
    conn.autocommit = True  # PREPARE TRANSACTION ended it: the session is idle again
    return count


def _copy_and_prepare(conn: psycopg.Connection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                      txn: TxnId) -> int:
    count = 0
    copy_sql = sql.SQL("copy {} ({}) from stdin").format(_ident(table), sql.SQL(", ").join(_ident(c) for c in columns))
    with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
    # the marker and the prepare in one round trip (one simple query, values inlined as literals)
    conn.execute(sql.SQL("insert into {} values ({}); prepare transaction {}").format(
        _ident(MARKERS_TABLE), sql.Literal(str(txn)), sql.Literal(str(txn))))
    return count


#: Idle connections kept by this process for its next session, by DSN (see :class:`PostgresSession`).
_KEPT: dict[str, list[psycopg.Connection]] = {}
_KEPT_LOCK = threading.Lock()


class PostgresSession:
    """One autocommit connection that a driver's commit or abort, or a task's lookup and prepare, does all its work
    on, opened at first use.

    A batch's commit asks for the prepared transactions twice, reads and writes the decision, and commits each
    task's transaction: a connection each (through the network's proxy) cost more than the statements. A
    connection that fails fails the commit, which is retried whole with a new session (:meth:`close` drops it).

    ``keep``: a session that ends without an error hands its connection, idle, to this process's next session of
    the same DSN instead of closing it. Spark reuses its Python workers and the process of its commits, and a new
    connection costs ~5 round trips (TLS asked, startup, password exchange) and a server process. A kept connection
    that died meanwhile (the server restarted) fails its first statement with the OperationalError the callers
    retry on a new connection.
    """

    def __init__(self, dsn: str, keep: bool = False) -> None:
        self.dsn = dsn
        self.keep = keep
        self._connection: psycopg.Connection | None = None

    def connection(self) -> psycopg.Connection:
        if self._connection is None:
            self._connection = (self._kept() if self.keep else None) or psycopg.connect(self.dsn, autocommit=True)
        return self._connection

    def _kept(self) -> psycopg.Connection | None:
        with _KEPT_LOCK:
            idle = _KEPT.get(self.dsn, [])
            while idle:
                connection = idle.pop()
                if _reusable(connection):
                    return connection
                connection.close()
        return None

    def close(self) -> None:
        """Close the connection (idempotent; nothing to do if it was never opened)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __enter__(self) -> "PostgresSession":
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        connection = self._connection
        if self.keep and exc_type is None and connection is not None and _reusable(connection):
            self._connection = None
            with _KEPT_LOCK:
                _KEPT.setdefault(self.dsn, []).append(connection)
            return
        self.close()


def _reusable(connection: psycopg.Connection) -> bool:
    """Open, in autocommit, and idle: no transaction of an earlier session left open on it."""
    return (not connection.closed and connection.autocommit
            and connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)


@contextlib.contextmanager
def _connected(dsn: str, session: PostgresSession | None) -> Iterator[psycopg.Connection]:
    """The session's connection (left open), or a connection of its own for this one call."""
    if session is not None:
        yield session.connection()
        return
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


class PostgresParticipant(Participant):
    def __init__(self, dsn: str, session: PostgresSession | None = None) -> None:
        self.dsn = dsn
        self.session = session

    def prepared(self, sink_id: str) -> list[str]:
        with _connected(self.dsn, self.session) as conn:
            rows = conn.execute("select gid from pg_prepared_xacts where gid like %s and database = current_database()"
                                " order by prepared", (TxnId.prefix(sink_id) + "%",)).fetchall()
        return [row[0] for row in rows]

    def _finish(self, verb: str, txn_id: str) -> bool:
        """Run ``verb`` on the prepared transaction; False when it was no longer prepared."""
        with _connected(self.dsn, self.session) as conn:
            try:
                conn.execute(sql.SQL(verb + " {}").format(sql.Literal(txn_id)))
            except psycopg.errors.UndefinedObject:
                return False
        return True

    def commit_prepared(self, txn_id: str) -> None:
        if self._finish("commit prepared", txn_id):
            return
        with _connected(self.dsn, self.session) as conn:
            committed = conn.execute(sql.SQL("select 1 from {} where gid = %s").format(_ident(MARKERS_TABLE)),
                                     (txn_id,)).fetchone()
        if committed is None:
            # Never silent: a decided transaction that is gone without having committed means lost rows.
            raise RuntimeError(f"Prepared transaction {txn_id} was decided but rolled back before it could commit: "
                               "its rows are lost (a bug in the sink's protocol, or someone ran ROLLBACK PREPARED)")

    def rollback_prepared(self, txn_id: str) -> None:
        self._finish("rollback prepared", txn_id)


class PostgresDecisionLog(DecisionLog):
    def __init__(self, dsn: str, session: PostgresSession | None = None) -> None:
        self.dsn = dsn
        self.session = session

    def record(self, sink_id: str, batch_id: int, txn_ids: list[str]) -> list[str]:
        with _connected(self.dsn, self.session) as conn:
            conn.execute(sql.SQL("insert into {} (sink_id, batch_id, txn_ids) values (%s, %s, %s) "
                                 "on conflict do nothing").format(_ident(DECISIONS_TABLE)),
                         (sink_id, batch_id, list(txn_ids)))
        decision = self.decision(sink_id, batch_id)
        assert decision is not None
        return decision

    def decision(self, sink_id: str, batch_id: int) -> list[str] | None:
        with _connected(self.dsn, self.session) as conn:
            row = conn.execute(sql.SQL("select txn_ids from {} where sink_id = %s and batch_id = %s").format(
                _ident(DECISIONS_TABLE)), (sink_id, batch_id)).fetchone()
        return None if row is None else list(row[0])
