"""What a failed attempt leaves behind, probed on the real servers: a prepared transaction in PostgreSQL, an open
transaction holding a Kafka topic's last stable offset, uncommitted files of the file sink (invisible: counted);
and the observers' visible marks, which change the moment a commit becomes visible."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest
from confluent_kafka import Producer

from streamcert.conformance.participants import probe_system_leftovers
from streamcert.harness.run.observers import OutputTarget, observer_for
from streamcert.harness.stack.kafka_clients import client_conf, create_topic
from streamcert.harness.systems import KafkaTopics, PostgresTables, SparkFileSink, StackAddresses
from streamcert.harness.waiting import wait_for
from streamcert.spi.external import ExternalSystem, OutputReader

pytestmark = pytest.mark.integration


def _postgres(dsn: str, since: float):
    return probe_system_leftovers(PostgresTables(StackAddresses(postgres_dsn=dsn, since=since)), "any", {})


def _kafka(bootstrap: str, topic: str):
    return probe_system_leftovers(KafkaTopics(StackAddresses(bootstrap_servers=bootstrap)), topic, {})


def test_a_prepared_transaction_left_in_postgres_is_found_and_its_gid_named(stack):
    dsn = stack.endpoints.postgres_dsn
    gid = f"left-{uuid.uuid4().hex[:8]}"
    began = time.time()
    assert _postgres(dsn, began).valid is True
    with psycopg.connect(dsn) as conn:
        conn.execute("select 1")
        conn.execute(f"prepare transaction '{gid}'")
    try:
        found = _postgres(dsn, began)
        assert found.valid is False and gid in [row["gid"] for row in found.violations]
        assert _postgres(dsn, time.time() + 60).valid is True  # not this run's
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"rollback prepared '{gid}'")


def test_an_open_kafka_transaction_on_the_output_is_found_and_the_marks_see_only_committed_records(stack):
    bootstrap, topic = stack.endpoints.bootstrap_servers, f"left-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    producer = Producer(client_conf(bootstrap, **{"transactional.id": f"left-{topic}"}))
    producer.init_transactions(30)
    with observer_for(OutputTarget("kafka", topic, bootstrap_servers=bootstrap)) as observer:
        producer.begin_transaction()
        producer.produce(topic, b"committed")
        producer.commit_transaction(30)
        wait_for(lambda: observer.visible_mark() >= 2, what="the first record and its commit marker", timeout=30)
        committed_mark = observer.visible_mark()
        producer.begin_transaction()
        producer.produce(topic, b"open")
        producer.flush(30)
        assert observer.visible_mark() == committed_mark  # the open record is not visible
        found = _kafka(bootstrap, topic)
        assert found.valid is False and found.counts["open_transactions"] == 1
        producer.commit_transaction(30)
        # the broker writes the commit markers just after the commit returns: the mark moves then
        wait_for(lambda: observer.visible_mark() > committed_mark, what="the committed record", timeout=30)
    assert _kafka(bootstrap, topic).valid is True


def test_the_postgres_mark_counts_committed_rows_on_its_own_connection(stack):
    dsn, table = stack.endpoints.postgres_dsn, f"mark_{uuid.uuid4().hex[:8]}"
    with observer_for(OutputTarget("postgres", table, postgres_dsn=dsn)) as observer, \
            psycopg.connect(dsn, autocommit=True) as conn:
        assert observer.visible_mark() == observer.count() == 0  # no table yet
        conn.execute(f"create table {table} (value bytea)")
        conn.execute(f"insert into {table} values ('\\x00')")
        assert observer.visible_mark() == 1


def test_uncommitted_files_of_the_file_sink_are_counted_not_found(tmp_path):
    (tmp_path / "part-orphan.parquet").write_bytes(b"")
    found = probe_system_leftovers(SparkFileSink(), str(tmp_path), {})
    assert found.valid is True and found.counts == {"committed_files": 0, "uncommitted_files": 1, "found": 0}


class _Blind(ExternalSystem):
    name = "blind"

    def reader(self, name, endpoints):
        class Reader(OutputReader):
            def read_new(self):
                return []
        return Reader()


def test_a_system_whose_reader_cannot_tell_leaves_the_leftovers_unknown_and_one_that_fails_too():
    assert probe_system_leftovers(_Blind(), "x", {}).valid == "unknown"
    unbound = probe_system_leftovers(PostgresTables(), "x", {})  # no server: the probe cannot look
    assert unbound.valid == "unknown" and "PostgreSQL" in unbound.error
