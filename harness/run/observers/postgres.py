"""The PostgreSQL observer: polls a sink's output table for rows that became visible (committed).

A row of a prepared transaction becomes visible only at ``COMMIT PREPARED``, possibly after rows of later
transactions, so neither insertion order nor ``xmin`` says which rows are new: each round compares the table's
row ids (``ctid``; the sinks only insert) with those already seen and fetches the values of the new ones.

Order: a table's rows have none, only their transactions' commits do. With ``track_commit_timestamp`` on (the
local and container servers), the rows of one round are ordered by their transaction's commit time, and the rows
of one transaction are visible at once; without it, all of a round's rows are (the poll, every 0.2 s, is the
resolution). Heap order (``ctid``) says nothing: a later transaction may fill space vacuum freed before an earlier
one's rows, and one transaction's rows need not lie in the order it inserted them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from streamcert.harness.errors import ConfigurationError
from streamcert.harness.run.observers.base import VISIBILITY_ORDER, Observer, OutputTarget
from streamcert.harness.stack.postgres import HARNESS_APPLICATION

__all__ = ["PostgresObserver"]


class PostgresObserver(Observer):
    """Reads column ``value`` (and ``key`` when the table has one) of table ``target.name``; location: ``ctid``."""

    kind = "postgres"
    idle_s = 0.2

    def __init__(self, target: OutputTarget, unpack=None) -> None:
        super().__init__(target, unpack)
        if not target.postgres_dsn:
            raise ConfigurationError(f"Output table {target.name!r} is in PostgreSQL, and this run has none.",
                                     hint="Use a provider with PostgreSQL (local, testcontainers, or "
                                     "STREAMCERT_POSTGRES_DSN with external).")
        self._connection = None
        self._seen: set[str] = set()
        self._has_key: bool | None = None
        #: Whether the server keeps commit times (``track_commit_timestamp``); asked in the first round.
        self.orders_commits: bool | None = None
        self._mark_connection = None

    @classmethod
    def output_name(cls, stem: str, run_id: str, workdir: Path) -> str:
        """A table name PostgreSQL takes unquoted: lower case letters, digits and underscores."""
        return f"out_{re.sub(r'[^a-z0-9_]', '_', stem.lower())}_{run_id}"

    def visible_mark(self) -> int:
        """The table's committed row count, asked on a connection of its own (a few milliseconds), so a fault timed
        by the output sees a commit at once; the rounds' count while the table is missing or the database away."""
        import psycopg
        from psycopg import sql

        try:
            if self._mark_connection is None or self._mark_connection.closed:
                self._mark_connection = psycopg.connect(self.target.mark_address or self.target.postgres_dsn,
                                                        autocommit=True, connect_timeout=5,
                                                        application_name=HARNESS_APPLICATION)
            row = self._mark_connection.execute(
                sql.SQL("select count(*) from {}").format(sql.Identifier(self.target.name))).fetchone()
            return int(row[0])
        except psycopg.Error:
            self._close_mark()
            return self.count()

    def _close_mark(self) -> None:
        if self._mark_connection is not None:
            try:
                self._mark_connection.close()
            finally:
                self._mark_connection = None

    def stop(self) -> None:
        super().stop()
        self._close_mark()

    def _connect(self) -> None:
        """Connect in the first round, and again after a transient error (not in ``_open``: the database may be
        down when the observer starts)."""
        import psycopg

        self._connection = psycopg.connect(self.target.postgres_dsn, autocommit=True, connect_timeout=10,
                                           application_name=HARNESS_APPLICATION)

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _transient(self, error: Exception) -> bool:
        """A lost or refused connection (the database killed or cut off): reconnect in the next round."""
        import psycopg

        if not isinstance(error, psycopg.OperationalError):
            return False
        self._close()
        return True

    def _read_new(self) -> pd.DataFrame | None:
        import psycopg
        from psycopg import sql

        if self._connection is None:
            self._connect()
        table = sql.Identifier(self.target.name)
        try:
            ids = [row[0] for row in self._connection.execute(sql.SQL("select ctid::text from {}").format(table))]
        except psycopg.errors.UndefinedTable:  # the sink creates it when its query starts
            return None
        new = [ctid for ctid in ids if ctid not in self._seen]
        if not new:
            return None
        if self._has_key is None:
            self._has_key = self._column_exists("key")
        if self.orders_commits is None:
            self.orders_commits = self._connection.execute("show track_commit_timestamp").fetchone()[0] == "on"
        # the commit time in microseconds (0 when unknown: then the round's rows are tied)
        committed = sql.SQL("coalesce((extract(epoch from pg_xact_commit_timestamp(xmin)) * 1000000)::bigint, 0)"
                            if self.orders_commits else "0")
        columns = sql.SQL(", key" if self._has_key else "")
        rows = self._connection.execute(
            sql.SQL("select ctid::text, {}, value{} from {} where ctid = any(%s::tid[])").format(
                committed, columns, table), (new,)).fetchall()
        self._seen.update(row[0] for row in rows)
        return pd.DataFrame({"ctid": [row[0] for row in rows], VISIBILITY_ORDER: [row[1] for row in rows],
                             "value": [bytes(row[2]) for row in rows],
                             **({"key": [row[3] for row in rows]} if self._has_key else {})})

    def _column_exists(self, column: str) -> bool:
        found = self._connection.execute(
            "select 1 from information_schema.columns where table_name = %s and column_name = %s",
            (self.target.name, column)).fetchone()
        return found is not None

    @property
    def carries_keys(self) -> bool:  # type: ignore[override]
        return bool(self._has_key)
