"""The Kafka write-ahead 2PC protocol on a real broker (no Spark): stage, commit, replay, orphans, fencing, loss."""

from __future__ import annotations

import json
import time

import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streamcert.connectors import kafka_write_ahead as wa
from streamcert.connectors.kafka_sink_options import parse_sink_options
from streamcert.connectors.row_blocks import encode_blocks
from streamcert.connectors.twophase import TxnId
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.stack.kafka_clients import client_conf, create_topic, end_offsets, read_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def options(stack):
    bootstrap = stack.endpoints.bootstrap_servers
    topic = f"wa-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=3)
    opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                               "sinkId": f"s{uuid.uuid4().hex[:8]}", "stagingPartitions": "2",
                               "stagingBlockBytes": "16",  # ~3 rows a staging record: ranges span many records
                               "copyTimeoutMs": "30000", "transactionTimeoutMs": "30000"})
    wa.ensure_topics(opts)
    return opts


def _batch(ids, key_count=5) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "key": pa.array([f"k{i % key_count}".encode() for i in ids], pa.binary()),
        "value": pa.array([f"v{i}".encode() for i in ids], pa.binary())})


def _stage(options, batch, partition, ids, attempt=0):
    return wa.stage_rows(options, TxnId.new(options.sink_id, batch, partition, attempt), iter([_batch(ids)]))


def _output(options) -> list[bytes]:
    """What a read_committed reader sees once every transaction on the output has its markers: a commit returns
    before the broker writes them, and until then the read ends before the rows (seen once on a loaded machine)."""
    deadline = time.monotonic() + 10.0
    while (end_offsets(options.bootstrap_servers, options.topic, "read_committed")
           != end_offsets(options.bootstrap_servers, options.topic, "read_uncommitted")
           and time.monotonic() < deadline):
        time.sleep(0.1)
    return sorted(value for _p, _o, _k, value in read_topic(options.bootstrap_servers, options.topic))


def _values(ids) -> list[bytes]:
    return sorted(f"v{i}".encode() for i in ids)


def test_commit_copies_exactly_the_named_ranges_and_a_replayed_commit_writes_nothing(options):
    first, second = _stage(options, 0, 0, range(0, 50)), _stage(options, 0, 1, range(50, 80))
    orphan = _stage(options, 0, 0, range(1000, 1010), attempt=1)  # staged, committed, but no message names it
    assert (first.rows, second.rows, orphan.rows) == (50, 30, 10)
    assert wa.commit_batch(options, 0, [first, second])["rows"] == 80
    assert wa.commit_batch(options, 0, [first, second])["replay"] is True  # Spark calls commit(0) again
    assert wa.last_committed_batch(options) == 0
    assert _output(options) == _values(range(0, 80))


def test_staging_partitions_shared_by_several_tasks_are_separated_by_transaction_id(options):
    # stagingPartitions=2: Spark partitions 0 and 2 share staging partition 0, their records interleave
    ranges = [_stage(options, 3, p, range(p * 100, p * 100 + 20)) for p in (0, 2, 0)]
    assert ranges[0].partition == ranges[1].partition == 0
    wa.commit_batch(options, 3, ranges[1:])
    assert _output(options) == _values(list(range(200, 220)) + list(range(0, 20)))


