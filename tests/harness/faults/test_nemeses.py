"""Each fault really happens: the toxic is listed and latency rose; the broker pid changed; it paused."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from streamcert.harness.stack import smoke
from streamcert.harness.errors import ConfigurationError
from streamcert.harness.faults.nemeses import BrokerFault, NetworkFault, fault_for
from streamcert.harness.run.history import History
from streamcert.harness.stack.kafka_clients import create_topic, produce, read_topic
from streamcert.harness.faults.schedule import FaultSpec

pytestmark = pytest.mark.integration


def _topic() -> str:
    return f"faults-{uuid.uuid4().hex[:8]}"


def test_latency_fault_is_listed_raises_latency_and_is_recorded(clean_links):
    env, history = clean_links, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    fault = fault_for(FaultSpec("latency", "kafka", 0, 1, {"latency": 250, "jitter": 0}, "upstream"), env, history)
    assert isinstance(fault, NetworkFault)
    fault.start()
    toxics = env.kafka_link.toxics()
    assert [t["attributes"]["latency"] for t in toxics.values()] == [250]
    assert next(iter(toxics.values()))["stream"] == "upstream"
    slowed = smoke._round_trip_ms(env.endpoints.bootstrap_servers, topic, samples=2)
    fault.stop()
    fault.stop()  # idempotent
    assert env.kafka_link.toxics() == {}
    assert slowed >= 250
    kinds = [e["kind"] for e in history.events()]
    assert kinds == ["fault-start", "fault-stop"]
    assert history.events()[0]["toxic"] == "latency_upstream"


def test_down_on_the_database_link_refuses_then_heals(clean_links):
    env, history = clean_links, History()
    fault = fault_for(FaultSpec("down", "postgres", 0, 1), env, history)
    fault.start()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2)
    fault.stop()
    with psycopg.connect(env.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def test_broker_kill_changes_the_pid_and_keeps_acknowledged_data(stack):
    env, history = stack, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"a")])
    fault = fault_for(FaultSpec("broker_kill", "kafka", 0, 1), env, history)
    assert isinstance(fault, BrokerFault)
    before = env.kafka.pid
    fault.start()
    assert env.kafka.pid is None
    fault.stop()
    assert env.kafka.pid not in (None, before)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"b")])
    assert [v for *_r, v in read_topic(env.endpoints.bootstrap_servers, topic)] == [b"a", b"b"]
    assert history.events("fault-start")[0]["pid_before"] == before


def test_broker_pause_stops_the_process_until_healed(stack):
    env, history = stack, History()
    fault = fault_for(FaultSpec("broker_pause", "kafka", 0, 1), env, history)
    fault.start()
    try:
        time.sleep(0.1)
        with open(f"/proc/{env.kafka.pid}/stat") as stat:
            assert stat.read().rsplit(")", 1)[1].split()[0] == "T"
    finally:
        fault.stop()
    with open(f"/proc/{env.kafka.pid}/stat") as stat:
        assert stat.read().rsplit(")", 1)[1].split()[0] != "T"


def test_driver_kill_is_not_an_environment_fault(stack):
    with pytest.raises(ConfigurationError, match="driver process"):
        fault_for(FaultSpec("driver_kill", "driver", 0, 1), stack, History())


TOXIC_PARAMS = {
    "latency": {"latency": 100, "jitter": 10}, "bandwidth": {"rate": 100}, "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0}, "slow_close": {"delay": 100},
    "slicer": {"average_size": 16, "size_variation": 4, "delay": 1}, "limit_data": {"bytes": 1024},
}


@pytest.mark.parametrize("target", ["kafka", "postgres"])
@pytest.mark.parametrize("stream", ["upstream", "downstream"])
@pytest.mark.parametrize("toxic", sorted(TOXIC_PARAMS))
def test_every_toxic_is_listed_by_toxiproxy_while_active(clean_links, toxic, stream, target):
    env, history = clean_links, History()
    fault = fault_for(FaultSpec(toxic, target, 0, 1, TOXIC_PARAMS[toxic], stream), env, history)
    link = env.kafka_link if target == "kafka" else env.postgres_link
    fault.start()
    try:
        [listed] = link.toxics().values()
        assert (listed["type"], listed["stream"]) == (toxic, stream)
        assert {k: listed["attributes"][k] for k in TOXIC_PARAMS[toxic]} == TOXIC_PARAMS[toxic]
    finally:
        fault.stop()
    assert link.toxics() == {}


@pytest.mark.parametrize("toxic, params", [("reset_peer", {"timeout": 0}), ("timeout", {"timeout": 0}),
                                           ("limit_data", {"bytes": 64})])
def test_breaking_toxics_break_database_connections(clean_links, toxic, params):
    env = clean_links
    fault = fault_for(FaultSpec(toxic, "postgres", 0, 1, params, "downstream"), env, History())
    fault.start()
    try:
        with pytest.raises(psycopg.OperationalError):
            with psycopg.connect(env.endpoints.postgres_dsn, connect_timeout=2) as conn:
                conn.execute("select repeat('x', 100000)").fetchone()
    finally:
        fault.stop()
    with psycopg.connect(env.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def test_bandwidth_toxic_slows_a_large_transfer(clean_links):
    env = clean_links

    def fetch_seconds() -> float:
        with psycopg.connect(env.endpoints.postgres_dsn) as conn:
            began = time.monotonic()
            conn.execute("select repeat('x', 300000)").fetchone()
            return time.monotonic() - began

    baseline = fetch_seconds()
    fault = fault_for(FaultSpec("bandwidth", "postgres", 0, 1, {"rate": 100}, "downstream"), env, History())
    fault.start()
    try:
        slowed = fetch_seconds()
    finally:
        fault.stop()
    assert slowed >= 2.0 > baseline  # 300 KB at 100 KB/s


def test_broker_clean_restart_changes_the_pid_and_keeps_data(stack):
    env, history = stack, History()
    topic = _topic()
    create_topic(env.endpoints.bootstrap_servers, topic)
    produce(env.endpoints.bootstrap_servers, topic, [(None, b"kept")])
    before = env.kafka.pid
    fault = fault_for(FaultSpec("broker_restart", "kafka", 0, 1), env, history)
    fault.start()
    fault.stop()
    assert env.kafka.pid not in (None, before)
    assert history.events("fault-start")[0]["pid_after"] == env.kafka.pid
    assert [v for *_r, v in read_topic(env.endpoints.bootstrap_servers, topic)] == [b"kept"]


def test_database_kill_restarts_postgres(stack):
    history = History()
    before = stack.postgres.pid
    fault = fault_for(FaultSpec("database_kill", "postgres", 0, 1), stack, history)
    fault.start()
    assert stack.postgres.pid is None
    fault.stop()
    assert stack.postgres.pid not in (None, before)
    with psycopg.connect(stack.endpoints.postgres_dsn) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def test_add_partitions_grows_the_input_topic(stack):
    from confluent_kafka.admin import AdminClient

    from streamcert.harness.stack.kafka_clients import client_conf

    topic, history = _topic(), History()
    create_topic(stack.endpoints.bootstrap_servers, topic, partitions=2)
    fault = fault_for(FaultSpec("add_partitions", "kafka", 0, 1, {"count": 5}), stack, history, topic=topic)
    fault.start()
    fault.stop()
    admin = AdminClient(client_conf(stack.endpoints.bootstrap_servers))
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    assert history.events("fault-start")[0]["topic"] == topic
