"""An exactly-once ``foreachBatch`` sink into PostgreSQL: each micro-batch is appended in one transaction together
with a marker row ``(sink_id, batch_id)``; a batch whose marker exists is skipped. Spark replays a batch after a
failure with the same batch id and the same rows, so the replay writes nothing twice.

``write_batch`` runs in the Spark driver, once per micro-batch (``foreachBatch``).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

__all__ = ["IdempotentPostgresWriter"]


class IdempotentPostgresWriter:
    """Appends each micro-batch's ``value`` column to ``table``, exactly once per ``(sink_id, batch id)``."""

    def __init__(self, dsn: str, table: str, sink_id: str) -> None:
        if not sink_id:
            raise ValueError("sink_id must not be empty: it keeps one query's batches apart from another's")
        self.dsn, self.table, self.sink_id = dsn, table, sink_id

    def write_batch(self, batch: Any, batch_id: int) -> None:
        values = [bytes(row["value"]) for row in batch.select("value").collect()]
        with psycopg.connect(self.dsn) as connection:  # one transaction: rows and marker, or neither
            connection.execute(sql.SQL("create table if not exists {} (batch_id bigint, value bytea)")
                               .format(sql.Identifier(self.table)))
            connection.execute("create table if not exists acme_batches (sink_id text, batch_id bigint, "
                               "primary key (sink_id, batch_id))")
            marked = connection.execute("insert into acme_batches values (%s, %s) on conflict do nothing",
                                        (self.sink_id, batch_id)).rowcount
            if not marked:  # a replay of a batch this sink committed: nothing to write
                return
            with connection.cursor().copy(sql.SQL("copy {} (batch_id, value) from stdin")
                                          .format(sql.Identifier(self.table))) as copy:
                for value in values:
                    copy.write_row((batch_id, value))
