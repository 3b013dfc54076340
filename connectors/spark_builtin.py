"""Spark's own connectors declared for certification (the first third parties).

So far Spark's file sink (Parquet with its ``_spark_metadata`` log): exactly-once by design, the sink the
harness pairs with a source under test. ``write`` runs in the driver process when the query is built.
"""

from __future__ import annotations

from typing import Any

from streamcert.spi.connector import QueryContext, SinkConnector

__all__ = ["SparkFileSink"]


class SparkFileSink(SinkConnector):
    """``spark-files``: ``writeStream.format("parquet")`` into the folder ``context.output``."""

    name = "spark-files"
    output_kind = "files"
    claims = frozenset({"SNK-1", "SNK-2", "SNK-3", "SNK-4", "SNK-5", "SNK-6", "SNK-7", "SNK-8", "exactly-once",
                        "GEN-1", "GEN-2", "GEN-3"})

    def write(self, frame: Any, context: QueryContext) -> Any:
        columns = [c for c in ("key", "value", "partition", "offset") if c in frame.columns]
        return (frame.select(*columns).writeStream.format("parquet").option("path", context.output)
                .option("checkpointLocation", context.checkpoint))