def test_ranges_on_several_staging_partitions_are_read_together_each_exactly_once_in_its_order(options):
    """The copy reads the first range of every staging partition at once, then the next: two ranges on each of the
    two staging partitions, another try's records between them, each copied once, every key's rows in order."""
    ranges = [_stage(options, 4, p, range(p * 100, p * 100 + 25)) for p in (0, 1, 2, 3)]  # 0, 2 and 1, 3 share
    _stage(options, 4, 0, range(900, 910), attempt=1)  # between the two ranges of staging partition 0: not named
    later = _stage(options, 4, 4, range(400, 425))  # a third range on staging partition 0, after the other try
    assert sorted(r.partition for r in ranges + [later]) == [0, 0, 0, 1, 1]
    assert wa.commit_batch(options, 4, ranges + [later])["rows"] == 125
    assert _output(options) == _values([i for p in (0, 1, 2, 3, 4) for i in range(p * 100, p * 100 + 25)])
    by_key_and_range: dict[tuple[bytes, int], list[int]] = {}
    for _p, _o, key, value in read_topic(options.bootstrap_servers, options.topic):
        by_key_and_range.setdefault((key, int(value[1:]) // 100), []).append(int(value[1:]))
    assert all(ids == sorted(ids) for ids in by_key_and_range.values())  # a range's rows keep their order per key


def test_records_of_other_attempts_inside_a_staged_range_are_not_copied(options):
    # two attempts whose transactions were open at the same time interleave in one staging partition
    ours, theirs = (TxnId.new(options.sink_id, 2, 0, attempt) for attempt in (0, 1))
    our_blocks = list(encode_blocks([_batch(range(100, 140))], 16))
    their_blocks = list(encode_blocks([_batch(range(500, 540))], 16))
    writer = Producer(client_conf(options.bootstrap_servers, **{"transactional.id": f"interleave-{options.sink_id}"}))
    writer.init_transactions(10)
    writer.begin_transaction()
    our_offsets: list[int] = []
    for our_block, their_block in zip(our_blocks, their_blocks, strict=True):
        writer.produce(options.staging_topic, value=our_block[0], partition=1,
                       headers=[(wa.STAGE_HEADER, str(ours).encode())],
                       on_delivery=lambda err, msg: our_offsets.append(msg.offset()))
        writer.produce(options.staging_topic, value=their_block[0], partition=1,
                       headers=[(wa.STAGE_HEADER, str(theirs).encode())])
    writer.commit_transaction(10)
    staged = wa.StagedRange(str(ours), 1, min(our_offsets), max(our_offsets), len(our_blocks), 40)
    assert staged.last_offset - staged.first_offset + 1 > staged.records  # not dense: the header decides
    assert wa.commit_batch(options, 2, [staged])["rows"] == 40
    assert _output(options) == _values(range(100, 140))


def test_a_later_batch_is_committed_and_an_earlier_replay_is_skipped(options):
    wa.commit_batch(options, 4, [_stage(options, 4, 0, range(10))])
    wa.commit_batch(options, 5, [_stage(options, 5, 0, range(10, 20))])
    assert wa.commit_batch(options, 4, [_stage(options, 4, 0, range(100, 110))])["replay"] is True
    assert _output(options) == _values(range(20))


def test_a_zombie_attempts_staged_rows_are_never_copied_even_while_it_stages_inside_the_new_range(options):
    """Staging is not transactional: what keeps a zombie's rows out is the marker of the try a message names."""
    zombie = Producer(client_conf(options.bootstrap_servers, **{"enable.idempotence": True, "acks": "all"}))
    zombie_marker = str(TxnId.new(options.sink_id, 0, 7, 0)).encode()
    for _i in range(20):  # the zombie of attempt 0 keeps staging into the partition the new attempt stages into
        zombie.produce(options.staging_topic, value=b"zombie", partition=7 % options.staging_partitions,
                       headers=[(wa.STAGE_HEADER, zombie_marker)])
    staged = _stage(options, 0, 7, range(30), attempt=1)
    zombie.flush(10)
    staging = read_topic(options.bootstrap_servers, options.staging_topic, "read_committed")
    assert sum(value == b"zombie" for *_x, value in staging) == 20  # visible at once: no transaction holds them
    wa.commit_batch(options, 0, [staged])
    assert _output(options) == _values(range(30))


def test_a_try_whose_acks_time_out_is_staged_again_and_only_the_last_try_is_copied(clean_links):
    """The broker writes a try's blocks but the task never hears (its acks come after message.timeout.ms): the task
    stages every block again under a new marker, and the commit copies that try's rows, once."""
    import threading

    env = clean_links
    bootstrap = env.endpoints.bootstrap_servers
    topic = f"wa-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                               "sinkId": f"s{uuid.uuid4().hex[:8]}", "stagingPartitions": "1",
                               "kafka.message.timeout.ms": "1500", "kafka.socket.timeout.ms": "1000",
                               "transactionTimeoutMs": "30000"})
    wa.ensure_topics(opts)
    wa.commit_batch(opts, 0, [wa.stage_rows(opts, TxnId.new(opts.sink_id, 0, 0, 0), iter([_batch(range(10))]))])
    env.kafka_link.add_toxic("latency", stream="downstream", latency=2500)  # the producer is connected by now
    threading.Timer(2.0, env.kafka_link.clear).start()
    staged = wa.stage_rows(opts, TxnId.new(opts.sink_id, 1, 0, 0), iter([_batch(range(10, 50))]))
    assert "/try-" in staged.txn_id and staged.rows == 40
    markers = {dict(headers).get(wa.STAGE_HEADER) for headers in _staging_headers(opts)}
    assert len(markers) >= 3  # batch 0's, the abandoned try of batch 1 (it reached the log too), the last try
    wa.commit_batch(opts, 1, [staged])
    assert _output(opts) == _values(range(50))


