"""The declaration streamcert certifies: what the sink is, what it claims, how to build its part of the query."""

from __future__ import annotations

from typing import Any

from streamcert.spi.connector import QueryContext, SinkConnector

from acme_sinks.idempotent_pg import IdempotentPostgresWriter


class IdempotentPostgresSinkUnderTest(SinkConnector):
    """``acme-idempotent-pg``: exactly-once appends to a PostgreSQL table, read back as committed rows."""

    name = "acme-idempotent-pg"
    output_kind = "postgres"
    claims = frozenset({"SNK-1", "SNK-2", "SNK-3", "SNK-4", "SNK-5", "SNK-7", "SNK-8", "GEN-1", "GEN-3",
                        "exactly-once"})
    unclaimed = {
        "SNK-6": "tasks write nothing (the driver writes each batch), so there is no task attempt to fence",
        "GEN-2": "it takes no options of its own",
    }

    def write(self, frame: Any, context: QueryContext) -> Any:
        """Called in the driver when the query is built; ``context.postgres_dsn`` leads through the fault proxy."""
        writer = IdempotentPostgresWriter(context.postgres_dsn, context.output, sink_id=context.run_id)
        return (frame.select("value").writeStream.foreachBatch(writer.write_batch)
                .option("checkpointLocation", context.checkpoint))
