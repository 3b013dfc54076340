"""Lakehouse tables as third-party connectors under test: Delta Lake's streaming sink and source, Apache Iceberg's
streaming sink, each declared as any third party would, with the table as its external system
(:mod:`~streamcert.connectors.delta_table`, :mod:`~streamcert.connectors.iceberg_table`).

Their documentation says both sinks are exactly-once for streaming appends (Delta records each batch's
``txn(appId = query id, version = batch id)`` in the commit that adds its files; Iceberg's sink skips a batch whose id
a snapshot of the same query already carries). Neither refuses options it does not know, as Spark's file sources do
not: GEN-2 is waived with that reason rather than claimed and failed. The tables are folders on the local
filesystem: no server, no network link (SNK-7 and the slowed-link moments do not apply). The methods run in the
query's driver when it is built.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.delta_table import DeltaTableSystem, delta_packages
from streamcert.connectors.iceberg_table import ICEBERG_PACKAGES, IcebergTableSystem
from streamcert.spi.connector import QueryContext, SinkConnector, SourceConnector

__all__ = ["DELTA", "ICEBERG", "DeltaSink", "DeltaSource", "IcebergSink"]

#: One system for every Delta connector of a certification (nothing runs: tables are folders of each run).
DELTA = DeltaTableSystem()
#: One Hadoop catalog for every Iceberg connector of a certification (its warehouse: a folder of the stack's).
ICEBERG = IcebergTableSystem()

_NO_LINK = "the table is a folder on the local filesystem: there is no server or network link to fault"
_NO_OPTION_CHECK = ("it takes options it does not know without a word, as Spark's file sources do (documented "
                    "behaviour): an unknown option is not refused")
_SNK = frozenset({"SNK-1", "SNK-2", "SNK-3", "SNK-4", "SNK-5", "SNK-6", "SNK-8", "GEN-1", "GEN-3", "exactly-once"})


class DeltaSink(SinkConnector):
    """``delta-sink``: ``writeStream.format("delta")`` appending ``key`` and ``value`` to the table at
    ``context.output``."""

    name = "delta-sink"
    output_system = DELTA
    spark_packages = delta_packages()
    spark_versions = ("4.1",)
    claims = _SNK
    unclaimed = {"SNK-7": _NO_LINK, "GEN-2": _NO_OPTION_CHECK}

    def write(self, frame: Any, context: QueryContext) -> Any:
        return (frame.select("key", "value").writeStream.format("delta").outputMode("append")
                .options(**context.connector_options).option("checkpointLocation", context.checkpoint)
                .option("path", context.output))


class DeltaSource(SourceConnector):
    """``delta-source``: ``readStream.format("delta")`` of the table at ``context.input_topic``, each batch at most
    ``max_records_per_batch`` records: ``maxFilesPerTrigger`` of that many records over the harness's records per
    write (``input_records_per_write``: each write commits one file)."""

    name = "delta-source"
    input_system = DELTA
    spark_packages = delta_packages()
    spark_versions = ("4.1",)
    claims = frozenset({"SRC-1", "SRC-2", "SRC-6", "SRC-7", "SRC-9", "GEN-1", "GEN-3", "exactly-once",
                        "read_committed", "admission-control"})
    unclaimed = {"SRC-3": "a table has no partitions to assign to reader tasks",
                 "SRC-4": "not yet planned for a table: the rescale run adds Kafka partitions while it runs",
                 "SRC-5": "a table has no partitions to add while the query runs",
                 "SRC-8": _NO_LINK, "SRC-10": "a table has no partitions to assign to reader tasks",
                 "SRC-11": "a table has no partitions whose event times could drift apart",
                 "GEN-2": _NO_OPTION_CHECK}

    def read(self, spark: Any, context: QueryContext) -> Any:
        per_file = max(1, int(context.option("input_records_per_write", 100)))
        files = max(1, int(context.option("max_records_per_batch", 1000)) // per_file)
        return (spark.readStream.format("delta").option("maxFilesPerTrigger", str(files))
                .options(**context.connector_options).load(context.input_topic))


class IcebergSink(SinkConnector):
    """``iceberg-sink``: ``writeStream.format("iceberg")`` appending ``key`` and ``value`` to the table
    ``context.output`` (``streamcert.db.t_<run>`` of a Hadoop catalog), created when the query is first built."""

    name = "iceberg-sink"
    output_system = ICEBERG
    spark_packages = ICEBERG_PACKAGES
    spark_versions = ("4.1",)
    claims = _SNK
    unclaimed = {"SNK-7": _NO_LINK, "GEN-2": _NO_OPTION_CHECK}

    def write(self, frame: Any, context: QueryContext) -> Any:
        frame.sparkSession.sql(f"CREATE TABLE IF NOT EXISTS {context.output} (key BINARY, value BINARY) USING iceberg")
        return (frame.select("key", "value").writeStream.format("iceberg").outputMode("append")
                .options(**context.connector_options).option("checkpointLocation", context.checkpoint)
                .option("path", context.output))
