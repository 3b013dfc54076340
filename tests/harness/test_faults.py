"""Each fault really happens: the toxic is listed and latency rose; the broker pid changed; it paused."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from harness import smoke
from harness.errors import ConfigurationError
from harness.faults import BrokerFault, NetworkFault, fault_for
from harness.history import History
from harness.kafka_clients import create_topic, produce, read_topic
from harness.schedule import FaultSpec

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
