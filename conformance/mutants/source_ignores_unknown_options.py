"""MUTANT, BROKEN ON PURPOSE: a source that drops the options it does not know instead of refusing them.

The bug: before it checks its options the source keeps only the names it documents (and librdkafka's ``kafka.``
settings), "as Spark's built-in sources ignore what they do not read". A misspelt option (``maxRecordPerBatch``)
then does nothing, silently: the query runs without the limit its author asked for. GEN-2's probe, which starts the
query once with an option no connector documents, must catch it: that query runs instead of failing with the
option named.
"""

from __future__ import annotations

from typing import Any

from streamcert.connectors.declarations import KafkaOffsetSourceUnderTest
from streamcert.connectors.kafka_options import KNOWN_OPTIONS
from streamcert.connectors.kafka_source import KafkaOffsetSource

__all__ = ["CONNECTOR"]

_KNOWN = {name.lower() for name in KNOWN_OPTIONS}


class _Source(KafkaOffsetSource):
    def __init__(self, options) -> None:
        # BUG: what the source does not know is dropped, not refused
        super().__init__({key: value for key, value in dict(options).items()
                          if key.lower() in _KNOWN or key.lower().startswith("kafka.")})

    @classmethod
    def name(cls) -> str:
        return "mutant-source-ignores-unknown-options"


class IgnoresUnknownOptions(KafkaOffsetSourceUnderTest):
    """Broken on purpose: see the module docstring."""

    name = "mutant-source-ignores-unknown-options"

    def datasource(self) -> Any:
        return _Source


CONNECTOR = IgnoresUnknownOptions()
