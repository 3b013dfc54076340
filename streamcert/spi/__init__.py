"""The connector SPI: what a connector under test depends on, and nothing of the harness (stdlib + pyspark only).

- :mod:`~streamcert.spi.errors`: errors with hints (a bad option is a :class:`ConfigurationError`);
- :mod:`~streamcert.spi.options`: :class:`OptionRules`, typed and case-insensitive Spark options;
- :mod:`~streamcert.spi.fault_points`: :func:`reached`, named moments where the harness may kill the driver or
  fail the task;
- :mod:`~streamcert.spi.connector`: the declaration of a connector under test (:class:`SourceConnector`,
  :class:`SinkConnector`, :class:`AggregatorConnector`) and the :class:`QueryContext` it builds its query from;
- :mod:`~streamcert.spi.external`: the external system a connector brings (:class:`ExternalSystem`: how to start it,
  its endpoints, its faults, an :class:`InputWriter` of workload records, an :class:`OutputReader` of what a sink
  committed).
"""

from streamcert.spi.connector import (KINDS, AggregatorConnector, Connector, QueryContext, SinkConnector,
                                      SourceConnector)
from streamcert.spi.errors import ConfigurationError, StreamcertError
from streamcert.spi.external import (Endpoint, ExternalSystem, InputRecord, InputWriter, Leftovers, OutputReader,
                                     VisibleRecord)
from streamcert.spi.fault_points import InjectedPointFailure, reached
from streamcert.spi.options import SPARK_READER_OPTIONS, SPARK_WRITER_OPTIONS, OptionRules, OptionValues

__all__ = ["KINDS", "Connector", "SourceConnector", "SinkConnector", "AggregatorConnector", "QueryContext",
           "ConfigurationError", "StreamcertError", "InjectedPointFailure", "reached", "OptionRules", "OptionValues",
           "SPARK_READER_OPTIONS", "SPARK_WRITER_OPTIONS", "ExternalSystem", "Endpoint", "InputRecord", "InputWriter",
           "OutputReader", "VisibleRecord", "Leftovers"]