def _staging_headers(options) -> list[list[tuple[str, bytes]]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client_conf(options.bootstrap_servers, **{"group.id": f"h{uuid.uuid4().hex[:6]}",
                                                                  "enable.partition.eof": True}))
    consumer.assign([TopicPartition(options.staging_topic, 0, 0)])
    headers = []
    try:
        while True:
            msg = consumer.poll(5)
            if msg is None or msg.error() is not None:
                return headers
            headers.append(msg.headers() or [])
    finally:
        consumer.close()


def test_an_open_transaction_of_a_dead_committer_is_aborted_and_its_batch_redone(options):
    staged = _stage(options, 0, 0, range(30))
    dead = Producer(client_conf(options.bootstrap_servers, **{
        "transactional.id": wa.committer_transactional_id(options.sink_id)}))
    dead.init_transactions(10)
    dead.begin_transaction()
    for i in range(30):  # a driver that copied batch 0 and wrote its decision record, then died before commit
        dead.produce(options.topic, value=f"v{i}".encode())
    dead.produce(options.decision_log_topic, key=options.sink_id.encode(), value=b'{"batch": 0}', partition=0)
    dead.flush(10)
    result = wa.commit_batch(options, 0, [staged])
    assert result["replay"] is False and result["rows"] == 30
    assert _output(options) == _values(range(30))  # once, not twice


def test_staged_rows_that_are_not_there_are_refused_not_skipped(options):
    import dataclasses

    staged = _stage(options, 0, 0, range(10))
    assert staged.records > 1
    _stage(options, 0, 0, range(10, 20), attempt=1)  # another try's records follow in the partition
    fields = staged.to_dict()
    for missing in (wa.StagedRange(**{**fields, "rows": staged.rows + 1}),
                    wa.StagedRange(**{**fields, "records": staged.records + 1, "last_offset": staged.last_offset + 1})):
        with pytest.raises(RuntimeError, match="staged rows are lost"):
            wa.commit_batch(options, 0, [missing])
    beyond = wa.StagedRange(**{**fields, "first_offset": 10_000, "last_offset": 10_003})  # past the log's end
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="could not be read within copyTimeoutMs"):
        wa.commit_batch(dataclasses.replace(options, copy_timeout_ms=3000), 0, [beyond])
    assert time.monotonic() - began < 15
    assert wa.last_committed_batch(options) is None and _output(options) == []


def test_decision_records_of_other_sinks_are_not_this_sinks_decisions(options):
    other = parse_sink_options({"kafka.bootstrap.servers": options.bootstrap_servers, "topic": options.topic,
                                "sinkId": "other", "decisionLogTopic": options.decision_log_topic,
                                "stagingTopic": options.staging_topic})
    wa.commit_batch(other, 9, [])
    assert wa.last_committed_batch(other) == 9 and wa.last_committed_batch(options) is None


