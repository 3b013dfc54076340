"""Integration tests on the real local stack: each item of `streamcert env smoke`, each able to fail."""

from __future__ import annotations

import stat
import uuid

import psycopg
import pytest
from confluent_kafka import Consumer, Producer

from streamcert.harness.stack import smoke
from streamcert.harness.stack.kafka_clients import client_conf, create_topic, produce, read_topic

pytestmark = pytest.mark.integration


def _topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_clients_are_redirected_through_the_proxy(clean_links):
    """Metadata names the proxy as the broker, so every connection goes through Toxiproxy."""
    env = clean_links
    consumer = Consumer(client_conf(env.endpoints.bootstrap_servers, **{"group.id": "g"}))
    try:
        brokers = consumer.list_topics(timeout=10).brokers
    finally:
        consumer.close()
    assert [f"{b.host}:{b.port}" for b in brokers.values()] == [env.kafka_link.listen]
    assert env.kafka_link.upstream == env.kafka.upstream
    assert env.endpoints.kafka_direct_bootstrap != env.endpoints.bootstrap_servers


def test_produce_and_consume_through_the_proxy(clean_links):
    env = clean_links
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic, partitions=3)
    records = [(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(300)]
    assert produce(env.endpoints.bootstrap_servers, topic, records) == 300
    back = read_topic(env.endpoints.bootstrap_servers, topic)
    assert sorted(value for *_rest, value in back) == sorted(value for _key, value in records)
    assert {partition for partition, *_rest in back} == {0, 1, 2}


def test_latency_toxic_is_listed_and_raises_the_round_trip(clean_links):
    env = clean_links
    topic = _topic("rtt")
    create_topic(env.endpoints.bootstrap_servers, topic)
    baseline = smoke._round_trip_ms(env.endpoints.bootstrap_servers, topic, samples=3)
    name = env.kafka_link.add_toxic("latency", stream="downstream", latency=300, jitter=0)
    assert env.kafka_link.toxics()[name]["attributes"]["latency"] == 300
    slowed = smoke._round_trip_ms(env.endpoints.bootstrap_servers, topic, samples=3)
    env.kafka_link.remove_toxic(name)
    assert env.kafka_link.toxics() == {}
    recovered = smoke._round_trip_ms(env.endpoints.bootstrap_servers, topic, samples=3)
    assert slowed >= 300 > baseline
    assert recovered < 300


def test_produce_fails_while_the_link_is_down_and_works_after(clean_links):
    env = clean_links
    topic = _topic("down")
    create_topic(env.endpoints.bootstrap_servers, topic)
    assert smoke._produce_fails_when_link_down(env, topic) is True
    assert produce(env.endpoints.bootstrap_servers, topic, [(None, b"after")]) == 1


def test_read_committed_sees_the_committed_transaction_only(clean_links):
    env = clean_links
    topic = _topic("txn")
    create_topic(env.endpoints.bootstrap_servers, topic)
    committed, aborted = smoke._transactions(env.endpoints.bootstrap_servers, topic)
    assert committed is True and aborted is False
    # read_uncommitted does see the aborted record: the check above is not vacuous.
    uncommitted = {value for *_rest, value in read_topic(env.endpoints.bootstrap_servers, topic,
                                                          "read_uncommitted")}
    assert {b"committed", b"aborted"} <= uncommitted


def test_prepared_transaction_is_committed_from_another_connection(clean_links):
    assert smoke._prepared_commit(clean_links.endpoints.postgres_dsn) is True


def test_prepared_transaction_survives_a_server_kill(stack):
    """PREPARE, SIGKILL PostgreSQL, restart: the prepared transaction is still there to commit."""
    gid = f"survive-{uuid.uuid4().hex}"
    dsn = stack.endpoints.postgres_direct_dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table if not exists survive (gid text)")
    with psycopg.connect(dsn) as conn:
        conn.execute("insert into survive values (%s)", (gid,))
        conn.execute(f"prepare transaction '{gid}'")
    old_pid = stack.postgres.pid
    stack.postgres.restart(clean=False)
    assert stack.postgres.pid != old_pid
    with psycopg.connect(stack.endpoints.postgres_dsn, autocommit=True) as conn:
        prepared = [row[0] for row in conn.execute("select gid from pg_prepared_xacts")]
        assert gid in prepared
        conn.execute(f"commit prepared '{gid}'")
        assert conn.execute("select count(*) from survive where gid = %s", (gid,)).fetchone()[0] == 1


def test_postgres_link_down_refuses_connections(clean_links):
    env = clean_links
    env.postgres_link.disable()
    try:
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2)
    finally:
        env.postgres_link.enable()
    with psycopg.connect(env.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def test_one_spark_micro_batch_over_a_python_data_source(stack, tmp_path):
    batches, rows = smoke._spark_batches(stack, str(tmp_path / "checkpoint"))
    assert batches >= 1 and rows == 10


def test_broker_kill_and_restart_keeps_acknowledged_records(stack):
    env = stack
    topic = _topic("restart")
    create_topic(env.endpoints.bootstrap_servers, topic)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"before")], conf={"acks": "all"})
    old_pid = env.kafka.pid
    env.kafka.restart(clean=False)
    assert env.kafka.pid not in (None, old_pid)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"after")])
    assert [value for *_rest, value in read_topic(env.endpoints.bootstrap_servers, topic)] == [b"before", b"after"]


def test_the_process_of_each_server_carries_the_run_token(stack):
    from streamcert.harness.stack.process import processes_with_token

    carriers = set(processes_with_token(stack.run_token))
    pids = stack.server_pids()
    assert all(pid in carriers for pid in pids.values()), (pids, carriers)
    producer = Producer(client_conf(stack.endpoints.bootstrap_servers))
    assert producer is not None


def test_the_stack_is_closed_to_other_users_and_postgres_wants_its_password(stack, monkeypatch):
    monkeypatch.setenv("PGPASSFILE", "/nonexistent")  # no password from elsewhere
    postgres = stack.postgres
    assert stat.S_IMODE(stack.workdir.stat().st_mode) == 0o700
    assert stat.S_IMODE(postgres.workdir.stat().st_mode) == 0o700
    assert stat.S_IMODE(postgres.passfile.stat().st_mode) == 0o600
    for dsn in (stack.endpoints.postgres_dsn, stack.endpoints.postgres_direct_dsn):
        assert "password" not in dsn and f"passfile={postgres.passfile}" in dsn
        bare = dsn.replace(f"passfile={postgres.passfile}", "")
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(bare, connect_timeout=5).close()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(bare + " password=guessed", connect_timeout=5).close()
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    secret = postgres._password.encode()
    for folder in (stack.workdir, postgres.workdir):
        leaks = [path for path in folder.rglob("*") if path.is_file() and path != postgres.passfile
                 and path.stat().st_size < 10_000_000
                 and secret in path.read_bytes()]
        assert leaks == []
