"""The Kafka offset source on the real stack: exact output, read_committed, admission control, discovery."""

from __future__ import annotations

import time
import uuid

import pytest

from streamcert.spi.errors import ConfigurationError

from streamcert.connectors.kafka_source import SOURCE_NAME, KafkaOffsetSource
from streamcert.harness.stack.kafka_clients import add_partitions, create_topic, produce
from streamcert.harness.run.workload import WorkloadSpec, decode_values, load_topic

pytestmark = pytest.mark.integration


def _reader(spark, bootstrap: str, topic: str, **options: str):
    spark.dataSource.register(KafkaOffsetSource)
    return (spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).options(**options).load())


def _run_available_now(spark, frame, tmp_path):
    name = f"q_{uuid.uuid4().hex[:8]}"
    query = (frame.writeStream.format("memory").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / name)).start())
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return spark.table(name).toPandas(), query


def test_available_now_reads_exactly_the_committed_records_in_bounded_batches(stack, tmp_path):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"src-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=3)
    ledger = load_topic(bootstrap, topic, WorkloadSpec(total=3000, keys=30, partitions=3, aborted_fraction=0.2,
                                                       transaction_records=50, seed=11))
    out, query = _run_available_now(stack.spark, _reader(stack.spark, bootstrap, topic, maxRecordsPerBatch="400"),
                                    tmp_path)
    decoded = decode_values(list(out["value"]))
    acked = ledger.frame[ledger.frame["status"] == "acked"]
    assert sorted(decoded["id"]) == sorted(acked["id"])  # no loss, no duplicate, no aborted record
    for _partition, group in out.groupby("partition"):
        assert group["offset"].is_monotonic_increasing
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert all(p["numInputRows"] <= 400 for p in batches)
    assert len(batches) >= len(acked) // 400


def test_columns_have_exact_types(stack, tmp_path):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"types-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [(b"k", b"v")], conf={"enable.idempotence": False})
    frame = _reader(stack.spark, bootstrap, topic)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("topic", "string"), ("partition", "int"), ("offset", "bigint"), ("timestamp", "timestamp"),
        ("key", "binary"), ("value", "binary"), ("headers", "array<struct<key:string,value:binary>>")]
    out, _ = _run_available_now(stack.spark, frame, tmp_path)
    row = out.iloc[0]
    assert (row["topic"], row["partition"], row["offset"], bytes(row["key"]), bytes(row["value"])) == (
        topic, 0, 0, b"k", b"v")
    assert abs(row["timestamp"].timestamp() - time.time()) < 600


def test_read_uncommitted_does_see_aborted_records(stack, tmp_path):
    """The read_committed test above could pass vacuously if nothing was aborted; here aborted records show."""
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"unc-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    ledger = load_topic(bootstrap, topic, WorkloadSpec(total=400, keys=5, partitions=1, aborted_fraction=0.5,
                                                       transaction_records=20, seed=2))
    out, _ = _run_available_now(stack.spark, _reader(stack.spark, bootstrap, topic,
                                                     isolationLevel="read_uncommitted"), tmp_path)
    assert set(decode_values(list(out["value"]))["id"]) == set(ledger.frame["id"])


def test_partitions_added_while_running_are_read_from_earliest(stack, tmp_path):
    spark, bootstrap = stack.spark, stack.endpoints.bootstrap_servers
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, [(None, b"p0-first")])
    name = f"grow_{uuid.uuid4().hex[:6]}"
    query = (_reader(spark, bootstrap, topic, partitionDiscoveryIntervalMs="200").writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while spark.table(name).count() < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        add_partitions(bootstrap, topic, 3)
        from confluent_kafka import Producer

        from streamcert.harness.stack.kafka_clients import client_conf

        producer = Producer(client_conf(bootstrap))
        for partition in (1, 2):
            producer.produce(topic, value=f"p{partition}-a".encode(), partition=partition)
            producer.produce(topic, value=f"p{partition}-b".encode(), partition=partition)
        producer.flush(30)
        while spark.table(name).count() < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        rows = spark.table(name).select("partition", "offset", "value").collect()
    finally:
        query.stop()
    seen = sorted((r.partition, r.offset, bytes(r.value)) for r in rows)
    assert seen == [(0, 0, b"p0-first"), (1, 0, b"p1-a"), (1, 1, b"p1-b"), (2, 0, b"p2-a"), (2, 1, b"p2-b")]


def test_an_unknown_option_fails_when_the_query_is_defined(stack):
    with pytest.raises(Exception) as info:
        _reader(stack.spark, stack.endpoints.bootstrap_servers, "t", maxOffsetsPerTrigger="5").schema  # noqa: B018
    text = str(info.value)
    # Spark hands option names over lower-cased.
    assert "Unknown option(s) for the streamcert-kafka source: maxoffsetspertrigger" in text
    assert "Hint: Known options" in text


def test_on_spark_4_1_the_reader_caps_batches_from_the_end_it_planned_last(monkeypatch):
    """Spark 4.1 calls latestOffset() with no start and no limit: the reader caps from the end it planned last (the
    initial offsets, a replayed batch's end); a reader that has planned nothing (a restart after a commit) cannot."""
    from streamcert.connectors.kafka_offsets import from_json
    from streamcert.connectors.kafka_options import parse_source_options
    from streamcert.connectors.kafka_source import KafkaStreamReader

    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                                    "maxRecordsPerBatch": "100"})
    broker = {"earliest": {"t": {0: 0, 1: 0}}, "latest": {"t": {0: 1000, 1: 1000}}}
    monkeypatch.setattr(KafkaStreamReader, "_broker_offsets", lambda self, which: broker[which])
    reader = KafkaStreamReader(options)
    reader.initialOffset()
    first = from_json(reader.latestOffset())
    assert sum(first["t"].values()) == 100
    second = from_json(reader.latestOffset())
    assert sum(second["t"].values()) == 200
    replaying = KafkaStreamReader(options)  # a restart that replays batch (second, third]
    replaying.partitions(reader.latestOffset(), reader.latestOffset())
    assert sum(from_json(replaying.latestOffset())["t"].values()) == 500  # 100 past the replayed end
    restarted = KafkaStreamReader(options)
    assert from_json(restarted.latestOffset()) == broker["latest"]  # nothing planned, trigger unknown: uncapped