def test_the_decision_log_is_read_to_its_end_not_to_an_open_transaction(options):
    # a commit returns before the broker writes its markers: the reader must wait for the last stable offset,
    # not take "behind it" for "not decided" (a replayed commit copied a committed batch twice)
    wa.commit_batch(options, 4, [_stage(options, 4, 0, range(10))])
    other = Producer(client_conf(options.bootstrap_servers, **{"transactional.id": f"other-{options.sink_id}"}))
    other.init_transactions(10)
    other.begin_transaction()
    other.produce(options.decision_log_topic, key=b"other", value=b'{"batch": 1}', partition=0)
    other.flush(10)
    with pytest.raises(TimeoutError, match="stayed open"):
        wa.last_committed_batch(options, timeout=2.0)
    other.commit_transaction(10)
    assert wa.last_committed_batch(options) == 4
    assert wa.commit_batch(options, 4, [])["replay"] is True


def test_options_are_validated_with_the_option_named(stack):
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "sinkId": "s"}
    with pytest.raises(ConfigurationError, match="stagingPartitions"):
        parse_sink_options({**base, "stagingPartitions": "0"})
    for bad_block in ("0", "9000000", "1k"):
        with pytest.raises(ConfigurationError, match="stagingBlockBytes"):
            parse_sink_options({**base, "stagingBlockBytes": bad_block})
    with pytest.raises(ConfigurationError, match="Unknown option"):
        parse_sink_options({**base, "tpoic": "x"})
    with pytest.raises(ConfigurationError, match="kafka.transactional.id"):
        parse_sink_options({**base, "kafka.transactional.id": "mine"})
    with pytest.raises(ConfigurationError, match="sinkId"):
        parse_sink_options({**base, "sinkId": "a b"})
    assert parse_sink_options({k.lower(): v for k, v in base.items()}).staging_topic == "t.s.staging"
    with pytest.raises(ConfigurationError, match="does not exist"):
        wa.ensure_topics(parse_sink_options({**base, "kafka.bootstrap.servers": stack.endpoints.bootstrap_servers,
                                             "topic": f"missing-{uuid.uuid4().hex[:6]}"}))


def test_a_broker_away_for_seconds_delays_the_writer_instead_of_failing_the_query(clean_links):
    """Spark creates the writer again for every batch's commit: a broker restarting then must be waited for
    (the reference pipeline's query died on a 3 s Kafka outage in a benchmark), an absent one still named."""
    import threading
    import time

    env = clean_links
    topic = f"wa-{uuid.uuid4().hex[:8]}"
    create_topic(env.endpoints.bootstrap_servers, topic)
    opts = parse_sink_options({"kafka.bootstrap.servers": env.endpoints.bootstrap_servers, "topic": topic,
                               "sinkId": f"s{uuid.uuid4().hex[:8]}"})
    env.kafka_link.disable()
    threading.Timer(3.0, env.kafka_link.enable).start()
    began = time.monotonic()
    wa.ensure_topics(opts, timeout=30.0)  # creates the staging and decision log topics once the link is back
    assert time.monotonic() - began >= 2.5
    env.kafka_link.disable()
    try:
        began = time.monotonic()
        wa.ensure_topics(opts, timeout=30.0)  # the next commit's writer: found once, not asked again
        assert time.monotonic() - began < 0.5
    finally:
        env.kafka_link.enable()
    topics = AdminClient(client_conf(env.endpoints.bootstrap_servers)).list_topics(timeout=10).topics
    assert {opts.staging_topic, opts.decision_log_topic} <= set(topics)

    nowhere = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": topic, "sinkId": "s"})
    began = time.monotonic()
    with pytest.raises(ConfigurationError, match="cannot reach Kafka at 127.0.0.1:1"):
        wa.ensure_topics(nowhere, timeout=3.0)
    assert time.monotonic() - began < 15


