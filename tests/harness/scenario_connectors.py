"""A connector under test for the scenario tests: an at-least-once Kafka sink, declared through the SPI.

It produces each micro-batch from ``foreachBatch``, passes the fault point ``after-batch-write`` and waits
``commit_delay_ms`` before Spark writes ``commits/N``: a driver killed there makes Spark replay the batch, and
this sink writes it again. That is the documented behaviour of at-least-once sinks, and the duplicate checker
must see it.
"""

import time

from streamcert.spi.connector import SinkConnector
from streamcert.spi.fault_points import reached


class AtLeastOnceKafkaSink(SinkConnector):
    name = "test-at-least-once-kafka"
    output_kind = "kafka"
    claims = frozenset({"SNK-5", "SNK-7"})
    unclaimed = {"SNK-1": "at-least-once by design: a batch replayed after a crash is written again"}

    def write(self, frame, context):
        bootstrap, topic = context.bootstrap_servers, context.output
        delay = context.option("commit_delay_ms", 0)

        def write_batch(batch, _batch_id):
            from confluent_kafka import Producer

            from streamcert.harness.stack.kafka_clients import client_conf

            producer = Producer(client_conf(bootstrap, **{"linger.ms": 5}))
            for row in batch.select("key", "value").toLocalIterator():
                producer.produce(topic, key=row.key, value=row.value)
                producer.poll(0)
            producer.flush(60)
            reached("after-batch-write")  # written, not yet committed: the at-least-once window
            time.sleep(delay / 1000)

        return frame.writeStream.foreachBatch(write_batch).option("checkpointLocation", context.checkpoint)


class NotAConnector:
    """Used to show that a reference to something else is refused with a clear error."""
