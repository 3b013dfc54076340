"""The reference two-phase-commit sink for Kafka: ``writeStream.format("streamcert-kafka-2pc")``.

Exactly-once into a Kafka topic by write-ahead (the protocol is in
:mod:`streamcert.connectors.kafka_write_ahead`); read the output with ``isolation.level=read_committed``.
Input columns: ``value`` (binary or string, required) and ``key`` (binary or string, optional);
output partitions follow the key with Java's murmur2, like Kafka's own clients. Options are in
:mod:`streamcert.connectors.kafka_sink_options`. Where each part runs:

- ``streamWriter`` (driver; Spark may build the writer again in each Python worker it uses):
  validate options and schema, check the output topic exists, create the staging and decision log topics;
- ``write`` (executors, one per task, Arrow batches): stage the rows in one committed staging
  transaction and return their range; fault point ``kafka-2pc.after-stage``;
- ``commit`` (driver): unless the decision log already holds the batch (a replay), copy the staged ranges
  to the output and write the decision record in one transaction; fault points
  ``kafka-2pc.before-copy``, ``kafka-2pc.before-commit`` (rows and decision record written, not
  committed) and ``kafka-2pc.after-commit`` (committed, Spark's ``commits/N`` not yet written);
- ``abort`` (driver): nothing to undo: staged rows no commit names are never copied.

One ``sinkId`` per checkpoint: the decision log says which batches of that sink are committed, so a new
checkpoint reusing an old sinkId would skip batches the old one committed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from streamcert.spi.errors import ConfigurationError

from .kafka_sink_options import SINK_NAME, SinkOptions, parse_sink_options
from .kafka_write_ahead import StagedRange, commit_batch, ensure_topics, stage_rows
from .twophase import TxnId
from .worker_gc import freeze_imports

__all__ = ["SINK_NAME", "KafkaTwoPhaseSink", "KafkaStreamWriter", "StagedMessage"]

_COLUMN_TYPES = {"key": ("binary", "string"), "value": ("binary", "string")}


@dataclass
class StagedMessage(WriterCommitMessage):
    """What a task tells the driver: where its committed staged rows are."""

    ranges: list[StagedRange] = field(default_factory=list)


def _check_schema(schema) -> None:
    kinds = {f.name: f.dataType.simpleString() for f in schema.fields}
    unknown = sorted(set(kinds) - set(_COLUMN_TYPES))
    bad = sorted(f"{name} {kind}" for name, kind in kinds.items()
                 if name in _COLUMN_TYPES and kind not in _COLUMN_TYPES[name])
    if "value" not in kinds or unknown or bad:
        seen = ", ".join(f"{name} {kind}" for name, kind in kinds.items())
        raise ConfigurationError(
            f"The {SINK_NAME} sink takes columns value (binary or string) and optionally key (binary or string); "
            f"the stream has: {seen}.",
            hint="Select or cast: df.selectExpr('CAST(key AS BINARY) AS key', 'CAST(value AS BINARY) AS value'), "
            "or to_json(struct(*)) AS value to keep several columns.")


class KafkaTwoPhaseSink(DataSource):
    #: the writer the driver builds (set below its class)
    writer_class: type["KafkaStreamWriter"]

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema, overwrite: bool) -> "KafkaStreamWriter":
        freeze_imports()
        options = parse_sink_options(dict(self.options))
        _check_schema(schema)
        ensure_topics(options)
        return self.writer_class(options)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    #: the driver's commit of a batch's staged ranges (one step a subclass may change, as the project's mutants do)
    commit_batch = staticmethod(commit_batch)

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> StagedMessage:
        """Executor: stage this task's rows; the range goes to the driver in the commit message."""
        from pyspark import TaskContext

        freeze_imports()
        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        txn = TxnId.new(self.options.sink_id, batch_id, context.partitionId(), context.attemptNumber())
        return StagedMessage([stage_rows(self.options, txn, iterator)])

    def commit(self, messages, batchId: int) -> None:
        """Driver: copy the staged rows and record the batch in one transaction (idempotent)."""
        freeze_imports()
        ranges = [rng for message in messages if message is not None for rng in message.ranges]
        self.commit_batch(self.options, batchId, ranges)

    def abort(self, messages, batchId: int) -> None:
        """Driver: nothing to undo. Staged rows are only ever copied by a commit that names them."""


# a subclass of the sink may build another writer (one step changed, as the project's mutants do)
KafkaTwoPhaseSink.writer_class = KafkaStreamWriter