def test_a_committer_fenced_by_a_newer_driver_gives_up_at_once_instead_of_fencing_it_back(options):
    txn_id = wa.committer_transactional_id(options.sink_id)
    newer = []

    def body(producer):
        producer.produce(options.topic, value=b"old driver", partition=1)
        producer.flush(10)
        if not newer:  # a newer driver of the same sink starts while this one is still committing
            newer.append(Producer(client_conf(options.bootstrap_servers, **{"transactional.id": txn_id})))
            newer[0].init_transactions(10)
        return "committed"

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="was fenced: another producer initialised transactional.id"):
        wa._transaction(options, txn_id, {}, "commit", body, time.monotonic() + 30)
    # at once, not at the deadline: two instances re-initialising in turn stalled a benchmark's batch for 60 s
    assert time.monotonic() - started < 10
    newer[0].begin_transaction()  # the newer driver was not fenced back: it still commits
    newer[0].produce(options.topic, value=b"newer driver", partition=1)
    newer[0].commit_transaction(10)
    output = [v for *_x, v in read_topic(options.bootstrap_servers, options.topic)]
    assert b"newer driver" in output and b"old driver" not in output


def test_one_staging_producer_serves_every_task_of_a_python_worker(options):
    """No producer initialisation per task: the worker's idempotent producer stages batch after batch."""
    first = _stage(options, 0, 1, range(5))
    producer = wa._staging_producer(options)
    second = _stage(options, 1, 1, range(5, 15))
    assert wa._staging_producer(options) is producer
    wa.commit_batch(options, 0, [first])
    wa.commit_batch(options, 1, [second])
    assert second.rows == 10 and _output(options) == _values(range(15))


def test_the_drivers_consumers_are_kept_between_commits_and_one_that_failed_is_not(options):
    wa.commit_batch(options, 0, [_stage(options, 0, 0, range(5))])
    kept = {key: consumer for key, consumer in wa._consumers.idle.items() if key[1] == options.sink_id}
    assert {key[2] for key in kept} == {"_decision_reader", "_staging_reader", "_watermarks_consumer"}
    wa.commit_batch(options, 1, [_stage(options, 1, 0, range(5, 10))])
    assert all(wa._consumers.idle[key] is consumer for key, consumer in kept.items())  # the same ones, not new
    with pytest.raises(RuntimeError, match="broken"):
        with wa._kept_consumer(options, wa._staging_reader):
            raise RuntimeError("broken")
    assert (options.bootstrap_servers, options.sink_id, "_staging_reader") not in wa._consumers.idle
    assert wa.commit_batch(options, 1, [])["replay"] is True and _output(options) == _values(range(10))


def test_a_cached_committer_fenced_by_a_driver_that_since_died_is_replaced(options):
    wa.commit_batch(options, 0, [_stage(options, 0, 0, range(5))])  # the driver caches its committer
    died = Producer(client_conf(options.bootstrap_servers, **{
        "transactional.id": wa.committer_transactional_id(options.sink_id)}))
    died.init_transactions(10)  # another driver of the sink started, then died before committing anything
    del died
    result = wa.commit_batch(options, 1, [_stage(options, 1, 0, range(5, 10))])
    assert result["rows"] == 5 and _output(options) == _values(range(10))


def test_a_row_too_large_for_the_output_fails_the_commit_at_once_with_what_to_do(options):
    import time

    big = pa.RecordBatch.from_pydict({"key": pa.array([b"k"], pa.binary()),
                                      "value": pa.array([bytes(1_500_000)], pa.binary())})
    staged = wa.stage_rows(options, TxnId.new(options.sink_id, 0, 0, 0), iter([big]))  # staging takes it
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="kafka.message.max.bytes"):
        wa.commit_batch(options, 0, [staged])
    assert time.monotonic() - started < 15  # not retried until copyTimeoutMs (30 s here)
    assert wa.last_committed_batch(options) is None and _output(options) == []


