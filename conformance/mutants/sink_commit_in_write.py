"""MUTANT, BROKEN ON PURPOSE: a PostgreSQL sink that commits in ``write()``.

The bug: each task inserts its rows and COMMITs them (instead of PREPARE TRANSACTION) before the driver decides
anything. A task attempt that fails after writing, a zombie attempt whose executor Spark gave up on, and every
batch Spark replays, write the rows again. SNK-2 (a failed attempt's writes are never visible) and SNK-6 (zombie
attempts are fenced) must catch it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

from streamcert.connectors.declarations import PostgresTwoPhaseSinkUnderTest
from streamcert.connectors.pg_participant import arrow_rows
from streamcert.connectors.pg_sink import PostgresStreamWriter, PostgresTwoPhaseSink, PreparedMessage

__all__ = ["CONNECTOR"]


class _Writer(PostgresStreamWriter):
    def write(self, iterator: Iterator) -> PreparedMessage:
        rows = 0
        with psycopg.connect(self.dsn) as conn:  # BUG: committed at the end of the task, not prepared
            copy_sql = sql.SQL("copy {} ({}) from stdin").format(
                sql.Identifier(self.table), sql.SQL(", ").join(sql.Identifier(c) for c in self.columns))
            with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
                for row in arrow_rows(iterator):
                    copy.write_row(row)
                    rows += 1
        return PreparedMessage([], rows)


class _Sink(PostgresTwoPhaseSink):
    writer_class = _Writer

    @classmethod
    def name(cls) -> str:
        return "mutant-sink-commit-in-write"


class CommitInWrite(PostgresTwoPhaseSinkUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-sink-commit-in-write"

    def datasource(self) -> Any:
        return _Sink


CONNECTOR = CommitInWrite()
