"""The systems streamcert's own stack runs, as :class:`~streamcert.spi.external.ExternalSystem` contexts: a Kafka
topic, a PostgreSQL table, the folder of Spark's file sink.

A run reaches its input and its output through a system, whichever it is: the one a connector's declaration brings
(``input_system`` / ``output_system``) or, when it brings none, the stack's (:func:`input_system_of`,
:func:`output_system_of`). The stack's three are contexts like any other (names, endpoints, writer, reader,
leftovers); they differ only in who started them (the stack, with its own Toxiproxy links) and in the faster paths a
harness may take (a native observer, a bulk load), which are optional capabilities any system could offer.
"""

from streamcert.harness.systems.file_sink import SparkFileSink
from streamcert.harness.systems.kafka_topics import KafkaTopicWriter, KafkaTopics
from streamcert.harness.systems.observer_reader import ObserverReader
from streamcert.harness.systems.postgres_tables import PostgresTables
from streamcert.harness.systems.resolve import (STACK_SYSTEMS, addresses, declared_input_system,
                                                 declared_output_system, input_system_of, output_system_of)
from streamcert.harness.systems.stack_system import StackAddresses, StackSystem

__all__ = ["StackSystem", "StackAddresses", "KafkaTopics", "KafkaTopicWriter", "PostgresTables", "SparkFileSink",
           "ObserverReader", "STACK_SYSTEMS", "declared_input_system", "declared_output_system", "input_system_of",
           "output_system_of", "addresses"]