def test_the_committer_reads_the_decision_log_only_when_its_own_last_commit_does_not_answer(options):
    """~60 ms a batch: the next batch after this committer's own commit, and a replay of it, need no read."""
    reads = []
    scan = wa.last_committed_batch

    def counted(opts, timeout=30.0):
        reads.append(1)
        return scan(opts, timeout)

    wa.last_committed_batch = counted
    try:
        first = wa.commit_batch(options, 3, [_stage(options, 3, 0, range(5))])
        nxt = wa.commit_batch(options, 4, [_stage(options, 4, 0, range(5, 10))])
        replay = wa.commit_batch(options, 4, [_stage(options, 4, 0, range(100, 105))])
        jump = wa.commit_batch(options, 6, [_stage(options, 6, 0, range(10, 15))])  # a batch the process skipped
    finally:
        wa.last_committed_batch = scan
    assert [r["decision_log_read"] for r in (first, nxt, replay, jump)] == [True, False, False, True]
    assert replay["replay"] is True and len(reads) == 2
    assert _output(options) == _values(range(15))


def test_a_batch_another_driver_decided_after_this_committers_last_commit_is_not_copied_again(options):
    wa.commit_batch(options, 0, [_stage(options, 0, 0, range(5))])  # this process remembers batch 0
    staged = _stage(options, 1, 0, range(5, 10))
    other = Producer(client_conf(options.bootstrap_servers, **{
        "transactional.id": wa.committer_transactional_id(options.sink_id)}))
    other.init_transactions(10)  # a newer driver of the sink decides batch 1 (fencing this process's committer)
    other.begin_transaction()
    for i in range(5, 10):
        other.produce(options.topic, value=f"v{i}".encode())
    other.produce(options.decision_log_topic, key=options.sink_id.encode(), partition=0,
                  value=json.dumps({"sink": options.sink_id, "batch": 1}).encode())
    other.commit_transaction(10)
    result = wa.commit_batch(options, 1, [staged])  # this (now zombie) driver is asked to commit batch 1 too
    assert result["replay"] is True and result["decision_log_read"] is True
    assert _output(options) == _values(range(10))  # once, not twice


def test_a_new_producer_waits_for_its_first_metadata_and_one_made_while_the_broker_is_away_still_stages(clean_links):
    """A new staging or committer producer asks for metadata first, so its producer id is asked at once (librdkafka
    otherwise asks on a 500-ms timer: every new Python worker's first staging waited for it). A broker that does
    not answer in time is not an error: the producer is used as it is and stages once the broker is back."""
    import threading

    from streamcert.connectors.kafka_client import wait_for_metadata

    env = clean_links
    bootstrap = env.endpoints.bootstrap_servers
    topic = f"wa-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    assert wait_for_metadata(Producer(client_conf(bootstrap)), topic, timeout=10.0)
    began = time.monotonic()
    assert not wait_for_metadata(Producer(client_conf("127.0.0.1:1")), topic, timeout=1.0)
    assert time.monotonic() - began < 5

    opts = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                               "sinkId": f"s{uuid.uuid4().hex[:8]}", "transactionTimeoutMs": "30000",
                               "copyTimeoutMs": "30000", "kafka.client.id": f"new-{uuid.uuid4().hex[:8]}"})
    wa.ensure_topics(opts)
    assert wa._staging_key(opts) not in wa._producers  # a client.id of its own: this process has no producer for it
    env.kafka_link.disable()
    threading.Timer(2.0, env.kafka_link.enable).start()
    try:
        staged = _stage(opts, 0, 0, range(20))  # its producer is made while the broker is away
    finally:
        env.kafka_link.enable()
    wa.commit_batch(opts, 0, [staged])
    assert staged.rows == 20 and _output(opts) == _values(range(20))
