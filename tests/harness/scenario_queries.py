"""A trivial connector for scenario tests: streamcert-kafka source -> an at-least-once Kafka sink.

The sink produces each micro-batch from ``foreachBatch``, passes the fault point
``after-batch-write`` and waits ``commit_delay_ms`` before Spark writes
``commits/N``: a driver killed there makes Spark replay the batch, and this sink
writes it again. That is the documented behaviour of at-least-once sinks, and the
duplicate checker must see it.
"""

import time

from streamcert.connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource
from streamcert.spi.fault_points import reached


def kafka_to_kafka_at_least_once(spark, params):
    spark.dataSource.register(KafkaOffsetSource)
    frame = (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", params["bootstrap"])
             .option("subscribe", params["input_topic"])
             .option("maxRecordsPerBatch", str(params.get("max_records_per_batch", 500))).load())
    bootstrap, topic, delay = params["bootstrap"], params["output_topic"], params.get("commit_delay_ms", 0)

    def write(batch, _batch_id):
        from confluent_kafka import Producer

        from streamcert.harness.stack.kafka_clients import client_conf

        producer = Producer(client_conf(bootstrap, **{"linger.ms": 5}))
        for row in batch.select("key", "value").toLocalIterator():
            producer.produce(topic, key=row.key, value=row.value)
            producer.poll(0)
        producer.flush(60)
        reached("after-batch-write")  # written, not yet committed: the at-least-once window
        time.sleep(delay / 1000)

    return (frame.writeStream.foreachBatch(write).option("checkpointLocation", params["checkpoint"])
            .trigger(processingTime="100 milliseconds"))