@pytest.mark.parametrize("trigger, first_batch", [("processingTime", 100), ("availableNow", 2000), (None, 2000)])
def test_on_spark_4_1_a_new_query_s_first_batch_is_capped_only_when_its_trigger_says_no_available_now(
        monkeypatch, trigger, first_batch):
    """Spark 4.1 asks a new query's first latestOffset() before initialOffset(), and under AvailableNow asks only once
    and stops at the answer: with trigger=processingTime the first batch is capped from the starting offsets; with
    availableNow (even after a restart told the reader its offset log's end) or no trigger, every offset is answered."""
    from streamcert.connectors.kafka_offsets import from_json
    from streamcert.connectors.kafka_options import parse_source_options
    from streamcert.connectors.kafka_source import KafkaStreamReader

    given = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "maxRecordsPerBatch": "100"}
    options = parse_source_options({**given, **({"trigger": trigger} if trigger else {})})
    broker = {"earliest": {"t": {0: 0, 1: 0}}, "latest": {"t": {0: 1000, 1: 1000}}}
    monkeypatch.setattr(KafkaStreamReader, "_broker_offsets", lambda self, which: broker[which])
    assert sum(from_json(KafkaStreamReader(options).latestOffset())["t"].values()) == first_batch
    restarted = KafkaStreamReader(options)
    restarted.partitions({"t": {"0": 300, "1": 300}}, {"t": {"0": 300, "1": 300}})  # setLatestSeenOffset
    expected = 2000 if trigger == "availableNow" else 700
    assert sum(from_json(restarted.latestOffset())["t"].values()) == expected


def test_the_trigger_option_takes_only_spark_s_two_names():
    from streamcert.connectors.kafka_options import parse_source_options

    with pytest.raises(ConfigurationError, match="trigger"):
        parse_source_options({"kafka.bootstrap.servers": "b:1", "subscribe": "t", "trigger": "once"})


def test_a_worker_s_reads_share_one_consumer_and_each_read_gets_exactly_its_range(stack):
    """Reads in one Python worker reuse its kept consumer: a range read after a later one (a replayed batch), and
    a read after one that stopped early, return exactly their own offsets; a read that raised leaves nothing kept."""
    import streamcert.connectors.kafka_source as source
    from streamcert.connectors.kafka_options import parse_source_options

    bootstrap = stack.endpoints.bootstrap_servers
    a, b = (f"kept-{name}-{uuid.uuid4().hex[:8]}" for name in "ab")
    for topic in (a, b):
        create_topic(bootstrap, topic, partitions=1)
        produce(bootstrap, topic, [(None, b"%d" % i) for i in range(200)], conf={"enable.idempotence": False})

    def reader(**options):
        return source.KafkaStreamReader(parse_source_options({"kafka.bootstrap.servers": bootstrap,
                                                              "subscribe": f"{a},{b}", **options}))

    def offsets(parts):
        return sorted((row["topic"], row["offset"]) for batch in reader().read(source._Range(0, parts))
                      for row in batch.to_pylist())

    source._readers.idle.clear()
    assert offsets([(a, 0, 100, 150), (b, 0, 100, 150)]) == [(t, o) for t in (a, b) for o in range(100, 150)]
    kept = list(source._readers.idle.values())
    assert len(kept) == 1
    assert offsets([(a, 0, 10, 20)]) == [(a, o) for o in range(10, 20)]  # earlier than the last read: a replay
    assert list(source._readers.idle.values()) == kept  # the same consumer, back in the pool
    early = reader().read(source._Range(0, [(b, 0, 0, 200)]))
    next(early)
    early.close()  # the task stopped reading (a cancelled task): that consumer is closed, not kept
    assert source._readers.idle == {}
    assert offsets([(b, 0, 190, 200)]) == [(b, o) for o in range(190, 200)]  # to the log end: an EOF event
    assert offsets([(b, 0, 0, 10)]) == [(b, o) for o in range(10)]  # that earlier EOF does not end this read
    with pytest.raises(TimeoutError):  # past the log end: no progress within pollTimeoutMs
        list(reader(pollTimeoutMs="1000").read(source._Range(0, [(a, 0, 0, 10_000)])))
    assert source._readers.idle == {}  # the consumer of the read that raised was closed, not kept
    assert offsets([(a, 0, 0, 5)]) == [(a, o) for o in range(5)]  # the next read makes another
    assert len(source._readers.idle) == 1
